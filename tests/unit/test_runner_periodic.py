"""runner.periodic: rounds on a common clock, a slow item never delays the others, bounded, stoppable."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

import pytest

from provisioner.run import runner


def _run_for(seconds: float, **kwargs: object) -> dict[str, list[float]]:
    starts: dict[str, list[float]] = defaultdict(list)
    stop = threading.Event()
    task = kwargs.pop("task")

    def timed(item: str) -> str:
        starts[item].append(time.monotonic())
        return task(item)  # type: ignore[operator, no-any-return]

    runner.periodic(["fast", "slow"], timed, on_result=lambda item, result: None, stop=stop,
                    until=time.monotonic() + seconds, **kwargs)  # type: ignore[arg-type]
    assert stop.is_set()
    return starts


def test_a_slow_item_does_not_delay_the_others() -> None:
    def task(item: str) -> str:
        time.sleep(0.6 if item == "slow" else 0.0)
        return item

    starts = _run_for(1.0, task=task, interval=0.1, forks=2)
    assert len(starts["fast"]) >= 7  # about every 0.1 s for a second, while "slow" sleeps
    assert len(starts["slow"]) <= 2
    gaps = [b - a for a, b in zip(starts["fast"], starts["fast"][1:], strict=False)]
    assert max(gaps) < 0.3


def test_next_in_sets_an_items_own_delay() -> None:
    starts = _run_for(0.65, task=lambda item: item, interval=0.05, forks=2,
                      next_in=lambda item, result: 10.0 if item == "slow" else 0.0)
    assert len(starts["slow"]) == 1  # backed off past the end of the run
    assert len(starts["fast"]) >= 10  # every tick: 0.65 s / 0.05 s


def test_stop_ends_the_run_promptly() -> None:
    stop = threading.Event()
    seen: list[str] = []
    threading.Timer(0.2, stop.set).start()
    started = time.monotonic()
    runner.periodic(["a"], lambda item: item, interval=5.0, forks=1, on_result=lambda i, r: seen.append(r),
                    stop=stop)
    assert time.monotonic() - started < 1.5
    assert seen == ["a"]


def test_a_bug_in_the_callback_is_raised() -> None:
    stop = threading.Event()

    def fine(item: str, result: str) -> None:
        if item == "a":
            raise ValueError("boom")

    started = time.monotonic()
    with pytest.raises(ValueError, match="boom"):  # and the other item's loop is stopped with it
        runner.periodic(["a", "b"], lambda item: item, interval=0.05, forks=2, on_result=fine, stop=stop)
    assert stop.is_set() and time.monotonic() - started < 2


def test_runs_start_in_rounds_on_one_clock() -> None:
    # The first runs end at different times (a slow login); the next ones still start together.
    first: set[str] = set()

    def task(item: str) -> str:
        if item not in first:
            first.add(item)
            time.sleep(0.25 if item == "slow" else 0.02)
        return item

    starts = _run_for(1.0, task=task, interval=0.4, forks=2)
    assert abs(starts["fast"][0] - starts["slow"][0]) < 0.05
    # Both second runs on the tick after the slow first run ended (0.4 s), not 0.4 s after each ended.
    assert abs(starts["fast"][1] - starts["slow"][1]) < 0.05
    assert 0.35 < starts["fast"][1] - starts["fast"][0] < 0.5


def test_an_overrun_takes_the_next_tick() -> None:
    starts = _run_for(1.0, task=lambda item: time.sleep(0.3 if item == "slow" else 0) or item,
                      interval=0.2, forks=2)
    gaps = [b - a for a, b in zip(starts["slow"], starts["slow"][1:], strict=False)]
    assert gaps and all(0.35 < gap < 0.5 for gap in gaps)  # two ticks, never 0.3 s after the last start


@pytest.mark.parametrize(("now", "expected"), [(10.0, 11.0), (10.5, 11.0), (11.0, 12.0), (13.2, 14.0), (9.0, 11.0)])
def test_next_tick(now: float, expected: float) -> None:
    assert runner.next_tick(10.0, 1.0, now) == pytest.approx(expected)
