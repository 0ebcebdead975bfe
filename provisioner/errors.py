"""Typed errors that carry where a problem is, so the CLI can say it precisely.

Library code raises these and never prints or exits; `cli.py` turns them into messages and exit codes.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any


class FabnetError(Exception):
    """Base of every error fabnet raises on purpose."""


class ReaderGone(FabnetError):
    """Standard output's reader went away (`fabnet audit | head -1`): nothing more can be shown, and
    nothing went wrong that anyone is left to be told; the command stops and exits quietly."""


class ConfigError(FabnetError):
    """A problem in a file the user wrote (inventory, playbook, profile, template).

    `file`, `line` (1-based) and `key` (a dotted path such as `plays[0].resources[2].mtu`) locate it.
    """

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 key: str | None = None) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.key = key
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "") + ": "
        key = f"{self.key}: " if self.key else ""
        return f"{where}{key}{self.message}"


class ConfigErrors(ConfigError):
    """Several problems found in one pass; located like the first, all of them in `errors`."""

    def __init__(self, errors: Sequence[ConfigError]) -> None:
        self.errors = list(errors)
        first = self.errors[0]
        super().__init__(first.message, file=first.file, line=first.line, key=first.key)

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)


class RenderError(ConfigError):
    """A template that did not render for one host. `detail` is the message without the host name."""

    def __init__(
        self,
        detail: str,
        *,
        host: str,
        file: str | None = None,
        line: int | None = None,
        key: str | None = None,
    ) -> None:
        self.detail = detail
        self.host = host
        super().__init__(f"{detail} (host {host})", file=file, line=line, key=key)


def fold_errors(errors: Sequence[ConfigError], shown: int = 3) -> list[ConfigError]:
    """One line per problem: the same template failing on many hosts is reported once, naming them."""
    folded: dict[tuple[Any, ...], list[ConfigError]] = {}
    for error in errors:
        if isinstance(error, ConfigErrors):
            for inner in error.errors:
                folded.setdefault(_fold_key(inner), []).append(inner)
        else:
            folded.setdefault(_fold_key(error), []).append(error)
    result: list[ConfigError] = []
    for group in folded.values():
        first = group[0]
        if not isinstance(first, RenderError) or len(group) == 1:
            result.append(first)
            continue
        hosts = list(dict.fromkeys(e.host for e in group if isinstance(e, RenderError)))
        named = ", ".join(hosts[:shown]) + (f" and {len(hosts) - shown} more" if len(hosts) > shown else "")
        result.append(ConfigError(f"{first.detail} (hosts {named})", file=first.file, line=first.line, key=first.key))
    return result


def _fold_key(error: ConfigError) -> tuple[Any, ...]:
    if isinstance(error, RenderError):
        return ("render", error.file, error.line, error.key, error.detail)
    return ("plain", str(error))


class ParseError(FabnetError):
    """Tool output that fabnet could not understand. `line` is 1-based; `text` is that line as printed."""

    def __init__(self, kind: str, message: str, *, line: int | None = None, text: str | None = None) -> None:
        self.kind = kind
        self.message = message
        self.line = line
        self.text = text
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f" at line {self.line}" if self.line else ""
        shown = f": {self.text.strip()!r}" if self.text is not None else ""
        return f"cannot parse {self.kind} output{where}: {self.message}{shown}"


class LabError(FabnetError):
    """The local lab could not be built, inspected or torn down."""


def did_you_mean(word: str, choices: Iterable[str], n: int = 1) -> str:
    """A hint to append to a message about an unknown name: the closest (up to `n`) of `choices`, or ""."""
    close = [repr(name) for name in difflib.get_close_matches(word, list(choices), n=n)]
    if not close:
        return ""
    return f" (did you mean {close[0] if len(close) == 1 else ', '.join(close[:-1]) + ' or ' + close[-1]}?)"
