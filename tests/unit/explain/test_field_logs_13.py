"""`explain` on what NCCL prints while it lays its NVLink paths, from the field (tests/samples/logs/, sources in
tests/samples/INDEX.md): NVLink SHARP (NVLS) multicast setup failing on the NVSwitch fabric, and rings the ranks
built from different views of the topology; and multi-node NVLink that IMEX does not serve, in each release's
wording."""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from tests.unit.explain._field import table, words

# file -> (the top cause's id, text its first evidence line holds, text its title/detail/fix hold)
CASES: dict[str, tuple[str, str, str]] = {
    # cuMulticastAddDevice failing with 401 on an H100 node (NCCL 2.26.2): the fabric, not a generic CUDA call.
    "nccl-nvls-add-device-illegal-state-1.txt": (
        "gpu-fabric-manager", "transport/nvls.cc:254 NCCL WARN Cuda failure 401", "NCCL_NVLS_ENABLE=0 only to confirm"),
    "nccl-nvls-invalid-argument-1.txt": (
        "gpu-fabric-manager", "transport/nvls.cc:598 NCCL WARN Cuda failure 1 'invalid argument'",
        "NVLS multicast: invalid argument"),
    # The ring check fails and the framework only says `internal error`.
    "nccl-ring-not-loop-back-1.txt": (
        "topology-mismatch", "Error : ring 2 does not loop back to start (7 != 2)", "NCCL_TOPO_FILE"),
    "nccl-ring-not-loop-back-2.txt": (
        "topology-mismatch", "Error : ring 0 does not loop back to start (48 != 52)", "NCCL_GRAPH_FILE"),
}
# file -> the hosts the top cause names
HOSTS: dict[str, list[str]] = {
    "nccl-nvls-add-device-illegal-state-1.txt": ["node004"],
    "nccl-nvls-invalid-argument-1.txt": ["ccw-gpu-128"],
    "nccl-ring-not-loop-back-1.txt": ["compute-dy-p4d24xlarge-5"],
    "nccl-ring-not-loop-back-2.txt": ["ip-0A0C04E3"],
}

test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, test_the_hosts_each_names = table(
    CASES, HOSTS)

_HEAD = "gb-01:2201:2290 [0] NCCL WARN "


@pytest.mark.parametrize(("line", "holds"), [
    # 2.21 to 2.24, with NCCL_MNNVL_ENABLE=1
    ("MNNVL is not supported on this system", "NCCL_MNNVL_ENABLE=1 asks for multi-node NVLink"),
    # 2.25, 2.26
    ("MNNVL (cliqueSize 72) is available but not supported on this system. Check the IMEX configuration.",
     "nvidia-imex-ctl -N"),
    # 2.27 on: no channel, then the daemons
    ("MNNVL (cliqueSize 72) is available but not working on this system. Check the IMEX channel configuration "
     "(/dev/nvidia-caps-imex-channels). Set NCCL_MNNVL_ENABLE=0 to ignore this issue.", "NVreg_CreateImexChannel0=1"),
    ("MNNVL (cliqueSize 8) is available but not working on this system. Check the IMEX configuration "
     "(nvidia-imex-ctl -N). Set NCCL_MNNVL_ENABLE=0 to ignore this issue.", "every node of the NVLink domain"),
])
def test_mnnvl_that_imex_does_not_serve_is_named_in_each_release_wording(line: str, holds: str) -> None:
    top = explain([("gb200.log", _HEAD + line + "\n")]).causes[0]
    assert top.id == "mnnvl-imex" and top.hosts == ["gb-01"], (top.id, top.hosts)
    assert holds in words(top), words(top)


def test_the_nvls_bind_failure_of_recent_releases_is_the_fabric() -> None:
    text = (_HEAD + "Failed to bind NVLink SHARP (NVLS) Multicast memory of size 1073741824 : CUDA error 801 "
            "'operation not supported'.\nThis is usually caused by a system or configuration error.\n")
    top = explain([("nvls.log", text)]).causes[0]
    assert top.id == "gpu-fabric-manager" and "operation not supported" in top.title, (top.id, top.title)


def test_an_nvls_failure_of_its_own_class_keeps_it() -> None:
    text = _HEAD.replace("NCCL WARN", "transport/nvls.cc:245 NCCL WARN") + "Cuda failure 'out of memory'\n"
    assert explain([("nvls.log", text)]).causes[0].id == "cuda-failure"


def test_a_peer_gpu_the_process_cannot_see_is_peer_access_not_the_driver() -> None:
    # 2.28.9's transport/p2p.cc:275 imports the peer's cuMem handle; ranks given one GPU each cannot.
    text = ("holygpu8a25204:804052:804100 [0] transport/p2p.cc:275 NCCL WARN Cuda failure 101 'invalid device "
            "ordinal'\nholygpu8a25204:804052:804100 [0] NCCL INFO transport/p2p.cc:300 -> 1\n")
    top = explain([("p2p.log", text)]).causes[0]
    assert top.id == "gpu-p2p-failure" and top.hosts == ["holygpu8a25204"], (top.id, top.hosts)
    assert "--gpus-per-task=1" in top.detail and "SYS_PTRACE" in top.detail, top.detail


def test_a_device_ordinal_outside_the_p2p_transport_is_a_gpu_the_process_cannot_see() -> None:
    text = "node1:1:1 [0] init.cc:100 NCCL WARN Cuda failure 101 'invalid device ordinal'\n"
    assert explain([("init.log", text)]).causes[0].id == "gpu-not-visible"


def test_nvls_forced_on_ranks_that_share_a_gpu_is_a_job_setting() -> None:
    text = ("node1:311:340 [0] transport/nvls.cc:254 NCCL WARN NCCL_NVLS_ENABLE has been set to \"1\" and communicator "
            "has multiple ranks using the same NVML device. This is not compatible with NCCL_NVLS_ENABLE=1.\n")
    top = explain([("nvls.log", text)]).causes[0]
    assert top.id == "nvls-forced-shared-gpu" and top.hosts == ["node1"], (top.id, top.hosts)
    assert "Leave NCCL_NVLS_ENABLE unset" in top.fix, top.fix
