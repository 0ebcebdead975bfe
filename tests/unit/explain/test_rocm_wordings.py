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
