"""A log that holds several nccl-tests runs is judged run by run, and its verdict is the worst run's.

Real outputs (tests/samples, INDEX.md) are concatenated as a job log of several runs holds them. Where no
real output has the shape, the lines are built from nccl-tests' own print formats: the footer from
writeResultFooter (src/util.cu, `# %-20s : %d %s` and `# %-20s : %g %s`) and the exit trace from TESTCHECK
(src/common.h since 2.10.0, ` .. %s pid %d: Test failure %s:%d`), which main prints in every process when
run() returns testNumResults for an average under NCCL_TESTS_MIN_BW (src/common.cu).
"""

from __future__ import annotations

from provisioner.parsers._text import after_mpi_tag
from provisioner.parsers.nccl_tests import parse_nccl_tests
from provisioner.parsers.nccl_tests_verdict import is_exit_trace

from ._samples import read

_BELOW = read("all_reduce_perf-33-h200-min-bw-failed.txt")  # NCCL_TESTS_MIN_BW=100, one rank: 0 FAILED
_OK = read("all_reduce_perf-30-h200-one-gpu.txt")  # the same machine, no minimum: `0 ` without a verdict
_FAILED = read("all_reduce_perf-12-failure-large-sizes.txt")  # Test NCCL failure lines, then exit traces
_TRACE = " .. vm pid 1348: Test failure common.cu:1454"


def test_a_run_below_the_minimum_then_a_passing_run_is_below_minimum_not_failed() -> None:
    # The first run's exit trace follows its own footer; the second run's passing footer must not make
    # that trace an unexplained failure.
    parsed = parse_nccl_tests(_BELOW + _OK)
    assert parsed.run_verdicts == ["below minimum bandwidth", "ok"]
    assert parsed.verdict == "below minimum bandwidth"


def test_a_passing_run_then_a_run_below_the_minimum_is_below_minimum() -> None:
    parsed = parse_nccl_tests(_OK + _BELOW)
    assert parsed.run_verdicts == ["ok", "below minimum bandwidth"]
    assert parsed.verdict == "below minimum bandwidth"


def test_a_failed_run_stays_failed_beside_a_run_below_the_minimum() -> None:
    # The failed run's own traces are explained by nothing: the worst verdict is failed, in either order.
    assert parse_nccl_tests(_FAILED + _BELOW).run_verdicts == ["failed", "below minimum bandwidth"]
    assert parse_nccl_tests(_FAILED + _BELOW).verdict == "failed"
    assert parse_nccl_tests(_BELOW + _FAILED).verdict == "failed"


def test_two_real_passing_runs_are_each_ok() -> None:
    parsed = parse_nccl_tests(read("all_gather_perf-9-two-runs.txt"))
    assert parsed.run_verdicts == ["ok", "ok"] and parsed.verdict == "ok"


def test_every_rank_s_exit_trace_belongs_to_the_run_it_follows() -> None:
    # Built from the print formats: under mpirun every process prints the trace, on another pipe than rank
    # 0's footer, so one may come before the footer and the others after it.
    head, _, _ = _BELOW.partition(" .. vm")
    footer = "# Out of bounds values"
    early = head.replace(footer, " .. gpu2 pid 7: Test failure common.cu:1454\n" + footer)
    parsed = parse_nccl_tests(early + " .. gpu1 pid 5: Test failure common.cu:1454\n" + _OK)
    assert parsed.run_verdicts == ["below minimum bandwidth", "ok"]


def test_out_of_bounds_in_an_earlier_run_is_not_hidden_by_a_later_footer() -> None:
    # Built from writeResultFooter's format: the first run's footer counts 3 values out of bounds.
    bad = _OK.replace("# Out of bounds values : 0 OK", "# Out of bounds values : 3 FAILED")
    assert bad != _OK
    parsed = parse_nccl_tests(bad + _OK)
    assert parsed.run_verdicts == ["out of bounds", "ok"] and parsed.verdict == "out of bounds"


def test_a_tagged_exit_trace_is_still_the_exit_trace() -> None:
    # Open MPI --tag-output on every line (mpirun --tag-output), the trace on stderr's tag.
    tagged = "".join(f"[1,0]<stdout>:{line}\n" for line in _BELOW.replace(_TRACE, "").splitlines())
    traces = f"[1,0]<stderr>:{_TRACE}\n[1,1]<stderr>: .. vm pid 1349: Test failure common.cu:1454\n"
    parsed = parse_nccl_tests(tagged + traces)
    assert parsed.verdict == "below minimum bandwidth" and len(parsed.failures) == 2


def test_a_tag_behind_a_label_only_the_trace_carries_is_seen_through() -> None:
    # The shared cleaning takes an srun label off only when most lines carry one, so the tag behind it stays.
    text = _BELOW.replace(_TRACE, f"0: [1,0]<stdout>:{_TRACE}")
    parsed = parse_nccl_tests(text)
    assert parsed.failures == [f"0: [1,0]<stdout>:{_TRACE}"]
    assert parsed.verdict == "below minimum bandwidth"


def test_exit_trace_shapes() -> None:
    assert is_exit_trace("[1,3]<stderr>: .. gpu1 pid 5: Test failure common.cu:853")
    assert is_exit_trace(".. gpu1 pid 5: Test failure common.cu:853")
    # A failure with NCCL's message is not the exit trace; neither is 2.0-2.9's trace without a pid, which
    # never followed a short average (run()'s result was returned without one).
    assert not is_exit_trace("[1,3]<stderr>:gpu1: Test NCCL failure common.cu:1204 'unhandled cuda error'")
    assert not is_exit_trace(".. gpu1: Test failure common.cu:853")
    assert after_mpi_tag("no tag here") == "no tag here"
    assert after_mpi_tag("0: [1,2]<stdout>: text") == "text"
