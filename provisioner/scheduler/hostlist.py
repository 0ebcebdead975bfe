"""Slurm hostlist expressions (`gpu[01-04,07]`, `a[1-2]b[3-4]`, `gpu1,gpu[3-5]`) expanded to host names.

Pure, and checked against `scontrol show hostnames` over a corpus (tests/unit/scheduler). What Slurm
does, this does: names are separated by commas or whitespace outside brackets; a bracket holds numbers
and `lo-hi` ranges separated by commas; a range's width is that of its lower bound (`[01-10]` gives
`01`..`10`, `[1-010]` gives `1`..`10`); of several brackets the last varies fastest, then the first,
the second... (`a[1-2]b[3-4]` gives a1b3, a1b4, a2b3, a2b4; `a[1-2]b[1-2]c[1-2]` gives a1b1c1, a1b1c2,
a2b1c1, ...); text may sit between brackets and after the last (`node[01-02]-ib` gives node01-ib,
node02-ib: Slurm takes such a suffix from 23.02.5 on, and refuses it before); a range holds at most
65536 names; order and duplicates are kept.

Where Slurm answers nonsense instead of refusing, this refuses: an unclosed or nested bracket (Slurm
turns `gpu[1-2` into `gpu]`), a `]` with no `[`, a range with no upper bound (`[1-]`, read as `[1]`),
and spaces or signs inside brackets (`[ 1-2]`, which Slurm pads to `01`).
"""

from __future__ import annotations

import itertools
import re

# Slurm's MAX_RANGE: a bigger range is refused ("Too many hosts in range").
MAX_RANGE = 64 * 1024
# A bound on a whole expression, so a few brackets cannot multiply into millions of names.
MAX_NAMES = 1 << 20
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")
_SEPARATORS = ", \t\n\r\f\v"


class HostlistError(ValueError):
    """An expression Slurm would refuse (or garble): the message names the expression and why."""


def expand(expression: str) -> list[str]:
    """Every name the expression stands for, in Slurm's order, duplicates kept."""
    names: list[str] = []
    for item in _items(expression):
        names.extend(_expand_item(item, expression))
        if len(names) > MAX_NAMES:
            raise HostlistError(f"invalid hostlist {expression!r}: more than {MAX_NAMES} names")
    return names


def _items(expression: str) -> list[str]:
    """Split at separators outside brackets; empty items are skipped, as Slurm does."""
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for char in expression:
        if char == "[":
            depth += 1
            if depth > 1:
                raise HostlistError(f"invalid hostlist {expression!r}: nested '['")
        elif char == "]":
            if depth == 0:
                raise HostlistError(f"invalid hostlist {expression!r}: ']' without '['")
            depth -= 1
        if char in _SEPARATORS and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth:
        raise HostlistError(f"invalid hostlist {expression!r}: '[' not closed")
    items.append("".join(current))
    return [item for item in items if item]


def _expand_item(item: str, expression: str) -> list[str]:
    if "[" not in item:
        return [item]
    # prefix [ranges] text [ranges] ... suffix: the pieces around brackets alternate with bracket bodies.
    # An older Slurm refuses a suffix; expanding it anyway names the same hosts a newer one does, and
    # an older Slurm has no node of such a name to be confused with.
    pieces = re.split(r"\[([^\]]*)\]", item)
    texts, bodies = pieces[0::2], pieces[1::2]
    choices = [_expand_body(body, expression) for body in bodies]
    total = 1
    for values in choices:
        total *= len(values)
    if total > MAX_NAMES:
        raise HostlistError(f"invalid hostlist {expression!r}: more than {MAX_NAMES} names")
    # Slurm's order: the last bracket varies fastest, then the first, the second, and so on.
    names = []
    for head in itertools.product(*reversed(choices[:-1])):
        for last in choices[-1]:
            names.append(_join(texts, (*reversed(head), last)))
    return names


def _join(texts: list[str], combo: tuple[str, ...]) -> str:
    """The texts around the brackets (one more than the brackets: the last is the suffix) with their values."""
    return "".join(text + value for text, value in zip(texts, combo, strict=False)) + texts[-1]


def _expand_body(body: str, expression: str) -> list[str]:
    values: list[str] = []
    for part in body.split(","):
        match = _RANGE.fullmatch(part)
        if match is None:
            raise HostlistError(f"invalid hostlist {expression!r}: invalid range {part!r}")
        low_text, high_text = match.group(1), match.group(2)
        low = int(low_text)
        high = low if high_text is None else int(high_text)
        if high < low:
            raise HostlistError(f"invalid hostlist {expression!r}: invalid range {part!r} (end before start)")
        if high - low + 1 > MAX_RANGE:
            raise HostlistError(f"invalid hostlist {expression!r}: too many hosts in range {part!r}")
        width = len(low_text)
        values.extend(f"{number:0{width}d}" for number in range(low, high + 1))
    return values
