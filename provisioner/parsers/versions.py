"""Ordering and constraint matching for driver and library versions (MLNX_OFED, DOCA, NCCL).

A version is dash-separated segments of dot-separated numbers, optionally followed by `+local`:
`23.10-1.1.9.0`, `5.1-2.3.7`, `2.21.5`, `2.18.3-1+cuda12.2`. Segments compare in order, numbers
numerically (`23.07` < `23.10`), and a version that extends another sorts after it (`2.21` < `2.21.5`).

Constraints are comma-separated clauses, all of which must hold: `>=23.07,<24.04`, `==2.21.5`, or a bare
version meaning `==`. `==` and `!=` compare by prefix, so `==2.21` accepts 2.21.5 and `==23.10-1`
accepts 23.10-1.1.9.0. `<=` and `>` use the same notion: `<=23.10` includes every 23.10 build and
`>23.10` starts after them. A `+local` part (`+cuda12.4`) only matters when the constraint names one.
"""

from __future__ import annotations

import functools
import re

_VERSION = re.compile(
    r"v?(?P<body>[0-9]+(?:\.[0-9]+)*(?:-[0-9]+(?:\.[0-9]+)*)*)(?:\+(?P<local>[0-9A-Za-z]+(?:[._-][0-9A-Za-z]+)*))?",
    re.ASCII,
)
_CLAUSE = re.compile(r"(?P<op>==|!=|>=|<=|>|<)?\s*(?P<version>\S+)", re.ASCII)
_OPERATORS = ("==", "!=", ">=", "<=", ">", "<")

Segments = tuple[tuple[int, ...], ...]


def _local_key(local: str | None) -> tuple[tuple[int, int | str], ...]:
    # `cuda12.10` must sort after `cuda12.9`: numbers compare as numbers, and a number never meets
    # a word in the same comparison (the tag in front decides first).
    if not local:
        return ()
    parts = re.findall(r"[0-9]+|[A-Za-z]+", local)
    return tuple((0, int(p)) if p.isascii() and p.isdigit() else (1, p.lower()) for p in parts)


@functools.total_ordering
class Version:
    """A parsed version; compares and hashes by value, prints as it was written."""

    __slots__ = ("local", "segments", "text")

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"version must be a string, not {type(text).__name__}")
        match = _VERSION.fullmatch(text.strip())
        if not match:
            raise ValueError(
                f"not a version: {text!r} "
                "(expected dotted numbers such as 23.10-1.1.9.0 or 2.21.5-1+cuda12.4)"
            )
        self.text = text.strip()
        self.segments: Segments = tuple(
            tuple(int(n) for n in seg.split(".")) for seg in match.group("body").split("-")
        )
        self.local: str | None = match.group("local")

    @classmethod
    def parse(cls, text: str | Version) -> Version:
        return text if isinstance(text, Version) else cls(text)

    def _key(self) -> tuple[Segments, tuple[tuple[int, int | str], ...]]:
        return self.segments, _local_key(self.local)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = Version(other)
            except ValueError:
                return False
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: object) -> bool:
        if isinstance(other, str):
            other = Version(other)
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Version({self.text!r})"

    @property
    def release(self) -> tuple[int, ...]:
        """The first segment: `23.10` of `23.10-1.1.9.0`, `2.21.5` of `2.21.5-1+cuda12.4`."""
        return self.segments[0]

    def startswith(self, prefix: str | Version) -> bool:
        """True when `prefix` names this version or a series containing it (`23.10` of `23.10-1.1.9.0`)."""
        prefix = Version.parse(prefix)
        if prefix.local is not None and _local_key(prefix.local) != _local_key(self.local):
            return False
        if len(prefix.segments) > len(self.segments):
            return False
        last = len(prefix.segments) - 1
        for i, seg in enumerate(prefix.segments):
            mine = self.segments[i]
            if i < last and seg != mine:
                return False
            if i == last and mine[: len(seg)] != seg:
                return False
        return True


def parse_constraint(constraint: str) -> list[tuple[str, Version]]:
    """Split a constraint into (operator, version) clauses; ValueError says which clause is wrong."""
    if not isinstance(constraint, str) or not constraint.strip():
        raise ValueError("empty version constraint (expected e.g. '>=23.07', '==2.21.5' or '>=23.07,<24.04')")
    clauses: list[tuple[str, Version]] = []
    for raw in constraint.split(","):
        clause = raw.strip()
        if not clause:
            raise ValueError(f"empty clause in version constraint {constraint!r}")
        match = _CLAUSE.fullmatch(clause)
        if not match:
            raise ValueError(
                f"malformed clause {clause!r} in version constraint {constraint!r} "
                f"(operators: {', '.join(_OPERATORS)}, or a bare version for ==)"
            )
        try:
            version = Version(match.group("version"))
        except ValueError:
            raise ValueError(
                f"malformed clause {clause!r} in version constraint {constraint!r}: "
                f"{match.group('version')!r} is not a version "
                f"(operators: {', '.join(_OPERATORS)}, or a bare version for ==)"
            ) from None
        clauses.append((match.group("op") or "==", version))
    return clauses


def _holds(version: Version, op: str, bound: Version) -> bool:
    same = version.startswith(bound)
    if op == "==":
        return same
    if op == "!=":
        return not same
    if op == ">=":
        return same or version > bound
    if op == "<":
        return not same and version < bound
    if op == "<=":
        return same or version < bound
    return not same and version > bound  # ">"


def matches(version: str | Version, constraint: str) -> bool:
    """True when `version` satisfies every clause of `constraint`.

    ValueError for a malformed constraint or version, with the offending clause in the message.
    """
    parsed = Version.parse(version)
    return all(_holds(parsed, op, bound) for op, bound in parse_constraint(constraint))
