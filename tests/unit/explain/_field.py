"""What every table of field logs checks: the top cause `explain` names for a real log (tests/samples/logs/,
sources in tests/samples/INDEX.md), its first evidence line, and a text its words must hold."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest

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


Case = tuple[str, str, str]


def table(cases: Mapping[str, Case], hosts: Mapping[str, list[str]] | None = None, *, evidence_starts: bool = False
          ) -> tuple[Callable[[], None], Callable[[str], None], Callable[[str], None]]:
    """The checks each table of field logs makes, as test functions for its module to bind under their own
    names: every case's log is there (and has hosts, when the table says which), each log's top cause
    (check_top_cause), and the hosts that cause names."""

    def test_every_log_of_this_set_has_a_case() -> None:
        assert all((LOGS / name).is_file() for name in cases)
        assert hosts is None or set(hosts) == set(cases)

    @pytest.mark.parametrize("name", sorted(cases))
    def test_the_top_cause_of_each_field_log(name: str) -> None:
        check_top_cause(name, cases[name], evidence_starts=evidence_starts)

    @pytest.mark.parametrize("name", sorted(hosts or {}))
    def test_the_hosts_each_names(name: str) -> None:
        assert hosts is not None and causes_of(name)[0].hosts == hosts[name]

    return test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, test_the_hosts_each_names


# One rank's NCCL prefix, for cases built as single lines from NCCL's source wording.
ONE_RANK = "gpu-a:1234:1300 [0] "


def line_causes(*lines: str) -> list[tuple[str, str, list[str]]]:
    """(id, words, hosts) of every cause `explain` names for `lines`, each printed by ONE_RANK."""
    causes = explain([("rank0.log", "\n".join(ONE_RANK + line for line in lines))]).causes
    return [(c.id, words(c), c.hosts) for c in causes]


def line_top(*lines: str) -> tuple[str, str, list[str]]:
    """The most likely of line_causes; there must be one."""
    causes = line_causes(*lines)
    assert causes, lines
    return causes[0]
