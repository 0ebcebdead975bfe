"""`explain` on a log of several nccl-tests runs gives each failing run its cause, not only the worst run's: a run
below the minimum bandwidth beside a failed or cut-off run is named too, citing its own run, and ranks under them.

Real outputs (tests/samples, INDEX.md) are concatenated or cut at a line, as a job log of several runs holds them.
"""

from __future__ import annotations

from provisioner.explain import explain
from tests.unit.parsers._samples import read

_BELOW = read("all_reduce_perf-33-h200-min-bw-failed.txt")  # NCCL_TESTS_MIN_BW=100: `0 FAILED`, then the trace
_FAILED = read("all_reduce_perf-33-h200-all-ops-types-invalid-argument.txt")  # Test NCCL failure, no footer
_TWO = read("all_gather_perf-9-two-runs.txt")  # two whole runs of all_gather_perf_mpi
_OK = read("all_reduce_perf-30-h200-one-gpu.txt")  # maxBytes 1G


def _ids(text: str) -> list[str]:
    return [c.id for c in explain([("job.log", text)]).causes if c.id != "nccl-tests-not-mpi"]


def test_a_run_below_the_minimum_beside_a_failed_run_gets_its_own_cause_ranked_under_it() -> None:
    text = _BELOW + _FAILED
    causes = {c.id: c for c in explain([("job.log", text)]).causes}
    failed, slow = causes["nccl-tests-failed"], causes["nccl-tests-below-minimum-bandwidth"]
    assert "(run 2 of 2: all_reduce_perf)" in failed.detail and "'invalid argument'" in failed.detail
    assert "(run 1 of 2: all_reduce_perf)" in slow.detail
    below_lines = len(_BELOW.splitlines())
    assert all(e.line <= below_lines for e in slow.evidence) and all(e.line > below_lines for e in failed.evidence)
    assert failed.score > slow.score
    assert _ids(text).index("nccl-tests-failed") < _ids(text).index("nccl-tests-below-minimum-bandwidth")


def test_the_order_of_the_runs_does_not_change_the_ranking() -> None:
    ids = _ids(_FAILED + _BELOW)
    assert ids.index("nccl-tests-failed") < ids.index("nccl-tests-below-minimum-bandwidth")


def test_a_run_below_the_minimum_beside_a_run_cut_off_after_its_last_size() -> None:
    cut = _TWO[:_TWO.index("# Out of bounds values")]  # its largest size printed, then nothing
    causes = {c.id: c for c in explain([("job.log", _BELOW + cut)]).causes}
    cut_off, slow = causes["nccl-tests-truncated"], causes["nccl-tests-below-minimum-bandwidth"]
    assert "(run 2 of 2: all_gather_perf_mpi)" in cut_off.detail and "(run 1 of 2" in slow.detail
    assert cut_off.score > slow.score


def test_a_run_that_stalled_beside_a_failed_run_is_the_mtu_rule_s_and_the_failed_run_its_own() -> None:
    lines = _OK.splitlines(keepends=True)
    stalled = "".join(lines[:lines.index(next(line for line in lines if line.split()[:1] == ["1073741824"]))])
    causes = {c.id: c for c in explain([("job.log", stalled + _FAILED)]).causes}
    assert "sizes up to 536870912 bytes completed (run 1 of 2: all_reduce_perf)" in causes["mtu-blackhole"].detail
    assert "(run 2 of 2: all_reduce_perf)" in causes["nccl-tests-failed"].detail
    assert "nccl-tests-truncated" not in causes


def test_runs_below_the_minimum_alone_fold_into_one_cause_naming_them() -> None:
    slow = [c for c in explain([("job.log", _BELOW + _BELOW)]).causes if c.id == "nccl-tests-below-minimum-bandwidth"]
    assert len(slow) == 1 and "(runs 1, 2 of 2: all_reduce_perf)" in slow[0].detail and slow[0].score == 80
