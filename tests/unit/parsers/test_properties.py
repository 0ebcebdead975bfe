"""Whatever text arrives, a parser returns facts or raises ParseError, never anything else."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provisioner.errors import ParseError
from provisioner.parsers import KINDS, parse

from ._samples import SAMPLE_KINDS, ibstatus_tail, read, samples_of


def _samples(kind: str) -> list[str]:
    texts = [read(name) for name in samples_of(kind)]
    return [*texts, ibstatus_tail()] if kind == "ibstatus" else texts


# Text that looks like tool output: the structural characters parsers split on, digits and names.
_ALPHABET = st.sampled_from([*list("abcmlx5_0123456789 \t:=,./-()[]'#$<>%+\r\nXGPUNICVv"), "NCCL INFO ", "CA "])
_TOOLISH = st.lists(_ALPHABET, max_size=200).map("".join)


@st.composite
def mutated_sample(draw: st.DrawFn, kind: str) -> str:
    """A real sample with lines dropped, repeated, swapped, cut or replaced by junk."""
    lines = draw(st.sampled_from(_samples(kind))).splitlines(keepends=True)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        if not lines:
            break
        i = draw(st.integers(min_value=0, max_value=len(lines) - 1))
        operation = draw(st.sampled_from(["drop", "repeat", "swap", "cut", "junk", "insert"]))
        if operation == "drop":
            del lines[i]
        elif operation == "repeat":
            lines.insert(i, lines[i])
        elif operation == "swap":
            j = draw(st.integers(min_value=0, max_value=len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif operation == "cut":
            lines[i] = lines[i][: draw(st.integers(min_value=0, max_value=len(lines[i])))]
        elif operation == "junk":
            lines[i] = draw(st.one_of(st.text(max_size=40), _TOOLISH)) + "\n"
        else:
            lines.insert(i, draw(st.text(max_size=40)) + "\n")
    return "".join(lines)


def _parse_or_parse_error(kind: str, text: str) -> None:
    try:
        data = parse(kind, text)
    except ParseError as err:
        assert err.kind == kind
        assert err.line is None or err.line >= 1
        return
    json.dumps(data)


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=200, deadline=None)
@given(text=st.one_of(st.text(), _TOOLISH))
def test_arbitrary_text_gives_facts_or_parse_error(kind: str, text: str) -> None:
    _parse_or_parse_error(kind, text)


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_damaged_samples_give_facts_or_parse_error(kind: str, data: st.DataObject) -> None:
    _parse_or_parse_error(kind, data.draw(mutated_sample(kind)))


@pytest.mark.parametrize(("name", "kind"), sorted(SAMPLE_KINDS.items()))
def test_sample_round_trips_through_json(name: str, kind: str) -> None:
    data = parse(kind, read(name))
    assert json.loads(json.dumps(data)) == data
