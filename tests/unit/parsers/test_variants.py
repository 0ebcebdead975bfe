"""The same output as another machine or a copy-paste would print it parses to the same facts."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from provisioner.errors import ParseError
from provisioner.parsers import parse

from ._samples import SAMPLE_KINDS, read


def _lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def to_lf(text: str) -> str:
    return "\n".join(_lines(text))


def to_crlf(text: str) -> str:
    return "\r\n".join(_lines(text))


def to_cr(text: str) -> str:
    return "\r".join(_lines(text))


def trailing_spaces(text: str) -> str:
    return "\n".join(line + "  \t " if line else line for line in _lines(text))


def tabs_to_spaces(text: str) -> str:
    return "\n".join(line.expandtabs(8) for line in _lines(text))


def tabs_to_four_spaces(text: str) -> str:
    return text.replace("\t", "    ")


def no_final_newline(text: str) -> str:
    return text.rstrip("\r\n")


def surrounding_blank_lines(text: str) -> str:
    return "\n\n" + to_lf(text) + "\n\n\n"


def mixed_line_endings(text: str) -> str:
    return "".join(line + ("\r\n" if i % 2 else "\n") for i, line in enumerate(_lines(text)))


VARIANTS: dict[str, Callable[[str], str]] = {
    "lf": to_lf,
    "crlf": to_crlf,
    "cr": to_cr,
    "mixed": mixed_line_endings,
    "trailing-spaces": trailing_spaces,
    "tabs-expanded": tabs_to_spaces,
    "tabs-four-spaces": tabs_to_four_spaces,
    "no-final-newline": no_final_newline,
    "blank-lines": surrounding_blank_lines,
}


def _shift_back(kind: str, facts: dict, by: int) -> dict:
    """Undo the shift that leading blank lines cause in the line numbers some kinds report."""
    facts["unplaced"] = [{**u, "line": u["line"] - by} for u in facts["unplaced"]]
    if kind == "nccl_debug":
        for records in ("completion_errors", "communicators", "suspect_interfaces"):
            facts[records] = [{**r, "line": r["line"] - by} for r in facts[records]]
    if kind == "show_gids":
        facts["tables"] = [{**t, "line": t["line"] - by} for t in facts["tables"]]
    if kind == "nccl_tests":
        for run in facts["run_results"]:
            run.update({k: run[k] - by for k in ("first_line", "last_line") if run[k] is not None})
            run.update({k: [n - by for n in run[k]] for k in ("footer_lines", "failure_lines")})
    if kind == "ibstat":
        facts["errors"] = [re.sub(r"^line (\d+)", lambda m: f"line {int(m[1]) - by}", e) for e in facts["errors"]]
    return facts


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize(("name", "kind"), sorted(SAMPLE_KINDS.items()))
def test_variant_parses_to_the_same_facts(name: str, kind: str, variant: str) -> None:
    original = parse(kind, read(name))
    changed = parse(kind, VARIANTS[variant](read(name)))
    if variant == "blank-lines":
        changed = _shift_back(kind, changed, 2)
    # A line left unplaced is shown as printed: re-spacing the output re-spaces it too.
    for facts in (original, changed):
        facts["unplaced"] = [{**u, "text": " ".join(u["text"].split())} for u in facts["unplaced"]]
    assert changed == original


@pytest.mark.parametrize(("name", "kind"), sorted(SAMPLE_KINDS.items()))
def test_every_line_prefix_parses_or_names_a_line(name: str, kind: str) -> None:
    """Output cut after any line either parses or raises ParseError pointing inside what was kept."""
    lines = read(name).splitlines(keepends=True)
    for keep in range(len(lines) + 1):
        text = "".join(lines[:keep])
        try:
            parse(kind, text)
        except ParseError as err:
            assert err.kind == kind
            assert err.line is None or 1 <= err.line <= keep


@pytest.mark.parametrize(("name", "kind"), sorted(SAMPLE_KINDS.items()))
def test_line_cut_mid_way_parses_or_names_a_line(name: str, kind: str) -> None:
    lines = read(name).splitlines(keepends=True)
    for index, line in enumerate(lines):
        cut = "".join(lines[:index]) + line[: max(1, len(line) // 2)]
        try:
            parse(kind, cut)
        except ParseError as err:
            assert err.line is None or 1 <= err.line <= index + 1
