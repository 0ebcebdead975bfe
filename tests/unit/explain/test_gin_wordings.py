"""`explain` on GPU-initiated networking (GIN) and symmetric registrations that differ between ranks (NCCL 2.28
to 2.30). No field log holding these lines was found, so each case is a single line built from NCCL's source
wording (gin_host.cc, rma_proxy.cc, dev_runtime.cc, net_ib/gin.cc, argcheck.cc, dev_runtime_segments.cc)."""

from __future__ import annotations

import pytest

from tests.unit.explain._field import line_causes as _causes
from tests.unit.explain._field import line_top as _top


# Each WARN returns an error to the call that asked for GIN: a cause, with the part of the fix that WARN needs.
@pytest.mark.parametrize(("line", "holds"), [
    ("gin/gin_host.cc:86 NCCL WARN GIN is disabled.", "Unset NCCL_GIN_ENABLE"),
    ("gin/gin_host.cc:92 NCCL WARN GIN not supported.", "GIN/Plugin:"),
    ("rma/rma_proxy.cc:494 NCCL WARN GIN not supported.", "aws-ofi-nccl"),
    ("gin/gin_host.cc:102 NCCL WARN No GIN-capable devices found.", "ibv_devices"),
    ("dev_runtime.cc:1126 NCCL WARN User requested GIN but not all ranks in the communicator support GIN",
     "compute capability 7.0"),
    ("dev_runtime.cc:1131 NCCL WARN User requested GIN connection type NCCL_GIN_CONNECTION_FULL but the "
     "communicator supports only NCCL_GIN_CONNECTION_RAIL", "NCCL_GIN_CONNECTION_RAIL"),
    ("transport/net_ib/gin.cc:42 NCCL WARN Unable to use GIN: Peermem is not supported, and device 3 does not "
     "support DMA-BUF.", "nvidia_peermem"),
])
def test_each_gin_warning_names_gin_unavailable(line: str, holds: str) -> None:
    got, said, hosts = _top(line)
    assert got == "gin-unavailable"
    assert holds in said, said
    assert hosts == ["gpu-a"]


# What NCCL prints at init while probing for GIN only says it is not offered: a job that never asks runs.
@pytest.mark.parametrize("line", [
    "NCCL INFO Unable to use GIN: Peermem is not supported, nor DMA-BUF.",
    "NCCL INFO GIN/Plugin: Failed to initialize any GIN plugin",
    "NCCL INFO Compute Capability (60) is not sufficient to enable GIN.  Require Volta (70) or newer.",
])
def test_gin_probing_at_init_names_nothing(line: str) -> None:
    assert _causes("NCCL INFO NCCL version 2.30.7+cuda13.0", line) == []


def test_a_disabled_gin_says_so_not_the_plugin() -> None:
    _, said, _ = _top("gin/gin_host.cc:86 NCCL WARN GIN is disabled.")
    assert "NCCL_GIN_ENABLE=0 turned it off" in said and "ibv_devices" not in said


def test_the_check_names_the_ranks_and_the_buffer() -> None:
    got, said, _ = _top("argcheck.cc:162 NCCL WARN Coll AllGather size 1048576 symmetric registration check failed "
                        "on rank 5: recv buffer window (0x200000) mismatch with rank 0 (0x0)")
    assert got == "symmetric-registration-mismatch"
    assert "ranks 0, 5" in said and "receive buffers lie in different windows" in said and "AllGather" in said
    _, reg, _ = _top("argcheck.cc:104 NCCL WARN Coll AllReduce size 4096 symmetric registration check failed on "
                     "rank 2: sendReg 0 recvReg 1 mismatch with rank 0 sendReg 1 recvReg 1")
    assert "one registered a buffer as a symmetric window and another did not" in reg


@pytest.mark.parametrize(("line", "ranks"), [
    ("dev_runtime_segments.cc:95 NCCL WARN Elastic GIN: rank 3 has 2 segments but another rank has 4 segments; all "
     "ranks must have identical segment configurations", "ranks 0, 3"),
    ("dev_runtime_segments.cc:114 NCCL WARN Elastic GIN: rank 6 segment 1 size 2097152 differs from rank 1 segment 1 "
     "size 4194304; all ranks must have identical segment configurations", "ranks 0, 6, 1"),
])
def test_elastic_gin_segments_that_differ_name_the_ranks(line: str, ranks: str) -> None:
    got, said, _ = _top(line)
    assert got == "symmetric-registration-mismatch"
    assert ranks in said and "Elastic GIN" in said


# A device communicator's GIN requirements refused before anything connects (dev_runtime.cc's format strings,
# 2.29.7 on): the program's request, never GIN's availability.
@pytest.mark.parametrize(("line", "holds"), [
    ("dev_runtime.cc:1120 NCCL WARN User requested GIN resources but did not request GIN to be enabled!",
     "lsaBarrierCount"),
    ("dev_runtime.cc:854 NCCL WARN User requested GIN connection type NCCL_GIN_CONNECTION_FULL but the "
     "communicator is already connected with NCCL_GIN_CONNECTION_RAIL", "same connection type"),
    ("dev_runtime.cc:1142 NCCL WARN Cannot create worldGinBarrier with NCCL_GIN_CONNECTION_RAIL.",
     "railGinBarrierCount"),
    ("dev_runtime.cc:882 NCCL WARN Requested number of exclusive GIN contexts (8) exceeds the unallocated count (4). "
     "Use NCCL_GIN_NCONTEXTS to increase the limit", "raise NCCL_GIN_NCONTEXTS"),
    ("dev_runtime.cc:889 NCCL WARN No shared contexts are available (4 requested) as all have been allocated for "
     "exclusive use. Use NCCL_GIN_NCONTEXTS to increase the limit", "fewer exclusive contexts"),
])
def test_each_refused_gin_request_names_the_program(line: str, holds: str) -> None:
    got, said, hosts = _top(line)
    assert got == "gin-request-refused"
    assert holds in said, said
    assert "ibv_devices" not in said and "nvidia_peermem" not in said
    assert hosts == ["gpu-a"]


def test_gin_resources_without_gin_is_not_gin_unavailable() -> None:
    causes = _causes("dev_runtime.cc:1120 NCCL WARN User requested GIN resources but did not request GIN to be "
                     "enabled!")
    assert [c[0] for c in causes] == ["gin-request-refused"]
    assert "without a GIN connection type" in causes[0][1]


@pytest.mark.parametrize("line", [
    "NCCL INFO Capping the number of GIN contexts to 4 (8 requested). Use NCCL_GIN_NCONTEXTS to increase the limit",
    "NCCL INFO ginForceEnable set to true, defaulting ginConnectionType to NCCL_GIN_CONNECTION_FULL",
    "NCCL INFO ginForceEnable is being deprecated in favor of explicitly setting ginConnectionType!",
])
def test_gin_requirement_info_lines_name_nothing(line: str) -> None:
    assert _causes("NCCL INFO NCCL version 2.29.7+cuda12.9", line) == []
