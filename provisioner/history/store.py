"""The run history in SQLite (WAL): runs, per-host results (verdict, drift items, counters, busbw, and
for watch the cycle's duration) and the changes watch reported, so `fabnet history` can say what changed when.

Each write is its own transaction, committed before the call returns: a watch killed with SIGKILL leaves
every finished cycle readable. Values are stored as audit's JSON shows them (already cleaned, secret
files only as fingerprints); nothing else from a host is kept. Threads share one connection under a lock.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provisioner.errors import FabnetError
from provisioner.output.files import OutputError, open_private

SCHEMA_VERSION = 3  # 2: results.seconds (a watch cycle's duration); 3: indexes by time and by run
_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY, command TEXT NOT NULL, started REAL NOT NULL, finished REAL,
    inventory TEXT, playbook TEXT, verdict TEXT, detail TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY, run INTEGER NOT NULL REFERENCES runs(id), host TEXT NOT NULL, at REAL NOT NULL,
    verdict TEXT NOT NULL, drift TEXT NOT NULL DEFAULT '[]', counters TEXT NOT NULL DEFAULT '{}',
    busbw REAL, error TEXT, seconds REAL);
CREATE TABLE IF NOT EXISTS changes (
    id INTEGER PRIMARY KEY, run INTEGER NOT NULL REFERENCES runs(id), host TEXT NOT NULL, at REAL NOT NULL,
    kind TEXT NOT NULL, subject TEXT NOT NULL, detail TEXT NOT NULL, delta REAL, rate REAL);
CREATE INDEX IF NOT EXISTS results_host_at ON results(host, at);
CREATE INDEX IF NOT EXISTS changes_host_at ON changes(host, at);
CREATE INDEX IF NOT EXISTS results_at ON results(at);
CREATE INDEX IF NOT EXISTS results_run ON results(run);
CREATE INDEX IF NOT EXISTS changes_at ON changes(at);
"""
# A watch writes a row per host per cycle (64 hosts every 30 s: about 180,000 a day). Reads ask by time,
# by host or by run through the indexes above, never for everything; old watch cycles are pruned in
# batches, each its own short transaction, so a running watch's writes never wait long.
PRUNE_BATCH = 20_000


class HistoryError(FabnetError):
    """The history file could not be opened, read or written."""


def default_path() -> Path:
    """Beside apply's journal: $XDG_STATE_HOME/fabnet/history.sqlite (~/.local/state by default)."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "fabnet" / "history.sqlite"


@dataclass(frozen=True)
class Run:
    id: int
    command: str
    started: float
    finished: float | None
    inventory: str | None
    playbook: str | None
    verdict: str | None
    detail: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "command": self.command, "started": self.started, "finished": self.finished,
                "inventory": self.inventory, "playbook": self.playbook, "verdict": self.verdict, "detail": self.detail}


@dataclass(frozen=True)
class Result:
    run: int
    command: str
    host: str
    at: float
    verdict: str
    drift: list[dict[str, Any]]
    counters: dict[str, float]
    busbw: float | None
    error: str | None
    seconds: float | None = None  # how long the host's watch cycle took from `at` (None for other commands)

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, "command": self.command, "host": self.host, "at": self.at, "verdict": self.verdict,
                "drift": self.drift, "counters": self.counters, "busbw": self.busbw, "error": self.error,
                "seconds": self.seconds}


@dataclass(frozen=True)
class Event:
    run: int
    host: str
    at: float
    kind: str
    subject: str
    detail: str
    delta: float | None
    rate: float | None

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, "host": self.host, "at": self.at, "kind": self.kind, "subject": self.subject,
                "detail": self.detail, "delta": self.delta, "rate": self.rate}


def _connect(path: Path) -> sqlite3.Connection:
    """One connection for every thread of the process (a lock serialises its use) to the file at `path`,
    which holds hosts' error messages and drift values: the owner's only. SQLite opens by name and follows
    links, so the file is first created 0600 (never the umask's mode, then a chmod that follows links)
    or checked and tightened through a descriptor opened without following one; that descriptor stays
    open until SQLite's own open is known to be the same file. SQLite gives its -wal and -shm files the
    database's mode."""
    fd = open_private(path, os.O_RDWR)
    try:
        db = sqlite3.connect(str(path), timeout=30, check_same_thread=False, isolation_level=None)
        mine, opened = os.fstat(fd), os.stat(path)
        if (mine.st_dev, mine.st_ino) != (opened.st_dev, opened.st_ino):
            db.close()
            raise OutputError(f"refusing to open {path}: it was replaced while being opened")
        return db
    finally:
        os.close(fd)


class History:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = _connect(path)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(results)")}
            if "seconds" not in columns:  # a history written before version 2
                self._db.execute("ALTER TABLE results ADD COLUMN seconds REAL")
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except (OSError, sqlite3.Error, OutputError) as exc:
            raise HistoryError(f"cannot open the history {path}: {exc}") from None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise HistoryError(f"cannot write the history {self.path}: {exc}") from None

    def _query(self, sql: str, args: Sequence[object]) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._db.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise HistoryError(f"cannot read the history {self.path}: {exc}") from None

    # ---------------------------------------------------------------------------------------- writing

    def start_run(self, command: str, inventory: str | None = None, playbook: str | None = None,
                  at: float | None = None) -> int:
        with self._tx() as db:
            cursor = db.execute("INSERT INTO runs (command, started, inventory, playbook) VALUES (?, ?, ?, ?)",
                                (command, time.time() if at is None else at, inventory, playbook))
            return int(cursor.lastrowid or 0)

    def finish_run(self, run: int, verdict: str, detail: Mapping[str, Any] | None = None,
                   at: float | None = None) -> None:
        with self._tx() as db:
            db.execute("UPDATE runs SET finished = ?, verdict = ?, detail = ? WHERE id = ?",
                       (time.time() if at is None else at, verdict, json.dumps(detail or {}), run))

    def add_results(self, run: int, results: Sequence[Mapping[str, Any]],
                    changes: Sequence[Mapping[str, Any]] = ()) -> None:
        """Host results (keys: host, at, verdict, drift, counters, busbw, error, seconds) and changes (Change.to_json),
        in one transaction: a cycle is either all there or not at all."""
        with self._tx() as db:
            db.executemany(
                "INSERT INTO results (run, host, at, verdict, drift, counters, busbw, error, seconds) "
                "VALUES (?,?,?,?,?,?,?,?,?)",
                [(run, r["host"], r["at"], r["verdict"], json.dumps(r.get("drift", [])),
                  json.dumps(r.get("counters", {})), r.get("busbw"), r.get("error"), r.get("seconds"))
                 for r in results])
            db.executemany(
                "INSERT INTO changes (run, host, at, kind, subject, detail, delta, rate) VALUES (?,?,?,?,?,?,?,?)",
                [(run, c["host"], c["at"], c["kind"], c["subject"], c["detail"], c.get("delta"), c.get("rate"))
                 for c in changes])

    # ---------------------------------------------------------------------------------------- reading

    def runs(self, since: float | None = None, command: str | None = None) -> list[Run]:
        rows = self._query(
            "SELECT id, command, started, finished, inventory, playbook, verdict, detail FROM runs "
            "WHERE started >= ? AND (? IS NULL OR command = ?) ORDER BY started, id",
            (since or 0.0, command, command))
        return [Run(r[0], r[1], r[2], r[3], r[4], r[5], r[6], json.loads(r[7] or "{}")) for r in rows]

    def results(self, host: str | None = None, since: float | None = None) -> list[Result]:
        rows = self._query(
            "SELECT r.run, u.command, r.host, r.at, r.verdict, r.drift, r.counters, r.busbw, r.error, r.seconds "
            "FROM results r JOIN runs u ON u.id = r.run WHERE r.at >= ? AND (? IS NULL OR r.host = ?) "
            "ORDER BY r.at, r.id", (since or 0.0, host, host))
        return [Result(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), json.loads(r[6]), r[7], r[8], r[9])
                for r in rows]

    def events(self, host: str | None = None, since: float | None = None) -> list[Event]:
        rows = self._query(
            "SELECT run, host, at, kind, subject, detail, delta, rate FROM changes "
            "WHERE at >= ? AND (? IS NULL OR host = ?) ORDER BY at, id", (since or 0.0, host, host))
        return [Event(*r) for r in rows]

    def latest(self, host: str) -> Result | None:
        """The host's most recent result of a command that checks drift (audit, apply, watch; not smoke)."""
        rows = self._query(
            "SELECT r.run, u.command, r.host, r.at, r.verdict, r.drift, r.counters, r.busbw, r.error, r.seconds "
            "FROM results r JOIN runs u ON u.id = r.run WHERE r.host = ? AND u.command != 'smoke' "
            "ORDER BY r.at DESC, r.id DESC LIMIT 1", (host,))
        return next((Result(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), json.loads(r[6]), r[7], r[8], r[9])
                     for r in rows), None)

    def last_busbw(self) -> dict[str, float]:
        """Each host's bus bandwidth from its most recent smoke result that has one."""
        rows = self._query(
            "SELECT host, busbw FROM results WHERE busbw IS NOT NULL AND run IN "
            "(SELECT id FROM runs WHERE command = 'smoke') ORDER BY at, id", ())
        return {str(host): float(busbw) for host, busbw in rows}  # oldest first: the last one wins

    def prune(self, before: float, command: str = "watch", on_batch: Callable[[int], None] | None = None) -> int:
        """Delete the results and changes of `command`'s runs from before `before` (a time); the runs
        themselves and every other command's rows stay. Returns how many rows went. `on_batch(gone so
        far)` is called after each full batch: the first prune of a long history takes a while."""
        gone = 0
        for table in ("results", "changes"):
            while True:
                with self._tx() as db:
                    count = db.execute(
                        f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE at < ? AND run IN "
                        "(SELECT id FROM runs WHERE command = ?) LIMIT ?)", (before, command, PRUNE_BATCH)).rowcount
                gone += count
                if count < PRUNE_BATCH:
                    break
                if on_batch is not None:
                    on_batch(gone)
        return gone

    def hosts(self) -> list[str]:
        """Every host with a result, in order. One index lookup per host (a skip scan through the
        (host, at) index), not a scan of every row: a watch writes a row per host per cycle."""
        return [r[0] for r in self._query(
            "WITH RECURSIVE h(name) AS (SELECT MIN(host) FROM results UNION ALL "
            "SELECT (SELECT MIN(host) FROM results WHERE host > h.name) FROM h WHERE h.name IS NOT NULL) "
            "SELECT name FROM h WHERE name IS NOT NULL", ())]
