"""The one host runner: order, bounds, rolling batches with max-fail, and all-at-once launches."""

from __future__ import annotations

import threading
import time

from provisioner.run import runner


def test_each_keeps_the_items_order_and_reports_each_result_as_it_arrives() -> None:
    seen: list[int] = []

    def slow_first(n: int) -> int:
        time.sleep(0.05 if n == 0 else 0)
        return n * 10

    results = runner.each([0, 1, 2, 3], slow_first, forks=4, on_result=seen.append)
    assert results == [0, 10, 20, 30]
    assert sorted(seen) == [0, 10, 20, 30]
    assert seen[-1] == 0  # the slow one arrived last, and was still handed over at once


def test_each_runs_at_most_forks_at_once() -> None:
    running = peak = 0
    lock = threading.Lock()

    def task(n: int) -> int:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.02)
        with lock:
            running -= 1
        return n

    assert runner.each(list(range(12)), task, forks=3) == list(range(12))
    assert peak == 3


def test_rolling_stops_starting_batches_past_max_fail_percent() -> None:
    started: list[str] = []

    def task(name: str) -> tuple[str, bool]:
        started.append(name)
        return name, name == "b"  # b fails

    rolled = runner.rolling(["a", "b", "c", "d", "e"], task, name=lambda n: n, forks=5, serial=["2"],
                            max_fail_percent=0, failed=lambda r: r[1], skip=lambda n, why: (n, why))
    assert rolled.batches == [["a", "b"]]
    assert sorted(started) == ["a", "b"]
    assert rolled.stopped is not None and "1 of 2 hosts failed (50%)" in rolled.stopped
    assert [r[0] for r in rolled.results] == ["a", "b", "c", "d", "e"]
    assert rolled.results[2][1] == "not started: " + rolled.stopped


def test_rolling_without_failures_runs_every_batch() -> None:
    rolled = runner.rolling(list("abcde"), lambda n: (n, False), name=lambda n: n, forks=2, serial=["1", "50%"],
                            max_fail_percent=0, failed=lambda r: r[1], skip=lambda n, why: (n, True))
    assert rolled.batches == [["a"], ["b", "c"], ["d", "e"]]
    assert rolled.stopped is None


def test_all_at_once_starts_every_task_before_any_ends() -> None:
    # Four tasks that each wait for all four to have started: a bounded pool smaller than 4 would hang.
    barrier = threading.Barrier(4, timeout=5)

    def rank(n: int) -> int:
        barrier.wait()
        return n

    launched = runner.AllAtOnce([0, 1, 2, 3], rank)
    assert launched.wait(time.monotonic() + 5)
    assert launched.results == {0: 0, 1: 1, 2: 2, 3: 3}
    launched.close()


def test_all_at_once_stops_waiting_when_one_result_says_so_and_collects_the_rest() -> None:
    release = threading.Event()

    def task(n: int) -> str:
        if n == 1:
            return "failed"
        release.wait(5)
        return "late"

    launched = runner.AllAtOnce([0, 1, 2], task)
    assert not launched.wait(time.monotonic() + 5, stop=lambda index, result: result == "failed")
    assert launched.results == {1: "failed"}
    assert launched.pending == [0, 2]
    release.set()
    launched.collect(5, lambda index, exc: "error")
    assert launched.results == {0: "late", 1: "failed", 2: "late"}
    launched.close()


def test_all_at_once_gives_up_at_its_deadline() -> None:
    release = threading.Event()
    launched = runner.AllAtOnce([0], lambda n: release.wait(5))
    started = time.monotonic()
    assert not launched.wait(time.monotonic() + 0.1)
    assert time.monotonic() - started < 2
    assert launched.pending == [0]
    release.set()
    launched.close()
