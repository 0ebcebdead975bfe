"""N nccl-tests processes that each ran alone (a build without MPI started N times), with one or several
GPUs each: every copy lists its own ranks from 0 under its own pid, and they are N separate runs."""

from __future__ import annotations

from provisioner.parsers.nccl_tests import parse_nccl_tests

from ._samples import read


def _rank(rank: int, pid: int, host: str, device: int, group: bool = True) -> str:
    # The formats of nccl-tests' src/common.cu: `#  Rank %2d Group %2d Pid %6d on %10s device %2d
    # [%04x:%02x:%02x] %s` (commit af6df96; the same in src/util.cu since ad956f1) and, before groups,
    # `#  Rank %2d Pid %6d on %10s device %2d [0x%02x] %s` (commit cbe7f65).
    if group:
        bus = f"0000:{device + 16:02x}:00"
        return f"#  Rank {rank:2d} Group  0 Pid {pid:6d} on {host:>10s} device {device:2d} [{bus}] H100"
    return f"#  Rank {rank:2d} Pid {pid:6d} on {host:>10s} device {device:2d} [0x{device + 16:02x}] V100"


HEADER = "# nThread 1 nGpus {g} minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"


def test_two_eight_gpu_copies_are_two_runs() -> None:
    facts = parse_nccl_tests(read("nccl-tests-15-two-8gpu-copies-cut.txt"))
    assert facts.separate_runs == 2
    assert facts.separate_ranks == [8, 5]  # the second copy's list was cut by the excerpt
    assert facts.single_rank_runs == 0  # each copy drove eight GPUs, not one
    assert facts.parameters["nGpus"] == "8"
    assert facts.complete is False


def test_one_rank_copies_are_separate_runs_too() -> None:
    facts = parse_nccl_tests(read("all_reduce_perf-11-two-one-rank-runs-cut.txt"))
    assert (facts.separate_runs, facts.separate_ranks, facts.single_rank_runs) == (2, [1, 1], 2)


def test_interleaved_copies_are_told_apart_by_pid() -> None:
    # Three copies of `-g 2` writing to one stream at once: their lines mix.
    lines = [HEADER.format(g=2)] * 3 + ["# Using devices\n"]
    for rank in (0, 1):
        for pid, host in ((101, "gpu1"), (202, "gpu2"), (303, "gpu3")):
            lines.append(_rank(rank, pid, host, rank) + "\n")
    facts = parse_nccl_tests("".join(lines))
    assert (facts.separate_runs, facts.separate_ranks) == (3, [2, 2, 2])


def test_copies_in_the_format_before_groups() -> None:
    text = "".join(_rank(r, pid, "node", r, group=False) + "\n" for pid in (7993, 8001) for r in range(4))
    facts = parse_nccl_tests(HEADER.format(g=4) + text)
    assert (facts.separate_runs, facts.separate_ranks) == (2, [4, 4])


def test_copies_that_share_host_and_pid_split_where_the_ranks_restart() -> None:
    # Two containers with one hostname and the same pid 1: only the restart at rank 0 tells them apart.
    text = "".join(_rank(r, 1, "worker", r) + "\n" for _ in range(2) for r in range(8))
    assert parse_nccl_tests(HEADER.format(g=8) + text).separate_ranks == [8, 8]


def test_one_mpi_job_of_two_eight_gpu_processes_is_one_run() -> None:
    # Under MPI the first process prints every rank: proc p's lines hold ranks 8p..8p+7.
    text = "".join(_rank(8 * p + i, pid, host, i) + "\n" for p, (pid, host) in enumerate(((11, "a"), (22, "b")))
                   for i in range(8))
    facts = parse_nccl_tests(HEADER.format(g=8) + text)
    assert (facts.separate_runs, facts.separate_ranks, len(facts.devices)) == (0, [], 16)


def test_a_recorded_multi_process_job_is_one_run() -> None:
    facts = parse_nccl_tests(read("all_reduce_perf-5.txt"))
    assert facts.separate_runs == 0
    assert len({d.pid for d in facts.devices}) > 1
