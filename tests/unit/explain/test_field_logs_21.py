"""`explain` on field logs of a rendezvous name that does not resolve (tests/samples/logs/, sources in
tests/samples/INDEX.md), and on the wordings next to it that must not read as one: an address torch failed to look
up, a bad NCCL_COMM_ID host, and an NCCL init that returned an error rather than hanging."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from provisioner.explain import explain, rules_bootstrap
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from tests.unit.explain._field import table

# file -> (the top cause's id, text its first evidence line holds, text its title/detail/fix hold)
CASES: dict[str, tuple[str, str, str]] = {
    # FineGrainedRLHF#12: the lookup fails (-5: the name has no address) until the store's 1800 s timeout.
    "torch-store-ipv6-lookup-no-address-1.txt": (
        "peer-unreachable", "The client socket has timed out after 1800s", "cannot resolve the rendezvous store's "
        "name cernet2.net"),
    # Grendel-GS#9: `--standalone` stores at the host's own name, which did not resolve; only the lookup's warning
    # is in the log. Before: no cause.
    "torchrun-standalone-hostname-unresolved-1.txt": (
        "peer-unreachable", "The IPv6 network addresses of (user, 53821)", "/etc/hosts"),
    # ColossalAI#2841: the same with a cloud host name, six warnings and no connection tried. Before: no cause.
    "torchrun-hostname-unresolved-2.txt": (
        "peer-unreachable", "(i-7840df31, 37340) cannot be retrieved", "torch retries the lookup until its connect "
        "timeout"),
    # examples#540: torch 1.1's TCPStore client, `host not found` with no host named. Before: no cause.
    "torch-tcpstore-host-not-found-1.txt": (
        "name-unresolved", "ValueError: host not found: Name or service not known", "does not say which name"),
    # pytorch#64990: the same under torch 1.9's elastic agent, which then restarts the worker group. Before: the
    # worker's exit only.
    "torchelastic-tcpstore-host-not-found-2.txt": (
        "name-unresolved", "host not found: Temporary failure in name resolution", "MASTER_ADDR"),
    # elastic#31: torchelastic 0.1 names the store's host and port on the line before `host not found`. Before:
    # `the log does not name it`.
    "torchelastic-tcpstore-host-not-found-3.txt": (
        "peer-unreachable", "host not found: Name or service not known", "cannot resolve the rendezvous store's name "
        "pytorch-elastic-test-z2b7s"),
}
HOSTS: dict[str, list[str]] = {name: [] for name in CASES}

test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, test_the_hosts_each_names = table(
    CASES, HOSTS)


def _causes(text: str) -> list[Cause]:
    return explain([("job.log", text)]).causes


_INIT_START = ("node1:100:100 [0] NCCL INFO ncclCommInitRankConfig comm 0x1799d350 rank 0 nranks 2 cudaDev 0 "
               "nvmlDev 0 busId 60 commId 0xb598af4961f49c37 - Init START\n")


def test_an_init_that_returned_an_error_is_not_called_unfinished() -> None:
    # NCCL 2.28's trace of a failing init, or the framework's error: the init ended, it did not hang.
    trace = _INIT_START + ("node1:100:100 [0] NCCL INFO init.cc:1577 -> 5\n"
                           "node1:100:100 [0] NCCL INFO init.cc:2162 -> 5\n")
    error = _INIT_START + ("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, internal error - please report "
                           "this issue to the NCCL developers, NCCL version 2.28.9\n")
    for text in (trace, error):
        assert "init-unfinished" not in [c.id for c in _causes(text)]


def test_another_process_error_trace_leaves_a_waiting_rank_unfinished() -> None:
    text = _INIT_START + "node2:200:200 [1] NCCL INFO init.cc:1577 -> 3\n"
    assert "init-unfinished" in [c.id for c in _causes(text)]


def test_an_init_that_printed_its_timings_finished() -> None:
    # The `Init COMPLETE` line lost (wrapped), the timings NCCL prints after it kept.
    text = (_INIT_START + "node1:100:100 [0] NCCL INFO Init timings - ncclCommInitRankConfig: rank 0 nranks 2 total "
            "0.53 (kernels 0.10, alloc 0.01, bootstrap 0.00, allgathers 0.00, topo 0.01, graphs 0.00, connections "
            "0.40, rest 0.00)\n")
    assert "init-unfinished" not in [c.id for c in _causes(text)]


def test_a_bad_nccl_comm_id_host_is_named_not_its_format() -> None:
    # NCCL 2.28's words (misc/socket.cc, bootstrap.cc) for NCCL_COMM_ID=badhost:12345. Before: no cause.
    text = ("node1:100:100 [0] NCCL INFO NCCL_COMM_ID set by environment to badhost:12345\n"
            "node1:100:100 [0] NCCL WARN Net : error encountered when getting address info : Name or service not "
            "known\nnode1:100:100 [0] NCCL WARN Invalid NCCL_COMM_ID, please use format: <ipv4>:<port> or "
            "[<ipv6>]:<port> or <hostname>:<port>\n")
    top = _causes(text)[0]
    assert top.id == "peer-unreachable" and "NCCL_COMM_ID's host name badhost" in top.title, top.title
    assert "not the format" in top.detail


def test_an_address_torch_failed_to_look_up_is_no_name() -> None:
    text = ("[W socket.cpp:601] [c10d] The IPv6 network addresses of (10.1.2.3, 8214) cannot be retrieved (gai "
            "error: -2 - Name or service not known).\n[E socket.cpp:860] [c10d] The client socket has timed out "
            "after 1800s while trying to connect to (10.1.2.3, 8214).\n")
    top = _causes(text)[0]
    assert top.id == "peer-unreachable" and "resolve" not in top.title + top.detail, top.title


def test_a_lookup_that_failed_once_before_the_init_finished_is_no_cause() -> None:
    text = ("[W socket.cpp:601] [c10d] The IPv6 network addresses of (node0, 29500) cannot be retrieved (gai error: "
            "-3 - Temporary failure in name resolution).\n" + _INIT_START
            + _INIT_START.replace("Init START", "Init COMPLETE"))
    assert "peer-unreachable" not in [c.id for c in _causes(text)]


def test_a_cut_log_of_many_unfinished_inits_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # A large job's log cut during init: one `Init START` per rank, none finished. Read once per communicator,
    # 512 ranks took over ten seconds; the log is searched for returned inits once.
    text = "".join(f"node{r // 8}:{100 + r}:{100 + r} [{r % 8}] NCCL INFO ncclCommInitRankConfig comm 0x{r:x} "
                   f"rank {r} nranks 64 cudaDev {r % 8} nvmlDev {r % 8} busId 60 commId 0x1 - Init START\n"
                   for r in range(64))
    searched: list[str] = []
    grep = Log.grep

    def counted(self: Log, pattern: re.Pattern[str]) -> Iterator[tuple[LogLine, re.Match[str]]]:
        searched.append(pattern.pattern)
        return grep(self, pattern)

    monkeypatch.setattr(Log, "grep", counted)
    causes = _causes(text)
    # Every rank was read: the detail names the first six and counts the rest.
    assert [c.id for c in causes] == ["init-unfinished"] and "rank 5 of 64 and 58 more" in causes[0].detail
    assert searched.count(rules_bootstrap._INIT_RETURNED.pattern) == 1
