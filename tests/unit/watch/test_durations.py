"""Durations on the command line (--every, --for, --since)."""

from __future__ import annotations

import pytest

from provisioner.commands.durations import parse_duration


@pytest.mark.parametrize(("text", "seconds"), [("60s", 60), ("2m", 120), ("1h30m", 5400), ("2d", 172800),
                                               ("500ms", 0.5), ("7", 7), ("1.5s", 1.5), ("1w", 604800)])
def test_durations_read_as_written(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "x", "5x", "s", "1h x", "-5s"])
def test_anything_else_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)
