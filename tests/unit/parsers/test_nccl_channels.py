"""What the NCCL log parser reads of each communicator's build, from real logs of several releases: its place
among nodes, rings and trees, the transport per channel and peer, channel counts, NVLS, init completion and
timing. 2.7 to 2.18 name the comm only in their last line (`Init COMPLETE`), so what its thread printed before
must wait for it; 2.19 on name it first."""

from __future__ import annotations

from collections import Counter

from provisioner.parsers.nccl_debug import parse_nccl_debug

from ._samples import SAMPLES


def _parse(name: str):  # type: ignore[no-untyped-def]
    return parse_nccl_debug((SAMPLES / "logs" / name).read_text())


def test_efa_two_nodes_2_9_every_rank_its_comm_links_and_tree() -> None:
    parsed = _parse("nccl-2.9-efa-p4d-two-nodes-mpi-tags.txt")
    comms = {c.rank: c for c in parsed.communicators}
    assert sorted(comms) == list(range(16))
    # `Using network` came from each process's main thread, the comm from its init thread.
    assert {c.network for c in comms.values()} == {"AWS Libfabric"}
    assert all(c.init_complete for c in comms.values())
    assert comms[2].cuda_dev == 2 and comms[2].bus_id == "201c0"
    # Rank 0 printed the ring order of each of the 8 channels before its comm was named.
    assert len(comms[0].rings) == 8
    assert comms[0].rings[1] == [0, 3, 10, 15, 14, 13, 12, 9, 8, 11, 2, 7, 6, 5, 4, 1]
    assert comms[1].rings == {}
    assert comms[0].trees[0].up == -1 and comms[0].trees[0].down == [1, 8]
    assert comms[0].channels == {"coll": 8, "p2p": 8, "p2p per peer": 1}
    # Every connection belongs to the comm of the thread that printed it.
    by_comm = {c.comm: c for c in comms.values()}
    assert all(link.comm in by_comm for link in parsed.links)
    families = Counter(link.transport.split("/")[0] for link in parsed.links)
    assert set(families) == {"P2P", "NET"}
    net = [link for link in parsed.links if link.transport.startswith("NET/AWS Libfabric/")]
    assert {link.direction for link in net} == {"send", "receive"}
    assert all(link.transport.endswith("/GDRDMA") for link in net)
    one = next(link for link in parsed.links if link.src == 1 and link.dst == 8 and link.direction == "send")
    assert one.transport == "NET/AWS Libfabric/1/GDRDMA" and one.channels == [0, 4]
    assert by_comm[one.comm].rank == 1


def test_socket_two_containers_2_11_links_rings_trees_and_no_verbs() -> None:
    parsed = _parse("nccl-2.11-socket-two-containers-aws-batch.txt")
    assert parsed.network == "Socket"
    assert parsed.ib_unavailable == ["Failed to open libibverbs.so[.1]"]
    rank0, rank1 = sorted(parsed.communicators, key=lambda c: c.rank)
    assert (rank0.host, rank1.host) == ("ip-10-0-139-244", "ip-10-0-142-242")
    assert rank0.rings == {0: [0, 1], 1: [0, 1]}
    assert rank0.trees[1].up == 1 and rank1.trees[1].down == [0]
    # Rank 1's comm line came after the nccl-tests table header: its links still wait for it.
    assert rank1.init_complete and rank1.channels == {"coll": 2, "p2p": 2, "p2p per peer": 1}
    assert {(link.comm, link.src, link.dst, link.direction) for link in parsed.links} == {
        (rank1.comm, 0, 1, "receive"), (rank0.comm, 1, 0, "receive"),
        (rank1.comm, 1, 0, "send"), (rank0.comm, 0, 1, "send"),
    }
    assert {link.transport for link in parsed.links} == {"NET/Socket/0"}
    assert all(link.channels == [0, 1] for link in parsed.links)


def test_one_rank_2_28_place_start_complete_and_timing() -> None:
    parsed = parse_nccl_debug((SAMPLES / "nccl-debug-30-h200-one-rank-socket-2.28.txt").read_text())
    (comm,) = parsed.communicators
    assert (comm.nnodes, comm.local_ranks, comm.local_rank) == (1, 1, 0)
    assert comm.comm_id == "0x1b37a6071ae27d0c"
    assert comm.init_started and comm.init_complete
    assert comm.init_seconds == 0.46
    assert len(comm.rings) == 64 and comm.rings[63] == [0]
    assert comm.channels["nvls"] == 0


# NVIDIA/nccl#1357 (2.19-era, two 8xH100 nodes): the comm is named before its trees; NVLS available.
_NVLS = """\
qh100-gpu19:49360:49416 [6] NCCL INFO NVLS multicast support is available on dev 6
qh100-gpu19:49360:49416 [6] NCCL INFO comm 0x55d900e4a6c0 rank 6 nRanks 16 nNodes 2 localRanks 8 localRank 6 MNNVL 0
qh100-gpu19:49360:49416 [6] NCCL INFO NVLS Head  0:  0  8
qh100-gpu19:49360:49416 [6] NCCL INFO Trees [0] 5/-1/-1->6->4 [1] 5/-1/-1->6->4 [2] 5/-1/-1->6->4 [3] 5/14/-1->6->-1
"""

# NVIDIA/nccl#1814 (two lines of a 64-rank job): NVLS connected, then the channel counts with NVLS channels.
_NVLS_DONE = (
    "hostname-test:983:1261 [3] NCCL INFO Connected NVLS tree\n"
    "hostname-test:983:1261 [3] NCCL INFO 16 coll channels, 0 collnet channels, 16 nvls channels, 16 p2p channels,"
    " 1 p2p channels per peer\n"
    "hostname-test:983:1261 [3] NCCL INFO comm 0x55f01c18e490 rank 35 nranks 64 cudaDev 3 nvmlDev 3 busId 59000"
    " commId 0x5ae77eb5ea4ec1ee - Init COMPLETE\n"
)


def test_nvls_comm_named_first_takes_the_multicast_line_before_it_and_the_trees_after() -> None:
    (comm,) = parse_nccl_debug(_NVLS).communicators
    assert comm.nvls_multicast is True
    assert (comm.nnodes, comm.local_ranks, comm.local_rank) == (2, 8, 6)
    assert comm.trees[3].up == -1 and comm.trees[3].down == [5, 14]


def test_nvls_channel_counts_and_connected_tree() -> None:
    (comm,) = parse_nccl_debug(_NVLS_DONE).communicators
    assert comm.connected == ["NVLS tree"]
    assert comm.channels == {"coll": 16, "collnet": 0, "nvls": 16, "p2p": 16, "p2p per peer": 1}
    assert comm.comm_id == "0x5ae77eb5ea4ec1ee" and comm.init_complete


# aws/aws-ofi-nccl#24 (NCCL 2.4, Horovod's `[1,26]<stdout>:` tags): `Ring` connections, a network one with
# the ranks alone.
_RING_2_4 = """\
[1,26]<stdout>:ip-172-32-36-209:8716:9558 [2] NCCL INFO Ring 00 : 26[2] -> 30[6] via P2P/IPC
[1,7]<stdout>:ip-172-32-38-1:21471:22316 [7] NCCL INFO Ring 00 : 7 -> 8 [send] via NET/AWS Libfabric/0
"""


def test_rings_of_2_4_read_as_links_and_net_paths() -> None:
    parsed = parse_nccl_debug(_RING_2_4)
    assert [(link.kind, link.src, link.dst, link.direction, link.transport) for link in parsed.links] == [
        ("ring", 26, 30, None, "P2P/IPC"), ("ring", 7, 8, "send", "NET/AWS Libfabric/0"),
    ]
    assert parsed.net_paths == ["AWS Libfabric"]


def test_a_thread_that_completed_one_comm_starts_the_next_afresh() -> None:
    # 2.7 to 2.18 name a comm at its end: a second comm made by the same thread must not take the first's.
    text = (
        "h:1:2 [0] NCCL INFO Channel 00/02 :    0   1\n"
        "h:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n"
        "h:1:2 [0] NCCL INFO Channel 00/01 :    0\n"
        "h:1:2 [0] NCCL INFO comm 0x2 rank 0 nranks 1 cudaDev 0 busId 1000 - Init COMPLETE\n"
    )
    first, second = parse_nccl_debug(text).communicators
    assert first.rings == {0: [0, 1]} and second.rings == {0: [0]}


def test_the_next_comm_of_a_thread_keeps_links_of_its_own() -> None:
    # 2.7 to 2.18: the same connection in two comms of one thread is two links, one per comm.
    text = (
        "h:1:2 [0] NCCL INFO Channel 00 : 0[1000] -> 1[2000] via P2P/IPC\n"
        "h:1:2 [0] NCCL INFO Channel 01 : 0[1000] -> 1[2000] via P2P/IPC\n"
        "h:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n"
        "h:1:2 [0] NCCL INFO Channel 00 : 0[1000] -> 1[2000] via P2P/IPC\n"
        "h:1:2 [0] NCCL INFO comm 0x2 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n"
    )
    links = parse_nccl_debug(text).links
    assert [(link.comm, link.channels, link.line) for link in links] == [("0x1", [0, 1], 1), ("0x2", [0], 4)]
