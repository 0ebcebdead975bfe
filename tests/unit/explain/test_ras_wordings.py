"""NCCL RAS wordings with no field log yet, one row each: lines built from the format strings in NCCL's own source
(src/ras/client_support.cc for the `ncclras` report, src/ras/rasnet.cc, peers.cc and ras.cc for the RAS thread's
INFO lines and the monitor events), with the release whose wording each row follows. The report's job summary rows
are built from the same source's format strings (no field report prints GPUs per process apart yet)."""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from provisioner.explain.logs import LogLine
from provisioner.explain.model import Cause
from provisioner.explain.ras import RasRank
from provisioner.explain.rules_ras import _who

_NCCL = "gpu01:1234:1300 [0] NCCL INFO "

# name -> (release and file, text, the top cause's id, its hosts, text its detail holds)
WORDINGS: dict[str, tuple[str, str, str, list[str], str]] = {
    "dead-2.24": ("v2.24.3 client_support.cc", "Errors\n======\n\nDEAD\n  2 job processes are considered dead "
                  "(unreachable via the RAS network)\n  Process 4242 on node gpu03 managing GPUs 3,4\n  [could not "
                  "find information on 1 process]\n\n#0-1 (0a1b2c3d4e5f6071) INCOMPLETE\n  Missing communicator "
                  "data from 3 ranks\n  The missing ranks: 3,4,11\n", "ras-process-dead", ["gpu03"],
                  "lost 2 job processes for good: process 4242 (GPUs 3,4) on gpu03 (and 1 it has no details on). "
                  "communicator #0-1 (0a1b2c3d4e5f6071) is missing ranks 3, 4, 11"),
    "incomplete-unknown-2.26": ("v2.26.2 client_support.cc", "INCOMPLETE\n  Missing communicator data from 1 job "
                                "process\n  Process 77 on node 10.0.0.5 managing GPU 0 (NVML 2)\n\n#0-0 "
                                "(00000000000000ff) INCOMPLETE\n  Missing communicator data from 2 ranks\n  Rank 8 "
                                "-- GPU 0 (NVML 2) managed by process 77 on node 10.0.0.5\n  Rank 9 -- [process "
                                "information not found]\n", "ras-process-unresponsive", ["10.0.0.5"],
                                "rank 8 (process 77, GPU 0 (NVML 2)) on 10.0.0.5; rank 9"),
    "error-2.26": ("v2.26.2 client_support.cc", "#0-0 (1111222233334444) ERROR\n  Asynchronous errors on 2 ranks\n"
                   "  Rank 3 reported Remote process error -- GPU 3 managed by process 11 on node gpu01\n  Rank 9 "
                   "reported System error -- GPU 1 managed by process 22 on node gpu02\n", "ras-rank-error",
                   ["gpu02"], "System error on rank 9 (process 22, GPU 1) on gpu02"),
    "status-2.24": ("v2.24.3 client_support.cc", "#0-0 (5555666677778888) MISMATCH\n  Communicator ranks have "
                    "different status\n  30 ranks have status RUNNING\n  Rank 3,7 has status INIT\n",
                    "ras-status-mismatch", [], "rank 3 is INIT, rank 7 is INIT"),
    "status-2.26": ("v2.26.2 client_support.cc", "#0-0 (5555666677778888) MISMATCH\n  Communicator ranks have "
                    "different status\n  15 ranks have status RUNNING\n  Rank 5 has status ABORT -- GPU 5 managed "
                    "by process 777 on node gpu02\n", "ras-status-mismatch", ["gpu02"],
                    "rank 5 (process 777, GPU 5) on gpu02 is ABORT"),
    "timeout-2.24": ("v2.24.3 client_support.cc", "Warnings\n========\n\nTIMEOUT\n  Encountered 2 communication "
                     "timeouts while gathering communicator data\n\n", "ras-process-unresponsive", [],
                     "2 communication timeouts"),
    "keepalive-2.24": ("v2.24.3 rasnet.cc", _NCCL + "RAS keep-alive timeout warning (5s) on socket connection with "
                       "10.0.0.3<41235>\n", "ras-process-unresponsive", ["10.0.0.3"],
                       "10.0.0.3 (RAS keep-alive timeout warning after 5s)"),
    "connect-2.30": ("v2.30.7 rasnet.cc", _NCCL + "RAS connect retry timeout (61s) on socket connection with "
                     "10.0.0.4<40001>\n", "ras-process-unresponsive", ["10.0.0.4"], "connect retry timeout"),
    "declared-2.24": ("v2.24.3 peers.cc", _NCCL + "RAS declaring peer 10.0.0.3<41235> as DEAD; rasDeadPeersHash "
                      "0x5a5a\n", "ras-process-dead", ["10.0.0.3"], "lost 1 job process for good: 10.0.0.3"),
    "dead-peer-dump-2.24": ("v2.24.3 peers.cc", _NCCL + "RAS dead peer 0: socket 10.0.0.3<41235>, pid 4242, GPU 3\n",
                            "ras-process-dead", ["10.0.0.3"], "process 4242 on 10.0.0.3"),
    # A peer declared dead connecting again was alive all along: a split between the two nodes, not a dead process.
    "considered-dead-2.24": ("v2.24.3 ras.cc", _NCCL + "RAS connection from peer 10.0.0.6<40100> that is "
                             "considered dead!\n", "ras-network-split", ["10.0.0.6", "gpu01"],
                             "gpu01 refused 10.0.0.6"),
    # The same split seen from the side refused: it declares the refusing peer dead in turn, though it is alive.
    "refused-2.30": ("v2.30.7 ras.cc", "gpu02:99:100 [0] NCCL INFO RAS handling connInitAck from 10.0.0.1<40000> "
                     "(nack 1)\ngpu02:99:100 [0] NCCL INFO RAS declaring peer 10.0.0.1<40000> as DEAD; "
                     "rasDeadPeersHash 0x1\n", "ras-network-split", ["gpu02", "10.0.0.1"], "10.0.0.1 refused gpu02"),
    # The job summary's table of GPUs per process, printed where they differ (no node is named there).
    "gpus-per-process-2.26": ("v2.26.2 client_support.cc", "Job summary\n===========\n\n  Nodes  Processes\n"
                              "          per node\n      4          8\n\n         Processes         GPUs\n"
                              "                    per process\n                31            1\n"
                              "                 1            0\n", "ras-node-outlier", [],
                              "1 process manages no GPUs where most manage 1"),
    # Where only the process count per node differs, the nodes are named.
    "outlier-nodes-2.30": ("v2.30.7 client_support.cc", "  Nodes  Processes         GPUs\n          per node  "
                           "per process\n      6          8            1\n      2          7            1\n\n  "
                           "Nodes  Processes         GPUs\n(total)    (total)      (total)\n      8         62"
                           "           62\n\nThe outlier nodes:\n  Node 10.0.0.7 running processes 1,2,3,4,5,6,7\n"
                           "  Node 10.0.0.8 running processes 1,2,3,4,5,6,7\n", "ras-node-outlier",
                           ["10.0.0.7", "10.0.0.8"], "node 10.0.0.8 runs 7 NCCL processes where the other nodes run 8"),
    "monitor-dead-2.29": ("v2.29.2 client_support.cc, peers.cc", "[2026-01-05 10:00:00] PEER_DEAD: Process 4242 on "
                          "node gpu03 managing GPU 3 \n", "ras-process-dead", ["gpu03"], "process 4242 on gpu03"),
    "monitor-unresponsive-2.29": ("v2.29.2 rasnet.cc", "[2026-01-05 10:00:00] PEER_UNRESPONSIVE: 10.0.0.7<40200> "
                                  "peer not responding for 6s (keepalive warning)\n", "ras-process-unresponsive",
                                  ["10.0.0.7"], "10.0.0.7 (PEER_UNRESPONSIVE)"),
}


def _causes(text: str) -> list[Cause]:
    return explain([("job.log", text)]).causes


@pytest.mark.parametrize(("source", "text", "cause_id", "where", "holds"), WORDINGS.values(), ids=list(WORDINGS))
def test_each_wording_names_its_cause_and_host(source: str, text: str, cause_id: str, where: list[str],
                                               holds: str) -> None:
    causes = _causes(text)
    assert causes and causes[0].id == cause_id, (source, [c.id for c in causes])
    assert causes[0].hosts == where, (source, causes[0].hosts)
    assert holds in causes[0].detail, causes[0].detail


def test_an_inventory_names_the_host_behind_a_peer_address() -> None:
    text = WORDINGS["declared-2.24"][1]
    top = explain([("job.log", text)], aliases={"10.0.0.3": "gpu03"}).causes[0]
    assert top.hosts == ["gpu03"] and top.addresses == ["10.0.0.3"]


def test_a_peer_really_dead_still_reads_as_dead_beside_a_split() -> None:
    # 10.0.0.6 was declared dead and came back (a split); 10.0.0.7 was declared dead and never did.
    text = (_NCCL + "RAS declaring peer 10.0.0.6<40100> as DEAD; rasDeadPeersHash 0x1\n" + _NCCL + "RAS declaring "
            "peer 10.0.0.7<40100> as DEAD; rasDeadPeersHash 0x2\n" + _NCCL + "RAS connection from peer "
            "10.0.0.6<40100> that is considered dead!\n")
    causes = {c.id: c for c in _causes(text)}
    assert causes["ras-network-split"].hosts == ["10.0.0.6", "gpu01"]
    assert [e.line for e in causes["ras-network-split"].evidence] == [3, 1]
    assert causes["ras-process-dead"].hosts == ["10.0.0.7"]
    assert "10.0.0.6" not in causes["ras-process-dead"].detail


def test_a_report_listing_the_process_cut_off_as_dead_reads_as_the_split() -> None:
    # RAS never takes a dead peer back: its report still lists the process that came back as dead.
    text = ("Errors\n======\n\nDEAD\n  1 job process is considered dead (unreachable via the RAS network)\n"
            "  Process 4242 on node 10.0.0.6 managing GPU 3\n\n" + _NCCL + "RAS connection from peer "
            "10.0.0.6<40100> that is considered dead!\n")
    causes = _causes(text)
    assert [c.id for c in causes] == ["ras-network-split"]
    assert "still lists process 4242 (GPU 3) on 10.0.0.6 as dead" in causes[0].detail


def test_a_connection_from_a_peer_with_no_address_names_the_node_that_refused_it() -> None:
    # Some builds print the line without the peer's address.
    causes = _causes(_NCCL + "RAS connection from a peer that is considered dead!\n")
    assert causes[0].id == "ras-network-split" and causes[0].hosts == ["gpu01"]


def test_a_peer_that_recovered_is_not_a_cause() -> None:
    text = ("[2026-01-05 10:00:00] PEER_UNRESPONSIVE: 10.0.0.7<40200> peer not responding for 6s (keepalive "
            "warning)\n[2026-01-05 10:00:03] PEER_RECOVERED: 10.0.0.7<40200> peer responding again\n")
    assert not _causes(text)


def test_the_lines_every_healthy_job_prints_name_nothing() -> None:
    text = (_NCCL + "RAS client listening socket at 127.0.0.1<28028>\n" + _NCCL + "RAS network listening socket at "
            "10.0.0.1<40000>\n" + _NCCL + "RAS established connection with 10.0.0.2<40000> (sendQ empty, "
            "experiencingDelays 0, startRetryTime 0.00s)\n")
    assert not _causes(text)


def test_a_word_alone_on_a_line_is_not_a_report_entry() -> None:
    assert not _causes("DEAD\nthe cat is asleep\nINCOMPLETE\n")


def test_the_ras_client_port_taken_is_not_the_rendezvous_port() -> None:
    # v2.27.3 client_support.cc: the bind of the client socket fails through SYSCHECK (a WARN naming the RAS
    # file), then RAS says so at INFO. The job runs on; only `ncclras` cannot reach it on that node.
    text = ("[2025-08-22 17:44:36] gpu01:6801:6839 [1] ras/client_support.cc:159 NCCL WARN Call to bind failed: "
            "Address already in use\n" + _NCCL + "RAS failed to establish a client listening socket at "
            "localhost:28028\n")
    assert "port-in-use" not in [c.id for c in _causes(text)]
    assert [c.id for c in _causes(text.replace("ras/client_support.cc:159", "misc/socket.cc:480").replace(
        "RAS failed to establish a client listening socket at localhost:28028", "Bootstrap timings total 0.1"))] == [
        "port-in-use"]


@pytest.mark.parametrize(("gpu", "worded"), [
    ("3", "GPU 3"), ("3,4", "GPUs 3,4"), ("0 (NVML 2)", "GPU 0 (NVML 2)"), ("0,1 (NVML 2,3)", "GPUs 0,1 (NVML 2,3)"),
])
def test_a_process_is_worded_for_how_many_gpus_it_manages(gpu: str, worded: str) -> None:
    item = RasRank(LogLine("job.log", 1, "", None), pid="4242", node="gpu03", gpu=gpu)
    assert _who(item) == f"process 4242 ({worded}) on gpu03"
