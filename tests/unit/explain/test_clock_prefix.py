"""A paste's bare clock before a prefix no tool output starts with goes even on a lone line; a clock before
anything else stays unless most lines carry it."""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from provisioner.explain.logs import read_log

LONE = {
    "torch-rank": ("18:11:06.680 [rank4]:[E205 10:00:00.123456 ProcessGroupNCCL.cpp:616] [Rank 4] Watchdog caught "
                   "collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
                   "Timeout(ms)=600000) ran for 600050 milliseconds before timing out.", "[Rank 4] Watchdog", 4,
                   None),
    "nccl": ("18:11:06 gpu01:123:456 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with error 12",
             "gpu01:123:456 [0] NCCL WARN", None, "gpu01"),
    "c10": ("18:11:06,5 [E205 10:00:00.123456 ProcessGroupNCCL.cpp:616] boom", "boom", None, None),
    "glog": ("18:11:06 E0205 10:00:00.123456  77 ProcessGroupNCCL.cpp:12] boom", "boom", None, None),
}


@pytest.mark.parametrize(("text", "starts", "rank", "host"), LONE.values(), ids=list(LONE))
def test_a_clock_before_a_known_prefix_goes_on_a_lone_line(text: str, starts: str, rank: int | None,
                                                           host: str | None) -> None:
    (line,) = read_log("paste", text).lines
    assert line.text.startswith(starts), line.text
    assert (line.rank, line.host) == (rank, host)


@pytest.mark.parametrize("text", ["18:11:06 job started: ok", "12:00:00 [rank] nothing", "10:00:00 3: not a label"])
def test_a_clock_before_anything_else_stays_on_a_lone_line(text: str) -> None:
    (line,) = read_log("paste", text).lines
    assert line.text == text
    assert line.rank is None


def test_the_watchdog_behind_a_lone_clock_is_named_for_its_rank() -> None:
    (cause, *_) = explain([("paste", LONE["torch-rank"][0])]).causes
    assert cause.id == "collective-timeout"
    assert "global rank 4 " in cause.detail, cause.detail


STORE = {
    "2.5": ("torch.distributed.DistStoreError: wait timeout after 900000ms, keys: /none/torchelastic/role_info/0, "
            "/none/torchelastic/role_info/1", "ranks 0, 1 never arrived"),
    "1.x": ("RuntimeError: Wait timeout", "did not complete"),
    "file": ("RuntimeError: Timeout waiting for key: /tmp/rdzv/0", "rank 0 never arrived"),
}


@pytest.mark.parametrize(("text", "holds"), STORE.values(), ids=list(STORE))
def test_a_store_wait_timeout_is_an_incomplete_rendezvous(text: str, holds: str) -> None:
    (cause, *_) = explain([("log", text)]).causes
    assert cause.id == "rendezvous-incomplete"
    assert holds in cause.detail, cause.detail


def test_an_aborted_communicator_reads_the_reason_it_quotes() -> None:
    nccl = ("torch.distributed.DistBackendError: NCCL communicator was aborted on rank 2. Original reason for "
            "failure was: NCCL error: unhandled system error, NCCL version 2.18.1")
    assert [c.id for c in explain([("log", nccl)]).causes] == ["nccl-error"]
    lost = ("torch.distributed.DistBackendError: NCCL communicator was aborted on rank 3. Original reason for "
            "failure was: NCCL error: remote process exited or there was a network error")
    assert [c.id for c in explain([("log", lost)]).causes] == ["connection-lost"]
