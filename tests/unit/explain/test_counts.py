"""The words an operator reads agree with how many things they count: none, one, or several."""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from provisioner.explain.evidence import counted, for_count, listed
from provisioner.explain.torch_status import named


def _top(text: str) -> str:
    cause = explain([("log", text)]).causes[0]
    return f"{cause.title} {cause.detail} {cause.fix}"


@pytest.mark.parametrize(("items", "want"), [([], "no ranks"), ([3], "rank 3"), ([3, 5], "ranks 3, 5")])
def test_listed(items: list[int], want: str) -> None:
    assert listed("rank", items) == want


@pytest.mark.parametrize(("count", "want"), [(0, "no processes"), (1, "1 process"), (2, "2 processes")])
def test_counted(count: int, want: str) -> None:
    assert counted(count, "process") == want


@pytest.mark.parametrize(("count", "want"), [(0, "they"), (1, "it"), (2, "they")])
def test_for_count(count: int, want: str) -> None:
    assert for_count(count, "it", "they") == want


@pytest.mark.parametrize(("whos", "want"), [
    ([], ""), (["rank 2"], "rank 2"), (["rank 6", "rank 2", "rank 6"], "ranks 2, 6"),
    (["rank 1", "rank 0 of process group 3"], "rank 1, rank 0 of process group 3"),
])
def test_ranks_torch_names_are_one_list(whos: list[str], want: str) -> None:
    assert named(whos) == want


_RAS_AHEAD = ("Communicator ranks have different AllGather operation counts\n"
              "{n} ranks have launched up to operation 640\n"
              "Rank 12 has launched up to operation 641 -- GPU 0 managed by process 11 on node n1\n")


@pytest.mark.parametrize(("n", "want"), [
    (1, "1 rank up to operation 640; rank 12 on n1 up to operation 641): rank 12 on n1 is ahead; the other 1 rank "
        "has not launched operation 641, so it is the one behind"),
    (2, "2 ranks up to operation 640; rank 12 on n1 up to operation 641): rank 12 on n1 is ahead; the other 2 "
        "ranks have not launched operation 641, so they are the ones behind"),
])
def test_ras_operation_counts(n: int, want: str) -> None:
    assert want in _top(_RAS_AHEAD.format(n=n))


@pytest.mark.parametrize(("ranks", "want"), [("3", "rank 3 never joined"), ("3, 5", "ranks 3, 5 never joined")])
def test_desync_report_lagging_ranks(ranks: str, want: str) -> None:
    text = f"[0] ranks [{ranks}] are the lagging ranks that caused this timeout. They never joined any collectives\n"
    assert want in _top(text)


@pytest.mark.parametrize(("peers", "want"), [
    (["10.0.0.2"], "the connection to 10.0.0.2 failed"),
    (["10.0.0.2", "10.0.0.3"], "connections to 10.0.0.2, 10.0.0.3 failed"),
])
def test_unreachable_peers(peers: list[str], want: str) -> None:
    text = "".join(f"gpu01: NCCL WARN Net : Connect to {p}<45035> failed : Connection refused\n" for p in peers)
    assert want in _top(text)


@pytest.mark.parametrize(("peers", "want"), [
    (["10.0.0.2"], "the connection to 10.0.0.2 closed"),
    (["10.0.0.2", "10.0.0.3"], "connections to 10.0.0.2, 10.0.0.3 closed"),
])
def test_lost_peers(peers: list[str], want: str) -> None:
    text = "".join(f"gpu01: NCCL WARN Net : Connection closed by remote peer {p}<45035>\n" for p in peers)
    assert want in _top(text)


_WATCHDOG = ("[rank{r}]:[E ProcessGroupNCCL.cpp:1] [Rank {r}] Watchdog caught collective operation timeout: "
             "WorkNCCL(SeqNum=5, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600100 milliseconds before timing "
             "out.\n")
_ALSO = "[rank{r}]:[E ProcessGroupNCCL.cpp:2] Some NCCL operations have failed or timed out.\n"


@pytest.mark.parametrize(("also", "want"), [
    ([], "Every rank in the log reached it"),
    ([3], "Global rank 3 timed out too (its watchdog reported it)"),
    ([3, 4], "Global ranks 3, 4 timed out too (their watchdogs reported it)"),
])
def test_ranks_that_timed_out_too(also: list[int], want: str) -> None:
    text = _WATCHDOG.format(r=0) + _WATCHDOG.format(r=1) + "".join(_ALSO.format(r=r) for r in also)
    assert want in _top(text)


_WORK = ("[rank{r}]:[E ProcessGroupNCCL.cpp:1] [Rank {r}] Watchdog caught collective operation timeout: "
         "WorkNCCL(SeqNum={seq}, OpType={op}, Timeout(ms)=600000) ran for {ms} milliseconds before timing out.\n")


@pytest.mark.parametrize(("works", "want"), [
    ([(0, 5, "ALLREDUCE", 600100), (1, 5, "ALLREDUCE", 600200)], " in ALLREDUCE (SeqNum 5) and gave up"),
    ([(0, 96120, "ALLREDUCE", 600100), (0, 96117, "ALLREDUCE", 600900), (0, 96125, "ALLREDUCE", 600050),
      (0, 96125, "ALLREDUCE", 600050), (1, 64088, "ALLREDUCE", 600010)],
     " in 4 ALLREDUCE operations (SeqNum 64088 to 96125; SeqNum 96117 timed out first) and gave up"),
    ([(0, 7, "BROADCAST", 600100), (1, 8, "ALLREDUCE", 600300), (1, 9, "ALLREDUCE", 600200)],
     " in BROADCAST (SeqNum 7), 2 ALLREDUCE operations (SeqNum 8 to 9; SeqNum 8 timed out first) and gave up"),
])
def test_an_operation_timed_out_under_several_sequence_numbers_is_named_once(
        works: list[tuple[int, int, str, int]], want: str) -> None:
    text = "".join(_WORK.format(r=r, seq=seq, op=op, ms=ms) for r, seq, op, ms in works)
    assert want in _top(text)


def test_a_lone_aborted_communicator_names_its_global_rank() -> None:
    text = ("RuntimeError: NCCL communicator was aborted on rank 3.  Original reason for failure was: [Rank 3] "
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLGATHER, Timeout(ms)=1800000) "
            "ran for 1803169 milliseconds before timing out.\n")
    words = _top(text)
    assert "global rank 3 waited 1803.17 s" in words
    assert "Every rank in the log" not in words and "process-group" not in words


@pytest.mark.parametrize(("reason", "title", "meaning"), [
    ("unhandled system error", "rank 2 was aborted: a call into the system failed", "a socket"),
    ("internal error", "rank 2 was aborted: NCCL found its own state wrong", "different NCCL releases"),
    ("invalid usage", "rank 2 was aborted: NCCL refused how it was used", "not the fabric"),
])
def test_an_aborted_communicator_names_the_nccl_error(reason: str, title: str, meaning: str) -> None:
    text = (f"torch.distributed.DistBackendError: NCCL communicator was aborted on rank 2. Original reason for "
            f"failure was: NCCL error: {reason}, NCCL version 2.18.1\n")
    cause = explain([("log", text)]).causes[0]
    assert cause.id == "nccl-error"
    assert title in cause.title and meaning in cause.detail
    assert not cause.title.startswith("NCCL failed")


def test_an_aborted_communicator_quotes_the_last_error() -> None:
    text = ("torch.distributed.DistBackendError: NCCL communicator was aborted on rank 2. Original reason for "
            "failure was: NCCL error: internal error, NCCL version 2.18.1\n"
            "ncclInternalError: Internal check failed.\nLast error:\nProxy: wrong magic from peer\n")
    cause = explain([("log", text)]).causes[0]
    assert "NCCL's last error: Proxy: wrong magic from peer" in cause.detail


def test_a_remote_error_names_the_aborted_rank() -> None:
    text = ("torch.distributed.DistBackendError: NCCL communicator was aborted on rank 3. Original reason for "
            "failure was: NCCL error: remote process exited or there was a network error\n")
    cause = explain([("log", text)]).causes[0]
    assert cause.id == "connection-lost"
    assert "a peer connection of rank 3" in cause.detail and "communicator of rank 3" in cause.detail
    assert "the peer named here" not in cause.fix


@pytest.mark.parametrize(("keys", "want"), [
    ("/default_pg/0//cuda//1", "rank 1 never arrived (it did not start"),
    ("/default_pg/0//cuda//1, /default_pg/0//cuda//2", "ranks 1, 2 never arrived (they did not start"),
])
def test_store_keys_of_ranks_that_never_arrived(keys: str, want: str) -> None:
    assert want in _top(f"torch.distributed.DistStoreError: wait timeout after 600000ms, keys: {keys}\n")


@pytest.mark.parametrize(("roots", "want"), [
    ([0], "rank 0 never posted its NCCL id"),
    ([0, 8], "ranks 0, 8 never posted their NCCL id"),
])
def test_roots_that_never_posted_their_id(roots: list[int], want: str) -> None:
    text = "".join(f"torch.distributed.DistBackendError: [5] is setting up NCCL communicator and retrieving "
                   f"ncclUniqueId from [{r}] via c10d key-value store by key '{r}', but store->get('{r}') got "
                   "error: Socket Timeout\n" for r in roots)
    words = _top(text)
    assert want in words
    assert ("those ranks" in words) == (len(roots) > 1)
