"""Each run of a log of several keeps its own footer (`run_results`), and the footer fields at the top are those of
the run the verdict comes from; a run cut off before its footer stays apart from the run after it.

Real outputs (tests/samples, INDEX.md) are concatenated or cut at a line, as a job log of several runs holds
them. The one built line is the footer in writeResultFooter's format (src/util.cu, `# %-20s : %d %s`).
"""

from __future__ import annotations

from provisioner.parsers.nccl_tests import parse_nccl_tests

from ._samples import read

_BELOW = read("all_reduce_perf-33-h200-min-bw-failed.txt")  # NCCL_TESTS_MIN_BW=100: `0 FAILED`, maxBytes 4M
_OK = read("all_reduce_perf-30-h200-one-gpu.txt")  # no minimum: `0 ` without a verdict, maxBytes 1G
_FAILED = read("all_reduce_perf-12-failure-large-sizes.txt")  # Test NCCL failure lines, no footer
_TWO = read("all_gather_perf-9-two-runs.txt")  # two whole runs of all_gather_perf_mpi, the same arguments
_COPIES = read("all_reduce_perf-32-h200-mpirun-without-mpi.txt")  # two copies interleaved line by line


def _cut(text: str) -> str:
    """`text` up to its first footer: a run cut off after its last row."""
    return text[:text.index("# Out of bounds values")]


def _line(text: str, number: int | None) -> str:
    assert number is not None
    return text.splitlines()[number - 1]


def test_each_run_keeps_its_own_footer_and_the_top_is_the_failing_run_s() -> None:
    text = _BELOW + _OK
    parsed = parse_nccl_tests(text)
    below, ok = parsed.run_results
    assert (below.verdict, below.avg_busbw, below.avg_busbw_ok) == ("below minimum bandwidth", 0.0, False)
    assert (ok.verdict, ok.avg_busbw, ok.avg_busbw_ok) == ("ok", 0.0, None)
    # The verdict is the first run's: the footer fields beside it are that run's too, not the last run's.
    assert parsed.verdict == "below minimum bandwidth" and parsed.avg_busbw_ok is False
    assert [_line(text, n).split(":")[0].strip() for n in below.footer_lines] == [
        "# Out of bounds values", "# Avg bus bandwidth"]
    assert [_line(text, n).strip() for n in below.failure_lines] == [".. vm pid 1348: Test failure common.cu:1454"]
    assert below.last_line is not None and ok.first_line is not None and below.last_line < ok.first_line


def test_each_run_s_rows_are_its_own_slice() -> None:
    parsed = parse_nccl_tests(_BELOW + _OK)
    below, ok = parsed.run_results
    assert (below.first_row, below.rows) == (0, 3)
    assert ok.first_row == 3 and ok.first_row + ok.rows == len(parsed.rows)
    assert below.parameters["maxBytes"] == "4194304" and ok.parameters["maxBytes"] == "1073741824"


def test_passing_runs_give_the_last_run_s_footer_as_one_run_does() -> None:
    parsed = parse_nccl_tests(_TWO)
    assert [r.avg_busbw for r in parsed.run_results] == [1.27827, 0.669677]
    assert parsed.avg_busbw == 0.669677 and parsed.out_of_bounds == 0 and parsed.out_of_bounds_ok is True
    assert [r.collective for r in parsed.run_results] == ["all_gather_perf_mpi"] * 2


def test_out_of_bounds_at_the_top_is_the_run_that_had_them() -> None:
    bad = _OK.replace("# Out of bounds values : 0 OK", "# Out of bounds values : 3 FAILED")
    parsed = parse_nccl_tests(bad + _OK)
    assert (parsed.out_of_bounds, parsed.out_of_bounds_ok) == (3, False)
    assert [(r.out_of_bounds, r.out_of_bounds_ok) for r in parsed.run_results] == [(3, False), (0, True)]


def test_a_failed_run_without_a_footer_has_no_average_at_the_top() -> None:
    # The failed run printed no footer: the later run's average is not the failed run's.
    parsed = parse_nccl_tests(_FAILED + _OK)
    assert parsed.run_verdicts == ["failed", "ok"]
    assert parsed.avg_busbw is None and parsed.run_results[1].avg_busbw == 0.0


def test_a_cut_run_then_a_run_with_other_arguments_are_two_runs() -> None:
    parsed = parse_nccl_tests(_cut(_OK) + _BELOW)
    assert parsed.run_verdicts == ["truncated: no footer", "below minimum bandwidth"]
    assert parsed.verdict == "truncated: no footer" and parsed.complete is False
    assert parsed.run_results[0].rows == 11  # 1 MiB to 1 GiB


def test_a_cut_run_then_another_collective_are_two_runs() -> None:
    parsed = parse_nccl_tests(_cut(_TWO) + _OK)
    assert parsed.run_verdicts == ["truncated: no footer", "ok"]
    assert [r.collective for r in parsed.run_results] == ["all_gather_perf_mpi", "all_reduce_perf"]


def test_a_cut_run_then_the_same_run_again_is_cut() -> None:
    # The same arguments twice read as copies would: one run, but with two `# nThread` lines and one footer.
    second = _TWO[_TWO.index("=== AllGather DEFAULT rep 2"):]
    parsed = parse_nccl_tests(_cut(_TWO) + second)
    assert parsed.verdict == "truncated: no footer" and parsed.complete is False


def test_interleaved_copies_stay_one_passing_run() -> None:
    parsed = parse_nccl_tests(_COPIES)
    assert parsed.run_verdicts == ["ok"] and parsed.complete
    assert len(parsed.run_results[0].footer_lines) == 4


def test_interleaved_copies_one_of_which_was_cut_are_cut() -> None:
    end = _COPIES.rindex("# Out of bounds values")
    parsed = parse_nccl_tests(_COPIES[:end])
    assert parsed.run_verdicts == ["truncated: no footer"]


def test_a_report_is_one_run() -> None:
    report = parse_nccl_tests(read("nccl-tests-33-h200-min-bw-failed.json"))
    assert report.run_verdicts == ["below minimum bandwidth"]
    (run,) = report.run_results
    assert (run.avg_busbw_ok, run.rows, run.first_line) == (False, len(report.rows), None)
