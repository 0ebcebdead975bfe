"""The same output as another machine or a copy-paste would print it parses to the same facts."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

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


_LINE_IN_TEXT = re.compile(r"\bline ([0-9]+)")


def _shift_back(original: Any, changed: Any, by: int, lines: int) -> Any:
    """`changed` with each line number that `by` leading blank lines moved put back. Both facts are walked
    together, so a field that reports a line needs no entry here: wherever `changed` holds a line of the text
    (1..`lines`) `by` above the number `original` holds in the same place, or a message whose `line N` is, that
    is a line number, and it is put back. Anything else that differs is left to fail the comparison."""
    if isinstance(original, dict) and isinstance(changed, dict) and original.keys() == changed.keys():
        return {key: _shift_back(original[key], value, by, lines) for key, value in changed.items()}
    if isinstance(original, list) and isinstance(changed, list) and len(original) == len(changed):
        return [_shift_back(was, value, by, lines) for was, value in zip(original, changed, strict=True)]
    if type(original) is int and type(changed) is int and changed - by == original and 1 <= original <= lines:
        return original
    if isinstance(original, str) and isinstance(changed, str):
        moved = _LINE_IN_TEXT.sub(lambda m: f"line {int(m[1]) - by}", changed)
        return moved if moved == original else changed
    return changed


def _same_facts(kind: str, text: str, variant: str) -> None:
    original = parse(kind, text)
    changed = parse(kind, VARIANTS[variant](text))
    if variant == "blank-lines":
        changed = _shift_back(original, changed, 2, len(_lines(text)))
    # A line left unplaced is shown as printed: re-spacing the output re-spaces it too.
    for facts in (original, changed):
        facts["unplaced"] = [{**u, "text": " ".join(u["text"].split())} for u in facts["unplaced"]]
    assert changed == original


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize(("name", "kind"), sorted(SAMPLE_KINDS.items()))
def test_variant_parses_to_the_same_facts(name: str, kind: str, variant: str) -> None:
    _same_facts(kind, read(name), variant)


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


def test_blank_lines_shift_every_line_number_an_nccl_tests_result_reports() -> None:
    """A real run (tests/samples/INDEX.md) with one result row cut short mid-way, as a line lost its end: the
    facts report it in `unreadable_rows` and `missing` beside the runs' own line numbers, and all of them move
    with the blank lines and are put back."""
    lines = read("all_reduce_perf-33-h200-min-bw-failed.txt").splitlines(keepends=True)
    row = next(i for i, line in enumerate(lines) if line.split()[:1] == ["2097152"])
    text = "".join([*lines[:row], lines[row][:60] + "\n", *lines[row + 1:]])
    facts = parse("nccl_tests", text)
    assert facts["unreadable_rows"] == [row + 1] and facts["run_results"][0]["footer_lines"]
    _same_facts("nccl_tests", text, "blank-lines")
    moved = parse("nccl_tests", VARIANTS["blank-lines"](text))
    assert moved["unreadable_rows"] == [row + 3]


def test_line_numbers_are_found_by_where_they_moved_and_nothing_else_is_put_back() -> None:
    original = {"runs": [{"first_line": 4, "lines": [5, 7]}], "missing": ["a row at line 4"], "kept": [1, 2]}
    changed = {"runs": [{"first_line": 6, "lines": [7, 9]}], "missing": ["a row at line 6"], "kept": [1, 2]}
    assert _shift_back(original, changed, 2, lines=10) == original
    assert _shift_back({"count": 40}, {"count": 42}, 2, lines=10) == {"count": 42}  # past the text: no line
    assert _shift_back({"count": 3}, {"count": 4}, 2, lines=10) == {"count": 4}
    assert _shift_back({"rows": [1]}, {"rows": [3, 1]}, 2, lines=10) == {"rows": [3, 1]}
