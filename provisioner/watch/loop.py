"""The watch loop: every host re-audited each interval over its kept session, one run per cycle.

Each cycle reads the host's playbook facts and its link readings in ONE run (engine.read_host with the
links probe added), compares the snapshot with the host's previous one (changes.py), records the cycle in
the history (one transaction: a killed watch keeps every finished cycle) and updates the metrics. A host
that is down is retried with a growing delay (never more than BACKOFF_MAX, or the interval if longer) and
its session is closed, so the next try logs in afresh instead of waiting on a dead connection; the other
hosts' cycles go on meanwhile. Cycles start in rounds on the watch's common clock (run/runner.periodic):
fleet checks compare readings of one round, and a round lasts as long as its slowest host. The first
round's fleet checks wait for every host's first reading: judged on the hosts read so far, a fleet check
would say "ok" alone and "drift" a cycle later, a change that never happened.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from provisioner.evaluate import engine
from provisioner.facts import batch
from provisioner.history.record import host_row
from provisioner.history.store import History, HistoryError
from provisioner.load.hostplans import HostPlan
from provisioner.output import report
from provisioner.output.watch_metrics import HostMetrics, WatchState
from provisioner.resources.base import Results
from provisioner.run import runner
from provisioner.run.session import Sessions
from provisioner.watch import links
from provisioner.watch.changes import HostTrack, Snapshot, snapshot
from provisioner.watch.events import Change

PRUNE_EVERY = 3600.0  # seconds between two prunings of old watch cycles from the history
BACKOFF_MAX = 60.0


@dataclass
class Cycle:
    host: str
    snapshot: Snapshot
    changes: list[Change]
    doc: dict[str, Any]  # the host as audit's JSON shows it
    seconds: float


@dataclass
class Reading:
    """One host's facts of one cycle, before they are judged (its outcome waits in the watcher's latest
    readings, where the other hosts' fleet checks find it too)."""

    results: Results | None
    at: float  # seconds since the epoch, when the run started
    sysfs_root: str


@dataclass
class _Host:
    track: HostTrack = field(default_factory=HostTrack)
    failures: int = 0  # cycles in a row that could not reach the host
    changes: dict[str, int] = field(default_factory=dict)


def backoff(interval: float, failures: int) -> float:
    """Seconds until a host that failed `failures` cycles in a row is tried again."""
    if failures <= 0:
        return interval
    return float(min(interval * 2 ** (failures - 1), max(BACKOFF_MAX, interval)))


def _port_counter(name: str) -> tuple[str, str]:
    port, _, counter = name.partition(" ")
    return port, counter


class Watcher:
    def __init__(self, plans: Sequence[HostPlan], sessions: Sessions, *, interval: float,
                 on_changes: Callable[[Sequence[Change]], None], history: History | None = None, run: int = 0,
                 state: WatchState | None = None, on_cycle: Callable[[Cycle], None] | None = None,
                 on_problem: Callable[[str], None] = lambda message: None, keep: float = 0.0) -> None:
        self.plans = list(plans)
        self.keep = keep  # seconds of watch cycles the history keeps; 0: all
        self._pruned = -math.inf
        self.sessions = sessions
        self.interval = interval
        self.on_changes = on_changes
        self.history = history
        self.run = run
        self.state = state or WatchState()
        self.on_cycle = on_cycle
        self.on_problem = on_problem
        self.cycles = 0
        self._forks = len(self.plans)  # run_until sets the real number (it sizes the first round's wait)
        self._hosts = {plan.host.name: _Host() for plan in self.plans}
        self._latest: dict[str, engine.HostOutcome] = {}  # each host's last reading, before fleet checks
        self._memos = {plan.host.name: engine.Memo() for plan in self.plans}  # facts unchanged: no re-evaluation
        self._lock = threading.Lock()
        self._unread = set(self._hosts)  # hosts whose first cycle has not ended yet
        self._first_read = threading.Condition(self._lock)

    def _wait_first_round(self, host: str, forks: int) -> dict[str, engine.HostOutcome]:
        """Every host's latest outcome, once all first cycles have ended (or could not have, in time).
        Called outside the runner's fork slots, so hosts beyond `forks` still get theirs meanwhile."""
        options = self.sessions.options
        # A first cycle lasts at most a login and a host's budget; with fewer forks than hosts they come
        # in that many batches.
        batches = -(-len(self._hosts) // max(1, forks))
        deadline = time.monotonic() + batches * (options.connect_timeout + options.command_timeout
                                                 + batch.REPORT_MARGIN)
        with self._first_read:
            self._unread.discard(host)
            self._first_read.notify_all()
            while self._unread and (left := deadline - time.monotonic()) > 0:
                self._first_read.wait(left)
            return dict(self._latest)

    def read(self, plan: HostPlan) -> Reading:
        """One host's cycle, first half: its facts and link readings in one run (a task of the runner,
        in one of its fork slots). Never raises."""
        host = plan.host
        session = self.sessions(host)
        sysfs_root = engine.host_context(plan).sysfs_root
        at = time.time()
        read, results = engine.read_host(plan, session, [links.probe(sysfs_root)], memo=self._memos[host.name])
        with self._lock:
            self._latest[host.name] = read
        return Reading(results, at, sysfs_root)

    def judge(self, plan: HostPlan, reading: Reading) -> Cycle:
        """One host's cycle, second half: fleet checks, then what changed since its previous cycle. Runs
        outside the fork slots: a first cycle may wait here for the other hosts' first readings."""
        host = plan.host
        with self._lock:
            first = host.name in self._unread
            latest = dict(self._latest)
        if first:
            latest = self._wait_first_round(host.name, self._forks)
        # Fleet checks (one MTU across the fleet) compare this host's reading with the others' last ones,
        # as audit compares the hosts it read together.
        outcome = engine.with_fleet_checks(self.plans, latest, host.name)
        engine.finish_status(outcome)
        doc = report.audit_json(engine.AuditOutcome([outcome], outcome.seconds), inventory="", playbook="",
                                limit=None, exit_code=0)["hosts"][0]
        session = self.sessions(host)
        current = snapshot(doc, links.read(reading.results, reading.sysfs_root), reading.at, session.logins)
        if not current.up:
            session.close()  # the next try logs in afresh rather than waiting on a dead connection
        with self._lock:
            state = self._hosts[host.name]
            found = state.track.advance(current)
            state.failures = 0 if current.up else state.failures + 1
        return Cycle(host.name, current, found, doc, outcome.seconds)

    def _done(self, plan: HostPlan, reading: Reading) -> None:
        self._arrived(plan, self.judge(plan, reading))

    def _arrived(self, plan: HostPlan, cycle: Cycle) -> None:
        snap = cycle.snapshot
        with self._lock:
            self.cycles += 1
            state = self._hosts[cycle.host]
            for change in cycle.changes:
                state.changes[change.kind] = state.changes.get(change.kind, 0) + 1
            counts = dict(state.changes)
        if self.history is not None:
            counters: dict[str, float] = {**snap.links.counters,
                                          **{f"{i} carrier_changes": v for i, v in snap.links.carrier_changes.items()}}
            # The whole cycle (read, evaluate, compare), not only the run: what a fleet's cycle costs.
            took = round(max(0.0, time.time() - snap.at), 4)
            try:
                self.history.add_results(self.run, [host_row(cycle.doc, snap.at, counters, seconds=took)],
                                         [c.to_json() for c in cycle.changes])
            except HistoryError as exc:  # a full disk must not stop the watching; it is said, once a cycle
                self.on_problem(str(exc))
            self.prune()
        self.state.update(cycle.host, self._metrics(cycle, counts))
        if cycle.changes:
            self.on_changes(cycle.changes)
        if self.on_cycle is not None:
            self.on_cycle(cycle)

    def _metrics(self, cycle: Cycle, counts: dict[str, int]) -> HostMetrics:
        snap = cycle.snapshot
        before = self.state.get(cycle.host)
        if not snap.up:
            return HostMetrics(up=False, last_success=before.last_success, busbw=before.busbw, changes=counts,
                               cycle_seconds=cycle.seconds, counters=before.counters,
                               carrier_changes=before.carrier_changes, drift_by_kind=before.drift_by_kind,
                               present=before.present)
        drift: dict[str, int] = {}
        for item in snap.drift.values():
            drift[item.kind] = drift.get(item.kind, 0) + 1
        split = {name: _port_counter(name) for name in snap.links.counters}
        rates = {split[c.subject]: c.rate for c in cycle.changes
                 if c.kind == "counter_rose" and c.rate is not None and c.subject in split}
        return HostMetrics(up=True, drift_by_kind=drift,
                           counters={split[name]: value for name, value in snap.links.counters.items()},
                           rates=rates, carrier_changes=dict(snap.links.carrier_changes), last_success=time.time(),
                           cycle_seconds=cycle.seconds, busbw=before.busbw, changes=counts,
                           present=_present(before.present, snap.links.present))

    def next_in(self, plan: HostPlan, reading: Reading) -> float:
        with self._lock:
            failures = self._hosts[plan.host.name].failures
        # A host that answered runs again at the next round; one that did not waits its backoff first.
        return 0.0 if failures == 0 else backoff(self.interval, failures)

    def seed_busbw(self) -> None:
        """Each host's busbw metric starts at its last smoke result in the history."""
        if self.history is None:
            return
        for host, busbw in self.history.last_busbw().items():
            if host in self._hosts:
                self.state.update(host, HostMetrics(busbw=busbw))

    def prune(self, now: float | None = None, on_batch: Callable[[int], None] | None = None) -> None:
        """Drop watch cycles older than `keep` from the history: at the start, then at most once an hour
        (from whichever host's thread comes first). `on_batch` as History.prune's."""
        if self.history is None or not self.keep:
            return
        now = time.time() if now is None else now
        with self._lock:
            if now - self._pruned < PRUNE_EVERY:
                return
            self._pruned = now
        try:
            self.history.prune(now - self.keep, on_batch=on_batch)
        except HistoryError as exc:
            self.on_problem(str(exc))

    def run_until(self, stop: threading.Event, forks: int, until: float | None = None) -> None:
        self._forks = forks
        runner.periodic(self.plans, self.read, interval=self.interval, forks=forks, on_result=self._done,
                        stop=stop, next_in=self.next_in, until=until)


def _present(before: dict[str, int], listed: AbstractSet[str] | None) -> dict[str, int]:
    """Every device and port listed so far -> 1 when this cycle lists it, else 0; a listing this cycle cannot
    trust (links.LinkReading.present is None) changes nothing."""
    if listed is None:
        return before
    return {**dict.fromkeys(before, 0), **dict.fromkeys(listed, 1)}
