"""Runs of nccl-tests one after the other in one log are not copies of a build without MPI: each lists its own
rank 0 after the run before it printed its rows or footer, whereas copies started together list theirs before
any row (the recorded samples, tests/samples/INDEX.md)."""

from __future__ import annotations

from provisioner.explain import explain
from provisioner.parsers.nccl_tests import parse_nccl_tests
from tests.unit.parsers._samples import SAMPLES

MIN_BW = (SAMPLES / "all_reduce_perf-33-h200-min-bw-failed.txt").read_text()
INTERLEAVED = (SAMPLES / "all_reduce_perf-32-h200-mpirun-without-mpi.txt").read_text()


def _ids(text: str) -> list[str]:
    return [c.id for c in explain([("t.log", text)]).causes]


def test_one_rank_run_twice_is_two_runs_not_two_copies() -> None:
    text = MIN_BW + MIN_BW
    facts = parse_nccl_tests(text)
    assert (facts.single_rank_runs, facts.separate_runs, len(facts.devices)) == (0, 0, 2)
    causes = explain([("t.log", text)]).causes
    assert [c.id for c in causes] == ["nccl-tests-below-minimum-bandwidth"]
    assert "(runs 1, 2 of 2" in causes[0].detail


def test_a_second_process_run_after_the_first_is_no_copy_either() -> None:
    # Another pid (another process), as two one-rank runs of a job script print one after the other.
    assert "nccl-tests-not-mpi" not in _ids(MIN_BW + MIN_BW.replace("1348", "1349"))


def test_a_run_cut_after_its_last_row_then_another_is_no_copy() -> None:
    lines = MIN_BW.splitlines(keepends=True)
    cut = "".join(lines[:lines.index(next(line for line in lines if "Out of bounds" in line))])
    facts = parse_nccl_tests(cut + MIN_BW.replace("1348", "1349"))
    assert (facts.single_rank_runs, facts.separate_runs) == (0, 0)
    assert "nccl-tests-not-mpi" not in _ids(cut + MIN_BW)


def test_copies_started_together_are_still_named() -> None:
    # Both copies printed their headers and rank lines before either printed a row.
    facts = parse_nccl_tests(INTERLEAVED)
    assert (facts.single_rank_runs, facts.separate_runs) == (2, 2)
    cause = next(c for c in explain([("t.log", INTERLEAVED)]).causes if c.id == "nccl-tests-not-mpi")
    assert cause.title == "nccl-tests ran as 2 separate one-rank runs"
    assert [e.line for e in cause.evidence] == [11, 12]


def test_two_launches_each_of_copies_are_copies_per_launch() -> None:
    facts = parse_nccl_tests(INTERLEAVED + INTERLEAVED)
    assert (facts.single_rank_runs, facts.separate_runs, len(facts.devices)) == (2, 2, 4)
    cause = next(c for c in explain([("t.log", INTERLEAVED * 2)]).causes if c.id == "nccl-tests-not-mpi")
    assert cause.title == "nccl-tests ran as 2 separate one-rank runs"
