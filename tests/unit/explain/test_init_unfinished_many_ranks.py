"""A large job whose init never finished names its first ranks and hosts and counts the rest, as other causes
abbreviate long lists. The lines are the real `Init START` line of
tests/samples/logs/nccl-init-rank-missing-h200-2.28.txt with its rank, nranks, host and pid varied: no real
log of thousands of stuck ranks is in the samples."""

from __future__ import annotations

from provisioner.explain import explain

_START = ("{host}:{pid}:{pid} [0] NCCL INFO ncclCommInitRankConfig comm 0x1799d350 rank {rank} nranks {nranks} "
          "cudaDev 0 nvmlDev 0 busId 60 commId 0xb598af4961f49c37 - Init START\n")


def _stuck(nranks: int) -> str:
    return "".join(_START.format(host=f"gpu{rank // 8:04d}", pid=1000 + rank, rank=rank, nranks=nranks)
                   for rank in range(nranks))


def test_thousands_of_stuck_ranks_are_named_in_part_and_counted() -> None:
    [cause] = [c for c in explain([("job.log", _stuck(2048))]).causes if c.id == "init-unfinished"]
    assert "rank 0 of 2048, rank 1 of 2048" in cause.detail and "and 2042 more printed `Init START`" in cause.detail
    assert "rank 2047 of 2048" not in cause.detail
    assert " on gpu0000, " in cause.detail and "and 250 more." in cause.detail  # 256 hosts
    assert len(cause.detail) < 1500, len(cause.detail)


def test_a_few_stuck_ranks_are_all_named() -> None:
    [cause] = [c for c in explain([("job.log", _stuck(4))]).causes if c.id == "init-unfinished"]
    assert cause.detail.startswith("rank 0 of 4, rank 1 of 4, rank 2 of 4, rank 3 of 4 printed")
    assert "more" not in cause.detail.split(".")[0]
