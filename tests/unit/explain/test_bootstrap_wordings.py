"""`explain` on what NCCL's bootstrap prints when it refuses a rank, an out-of-band device or a connection.
No field log was found for most of these, so each line is built from the wording NCCL's own source prints in
the releases named (host names, ranks and numbers made up); one real log is in test_field_logs_5."""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from provisioner.explain.model import Cause

_P = "gpu07:4117:4190 [0] bootstrap.cc:{} NCCL WARN "


def _causes(*lines: str) -> list[Cause]:
    return explain([("job.log", "\n".join(lines) + "\n")]).causes


def _top(*lines: str) -> Cause:
    causes = _causes(*lines)
    assert causes, "no cause named"
    return causes[0]


@pytest.mark.parametrize("line", [
    _P.format(210) + "Bootstrap Root : rank 3 of 16 ranks has already checked in",  # 2.4 to 2.22
    _P.format(348) + "Bootstrap Root : rank 3 of 16 ranks has already checked in",  # 2.29 on
])
def test_a_rank_that_checks_in_twice_names_two_jobs_on_one_port(line: str) -> None:
    top = _top(line)
    assert top.id == "bootstrap-rank-claimed-twice"
    assert top.hosts == ["gpu07"]
    assert "rank 3 of 16" in top.detail and "MASTER_PORT" in top.fix and "NCCL_COMM_ID" in top.fix


@pytest.mark.parametrize(("line", "counts"), [
    (_P.format(205) + "Bootstrap Root : mismatch in rank count from procs 8 : 16", "8 and 16"),  # 2.3 to 2.22
    (_P.format(310) + "Bootstrap Root : mismatch in info from procs, nranks 16 vs 8, nroots 1 vs 1, iroot 0 vs 0",
     "16 and 8"),  # 2.23 to 2.28
    (_P.format(345) + "Bootstrap Root : mismatch in info from procs, nranks 16 vs 8, nroots 1 vs 1, iroot 0 vs 0, "
     "offset 0 vs 0", "16 and 8"),  # 2.29 on
])
def test_ranks_with_different_world_sizes_are_named(line: str, counts: str) -> None:
    top = _top(line)
    assert top.id == "bootstrap-world-size-mismatch"
    assert counts in top.detail and "--nproc_per_node" in top.detail
    assert top.hosts == ["gpu07"]


def test_a_field_no_rank_would_send_points_at_different_nccl_releases() -> None:
    # Equal rank counts and an offset of a billion: the root read a message laid out otherwise (2.29 on).
    top = _top(_P.format(345) + "Bootstrap Root : mismatch in info from procs, nranks 16 vs 16, nroots 1 vs 1, "
               "iroot 0 vs 0, offset 0 vs 1305411586")
    assert top.id == "bootstrap-rank-info-mismatch"
    assert "different NCCL releases" in top.detail and "NCCL version" in top.fix


def test_ranks_that_split_the_roots_differently_are_named() -> None:
    top = _top(_P.format(310) + "Bootstrap Root : mismatch in info from procs, nranks 16 vs 16, nroots 2 vs 1, "
               "iroot 0 vs 0")
    assert top.id == "bootstrap-rank-info-mismatch"
    assert "nroots 2 vs 1" in top.detail and "different NCCL releases" not in top.detail


def test_a_position_out_of_range_is_read() -> None:
    top = _top(_P.format(343) + "Bootstrap Root : localId 9 is out of range")  # 2.29 on
    assert top.id == "bootstrap-rank-info-mismatch"
    assert "same rank count" not in top.detail


@pytest.mark.parametrize(("line", "setting", "score"), [
    (_P.format(510) + "no device found matching NCCL_OOB_NET_IFNAME=mlx5_9, ignoring", "mlx5_9", 40),  # 2.23
    (_P.format(513) + "no device found matching mlx5_9,mlx5_8, verify NCCL_OOB_NET_IFNAME", "mlx5_9,mlx5_8", 90),
    (_P.format(513) + "no device found matching exactly mlx5_9:1, verify NCCL_OOB_NET_IFNAME", "=mlx5_9:1", 90),
    (_P.format(515) + "no device found after excluding mlx5, verify NCCL_OOB_NET_IFNAME", "^mlx5", 90),  # 2.24 on
    (_P.format(579) + "no device found after excluding exactly mlx5_0, verify NCCL_OOB_NET_IFNAME", "^=mlx5_0", 90),
])
def test_an_oob_device_setting_that_matches_nothing_is_named(line: str, setting: str, score: int) -> None:
    top = _top(line)
    assert top.id == "oob-device-not-found"
    assert f"NCCL_OOB_NET_IFNAME={setting}" in top.settings
    assert top.score == score and "NCCL_OOB_NET_ENABLE" in top.fix


def test_the_oob_cause_lists_the_devices_nccl_found() -> None:
    top = _top("gpu07:4117:4117 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.7<0>",
               _P.format(513) + "no device found matching ib0, verify NCCL_OOB_NET_IFNAME")
    assert top.id == "oob-device-not-found"
    assert "mlx5_0" in top.detail


@pytest.mark.parametrize(("line", "holds"), [
    ("gpu07:4117:4190 [0] misc/socket.cc:415 NCCL WARN socketTryAccept: Accept failed: Too many open files",
     "open-file limit"),  # 2.18 on
    ("gpu07:4117:4190 [0] misc/socket.cc:442 NCCL WARN socketTryAccept: exceeded error retry count (10), "
     "Interrupted system call", "2.27"),  # 2.26
    ("gpu07:4117:4190 [0] misc/socket.cc:448 NCCL WARN socketTryAccept: exceeded error retry count after 10 "
     "attempts, Interrupted system call", "interrupted"),  # 2.27 on
])
def test_accept_failures_are_named(line: str, holds: str) -> None:
    top = _top(line)
    assert top.id == "bootstrap-accept-failed"
    assert holds in top.detail + top.fix and top.hosts == ["gpu07"]


@pytest.mark.parametrize(("line", "peer"), [
    ("gpu07:4117:4190 [0] misc/socket.cc:432 NCCL WARN socketFinalizeAccept: wrong magic 4745542048 != "
     "3f8e2b7d9a6c1e05", None),  # 2.18 to 2.26
    ("gpu07:4117:4190 [0] misc/socket.cc:442 NCCL WARN socketFinalizeAccept: wrong type 3 != 1", None),
    ("gpu07:4117:4190 [0] misc/socket.cc:533 NCCL WARN socketFinalizeAccept from 10.0.0.9<40312>: wrong type 3 != 1",
     "10.0.0.9"),  # 2.27 on
])
def test_a_connection_that_is_not_this_jobs_rank_is_named(line: str, peer: str | None) -> None:
    top = _top(line)
    assert top.id == "bootstrap-foreign-connection"
    assert top.addresses == ([peer] if peer else [])
    assert "MASTER_PORT" in top.fix


def test_bootstrap_lines_that_report_no_fault_name_nothing() -> None:
    assert _causes("gpu07:4117:4117 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.7<0>",
                   "gpu07:4117:4117 [0] NCCL INFO Bootstrap: Using mlx5_0:1",
                   "gpu07:4117:4190 [0] NCCL INFO NCCL_OOB_NET_IFNAME set to mlx5_0",
                   "gpu07:4117:4190 [0] NCCL INFO Bootstrap timings total 0.000892 (create 0.000028, send 0.000125, "
                   "recv 0.000242, ring 0.000083, delay 0.000000)") == []
