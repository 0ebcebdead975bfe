"""`explain` on field logs from AMD GPUs (RCCL, HIP, the HSA runtime, the amdgpu driver; tests/samples/logs/,
sources in tests/samples/INDEX.md). The GPU-side causes keep their ids and scores, and speak of AMD's tools:
no `nvidia-smi`, Xid or fabric manager in what an operator of an AMD cluster reads."""

from __future__ import annotations

import pytest

from tests.unit.explain._field import causes_of, table, words

# file -> (the top cause's id, text its first evidence line holds, text its title/detail/fix hold)
CASES: dict[str, tuple[str, str, str]] = {
    # RCCL 2.17 without code for the Radeon GPUs' gfx target. Before: `a CUDA call failed` and nvidia-smi.
    "rccl-invalid-kernel-file-hipify-1.txt": ("cuda-driver", "Cuda failure 'invalid kernel file'", "GPU_TARGETS"),
    # RCCL's P2P transport could not export an IPC handle. Before: no GPU cause at all.
    "rccl-ipc-get-mem-handle-hipify-1.txt": (
        "gpu-p2p-failure", "hipIpcGetMemHandle failed : invalid argument", "amd-smi topology"),
    # A CUDACHECK in RCCL's P2P transport, in hipGetErrorString's words. Before: `a CUDA call failed`.
    "rccl-p2p-invalid-argument-hipify-1.txt": (
        "gpu-p2p-failure", "transport/p2p.cc:237 NCCL WARN Cuda failure 'invalid argument'", "NCCL_P2P_DISABLE=1"),
    # amdgpu's ring timeout and the reset after it. Before: nothing named.
    "amdgpu-ring-timeout-gpu-reset-1.txt": (
        "gpu-hardware-fault", "ring sdma0 timeout", "dmesg | grep amdgpu"),
    # The HSA runtime's report of a kernel's bad access. Before: only `a process crashed`.
    "hsa-memory-access-fault-1.txt": ("cuda-failure", "Memory access fault by GPU node-2", "AMD_SERIALIZE_KERNEL"),
}
# file -> the hosts the top cause names
HOSTS: dict[str, list[str]] = {
    "rccl-invalid-kernel-file-hipify-1.txt": ["catalyst-convoy"],
    "rccl-ipc-get-mem-handle-hipify-1.txt": ["sharbox-ultra"],
    "rccl-p2p-invalid-argument-hipify-1.txt": ["UVOSLinux"],
    "amdgpu-ring-timeout-gpu-reset-1.txt": [],
    "hsa-memory-access-fault-1.txt": [],
}
# The AMD logs already in other tables: their top causes stay, the GPU cause beside them speaks AMD.
OTHERS = ["rccl-bootstrap-rank-checked-in-twice-1.txt", "rccl-proxy-polling-hipify-1.txt"]


test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, test_the_hosts_each_names = table(
    CASES, HOSTS)


@pytest.mark.parametrize("name", sorted(CASES) + OTHERS)
def test_no_gpu_cause_of_an_amd_log_speaks_nvidia(name: str) -> None:
    gpu = [c for c in causes_of(name) if c.id.startswith(("cuda-", "gpu-"))]
    assert gpu, [c.id for c in causes_of(name)]
    for cause in gpu:
        said = words(cause)
        assert not any(w in said for w in ("nvidia-smi", "Xid", "fabric manager", "CUDA call", "NVLink")), said


def test_the_invalid_kernel_file_beside_a_rank_twice_is_the_build_for_another_gpu() -> None:
    causes = causes_of("rccl-bootstrap-rank-checked-in-twice-1.txt")
    assert [c.id for c in causes] == ["bootstrap-rank-claimed-twice", "cuda-driver"]
    assert "code object" in causes[1].fix
