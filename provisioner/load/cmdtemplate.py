"""Command templates given on the command line (`--drain-cmd`, `--launch`): words first, values after.

A template is split into words as a shell would (shlex) BEFORE any value goes in, and each `{field}`
is filled inside its word; the words are then run without a shell (or each quoted for a remote one). So a
host name, a reason or a path can never become part of the command's syntax, whatever it contains.
"""

from __future__ import annotations

import shlex
import string
from collections.abc import Mapping, Sequence


def words(template: str, fields: Sequence[str], what: str) -> list[str]:
    """The template's words, unfilled. ValueError (naming `what`) when it is empty, cannot be split
    (an open quote) or names a field not in `fields`."""
    split = shlex.split(template)
    if not split:
        raise ValueError(f"the {what} is empty")
    for word in split:
        for _text, name, _spec, _conv in string.Formatter().parse(word):
            if name is not None and name not in fields:
                raise ValueError(f"unknown field {{{name}}} in the {what}; allowed: "
                                 + ", ".join("{" + f + "}" for f in fields))
    return split


def fill(template: str, fields: Sequence[str], what: str, values: Mapping[str, str]) -> list[str]:
    """The template's words with the values in (a field without a value is left empty)."""
    known = {name: str(values.get(name, "")) for name in fields}
    return [word.format_map(known) for word in words(template, fields, what)]
