"""Line handling common to every parser: line endings, trailing blanks, 1-based line numbers, typed errors.

Every parser works on `Line` objects so that an error can always say which line of the output it is about.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NoReturn

from pydantic import BaseModel, ConfigDict

from provisioner.errors import ParseError

# Only real line breaks: str.splitlines() would also split on form feeds, \x1c.. and U+2028,
# which would make our line numbers disagree with what an editor shows.
_EOL = re.compile(r"\r\n|\r|\n")

# An echoed shell command (`$ ibstat | grep mlx5`, `user@host:~$ cmd`, `[root@node ~]# cmd`).
# A bare `# ...` is deliberately not a prompt: nccl-tests prints its own comments that way.
_PROMPT = re.compile(
    r"^\s*(?:\$|[\w.-]+@[\w.-]+(?::\S*)?\s*[$#]|\[[^\]\s]+@[^\]]+\]\s*[$#])\s+\S",
    re.ASCII,
)

_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)


class Fact(BaseModel):
    """Base of every parsed result: immutable, and no field that the parser did not declare."""

    model_config = ConfigDict(frozen=True, extra="forbid")


@dataclass(frozen=True, slots=True)
class Line:
    """One line of tool output. `text` has trailing whitespace removed; `raw` is the line as printed."""

    number: int
    text: str
    raw: str

    @property
    def stripped(self) -> str:
        return self.text.strip()

    @property
    def blank(self) -> bool:
        return not self.text.strip()

    @property
    def indent(self) -> int:
        """Width of the leading whitespace with tabs expanded to 8 columns, as a terminal shows it."""
        body = self.text.lstrip()
        return len(self.text[: len(self.text) - len(body)].expandtabs(8))


def split_lines(text: str) -> list[Line]:
    """Split on CRLF, CR or LF; a final line break does not start another (empty) line."""
    if text.startswith("\ufeff"):
        text = text[1:]
    parts = _EOL.split(text)
    if parts and parts[-1] == "":
        parts.pop()
    return [Line(number, part.rstrip(), part) for number, part in enumerate(parts, start=1)]


def content_lines(text: str) -> list[Line]:
    """The non-blank lines, with their original line numbers."""
    return [line for line in split_lines(text) if not line.blank]


def is_prompt(line: Line) -> bool:
    """True for an echoed shell command line such as `$ ibstat | grep mlx5`."""
    return bool(_PROMPT.match(line.text))


def fail(kind: str, message: str, line: Line | None = None) -> NoReturn:
    """Raise ParseError for `kind`, pointing at `line` when there is one."""
    if line is None:
        raise ParseError(kind, message)
    raise ParseError(kind, message, line=line.number, text=line.raw)


def to_int(kind: str, value: str, line: Line, what: str) -> int:
    """`value` as an int, or a ParseError naming `what` and the line."""
    value = value.strip()
    if not _INT.fullmatch(value):
        fail(kind, f"{what} is not an integer: {value!r}", line)
    return int(value)


def to_float(kind: str, value: str, line: Line, what: str) -> float:
    """`value` as a float (plain or exponent notation), or a ParseError naming `what` and the line."""
    value = value.strip()
    if not _FLOAT.fullmatch(value):
        fail(kind, f"{what} is not a number: {value!r}", line)
    return float(value)


def is_int(value: str) -> bool:
    return bool(_INT.fullmatch(value.strip()))


def number(value: str) -> int | float | None:
    """An int when the text is integral, else a float; None when it is not a number at all."""
    value = value.strip()
    if _INT.fullmatch(value):
        return int(value)
    if _FLOAT.fullmatch(value):
        result = float(value)
        return int(result) if result.is_integer() and "e" not in value.lower() else result
    return None


def unique(items: list[str]) -> list[str]:
    """`items` without repeats, first occurrence kept: logs repeat the same fact once per rank."""
    return list(dict.fromkeys(items))
