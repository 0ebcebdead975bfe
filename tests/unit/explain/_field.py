"""What every table of field logs checks: the top cause `explain` names for a real log (tests/samples/logs/,
sources in tests/samples/INDEX.md), its first evidence line, and a text its words must hold."""

from __future__ import annotations

from provisioner.explain import explain
from provisioner.explain.model import Cause
from tests.unit.parsers._samples import SAMPLES

LOGS = SAMPLES / "logs"


def causes_of(name: str) -> list[Cause]:
    """The causes `explain` names for the sample log `name`, most likely first."""
    return explain([(name, (LOGS / name).read_text())]).causes


def words(cause: Cause, addresses: bool = True) -> str:
    """Everything an operator reads of a cause: title, detail, fix, settings (and addresses)."""
    return " ".join([cause.title, cause.detail, cause.fix, *cause.settings, *(cause.addresses if addresses else [])])


def check_top_cause(name: str, case: tuple[str, str, str], *, evidence_starts: bool = False,
                    addresses: bool = True) -> Cause:
    """`case` = (the top cause's id, text of its first evidence line, text its words must hold). With
    `evidence_starts`, the evidence line must start with that text, not only hold it."""
    want, line, holds = case
    causes = causes_of(name)
    assert causes, f"{name}: no cause named"
    top = causes[0]
    assert top.id == want, (top.id, top.title)
    first = top.evidence[0].text
    assert first.startswith(line) if evidence_starts else line in first, first
    assert holds in words(top, addresses), words(top, addresses)
    return top
