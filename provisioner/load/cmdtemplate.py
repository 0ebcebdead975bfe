"""Command templates given on the command line (`--drain-cmd`, `--launch`): words first, values after.

A template is split into words as a shell would (shlex) BEFORE any value goes in, and each `{field}`
is filled inside its word; the words are then run without a shell (or each quoted for a remote one). So a
host name, a reason or a path can never become part of the command's syntax, whatever it contains. A list
field (`lists`) stands for any number of whole words, none included: it must be a word of its own.
"""

from __future__ import annotations

import shlex
import string
from collections.abc import Collection, Mapping, Sequence


def words(template: str, fields: Sequence[str], what: str, lists: Collection[str] = ()) -> list[str]:
    """The template's words, unfilled. ValueError (naming `what`) when it is empty, cannot be split
    (an open quote), names a field not in `fields`, or puts a list field inside a word."""
    split = shlex.split(template)
    if not split:
        raise ValueError(f"the {what} is empty")
    for word in split:
        for _text, name, _spec, _conv in string.Formatter().parse(word):
            if name is not None and name not in fields:
                raise ValueError(f"unknown field {{{name}}} in the {what}; allowed: "
                                 + ", ".join("{" + f + "}" for f in fields))
            if name in lists and word != f"{{{name}}}":
                raise ValueError(f"{{{name}}} in the {what} stands for whole words: it must be a word of its "
                                 f"own, not part of {word!r}")
    return split


def fill(template: str, fields: Sequence[str], what: str, values: Mapping[str, str],
         lists: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """The template's words with the values in (a field without a value is left empty); a word that is a
    list field becomes that list's words."""
    lists = lists or {}
    known = {name: str(values.get(name, "")) for name in fields}
    filled: list[str] = []
    for word in words(template, fields, what, lists):
        name = word[1:-1]
        filled.extend(lists[name] if word == f"{{{name}}}" and name in lists else [word.format_map(known)])
    return filled
