"""`explain` on a log of several nccl-tests runs names the run that failed, with that run's own lines as evidence:
not the footers of the runs that passed.

Real outputs (tests/samples, INDEX.md) are concatenated or cut at a line, as a job log of several runs holds them;
the one edited line is a footer in writeResultFooter's format (src/util.cu, `# %-20s : %d %s`).
"""

from __future__ import annotations

from provisioner.explain import explain
from provisioner.explain.model import Cause
from tests.unit.parsers._samples import read

_BELOW = read("all_reduce_perf-33-h200-min-bw-failed.txt")  # NCCL_TESTS_MIN_BW=100: `0 FAILED`, then the trace
_OK = read("all_reduce_perf-30-h200-one-gpu.txt")  # no minimum: `# Avg bus bandwidth    : 0 `
_TWO = read("all_gather_perf-9-two-runs.txt")  # two whole runs of all_gather_perf_mpi


def _cause(text: str, cause_id: str) -> Cause:
    causes = [c for c in explain([("job.log", text)]).causes if c.id == cause_id]
    assert len(causes) == 1, [c.id for c in explain([("job.log", text)]).causes]
    return causes[0]


def test_below_minimum_cites_the_failing_run_s_footer_and_trace_only() -> None:
    cause = _cause(_BELOW + _OK, "nccl-tests-below-minimum-bandwidth")
    assert [e.text.strip() for e in cause.evidence] == [
        "# Avg bus bandwidth    : 0 FAILED", ".. vm pid 1348: Test failure common.cu:1454"]
    assert "(run 1 of 2: all_reduce_perf)" in cause.detail and "(0 GB/s)" in cause.detail


def test_below_minimum_in_the_later_run_cites_that_run() -> None:
    cause = _cause(_OK + _BELOW, "nccl-tests-below-minimum-bandwidth")
    first_of_second = len(_OK.splitlines()) + 1
    assert cause.evidence and all(e.line > first_of_second for e in cause.evidence)
    assert "FAILED" in cause.evidence[0].text and "(run 2 of 2: all_reduce_perf)" in cause.detail


def test_one_run_below_the_minimum_names_no_run() -> None:
    cause = _cause(_BELOW, "nccl-tests-below-minimum-bandwidth")
    assert "run 1" not in cause.detail and len(cause.evidence) == 2


def test_out_of_bounds_cites_the_run_that_had_them() -> None:
    bad = _TWO.replace("# Out of bounds values : 0 OK", "# Out of bounds values : 3 FAILED", 1)
    cause = _cause(bad, "nccl-tests-out-of-bounds")
    assert [e.text for e in cause.evidence] == ["# Out of bounds values : 3 FAILED"]
    assert "(run 1 of 2: all_gather_perf_mpi)" in cause.detail


def test_a_run_cut_before_its_largest_size_then_another_run_is_named_as_the_stalled_one() -> None:
    # The first run stops after its 512 MiB row (its maxBytes is 1 GiB); another run follows it whole.
    lines = _OK.splitlines(keepends=True)
    cut = "".join(lines[:lines.index(next(line for line in lines if line.split()[:1] == ["1073741824"]))])
    cause = _cause(cut + _BELOW, "mtu-blackhole")
    assert "sizes up to 536870912 bytes completed (run 1 of 2: all_reduce_perf)" in cause.detail
    assert all(e.line <= len(cut.splitlines()) for e in cause.evidence)
