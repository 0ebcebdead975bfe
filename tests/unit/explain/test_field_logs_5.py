"""`explain` on a fifth set of field logs (tests/samples/logs/, sources in tests/samples/INDEX.md): what a job
prints as it ends rather than as it fails, such as torchelastic's exit barrier, where the nodes did not end
together; a collective that hangs between the GPUs of one node, which no network carries; and NCCL's
bootstrap root refusing a rank that checked in twice, or a connection closing before its handshake."""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from tests.unit.explain._field import causes_of, table

# file -> (the top cause's id, text its first evidence line starts with, text its title/detail/fix/settings hold)
CASES: dict[str, tuple[str, str, str]] = {
    # This node's agent waited past the barrier's 300 s: another node had not finished (its error line is cut
    # off in the source, so the wait alone tells it).
    "torchelastic-exit-barrier-timeout-cloudwatch-1.txt": (
        "exit-barrier", "ERROR:torch.distributed.elastic.agent.server.api:Error waiting on exit barrier",
        "waited 316 s in the exit barrier"),
    # RCCL (NCCL's bootstrap, same wording) on one workstation: the root was reached twice for rank 1. The CUDA
    # failure above it is named too, below the bootstrap, which stops init by itself.
    "rccl-bootstrap-rank-checked-in-twice-1.txt": (
        "bootstrap-rank-claimed-twice", "/long_pathname_so_that_rpms_can_package_the_debug_info/src/extlibs/rccl/"
        "build/src/bootstrap.cpp:132 NCCL WARN Bootstrap Root : rank 1 of 2", "rank 1 of 2"),
    # A connection closed before its handshake, and the trace unwinds through bootstrap.cc: init failed, not a
    # running job (NCCL before 2.27.3 aborts on such a connection, a port scanner's for one).
    "nccl-bootstrap-closed-before-handshake-1.txt": (
        "connection-lost", "misc/socket.cc:71 NCCL WARN socketProgress: Connection closed by remote peer",
        "during NCCL's bootstrap"),
}


test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, _ = table(CASES, evidence_starts=True)


def test_an_exit_barrier_alone_is_not_blamed_on_the_fabric() -> None:
    causes = causes_of("torchelastic-exit-barrier-timeout-cloudwatch-1.txt")
    assert [c.id for c in causes] == ["exit-barrier"]
    assert "Not a fabric fault" in causes[0].detail


# torch 2.x's agent logs through glog's prefix and ends the traceback with torch.distributed's own error types
# (torch/distributed/elastic/agent/server/api.py `_exit_barrier`, utils/store.py; hosts and numbers changed).
_GLOG = "E0319 23:40:35.118955 139795948843008 torch/distributed/elastic/agent/server/api.py:951] "
_WAITED = (f"[2024-03-12 08:22:56,574] torch.distributed.elastic.agent.server.api: [INFO] Local worker group finished "
           f"(WorkerState.SUCCEEDED). Waiting 300 seconds for other agents to finish\n"
           f"{_GLOG}Error waiting on exit barrier. Elapsed: 300.10335206985474 seconds\n"
           f"{_GLOG}Traceback (most recent call last):\n{_GLOG}    data = store.get(f\"{{prefix}}{{idx}}\")\n"
           f"{_GLOG}           ^^^^^^^^^^^^^^^^^^^^^^^^^^^\n{_GLOG}torch.distributed.DistStoreError: Socket Timeout\n")
_GONE = (f"{_GLOG}Error waiting on exit barrier. Elapsed: 0.004255771636962891 seconds\n"
         f"{_GLOG}Traceback (most recent call last):\n{_GLOG}    idx = store.add(num_members_key, 1)\n"
         f"{_GLOG}torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. "
         "Did the remote server shutdown or crash?\n")


@pytest.mark.parametrize(("text", "holds", "last"), [
    (_WAITED, "ended (succeeded), and its agent waited 300 s in the exit barrier for the other nodes' agents, "
              "which did not come (Socket Timeout)", "DistStoreError: Socket Timeout"),
    # The store answered at once with a closed connection: the first node's agent, which holds it, had left.
    (_GONE, "could not reach the rendezvous store", "Did the remote server shutdown or crash?"),
])
def test_the_exit_barrier_in_torch_2_wording(text: str, holds: str, last: str) -> None:
    top = explain([("agent.log", text)]).causes[0]
    assert top.id == "exit-barrier"
    assert holds in top.detail, top.detail
    assert top.evidence[-1].text.endswith(last)  # the traceback's error line is evidence too


# NCCL's connection lines (`Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM`, 2.19 on, as in NVIDIA/nccl#1538; `via
# P2P/IPC` before) and torch 2.x's watchdog line; hosts and numbers changed.
_WATCHDOG = ("[rank{r}]:[E0612 10:41:07.512331 7812{r} ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
             "operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
             "ran for 60004{r} milliseconds before timing out.\n")
_P2P = ("gpu01:5664:5812 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM\n"
        "gpu01:5663:5809 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n"
        + _WATCHDOG.format(r=0) + _WATCHDOG.format(r=1))


def test_a_hang_between_gpus_of_one_node_is_named_p2p_not_the_network() -> None:
    causes = explain([("job.log", _P2P)]).causes
    # The PCIe peer-path cause (ACS, the IOMMU) leads; the timeout it explains follows, in P2P terms too, and
    # points at it for the advice.
    assert [c.id for c in causes][:2] == ["pcie-p2p-hang", "collective-timeout"]
    top = causes[1]
    assert "connected GPU to GPU (via P2P)" in top.detail and "pcie-p2p-hang" in top.detail
    assert "NCCL_SOCKET_IFNAME" not in top.detail  # the first collective's note speaks of P2P too
    assert "pcie-p2p-hang" in top.fix and "NCCL_P2P_DISABLE=1" in causes[0].fix
    # Ranks on two nodes, or connected through the network, keep the network advice.
    across = _P2P + "gpu02:7001:7010 [0] NCCL INFO Channel 00/0 : 2[0] -> 0[0] [receive] via NET/IB/0\n"
    assert "PCIe ACS" not in explain([("job.log", across)]).causes[0].detail


def test_a_connection_closed_after_init_is_still_read_as_mid_job() -> None:
    # The same close with the trace of a running communicator (Init COMPLETE first, proxy trace after).
    text = ("gpu07:4117:4190 [0] NCCL INFO comm 0x55d0 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n"
            "gpu07:4117:4201 [0] misc/socket.cc:71 NCCL WARN socketProgress: Connection closed by remote peer "
            "10.10.1.3<36138>\n"
            "gpu07:4117:4201 [0] NCCL INFO misc/socket.cc:80 -> 6\n"
            "gpu07:4117:4201 [0] NCCL INFO bootstrap.cc:701 -> 6\n")
    cause = next(c for c in explain([("job.log", text)]).causes if c.id == "connection-lost")
    assert "mid-job" in cause.detail and "bootstrap" not in cause.detail
