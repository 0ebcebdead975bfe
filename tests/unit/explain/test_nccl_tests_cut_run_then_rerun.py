"""explain on a log of a run cut off after some rows and then rerun with the same arguments: the cut run is
named by its own lines, and the rerun is judged on its own. Built from real outputs (tests/samples, INDEX.md),
each cut just before its first `# Out of bounds values` line and followed by the whole output again."""

from __future__ import annotations

from provisioner.explain import explain
from tests.unit.parsers._samples import read

_OK = read("all_reduce_perf-30-h200-one-gpu.txt")
_BELOW = read("all_reduce_perf-33-h200-min-bw-failed.txt")


def _cut(text: str) -> str:
    return text[:text.index("# Out of bounds values")]


def test_explain_names_the_cut_run_only() -> None:
    text = _cut(_OK) + _OK
    causes = explain([("t.log", text)]).causes
    assert [c.id for c in causes] == ["nccl-tests-truncated"]
    assert "(run 1 of 2" in causes[0].detail
    assert all(e.line <= 21 for e in causes[0].evidence)  # the cut run's lines, not the rerun's


def test_explain_judges_the_rerun_on_its_own() -> None:
    ids = [c.id for c in explain([("t.log", _cut(_BELOW) + _BELOW)]).causes]
    assert ids == ["nccl-tests-truncated", "nccl-tests-below-minimum-bandwidth"]
