"""The runner's pool (run/runner.py is its only user): one function per item, bounded: threads in this
process, or, for a large fleet on a machine with several cores, a few worker processes with a bounded
thread pool each.

Each host costs the controller some CPU (SSH key exchange and ciphers, parsing, evaluation) and that
work holds Python's interpreter lock, so one process tops out at one core: about 1000 hosts at ~10 ms
each is 10 s of CPU whatever the parallelism. Worker processes are forked (no re-import, no pickling of
the work; the results come back pickled over a pipe as each host finishes), one per HOSTS_PER_PROCESS
hosts, at most one per core. `forks` bounds the threads of all workers together, and so the number of
connections open at once and their file descriptors and threads (paramiko adds one per connection).
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING, TypeVar

from provisioner import startup

# multiprocessing is imported where worker processes are started: most audits never need it, and it
# costs every start-up several milliseconds.
if TYPE_CHECKING:
    from multiprocessing.connection import Connection

T = TypeVar("T")
R = TypeVar("R")

HOSTS_PER_PROCESS = 128
MAX_PROCESSES = 8
WORKERS_ENV = "FABNET_WORKERS"
# Per open connection: its socket, and a margin for the key and known_hosts files being read.
FDS_PER_CONNECTION = 2
FDS_RESERVED = 64


def process_count(hosts: int, forks: int) -> int:
    """How many worker processes to use; 1 means threads in this process only.

    FABNET_WORKERS=N overrides the choice (the benchmark and tests use it); it is still bounded by the
    number of hosts and by `forks`.
    """
    wanted = os.environ.get(WORKERS_ENV, "").strip()
    if wanted.isdigit() and int(wanted) > 0:
        count = int(wanted)
    else:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        count = min(cores, MAX_PROCESSES, hosts // HOSTS_PER_PROCESS)
    return max(1, min(count, hosts, forks))


def ensure_fd_limit(forks: int) -> None:
    """Raise the soft open-files limit (up to the hard one) so `forks` connections fit."""
    needed = forks * FDS_PER_CONNECTION + FDS_RESERVED
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def run(items: Sequence[T], work: Callable[[T], R], forks: int, on_result: Callable[[R], None],
        lost: Callable[[T, str], R]) -> None:
    """Call `work(item)` for every item, at most `forks` at once, and `on_result` with each result in
    this process as it arrives. `work` must not raise. An item whose worker process died is reported as
    `lost(item, reason)`.
    """
    if not items:
        return
    startup.release()  # before any fork: see startup.py
    ensure_fd_limit(forks)
    processes = process_count(len(items), forks)
    if processes == 1 or not hasattr(os, "fork"):
        in_threads(items, work, forks, on_result)
        return
    _processes(items, work, forks, processes, on_result, lost)


def in_threads(items: Sequence[T], work: Callable[[T], R], forks: int, on_result: Callable[[R], None],
               on_interrupt: Callable[[], None] | None = None, grace: float = 0.0) -> None:
    """`work(item)` for every item in at most `forks` threads of this process; `on_result` as each ends.

    On Ctrl-C, items not started are dropped, `on_interrupt` is called (it ends the running execs) and
    the running ones get `grace` seconds to hand over their results before the interrupt goes on.
    """
    workers = max(1, min(forks, len(items)))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fabnet-host")
    futures = []
    delivered: set[Future[R]] = set()
    try:
        futures = [pool.submit(work, item) for item in items]
        for future in as_completed(futures):
            delivered.add(future)
            on_result(future.result())
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        if on_interrupt is not None:
            on_interrupt()
        # Every task that had ended is handed over, also one that ended while the interrupt came in and
        # as_completed had not yet yielded; the running ones get `grace` seconds.
        waiting = [f for f in futures if not f.cancelled() and f not in delivered]
        try:
            for future in as_completed(waiting, timeout=grace):
                on_result(future.result())
        except TimeoutError:
            pass
        raise
    pool.shutdown()


def _child(items: Sequence[T], indices: list[int], work: Callable[[T], R], threads: int, conn: Connection) -> None:
    def numbered(index: int) -> tuple[int, R]:
        return index, work(items[index])

    def send(result: tuple[int, R]) -> None:
        conn.send((True, result))

    try:
        in_threads(indices, numbered, threads, send)
    finally:
        conn.send((False, None))
        conn.close()


def _processes(items: Sequence[T], work: Callable[[T], R], forks: int, processes: int,
               on_result: Callable[[R], None], lost: Callable[[T, str], R]) -> None:
    import multiprocessing
    from multiprocessing.connection import Connection, wait

    context = multiprocessing.get_context("fork")
    # Round-robin shares: neighbouring hosts (same rack, same state) spread over the workers.
    shares = [list(range(i, len(items), processes)) for i in range(processes)]
    running: dict[Connection, tuple[multiprocessing.process.BaseProcess, list[int]]] = {}
    for number, share in enumerate(shares):
        threads = forks // processes + (1 if number < forks % processes else 0)
        receiver, sender = context.Pipe(duplex=False)
        process: multiprocessing.process.BaseProcess = context.Process(
            target=_child, args=(items, share, work, max(1, threads), sender), name=f"fabnet-worker-{number}",
            daemon=True)
        process.start()
        sender.close()
        running[receiver] = (process, share)
    done: set[int] = set()
    while running:
        for ready in wait(list(running)):
            assert isinstance(ready, Connection)
            process, share = running[ready]
            try:
                more, payload = ready.recv()
            except (EOFError, OSError):
                more, payload = False, None
            if more:
                index, result = payload
                done.add(index)
                on_result(result)
                continue
            process.join()
            del running[ready]
            ready.close()
            reason = f"worker process ended early (exit code {process.exitcode})"
            for index in share:
                if index not in done:
                    on_result(lost(items[index], reason))


def start_all(items: Sequence[T], work: Callable[[T], R], name: str) -> tuple[ThreadPoolExecutor, list[Future[R]]]:
    """`work(item)` for every item, each in a thread of its own, all started now; the caller waits."""
    pool = ThreadPoolExecutor(max_workers=max(1, len(items)), thread_name_prefix=name)
    return pool, [pool.submit(work, item) for item in items]
