"""Durations on the command line: `60s`, `2m`, `1h30m`, `2d`, `500ms`, or plain seconds."""

from __future__ import annotations

import re

import click

_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d|w)?")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, None: 1.0}


def parse_duration(text: str) -> float:
    """Seconds; ValueError naming what is wrong."""
    value = text.strip().lower()
    if not value:
        raise ValueError("empty duration")
    total, position = 0.0, 0
    for match in _PART.finditer(value):
        if match.start() != position or (match.group(2) is None and match.end() != len(value)):
            break
        total += float(match.group(1)) * _UNIT[match.group(2)]
        position = match.end()
    if position != len(value):
        raise ValueError(f"not a duration: {text!r} (e.g. 60s, 2m, 1h30m, 2d)")
    return total


def duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """A click callback for a duration option."""
    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
