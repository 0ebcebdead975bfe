"""Where each rank sits in its comm's rings and NVLS heads: no sample holds these lines, so they are built from NCCL's
own format strings, each test naming the release and source file. Also the JSON form of a comm's layouts:
one entry per distinct layout with the channels that share it."""

from __future__ import annotations

from provisioner.parsers.nccl_channels import Communicator, RingPeers
from provisioner.parsers.nccl_debug import parse_nccl_debug

from ._samples import SAMPLES

_P = "gpu01:2001:2101 [0] NCCL INFO "


def _sample(name: str) -> str:
    return (SAMPLES / "logs" / name).read_text()


def test_ring_neighbours_per_channel_before_the_comm_is_named() -> None:
    # 2.10.3 to 2.30.7 src/init.cc: "Ring %02d : %d -> %d -> %d" (prev, rank, next); 2.10 to 2.18 name the comm
    # only at "%s comm %p rank %d nranks %d cudaDev %d busId %lx - Init COMPLETE".
    log = parse_nccl_debug(
        _P + "Ring 00 : 7 -> 0 -> 1\n" + _P + "Ring 01 : 1 -> 0 -> 7\n"
        + _P + "ncclCommInitRank comm 0x5580 rank 0 nranks 8 cudaDev 0 busId 18000 - Init COMPLETE\n"
    )
    (comm,) = log.communicators
    assert comm.ring_peers == {0: RingPeers(prev=7, next=1), 1: RingPeers(prev=1, next=7)}
    assert comm.rings == {} and not log.unplaced and not log.links


def test_nvls_heads_and_head_rank() -> None:
    # 2.18 to 2.30.7 src/graph/connect.cc: "NVLS Head %2d:" then " %2d" per node; src/transport/nvls.cc: "NVLS comm
    # %p headRank %d nHeads %d buffSize ..." (2.18 to 2.26), "... nHeads %d nvlsRanks %d buffSize ..." (2.27 on).
    comm_line = _P + "comm 0x5580 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0\n"
    log = parse_nccl_debug(
        comm_line + _P + "NVLS Head  0:  0  8\n" + _P + "NVLS Head  1:  1  9\n"
        + _P + "NVLS comm 0x5580 headRank 0 nHeads 8 nvlsRanks 8 buffSize 1048576 nvlsPerRankSize 201326592 "
        "nvlsTotalSize 1610612736\n"
    )
    (comm,) = log.communicators
    assert comm.nvls_heads == {0: [0, 8], 1: [1, 9]}
    assert (comm.nvls_head_rank, comm.nvls_nheads) == (0, 8)


def test_nvls_set_up_at_the_first_collective_belongs_to_the_finished_comm() -> None:
    # 2.22 on connect NVLS at runtime: its lines come after "Init COMPLETE" (2.26 src/init.cc wording).
    log = parse_nccl_debug(
        _P + "comm 0x5580 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0\n"
        + _P + "ncclCommInitRankConfig comm 0x5580 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 18000 commId 0x1 - "
        "Init COMPLETE\n"
        + _P + "NVLS Head  0:  0  8\n"
        + _P + "NVLS comm 0x5580 headRank 0 nHeads 8 buffSize 1048576 nvlsPerRankSize 1 nvlsTotalSize 8\n"
        + _P + "comm 0x6690 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0\n"
    )
    first, second = log.communicators
    assert first.nvls_heads == {0: [0, 8]} and first.nvls_nheads == 8
    assert second.nvls_heads == {} and second.nvls_nheads is None


def test_json_groups_the_channels_that_share_a_layout() -> None:
    parsed = parse_nccl_debug((SAMPLES / "nccl-debug-30-h200-one-rank-socket-2.28.txt").read_text())
    (comm,) = parsed.communicators
    data = comm.model_dump(mode="json")
    assert data["rings"] == [{"channels": list(range(64)), "ranks": [0]}]
    assert Communicator.model_validate(data) == comm
    assert Communicator.model_validate_json(comm.model_dump_json()) == comm
    assert len(comm.rings) == 64  # in Python, still one entry per channel


def test_json_trees_keep_which_channels_differ() -> None:
    parsed = parse_nccl_debug(_sample("nccl-2.9-efa-p4d-two-nodes-mpi-tags.txt"))
    comm = next(c for c in parsed.communicators if c.rank == 0)
    trees = comm.model_dump(mode="json")["trees"]
    assert sorted(ch for entry in trees for ch in entry["channels"]) == sorted(comm.trees)
    assert len(trees) == len({(t.up, tuple(t.down)) for t in comm.trees.values()}) < len(comm.trees)
    assert Communicator.model_validate(comm.model_dump(mode="json")) == comm
