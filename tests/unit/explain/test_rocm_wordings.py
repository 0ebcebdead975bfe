"""Single AMD wordings with no field log here: RCCL's (read in its source: checks.h before the hipify step
moved into the build in late 2022 printed `HIP failure 'X'`; init.cc's banner from 2.22 is `RCCL version :
X-HASH` with `HIP version  :` and `ROCm version :` lines), and an amdgpu page-fault line as posted in
github ROCm/legacy-rocm-build#5051. The NVIDIA reading of the same causes must not move."""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from provisioner.explain.model import Cause


def _gpu(text: str) -> Cause:
    return next(c for c in explain([("job.log", text)]).causes if c.id.startswith(("cuda-", "gpu-")))


@pytest.mark.parametrize(("text", "cause", "holds"), [
    # RCCL before late 2022 (checks.h): the macro's own word was HIP.
    ("gpu1:100:200 [0] src/enqueue.cc:43 NCCL WARN HIP failure 'out of memory'\n", "cuda-failure", "amd-smi process"),
    # HIP's error names read by their class.
    ("gpu1:100:200 [0] NCCL WARN HIP failure 'hipErrorNoBinaryForGpu'\n", "cuda-driver", "rocminfo"),
    ("RuntimeError: HIP error: hipErrorIllegalAddress\n", "cuda-failure", "AMD_SERIALIZE_KERNEL"),
    # RCCL 2.22 on: the banner alone marks the log, and a plain `Cuda failure` then speaks AMD.
    ("gpu1:100:100 [0] NCCL INFO RCCL version : 2.22.3-HEAD:abc1234\nHIP version  : 6.3.1\n"
     "gpu1:100:200 [0] NCCL WARN Cuda failure 'out of memory'\n", "cuda-failure", "HIP out of memory"),
    # amdgpu's page fault, behind a journal's host.
    ("Jan 09 18:55:45 alexpc kernel: amdgpu 0000:0b:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 "
     "pasid:32792)\n", "cuda-failure", "GPU page fault on 0000:0b:00.0"),
])
def test_an_amd_wording_is_read_as_its_class(text: str, cause: str, holds: str) -> None:
    found = _gpu(text)
    said = " ".join([found.title, found.detail, found.fix])
    assert found.id == cause and holds in said, said
    assert "nvidia-smi" not in said


def test_the_nvidia_reading_is_unchanged() -> None:
    found = _gpu("gpu1:100:200 [0] enqueue.cc:43 NCCL WARN Cuda failure 'invalid kernel file'\n")
    assert (found.id, found.title) == ("cuda-failure", "a CUDA call failed: invalid kernel file")
    assert "nvidia-smi" in found.fix


def test_a_harmless_ras_line_is_no_fault() -> None:
    text = "amdgpu 0000:30:00.0: amdgpu: RAS: optional ras ta ucode is not available\n"
    assert not [c for c in explain([("dmesg", text)]).causes if c.id.startswith(("cuda-", "gpu-"))]


def _causes(text: str) -> list[Cause]:
    return explain([("job.log", text)]).causes


# RCCL 2.2x on: a date before the NCCL prefix (NCCL_DEBUG_TIMESTAMP_FORMAT's default, on WARN lines), and
# `[FATAL ERROR]: HIP failure: 'X'` after the WARN of the call that failed.
_DATED = ("[2026-09-22 06:57:47] gpu-276:717:1686 [0] /build/rccl/hipify/src/transport/p2p.cc:256 NCCL WARN "
          "hipIpcGetMemHandle failed : invalid argument\n"
          "gpu-276:717:1686 [0] [FATAL ERROR]: HIP failure: 'invalid argument'\n"
          "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)\n")


def test_the_fatal_error_line_is_the_failure_it_repeats_not_a_second_cause() -> None:
    gpu = [c for c in _causes(_DATED) if c.id.startswith(("cuda-", "gpu-"))]
    assert [(c.id, c.hosts) for c in gpu] == [("gpu-p2p-failure", ["gpu-276"])]
    assert [e.text.split()[-1] for e in gpu[0].evidence[:2]] == ["argument", "argument'"]


@pytest.mark.parametrize(("text", "cause", "holds"), [
    # Alone (its WARN not in the paste), the fatal line keeps its own class.
    ("[2] [FATAL ERROR]: HIP failure: 'out of memory' (in ncclCommInitRank during init_model_parallel)\n",
     "cuda-failure", "HIP out of memory"),
    # rocmwrap.h: a ROCr (HSA runtime) call's failure, in hsa_status_string's words.
    ("gpu1:10:20 [0] misc/rocmwrap.cc:120 NCCL WARN ROCr failure 'HSA_STATUS_ERROR_OUT_OF_RESOURCES: The "
     "runtime failed to allocate the necessary resources.'\n", "cuda-failure", "ROCr (HSA runtime)"),
    # rocm_smi_wrap.cc: ROCm SMI cannot read the GPUs.
    ("gpu1:10:10 [0] misc/rocm_smi_wrap.cc:34 NCCL WARN ROCm SMI init failure An error occurred during "
     "initialization, during monitor discovery or when when initializing internal data structures\n",
     "cuda-driver", "ROCm SMI init failure"),
    # graph/topo.cc: an xGMI link in the topology to a GPU this process cannot see ends init.
    ("gpu1:10:10 [0] graph/topo.cc:564 NCCL WARN Add XGMI error : could not find GPU 3000\n", "cuda-driver",
     "xGMI topology: could not find GPU 3000"),
])
def test_rccls_own_failures_read_as_their_class(text: str, cause: str, holds: str) -> None:
    found = _gpu(text)
    said = " ".join([found.title, found.detail, found.fix])
    assert found.id == cause and holds in said, said


def test_a_rocr_failure_rccl_ignored_is_no_cause() -> None:
    assert not _causes("gpu1:10:20 [0] NCCL INFO misc/rocmwrap.cc:140 ROCr failure 'HSA_STATUS_ERROR'\n")


@pytest.mark.parametrize(("text", "holds"), [
    ('gpu2:1:1 [0] init.cc:213 NCCL WARN Missing "iommu=pt" from kernel command line which can lead to system '
     "instablity or hang!\n", "GRUB_CMDLINE_LINUX"),
    ('gpu2:1:1 [0] init.cc:168 NCCL WARN Missing "HSA_FORCE_FINE_GRAIN_PCIE=1" from environment which can lead '
     "to low RCCL performance, system instablity or hang!\n", "every rank's environment"),
    ('gpu2:1:1 [0] init.cc:142 NCCL WARN NUMA auto balancing enabled which can lead to variability in the RCCL '
     'performance! Disable by "sudo sysctl kernel.numa_balancing=0"\n', "kernel.numa_balancing=0"),
])
def test_rccls_settings_warnings_are_a_low_cause_naming_host_and_fix(text: str, holds: str) -> None:
    causes = _causes(text)
    assert [(c.id, c.hosts) for c in causes] == [("rccl-node-settings", ["gpu2"])]
    assert causes[0].score < 40 and holds in causes[0].fix, causes[0].fix


def test_nccl_names_no_settings_cause() -> None:
    assert not _causes("gpu1:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
                       'gpu1:1:1 [0] NCCL INFO NCCL_IB_HCA set by environment to "mlx5_0"\n')
