"""The MTU cause of nccl-tests runs that stalled before their largest size names every run that stalled, each
with its last row as evidence, not only the first.

Real outputs (tests/samples, INDEX.md) are cut before a row and concatenated, as a job log of several runs holds
them; a different collective between two cut runs makes each a run of its own."""

from __future__ import annotations

from provisioner.explain import explain
from provisioner.explain.model import Cause
from tests.unit.parsers._samples import read

_BELOW = read("all_reduce_perf-33-h200-min-bw-failed.txt")  # a whole run, below NCCL_TESTS_MIN_BW


def _cut(name: str, size: str) -> str:
    """The sample up to (not including) its first row of `size` bytes: the run stalled after the size before."""
    lines = read(name).splitlines(keepends=True)
    return "".join(lines[:lines.index(next(line for line in lines if line.split()[:1] == [size]))])


_REDUCE = _cut("all_reduce_perf-30-h200-one-gpu.txt", "1073741824")  # up to 536870912 of maxBytes 1 GiB
_GATHER = _cut("all_gather_perf-9-two-runs.txt", "134217728")  # up to 67108864 of maxBytes 128 MiB


def _mtu(text: str) -> Cause:
    causes = [c for c in explain([("job.log", text)]).causes if c.id == "mtu-blackhole"]
    assert len(causes) == 1, [c.id for c in explain([("job.log", text)]).causes]
    return causes[0]


def test_two_runs_that_stalled_at_different_sizes_are_both_named() -> None:
    text = _REDUCE + _GATHER + _BELOW
    cause = _mtu(text)
    assert cause.detail.startswith(
        "sizes up to 536870912 bytes in run 1, 67108864 bytes in run 2 completed (runs 1, 2 of 3: all_reduce_perf, "
        "all_gather_perf_mpi), then the runs stalled without an error")
    lines = text.splitlines()
    assert [lines[e.line - 1].split()[0] for e in cause.evidence] == ["536870912", "67108864"]
    assert "nccl-tests-truncated" not in [c.id for c in explain([("job.log", text)]).causes]


def test_the_last_run_stalled_cites_the_end_of_the_log_too() -> None:
    text = _BELOW + _REDUCE + _GATHER
    cause = _mtu(text)
    assert "(runs 2, 3 of 3:" in cause.detail
    assert cause.evidence[-1].line == len(text.splitlines())


def test_many_runs_that_stalled_are_named_abridged() -> None:
    cause = _mtu((_REDUCE + _GATHER) * 4)
    assert ("sizes up to 536870912 bytes in run 1, 67108864 bytes in run 2, 536870912 bytes in run 3, "
            "67108864 bytes in run 4 and 4 more completed (runs 1, 2, 3, 4, 5, 6 and 2 more of 8: ") in cause.detail
    assert len(cause.evidence) == 8


def test_one_run_that_stalled_is_worded_as_before() -> None:
    cause = _mtu(_REDUCE)
    assert cause.detail.startswith("sizes up to 536870912 bytes completed, then the run stalled without an error")
