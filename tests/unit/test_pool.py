"""The host pool: every item once, results in this process as they come, threads or forked workers,
a worker that dies reported per item, and the bound on concurrency."""

from __future__ import annotations

import os
import threading
import time

import pytest

from provisioner.run import pool as workers


def collect(items: list[int], work, forks: int) -> list[object]:
    results: list[object] = []
    workers.run(items, work, forks, results.append, lambda item, why: ("lost", item, why))
    return results


@pytest.mark.parametrize("processes", ["1", "3"])
def test_every_item_once_with_threads_or_processes(monkeypatch: pytest.MonkeyPatch, processes: str) -> None:
    monkeypatch.setenv(workers.WORKERS_ENV, processes)
    results = collect(list(range(50)), lambda i: (i * i, os.getpid()), forks=9)
    assert sorted(r[0] for r in results) == [i * i for i in range(50)]
    pids = {r[1] for r in results}
    if processes == "1":
        assert pids == {os.getpid()}
    else:
        assert len(pids) == 3 and os.getpid() not in pids


def test_forks_bounds_concurrency_across_processes(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv(workers.WORKERS_ENV, "2")
    # Each call holds a slot for 50 ms; a shared directory counts the calls running at once.
    lock = threading.Lock()

    def work(i: int) -> int:
        mark = tmp_path / f"{i}"
        mark.write_text("")
        with lock:
            running = len(list(tmp_path.iterdir()))
        time.sleep(0.05)
        mark.unlink()
        return running

    results = collect(list(range(24)), work, forks=4)
    assert len(results) == 24 and max(results) <= 4


def test_a_dead_worker_is_reported_for_each_of_its_items(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(workers.WORKERS_ENV, "2")

    def work(i: int) -> int:
        if i == 1:  # item 1 goes to the second worker (round robin), which dies with items 3, 5 ... unfinished
            os._exit(3)
        return i

    results = collect(list(range(10)), work, forks=2)
    lost = sorted(r[1] for r in results if isinstance(r, tuple))
    done = sorted(r for r in results if isinstance(r, int))
    assert sorted(lost + done) == list(range(10))
    assert 1 in lost and set(done) >= {0, 2, 4, 6, 8}
    assert all("exit code 3" in r[2] for r in results if isinstance(r, tuple))


def test_process_count_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(workers.WORKERS_ENV, raising=False)
    assert workers.process_count(16, 50) == 1
    assert workers.process_count(1000, 50) == min(len(os.sched_getaffinity(0)), workers.MAX_PROCESSES, 7)
    assert workers.process_count(1000, 1) == 1
    monkeypatch.setenv(workers.WORKERS_ENV, "4")
    assert workers.process_count(3, 50) == 3


def test_a_task_that_ended_as_ctrl_c_came_in_is_still_handed_over() -> None:
    """Ctrl-C while the first result is being handed over, with the second task already ended but not yet
    yielded by as_completed: its result is handed over too, not dropped as if it had never ended."""
    a_delivered, b_returned = threading.Event(), threading.Event()
    got: list[str] = []

    def work(item: str) -> str:
        if item == "b":
            a_delivered.wait(10)
            b_returned.set()
        return item

    def on_result(result: str) -> None:
        got.append(result)
        if result == "a":
            a_delivered.set()
            b_returned.wait(10)
            time.sleep(0.2)  # the future is marked done right after work returns
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        workers.in_threads(["a", "b"], work, 2, on_result, grace=5.0)
    assert got == ["a", "b"]
