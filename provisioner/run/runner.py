"""The one host runner: every command that touches hosts runs its per-host task through here.

A task is a plain function of one item (a host's plan, a smoke target) that returns its result as data
and never raises; the runner bounds how many run at once (`forks`), hands each result back as it
arrives (progress), keeps results in the items' order, rolls batches (`serial`, `max_fail_percent`, as
Ansible's), and turns Ctrl-C into a prompt stop of every login and exec. `all_at_once` is for work
whose hosts must run together (the ranks of one collective), where a bounded pool would deadlock.
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from provisioner.run import pool, transport

T = TypeVar("T")
R = TypeVar("R")


# After Ctrl-C, how long running tasks get to hand over their results (their execs end within a poll;
# what they learned, such as which steps ran, is then reported instead of lost).
INTERRUPT_GRACE = 5.0


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so a run stops the same way and reports what it did (exit 143)."""


@contextmanager
def terminate_like_interrupt() -> Iterator[None]:
    """While the block runs (in the main thread), SIGTERM raises Terminated."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum: int, frame: object) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


_active = 0  # runs of `each` under way: only the outermost clears an earlier run's Ctrl-C
_active_lock = threading.Lock()


@contextmanager
def _interruptible() -> Iterator[None]:
    """Ctrl-C: every login and exec returns within a poll instead of being waited for; a second Ctrl-C
    while they unwind ends the process at once, without a traceback."""
    global _active
    with _active_lock:
        if _active == 0:
            transport.reset()
        _active += 1
    try:
        yield
    except KeyboardInterrupt:
        transport.interrupt()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_DFL)
        raise
    finally:
        with _active_lock:
            _active -= 1


def each(items: Sequence[T], task: Callable[[T], R], *, forks: int,
         on_result: Callable[[R], None] | None = None,
         lost: Callable[[T, str], R] | None = None) -> list[R]:
    """`task(item)` for every item, at most `forks` at once; the results in the items' order.

    With `lost` given, a large fleet may be spread over a few forked worker processes (run/pool.py):
    the task must then keep nothing open past its return, and `lost(item, why)` stands for the result
    of an item whose worker died. Without it, every task runs in a thread of this process (tasks that
    keep sessions open for a later step).
    """
    indexed = list(enumerate(items))
    results: dict[int, R] = {}

    def numbered(pair: tuple[int, T]) -> tuple[int, R]:
        return pair[0], task(pair[1])

    def arrived(pair: tuple[int, R]) -> None:
        results[pair[0]] = pair[1]
        if on_result is not None:
            on_result(pair[1])

    with _interruptible():
        if lost is not None:
            pool.run(indexed, numbered, forks, arrived, lambda pair, why: (pair[0], lost(pair[1], why)))
        else:
            pool.in_threads(indexed, numbered, forks, arrived, on_interrupt=transport.interrupt,
                            grace=INTERRUPT_GRACE)
    return [results[i] for i in range(len(indexed))]


# --------------------------------------------------------------------------------------- rolling batches


def batches(names: Sequence[str], serial: Sequence[str] | None) -> list[list[str]]:
    """Rolling batches as Ansible's `serial`: numbers, percentages of all hosts, or a list of them,
    the last size repeating until every host is in a batch."""
    total = len(names)
    if not serial:
        return [list(names)] if names else []
    sizes = []
    for item in serial:
        text = str(item).strip()
        size = int(total * float(text[:-1]) / 100) if text.endswith("%") else int(text)
        sizes.append(max(1, size))
    result: list[list[str]] = []
    start = 0
    index = 0
    while start < total:
        size = sizes[min(index, len(sizes) - 1)]
        result.append(list(names[start:start + size]))
        start += size
        index += 1
    return result


@dataclass
class Rolled(Generic[R]):
    results: list[R]  # in the items' order, skipped items included
    batches: list[list[str]] = field(default_factory=list)  # the batches that were started
    stopped: str | None = None  # why no further batch started, if so


def rolling(items: Sequence[T], task: Callable[[T], R], *, name: Callable[[T], str], forks: int,
            serial: Sequence[str] | None, max_fail_percent: float | None, failed: Callable[[R], bool],
            skip: Callable[[T, str], R], on_result: Callable[[R], None] | None = None) -> Rolled[R]:
    """`each` batch by batch; once more than `max_fail_percent` of the hosts so far failed, the items of
    the batches not yet started get `skip(item, why)` instead of running."""
    by_name = {name(item): item for item in items}
    done: dict[str, R] = {}
    outcome: Rolled[R] = Rolled([])
    seen = failures = 0
    for group in batches(list(by_name), serial):
        if outcome.stopped is not None:
            for member in group:
                done[member] = skip(by_name[member], "not started: " + outcome.stopped)
            continue
        outcome.batches.append(group)
        results = each([by_name[m] for m in group], task, forks=forks, on_result=on_result)
        done.update(zip(group, results, strict=True))
        seen += len(group)
        failures += sum(1 for result in results if failed(result))
        if max_fail_percent is not None and seen and 100.0 * failures / seen > max_fail_percent:
            outcome.stopped = (f"{failures} of {seen} hosts failed ({100.0 * failures / seen:.0f}%), more than "
                               f"--max-fail-percent {max_fail_percent:g}")
    outcome.results = [done[name(item)] for item in items]
    return outcome


# ------------------------------------------------------------------------------------------- all at once


class AllAtOnce(Generic[T, R]):
    """Every item's task started at once, each in its own thread: for the ranks of one collective, which
    wait for each other (a bounded pool would leave some never started and the rest waiting forever)."""

    def __init__(self, items: Sequence[T], task: Callable[[T], R], name: str = "fabnet-host") -> None:
        self._pool, started = pool.start_all(items, task, name)
        self._futures: dict[Future[R], int] = {future: i for i, future in enumerate(started)}
        self._pending = set(self._futures)
        self.results: dict[int, R] = {}

    def wait(self, until: float, stop: Callable[[int, R], bool] = lambda index, result: False) -> bool:
        """Collect results until every task ended, `until` (a monotonic time) passed, or `stop` said so
        for one result; True when every task ended."""
        stopped = False
        while self._pending and not stopped:
            done, self._pending = wait(self._pending, timeout=max(0.0, until - time.monotonic()),
                                       return_when=FIRST_COMPLETED)
            if not done:
                break
            for future in done:
                index = self._futures[future]
                self.results[index] = future.result()
                stopped = stopped or stop(index, self.results[index])
        return not self._pending

    @property
    def pending(self) -> list[int]:
        return sorted(self._futures[f] for f in self._pending)

    def collect(self, timeout: float, failed: Callable[[int, BaseException], R]) -> None:
        """The tasks still running get `timeout` seconds more each; one that does not end (or raised) gets
        `failed(index, error)`."""
        for future in list(self._pending):
            index = self._futures[future]
            try:
                self.results[index] = future.result(timeout=timeout)
            except Exception as exc:
                self.results[index] = failed(index, exc)
        self._pending = set()

    def close(self) -> None:
        """Forget tasks that still run (their execs are ended by their own deadlines)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


# ---------------------------------------------------------------------------------------------- periodic


def periodic(items: Sequence[T], task: Callable[[T], R], *, interval: float, forks: int,
             on_result: Callable[[T, R], None], stop: threading.Event,
             next_in: Callable[[T, R], float] | None = None, until: float | None = None,
             grace: float = INTERRUPT_GRACE) -> None:
    """`task(item)` again and again for every item, in rounds, until `stop` is set (or the monotonic time
    `until` passed: then `stop` is set, and the running tasks finish).

    Runs start on a common clock, the ticks start + k * `interval`: every item's first run at the first
    tick, and each next run at the first tick after its previous run ended (or, with `next_in`, after
    that many seconds more: a caller's backoff for a host that is down). So the items' k-th runs form one
    round, as an audit of them all would (checks across items compare readings of the same moment, and
    a round costs its slowest item, not the spread of the first logins); an item whose run outlasts the
    interval takes the next tick, and one slow or unreachable item never delays the others' runs. At most
    `forks` tasks run at once. `on_result(item, result)` is
    called from the item's own thread (it must be thread-safe) and must not raise. Blocks the calling
    thread; Ctrl-C or SIGTERM (under terminate_like_interrupt) sets `stop`, ends the running execs, and
    gives running tasks `grace` seconds to hand over their results before the interrupt goes on.
    """
    if not items:
        return
    slots = threading.BoundedSemaphore(max(1, forks))
    # Every thread is started before the first round: started one by one, each start waits for the
    # interpreter lock that the threads already logging in hold (64 of them took over half a second on
    # a busy 2-core controller), and the first round would then be spread over that time.
    go = threading.Event()
    clock: list[float] = []

    def loop(item: T) -> None:
        go.wait()
        while not stop.is_set():
            with slots:
                if stop.is_set():
                    return
                result = task(item)
            on_result(item, result)
            extra = next_in(item, result) if next_in is not None else 0.0
            stop.wait(max(0.0, next_tick(clock[0], interval, time.monotonic() + max(0.0, extra)) - time.monotonic()))

    threads, futures = pool.start_all(items, loop, "fabnet-watch")
    clock.append(time.monotonic())
    go.set()
    with _interruptible():
        try:
            while not stop.is_set() and not all(f.done() for f in futures):
                # A deadline, or a bug in one item's loop (raised below): every loop stops.
                if (until is not None and time.monotonic() >= until) or any(
                        f.done() and f.exception() is not None for f in futures):
                    stop.set()
                    break
                stop.wait(0.2)  # short waits: the main thread must stay free to take signals
        except KeyboardInterrupt:
            stop.set()
            go.set()
            transport.interrupt()
            wait(futures, timeout=grace)
            threads.shutdown(wait=False, cancel_futures=True)
            raise
    wait(futures, timeout=grace)
    threads.shutdown(wait=False, cancel_futures=True)
    for future in futures:
        error = future.exception(timeout=0) if future.done() else None
        if error is not None:
            raise error  # a bug in a task or callback is not swallowed


def next_tick(start: float, interval: float, now: float) -> float:
    """The first tick (start + k * interval, k >= 1) after `now`: a run that ended past a tick waits for
    the next one rather than starting late, out of step with the round."""
    if interval <= 0:
        return now
    ticks = max(1, math.floor((now - start) / interval) + 1)
    return start + ticks * interval
