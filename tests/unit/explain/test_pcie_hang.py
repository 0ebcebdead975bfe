"""`explain` on a hang with no error on PCIe peer-to-peer paths (ACS or the IOMMU), and on the hangs it must leave
to their own causes. The lines follow the shape of NVIDIA/nccl#2079 (two GPUs on PCIe, NODE, NCCL 2.25.1: init
completes, the first all-reduce never returns) and torch's watchdog wording; the thread's own log was not kept."""

from __future__ import annotations

from provisioner.explain import explain
from tests.unit.explain._field import words

_A = "ws01:4101:4120 [0] NCCL INFO "
_B = "ws01:4102:4121 [1] NCCL INFO "
_INIT = "".join([
    _A + "NCCL version 2.25.1+cuda12.8\n",
    _A + "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n",
    _B + "Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM\n",
    _A + "Connected all rings\n",
    _A + "ncclCommInitRank comm 0x55d0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 41000 commId 0x1f - Init COMPLETE\n",
    _B + "ncclCommInitRank comm 0x55d1 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 61000 commId 0x1f - Init COMPLETE\n",
])
_WATCHDOG = "".join(
    f"[rank{r}]:[E330 10:00:00.000000000 ProcessGroupNCCL.cpp:629] [Rank {r}] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600050 "
    "milliseconds before timing out.\n" for r in (0, 1))
_TOPO = ("        GPU0    GPU1    CPU Affinity    NUMA Affinity\n"
         "GPU0     X      NODE    0-63            0\n"
         "GPU1    NODE     X      0-63            0\n")


def _ids(text: str) -> list[str]:
    return [c.id for c in explain([("job.log", text)]).causes]


def test_init_then_watchdog_on_p2p_names_acs_below_concrete_errors() -> None:
    causes = explain([("job.log", _TOPO + _INIT + _WATCHDOG)]).causes
    top = causes[0]
    assert top.id == "pcie-p2p-hang" and 60 < top.score < 70, [(c.id, c.score) for c in causes]
    said = words(top)
    for text in ("ACSCtl", "NCCL_P2P_DISABLE=1", "NCCL_P2P_LEVEL", "iommu=pt", "no NVLink"):
        assert text in said, said
    assert top.hosts == ["ws01"]
    assert "collective-timeout" in [c.id for c in causes]


def test_without_topology_it_says_pcie_is_assumed() -> None:
    top = explain([("job.log", _INIT + _WATCHDOG)]).causes[0]
    assert top.id == "pcie-p2p-hang" and "unless the GPUs share NVLink" in top.detail


def test_nvlink_between_the_gpus_is_no_pcie_hang() -> None:
    nvlink = _TOPO.replace("NODE", "NV12")
    assert "pcie-p2p-hang" not in _ids(nvlink + _INIT + _WATCHDOG)
    graph = _A + "Pattern 4, crossNic 0, nChannels 12, bw 20.000000/20.000000, type NVL/PIX, sameChannels 1\n"
    assert "pcie-p2p-hang" not in _ids(graph + _INIT + _WATCHDOG)


def test_gpudirect_to_the_nic_counts_as_a_pcie_peer_path() -> None:
    net = _INIT.replace("via P2P/CUMEM", "[send] via NET/IB/0/GDRDMA")
    top = explain([("job.log", net + _WATCHDOG)]).causes
    hang = next(c for c in top if c.id == "pcie-p2p-hang")
    assert "GDRDMA" in hang.detail and "NCCL_NET_GDR_LEVEL" in hang.settings
    # GPUDirect alone is what nearly every job on RDMA shows: a place to look, below the timeout it would explain.
    timeout = next(c for c in top if c.id == "collective-timeout")
    assert hang.score < timeout.score, [(c.id, c.score) for c in top]


def test_other_causes_of_the_same_silence_win() -> None:
    # a network error, a peer that died, ranks at different collectives
    completion = ("ws01:4101:4130 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
                  "10.0.0.2<41234> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.1 "
                  "remoteGids::ffff:10.0.0.2\n")
    dead = ("ws01:4101:4130 [0] misc/socket.cc:47 NCCL WARN socketProgress: Connection closed by remote peer "
            "ws02<45678>\n")
    desync = ("[rank0]:[E330 10:00:00.000000000 ProcessGroupNCCL.cpp:1316] [PG ID 0 PG GUID 0(default_pg) Rank 0] "
              "Observed flight recorder dump signal from another rank via TCPStore.\n"
              "[rank0]: RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running collective: "
              "CollectiveFingerPrint(SequenceNumber=1, OpType=ALLREDUCE), but Rank 1 is running collective: "
              "CollectiveFingerPrint(SequenceNumber=1, OpType=BROADCAST).\n")
    for extra in (completion, dead, desync):
        assert "pcie-p2p-hang" not in _ids(_INIT + extra + _WATCHDOG), extra


def test_no_hang_no_cause() -> None:
    assert _ids(_TOPO + _INIT) == []


_TIME_LIMIT = "slurmstepd: error: *** STEP 81234.0 ON ws01 CANCELLED AT 2025-03-30T10:10:00 DUE TO TIME LIMIT ***\n"
_PREEMPTED = "slurmstepd: error: *** JOB 81234 ON ws01 CANCELLED AT 2025-03-30T10:10:00 DUE TO PREEMPTION ***\n"


def test_a_time_limit_or_a_cancel_alone_is_no_hang() -> None:
    # a healthy job runs until its time is up, or is preempted
    for end in (_TIME_LIMIT, _PREEMPTED):
        ids = _ids(_TOPO + _INIT + end)
        assert "pcie-p2p-hang" not in ids and ids, end


def test_a_watchdog_timeout_ended_by_the_time_limit_still_names_acs() -> None:
    assert "pcie-p2p-hang" in _ids(_TOPO + _INIT + _WATCHDOG + _TIME_LIMIT)


_FLUSH = ("gpu07:984:1357 [4] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<44206> "
          "with status=5 opcode=32656 len=32659 vendor err 249 (Recv) localGid ::ffff:10.0.0.1 "
          "remoteGids::ffff:10.0.0.2\n")


def test_a_lone_flush_names_the_platform_causes_and_an_echo_does_not() -> None:
    # nccl#1353: status 5, vendor err 249 with nothing before it; a maintainer named ACS and platform firmware.
    alone = explain([("job.log", _FLUSH)]).causes[0]
    assert alone.id == "ib-completion-error" and alone.score < 60
    assert "ACSCtl" in alone.fix and "firmware" in alone.fix and "No earlier error" in alone.detail
    retry = _FLUSH.replace("status=5", "status=12").replace("err 249", "err 129")
    echo = next(c for c in explain([("job.log", retry + _FLUSH)]).causes if "IBV_WC_WR_FLUSH_ERR" in c.title)
    assert "ACSCtl" not in echo.fix and "comes first" in echo.detail



def test_the_timeout_points_at_the_pcie_cause_instead_of_repeating_it() -> None:
    causes = {c.id: c for c in explain([("job.log", _TOPO + _INIT + _WATCHDOG)]).causes}
    hang, timeout = causes["pcie-p2p-hang"], causes["collective-timeout"]
    assert "pcie-p2p-hang" in timeout.fix and hang.title in timeout.fix
    for advice in ("NCCL_P2P_DISABLE=1", "ACSCtl", "iommu=pt"):
        assert advice not in timeout.fix, timeout.fix
    assert "redirecting peer traffic" not in timeout.detail and "pcie-p2p-hang" in timeout.detail
    assert timeout.settings == [] and "NCCL_P2P_DISABLE" in hang.settings
    # Where the P2P hang is not named (NVLink between the GPUs), the timeout keeps its own P2P advice.
    nvlink = {c.id: c for c in explain([("job.log", _TOPO.replace("NODE", "NV12") + _INIT + _WATCHDOG)]).causes}
    assert "pcie-p2p-hang" not in nvlink and "NCCL_P2P_DISABLE=1" in nvlink["collective-timeout"].fix
