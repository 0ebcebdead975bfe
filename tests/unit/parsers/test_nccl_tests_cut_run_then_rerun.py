"""A run cut off after some rows, then a run of the same arguments: two runs, the first cut, each judged alone.

The two print the same preamble and nothing ends the first (no footer, no failure), so only the rerun's
`#  Rank` listing, printed after the first run's rows, tells it from a copy of the binary started together with
the first (copies list their ranks before any row). Built from real outputs (tests/samples, INDEX.md): each is
cut just before its first `# Out of bounds values` line, as a killed run leaves it, and followed by the whole
output again, as a job that reran it logs.
"""

from __future__ import annotations

from provisioner.parsers.nccl_tests import parse_nccl_tests

from ._samples import read

_OK = read("all_reduce_perf-30-h200-one-gpu.txt")  # 2.19.6, one rank, 11 rows, the version line first
_BELOW = read("all_reduce_perf-33-h200-min-bw-failed.txt")  # `# Writing JSON output to ...` first, 3 rows
_COPIES = read("all_reduce_perf-32-h200-mpirun-without-mpi.txt")  # two copies interleaved, 3 rows each


def _cut(text: str) -> str:
    return text[:text.index("# Out of bounds values")]


def _line(text: str, number: int | None) -> str:
    assert number is not None
    return text.splitlines()[number - 1]


def test_a_run_cut_after_its_rows_then_rerun_is_two_runs() -> None:
    text = _cut(_OK) + _OK
    tests = parse_nccl_tests(text)
    assert tests.run_verdicts == ["truncated: no footer", "ok"]
    assert tests.verdict == "truncated: no footer" and tests.runs == 2
    first, second = tests.run_results
    assert (first.rows, second.rows, second.first_row) == (11, 11, 11)
    assert _line(text, second.first_line).startswith("# nccl-tests version")  # its preamble is its own
    assert first.last_line == second.first_line - 1  # type: ignore[operator]
    assert _line(text, first.last_line).split()[0] == "1073741824"  # the cut run's last row
    assert (first.parameters, second.parameters) == (tests.parameters, tests.parameters)
    assert second.avg_busbw == 0 and first.avg_busbw is None


def test_a_rerun_cut_in_the_middle_of_its_table_is_two_runs_too() -> None:
    lines = _OK.splitlines(keepends=True)
    text = "".join(lines[:15]) + _OK  # the first five rows only
    assert parse_nccl_tests(text).run_verdicts == ["truncated: no footer", "ok"]


def test_the_rerun_keeps_the_lines_it_leads_with_and_its_own_verdict() -> None:
    text = _cut(_BELOW) + _BELOW
    tests = parse_nccl_tests(text)
    assert tests.run_verdicts == ["truncated: no footer", "below minimum bandwidth"]
    second = tests.run_results[1]
    assert _line(text, second.first_line).startswith("# Writing JSON output to ")
    assert (second.collective, second.nccl_tests_version, second.rows) == ("all_reduce_perf", "2.19.6", 3)


def test_copies_cut_then_relaunched_are_two_runs_of_two_copies() -> None:
    text = _cut(_COPIES) + _COPIES
    tests = parse_nccl_tests(text)
    assert tests.run_verdicts == ["truncated: no footer", "ok"]
    assert [run.rows for run in tests.run_results] == [6, 6]
    assert (tests.single_rank_runs, tests.separate_runs) == (2, 2)


def test_copies_started_together_stay_one_passing_run() -> None:
    tests = parse_nccl_tests(_COPIES)
    assert (tests.verdict, tests.run_verdicts, tests.runs) == ("ok", ["ok"], 1)
    assert tests.run_results[0].rows == 6


def test_without_a_rank_listing_the_repeated_preamble_stays_with_the_cut_run() -> None:
    # Nothing tells a rerun from a copy here: the log stays one run, cut.
    rerun = "".join(line for line in _OK.splitlines(keepends=True) if "Rank" not in line)
    tests = parse_nccl_tests(_cut(_OK) + rerun)
    assert tests.run_verdicts == ["truncated: no footer"]
    assert tests.run_results[0].rows == 22

