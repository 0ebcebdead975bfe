"""The lines a run prints before its table belong to it in a log of several runs: `# Writing JSON output to X`
(printed before the version line) starts the run after it, even where the run before was cut off; and the
parameters, versions and NCCL's last error at the top are those of the run the verdict comes from, each run's own
being in `run_results`.

Real outputs (tests/samples, INDEX.md) are concatenated or cut at a line, as a job log of several runs holds
them. The one built line is `# error: %s` as nccl-tests 2.17.3 on prints NCCL's last error (src/common.cu).
"""

from __future__ import annotations

from provisioner.parsers.nccl_tests import parse_nccl_tests

from ._samples import read

_BELOW = read("all_reduce_perf-33-h200-min-bw-failed.txt")  # 2.19.6, `# Writing JSON output to ...` first, 4M
_OK = read("all_reduce_perf-30-h200-one-gpu.txt")  # 2.19.6, no JSON line, maxBytes 1G
_TWO = read("all_gather_perf-9-two-runs.txt")  # 2.18.0 (nccl-headers=22907), two whole runs, maxBytes 128M
_ERROR = "# error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)\n"


def _cut(text: str) -> str:
    """`text` up to its first footer: a run cut off after its last row."""
    return text[:text.index("# Out of bounds values")]


def _line(text: str, number: int | None) -> str:
    assert number is not None
    return text.splitlines()[number - 1]


def test_the_json_line_after_a_footer_starts_the_next_run() -> None:
    text = _OK + _BELOW
    first, second = parse_nccl_tests(text).run_results
    assert _line(text, second.first_line).startswith("# Writing JSON output to ")
    assert first.last_line is not None and first.last_line < second.first_line  # type: ignore[operator]


def test_the_json_line_after_a_run_cut_off_starts_the_next_run_and_the_cut_run_ends_before_it() -> None:
    # The two runs print the same version and collective lines: only their parameters tell them apart, and the
    # lines printed before those are the second run's.
    text = _cut(_OK) + _BELOW
    first, second = parse_nccl_tests(text).run_results
    assert (first.verdict, second.verdict) == ("truncated: no footer", "below minimum bandwidth")
    assert _line(text, second.first_line).startswith("# Writing JSON output to ")
    assert first.last_line == second.first_line - 1  # type: ignore[operator]
    assert _line(text, first.last_line).split()[0].isdigit()  # its last row
    assert second.nccl_tests_version == "2.19.6" and second.parameters["maxBytes"] == "4194304"
    assert second.collective == "all_reduce_perf"  # from the `# Collective test starting` line it led with


def test_parameters_and_versions_are_the_deciding_run_s_not_the_last_printed() -> None:
    tests = parse_nccl_tests(_BELOW + _TWO)
    assert tests.run_verdicts == ["below minimum bandwidth", "ok", "ok"]
    assert tests.parameters["maxBytes"] == "4194304"
    assert (tests.nccl_tests_version, tests.nccl_library_version, tests.nccl_version) == ("2.19.6", "2.28.9", "2.28.9")
    last = tests.run_results[-1]
    assert (last.nccl_tests_version, last.nccl_library_version, last.parameters["maxBytes"]) == (
        "2.18.0", "2.29.7", "134217728")


def test_a_log_of_passing_runs_reports_its_last_run_s_parameters_and_versions() -> None:
    tests = parse_nccl_tests(_OK + _TWO)
    assert tests.verdict == "ok"
    assert (tests.nccl_tests_version, tests.parameters["maxBytes"]) == ("2.18.0", "134217728")


def test_nccl_s_last_error_is_the_deciding_run_s_only() -> None:
    passing_with_error = parse_nccl_tests(_OK + _ERROR + _BELOW)
    assert passing_with_error.run_results[0].nccl_last_error is not None
    assert passing_with_error.nccl_last_error is None
    failing_with_error = parse_nccl_tests(_BELOW + _ERROR + _OK)
    assert failing_with_error.nccl_last_error == "unhandled cuda error (run with NCCL_DEBUG=INFO for details)"
    assert failing_with_error.run_results[1].nccl_last_error is None
