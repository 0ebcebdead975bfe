"""`explain` on torch's heartbeat monitor (the watchdog thread hung), its timeout progress lines and ranks out
of step (desync), from field logs (tests/samples/logs/, sources in tests/samples/INDEX.md) and from each
release's wording as torch and NCCL print it.

Wordings not in a field log, written from the source that prints them: ProcessGroupNCCL.cpp `Terminating the
process after attempting to dump debug info, due to ProcessGroupNCCL watchdog hang.` (2.6 on), `ProcessGroupNCCL
monitor thread is disabled, but would have terminated the process ...`, `Exception (either an error or timeout)
detected by watchdog at work: N, last enqueued NCCL work: M, last completed NCCL work: K.` (2.4, 2.5); TraceUtils.h
desync report (`[R] Timeout at collective: X, #S`, `ranks [..] are the lagging ranks that caused this timeout`,
`[..] joined but didn't finish collective #S (count from 1)`, `[..] finished collective #S, but didn't join
collective #S+1`); NCCL ras/client_support.cc `Communicator ranks have different collective operation counts`
(v2.24.3) and `Rank R has launched up to operation K -- GPU G managed by process P on node H`.
"""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from provisioner.explain.model import Cause
from tests.unit.explain._field import LOGS, check_top_cause

# file -> (the top cause's id, text of its first evidence line, text its title/detail/fix must hold)
FIELD: dict[str, tuple[str, str, str]] = {
    "torch-heartbeat-monitor-2.3-1.txt": ("watchdog-hung", "Heartbeat monitor timed out!",
                                          "ranks 0, 1, 2 stopped making progress for 600 s"),
    "torch-heartbeat-first-pg-2.4-2.txt": ("watchdog-hung", "[PG 3 Rank 0] Heartbeat monitor timed out!",
                                           "ranks 0, 1, 6, 7"),
    # Every rank had enqueued #7753 and none completed it: inside NCCL or the network, not a desync.
    "torch-progress-all-enqueued-1.txt": ("collective-timeout", "Timeout at NCCL work: 7753",
                                          "had enqueued collective #7753 of process group 1 and none had completed"),
    # Rank 2 was signalled by rank 6 and had enqueued the collective rank 7 timed out in: it reached it.
    "torch-progress-dump-signal-2.txt": ("collective-timeout", "[Rank 7] Watchdog caught",
                                         "first detected on rank 6"),
    "torch-progress-signal-only-3.txt": ("collective-timeout", "from  rank 2",
                                         "rank 5 had completed every collective it had enqueued"),
    "torch-desync-fingerprint-seq-1.txt": ("collective-desync", "Detected mismatch between collectives",
                                           "rank 16 is at BROADCAST (sequence number 1977865401) while rank 1"),
    "torch-desync-fingerprint-1.11-2.txt": ("collective-desync", "running inconsistent collective",
                                            "rank 0 is at BROADCAST"),
    "nccl-mismatched-collective-2.4-1.txt": ("collective-desync", "Mismatched collective detected",
                                             "at or around rank 39"),
    "nccl-ras-mismatch-counts-1.txt": ("collective-desync", "Communicator ranks have different AllGather",
                                       "ranks 12 on 10.137.190.124, 13 on 10.137.190.124 are ahead; the other 30"),
    "nccl-ras-straggler-behind-1.txt": ("collective-desync", "Communicator ranks have different AllReduce",
                                        "behind is rank 7 on node1"),
}


def _causes(text: str) -> list[Cause]:
    return explain([("job.log", text)]).causes


@pytest.mark.parametrize("name", sorted(FIELD))
def test_the_top_cause_of_each_field_log(name: str) -> None:
    check_top_cause(name, FIELD[name], addresses=False)


def test_every_field_log_of_this_set_has_a_case() -> None:
    prefixes = ("torch-heartbeat-", "torch-progress-", "torch-desync-", "nccl-mismatched-", "nccl-ras-")
    assert {p.name for p in LOGS.glob("*.txt") if p.name.startswith(prefixes)} == set(FIELD)


def test_a_rank_that_enqueued_the_collective_is_not_called_absent() -> None:
    top = _causes((LOGS / "torch-progress-dump-signal-2.txt").read_text())[0]
    assert "never reported" not in top.detail


def test_a_heartbeat_timeout_is_not_called_a_collective_timeout() -> None:
    for name in ("torch-heartbeat-monitor-2.3-1.txt", "torch-heartbeat-first-pg-2.4-2.txt"):
        ids = [c.id for c in _causes((LOGS / name).read_text())]
        assert "collective-timeout" not in ids and "collective-desync" not in ids, (name, ids)


def test_no_field_log_of_another_class_is_read_as_desync_or_a_hung_watchdog() -> None:
    # RAS's report of ranks a collective behind the others is a desync by NCCL's own count.
    ours = set(FIELD) | {"torch-watchdog-stuck-wrapped-3.txt", "torch-watchdog-stuck-and-caught-4.txt",
                         "torch-stuck-watchdog-dump-wrapped-116-1.txt", "ncclras-json-mismatch-a10g-2.28.9.txt"}
    for path in sorted(LOGS.glob("*.txt")):
        if path.name in ours:
            continue
        ids = [c.id for c in _causes(path.read_text())]
        assert "collective-desync" not in ids and "watchdog-hung" not in ids, (path.name, ids)


_P = "[rank{r}]:[E919 06:52:14.737942593 ProcessGroupNCCL.cpp:1628] [PG ID 0 PG GUID 0(default_pg) Rank {r}] "
_TAB = "\n\t - "

# (release, log, first cause id, text its detail must hold)
WORDINGS: dict[str, tuple[str, str, str, str]] = {
    "terminating-2.6": ("2.6 ProcessGroupNCCL.cpp", "[rank3]:[F1229 20:37:13.156485650 ProcessGroupNCCL.cpp:1306] "
                        "[PG ID 0 PG GUID 0(default_pg) Rank 3] [PG ID 0 PG GUID 0(default_pg) Rank 3] Terminating "
                        "the process after attempting to dump debug info, due to ProcessGroupNCCL watchdog hang.\n",
                        "watchdog-hung", "rank 3"),
    "monitor-disabled": ("2.7 ProcessGroupNCCL.cpp", _P.format(r=1) + "ProcessGroupNCCL monitor thread is disabled, "
                         "but would have terminated the process after attempting to dump debug info, due to "
                         "ProcessGroupNCCL watchdog hang.\n", "watchdog-hung", "rank 1"),
    "exception-2.4": ("2.4 ProcessGroupNCCL.cpp", "[rank12]:[E909 09:55:46.996672294 ProcessGroupNCCL.cpp:1664] "
                      "[PG 0 (default_pg) Rank 12] Exception (either an error or timeout) detected by watchdog at "
                      "work: 2070, last enqueued NCCL work: 2082, last completed NCCL work: 2069.\n",
                      "collective-timeout", "collective #2070 of process group 0"),
    # Rank 1 had not enqueued #12, which rank 0 timed out in: rank 1 is behind.
    "behind-2.5": ("2.5 ProcessGroupNCCL.cpp", _P.format(r=0) + "Timeout at NCCL work: 12, last enqueued NCCL work: "
                   "12, last completed NCCL work: 11.\n" + _P.format(r=1) + "Received a dump signal due to a "
                   "collective timeout from  rank 0 and we will try our best to dump the debug info. Last enqueued "
                   "NCCL work: 11, last completed NCCL work: 11.This is most likely caused by incorrect usages of "
                   "collectives\n", "collective-desync", "rank 1 had last enqueued collective #11 of process group 0"),
    "behind-2.6": ("2.6 ProcessGroupNCCL.cpp", _P.format(r=4) + " failure detected by watchdog at work sequence id: "
                   "460631 PG status: last enqueued work: 460631, last completed work: 460630\n" + _P.format(r=5)
                   + "Received a dump signal due to a collective timeout from this local rank and we will try our best "
                   "to dump the debug info. Last enqueued NCCL work: 460629, last completed NCCL work: 460629.\n",
                   "collective-desync", "rank 5 had last enqueued collective #460629"),
    "report-lagging": ("TraceUtils.h", "[rank0]:[E ProcessGroupNCCL.cpp:1316] [Rank 0] Watchdog caught collective "
                       "operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600081 "
                       "milliseconds before timing out." + _TAB + "[0] Timeout at collective: ALLREDUCE, #12" + _TAB
                       + "To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:"
                       "\n\t   - [0, 1] joined but didn't finish collective #12 (count from 1)\n\t     [2, 3] finished "
                       "collective #12, but didn't join collective #13 (count from 1)\n", "collective-desync",
                       "ranks 2, 3 finished collective #12 but never joined #13"),
    "report-missing": ("TraceUtils.h", "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, "
                       "OpType=BROADCAST, Timeout(ms)=600000) ran for 600012 milliseconds before timing out." + _TAB
                       + "[0] Timeout at collective: BROADCAST, #3" + _TAB + "To our best knowledge, ranks [3] are the "
                       "lagging ranks that caused this timeout. They never joined any collectives\n",
                       "collective-desync", "rank 3 never joined any collective"),
    "ras-2.24": ("v2.24.3 ras/client_support.cc", "#0-0 (0f1e2d3c4b5a6978) MISMATCH\n  Communicator ranks have "
                 "different collective operation counts\n  31 ranks have launched up to operation 900\n  Rank 7 has "
                 "launched up to operation 899 -- GPU 7 managed by process 4242 on node gpu03\n",
                 "collective-desync", "behind is rank 7 on gpu03"),
}


@pytest.mark.parametrize(("source", "text", "cause_id", "holds"), WORDINGS.values(), ids=list(WORDINGS))
def test_each_wording_names_its_class(source: str, text: str, cause_id: str, holds: str) -> None:
    causes = _causes(text)
    assert causes and causes[0].id == cause_id, (source, [c.id for c in causes])
    assert holds in causes[0].detail, causes[0].detail


def test_ras_names_the_node_of_the_rank_behind() -> None:
    assert "gpu03" in _causes(WORDINGS["ras-2.24"][1])[0].hosts
    assert _causes((LOGS / "nccl-ras-straggler-behind-1.txt").read_text())[0].hosts == ["node1"]


def test_ras_does_not_send_the_operator_to_the_ranks_ahead() -> None:
    # NVIDIA/nccl#1911: the two ranks RAS lists launched one operation more; the 30 behind are not listed.
    assert _causes((LOGS / "nccl-ras-mismatch-counts-1.txt").read_text())[0].hosts == []
