"""The run history: rows written per cycle survive a crash, queries by host and time, drift changes between
audits, secrets only as audit's JSON shows them, and the watch lock."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from provisioner.history import record
from provisioner.history.store import History
from provisioner.watch.lock import AlreadyWatched, WatchLock


def audit_doc(actual: str | None, status: str = "drifted") -> dict[str, Any]:
    checks = [] if actual is None else [{"attribute": "value", "desired": "1", "actual": actual, "status": "drift",
                                         "message": ""}]
    return {"inventory": "inv.yml", "playbook": "site.yml", "summary": {"drifted": 1 if checks else 0},
            "hosts": [{"name": "gpu03", "status": status if checks else "in_sync", "error": None,
                       "resources": [{"kind": "sysctl", "target": "net.x", "checks": checks}]}]}


def test_audits_record_the_drift_that_appeared_and_went_away(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with History(path) as history:
        record.record(history, "audit", record.audit_rows(audit_doc(None), 100.0), verdict="in_sync", at=100.0)
        record.record(history, "audit", record.audit_rows(audit_doc("0"), 200.0), verdict="drifted", at=200.0)
        record.record(history, "audit", record.audit_rows(audit_doc("0"), 300.0), verdict="drifted", at=300.0)
        record.record(history, "audit", record.audit_rows(audit_doc(None), 400.0), verdict="in_sync", at=400.0)
        events = history.events("gpu03")
        assert [(e.at, e.kind, e.subject) for e in events] == [(200.0, "drift_new", "sysctl net.x: value"),
                                                              (400.0, "drift_gone", "sysctl net.x: value")]
        assert history.events("gpu03", since=300.0)[0].kind == "drift_gone"
        assert history.events("gpu09") == []
        assert [r.verdict for r in history.results("gpu03")] == ["in_sync", "drifted", "drifted", "in_sync"]
        assert [r.command for r in history.runs()] == ["audit"] * 4
        assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_strings_are_stored_cleaned_as_audits_json_shows_them(tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite") as history:
        record.record(history, "audit", record.audit_rows(audit_doc("\x1b[31mred"), 1.0), verdict="drifted")
        assert history.results()[0].drift[0]["actual"] == "\\x1b[31mred"


def test_smoke_rows_keep_busbw_and_pairs(tmp_path: Path) -> None:
    doc = {"verdict": "pass", "avg_busbw": 12.5, "results": [{"size": 1048576, "busbw": 10.0}],
           "hosts": [{"name": "gpu01", "failed": False}, {"name": "gpu02", "failed": True, "reason": "slow"}],
           "localisation": {"pairs": [{"round": 1, "hosts": ["gpu01", "gpu02"], "busbw": 3.0, "ok": True}]}}
    with History(tmp_path / "h.sqlite") as history:
        record.record(history, "smoke", record.smoke_rows(doc, 5.0), verdict="pass", detail=record.smoke_detail(doc))
        assert [(r.host, r.verdict, r.busbw) for r in history.results()] == [("gpu01", "pass", 12.5),
                                                                             ("gpu02", "failed", 12.5)]
        assert history.runs()[0].detail["pairs"][0]["hosts"] == ["gpu01", "gpu02"]


def test_record_safely_keeps_the_runs_verdict_and_duration(tmp_path: Path) -> None:
    doc = {**audit_doc("0"), "seconds": 12.5}
    assert record.record_safely("audit", doc, path=tmp_path / "h.sqlite") is None
    with History(tmp_path / "h.sqlite") as history:
        (run,) = history.runs()
        assert (run.command, run.verdict, run.inventory) == ("audit", "drifted", "inv.yml")
        assert run.finished is not None and run.finished - run.started == pytest.approx(12.5)


def test_record_safely_names_an_unwritable_history(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    note = record.record_safely("audit", audit_doc("0"), path=blocker / "h.sqlite")
    assert note is not None and note.startswith("history not recorded: cannot open the history")


def test_history_path_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(record.ENV, "off")
    assert record.history_path() is None
    monkeypatch.setenv(record.ENV, str(tmp_path / "x.sqlite"))
    assert record.history_path() == tmp_path / "x.sqlite"
    monkeypatch.delenv(record.ENV)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert record.history_path() == tmp_path / "fabnet" / "history.sqlite"
    # Switch words are never a file named "on" in the working folder.
    for word in ("0", "False", "no", "NONE"):
        monkeypatch.setenv(record.ENV, word)
        assert record.history_path() is None
    for word in ("on", "1", "true", "Yes"):
        monkeypatch.setenv(record.ENV, word)
        assert record.history_path() == tmp_path / "fabnet" / "history.sqlite"


def test_a_killed_writer_leaves_every_committed_cycle_readable(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    script = (
        "import os, sys\nfrom provisioner.history.store import History\n"
        f"h = History(__import__('pathlib').Path({str(path)!r}))\nrun = h.start_run('watch')\n"
        "for i in range(50):\n"
        "    h.add_results(run, [{'host': 'gpu01', 'at': float(i), 'verdict': 'in_sync'}])\n"
        "os.kill(os.getpid(), 9)\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).resolve().parents[3], timeout=60)
    assert proc.returncode == -9
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with History(path) as history:
        assert len(history.results("gpu01")) == 50
        assert history.runs()[0].finished is None


def test_a_second_lock_of_one_inventory_names_the_holder(tmp_path: Path) -> None:
    inventory = tmp_path / "inv.yml"
    inventory.write_text("")
    with WatchLock(inventory, tmp_path / "state"):
        with pytest.raises(AlreadyWatched, match=rf"already watched by fabnet watch \(pid {os.getpid()}\)"):
            WatchLock(tmp_path / "." / "inv.yml", tmp_path / "state").acquire()
        WatchLock(tmp_path / "other.yml", tmp_path / "state").acquire()  # another inventory is free
    with WatchLock(inventory, tmp_path / "state"):  # released with the first
        pass


def test_a_history_from_before_cycle_durations_opens_and_then_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with sqlite3.connect(path) as db:  # version 1: results had no seconds column
        db.executescript(
            "CREATE TABLE runs (id INTEGER PRIMARY KEY, command TEXT NOT NULL, started REAL NOT NULL, finished REAL,"
            " inventory TEXT, playbook TEXT, verdict TEXT, detail TEXT NOT NULL DEFAULT '{}');"
            "CREATE TABLE results (id INTEGER PRIMARY KEY, run INTEGER NOT NULL, host TEXT NOT NULL, at REAL NOT NULL,"
            " verdict TEXT NOT NULL, drift TEXT NOT NULL DEFAULT '[]', counters TEXT NOT NULL DEFAULT '{}',"
            " busbw REAL, error TEXT);"
            "INSERT INTO runs (command, started) VALUES ('audit', 1.0);"
            "INSERT INTO results (run, host, at, verdict) VALUES (1, 'gpu01', 1.0, 'in_sync');"
            "PRAGMA user_version=1;")
    db.close()
    with History(path) as history:
        run = history.start_run("watch")
        history.add_results(run, [{"host": "gpu01", "at": 2.0, "verdict": "in_sync", "seconds": 0.25}])
        assert [(r.command, r.seconds) for r in history.results("gpu01")] == [("audit", None), ("watch", 0.25)]
        assert history.results()[1].to_json()["seconds"] == 0.25
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (3,)
    db.close()


def test_watch_records_each_cycle_with_the_time_it_took_from_its_start(tmp_path: Path) -> None:
    from types import SimpleNamespace
    from typing import cast

    from provisioner.load.hostplans import HostPlan
    from provisioner.run.session import Sessions
    from provisioner.watch.changes import Snapshot
    from provisioner.watch.loop import Cycle, Watcher

    plan = cast(HostPlan, SimpleNamespace(host=SimpleNamespace(name="gpu01")))
    started = time.time() - 0.3  # read, evaluation and comparison took 0.3 s; the exec alone 0.1 s
    doc = {"name": "gpu01", "status": "in_sync", "error": None, "resources": []}
    with History(tmp_path / "h.sqlite") as history:
        run = history.start_run("watch")
        watcher = Watcher([plan], cast(Sessions, None), interval=1.0, on_changes=lambda changes: None,
                          history=history, run=run)
        watcher._arrived(plan, Cycle("gpu01", Snapshot("gpu01", started, up=True), [], doc, 0.1))
        (result,) = history.results("gpu01")
    assert result.at == started
    assert result.seconds is not None and 0.3 <= result.seconds < 30


def _row(host: str, at: float, **extra: Any) -> dict[str, Any]:
    return {"host": host, "at": at, "verdict": "in_sync", **extra}


def test_the_last_smoke_bandwidth_per_host_comes_from_smoke_runs_only(tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite") as history:
        first, audit, second = history.start_run("smoke"), history.start_run("audit"), history.start_run("smoke")
        history.add_results(first, [_row("gpu01", 10.0, busbw=40.0), _row("gpu02", 10.0, busbw=41.0)])
        history.add_results(audit, [_row("gpu01", 30.0, busbw=99.0)])  # not a smoke: never a bandwidth
        history.add_results(second, [_row("gpu01", 20.0, busbw=45.5), _row("gpu02", 20.0)])  # gpu02: none
        assert history.last_busbw() == {"gpu01": 45.5, "gpu02": 41.0}


def test_pruning_drops_only_old_watch_cycles_in_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from provisioner.history import store

    monkeypatch.setattr(store, "PRUNE_BATCH", 7)  # several batches, the last one short
    with History(tmp_path / "h.sqlite") as history:
        watch, audit = history.start_run("watch"), history.start_run("audit")
        history.add_results(watch, [_row(f"gpu{i % 4}", float(i)) for i in range(30)],
                            [{"host": "gpu0", "at": float(i), "kind": "drift_new", "subject": "s", "detail": "d"}
                             for i in range(0, 30, 3)])
        history.add_results(audit, [_row("gpu0", 1.0)])
        batches: list[int] = []
        assert history.prune(before=20.0, on_batch=batches.append) == 20 + 7  # results at 0..19, changes at 0..18
        assert batches == [7, 14, 27]  # after each full batch: results 7, 14 (then 6), changes 7 (then 0)
        assert sorted(r.at for r in history.results() if r.command == "watch") == [float(i) for i in range(20, 30)]
        assert [r.at for r in history.results() if r.command == "audit"] == [1.0]
        assert [e.at for e in history.events()] == [21.0, 24.0, 27.0]
        assert [r.command for r in history.runs()] == ["watch", "audit"]  # the runs themselves stay
        assert history.prune(before=20.0) == 0


def test_watch_prunes_at_start_and_then_at_most_hourly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace
    from typing import cast

    from provisioner.history import store
    from provisioner.load.hostplans import HostPlan
    from provisioner.run.session import Sessions
    from provisioner.watch.loop import PRUNE_EVERY, Watcher

    plan = cast(HostPlan, SimpleNamespace(host=SimpleNamespace(name="gpu01")))
    keep = 600.0
    with History(tmp_path / "h.sqlite") as history:
        run, smoke = history.start_run("watch"), history.start_run("smoke")
        history.add_results(run, [_row("gpu01", at) for at in (0.0, 5000.0, 9000.0)])
        history.add_results(smoke, [_row("gpu01", 0.0, busbw=33.0)])
        watcher = Watcher([plan], cast(Sessions, None), interval=1.0, on_changes=lambda changes: None,
                          history=history, run=run, keep=keep)
        watcher.seed_busbw()
        assert watcher.state.get("gpu01").busbw == 33.0
        monkeypatch.setattr(store, "PRUNE_BATCH", 1)
        progress: list[int] = []
        watcher.prune(now=5500.0, on_batch=progress.append)
        assert [(r.command, r.at) for r in history.results()] == [("smoke", 0.0), ("watch", 5000.0), ("watch", 9000.0)]
        assert progress == [1]  # the command prints each full batch's count (watch_report.pruning)
        watcher.prune(now=5500.0 + PRUNE_EVERY / 2)  # within the hour since the last: nothing goes
        assert len(history.results()) == 3
        watcher.prune(now=5500.0 + PRUNE_EVERY + 1)
        assert [(r.command, r.at) for r in history.results()] == [("smoke", 0.0), ("watch", 9000.0)]
        unpruned = Watcher([plan], cast(Sessions, None), interval=1.0, on_changes=lambda changes: None,
                           history=history, run=run)  # keep 0: every cycle stays
        unpruned.prune(now=10 * PRUNE_EVERY)
        assert len(history.results()) == 2


def _two_host_watcher() -> object:
    from types import SimpleNamespace
    from typing import cast

    from provisioner.load.hostplans import HostPlan
    from provisioner.run.session import Options, Sessions
    from provisioner.watch.loop import Watcher

    plans = [cast(HostPlan, SimpleNamespace(host=SimpleNamespace(name=n))) for n in ("gpu01", "gpu02")]
    sessions = cast(Sessions, SimpleNamespace(options=Options(connect_timeout=5, command_timeout=5)))
    return Watcher(plans, sessions, interval=1.0, on_changes=lambda changes: None)


@pytest.mark.parametrize("forks", [2, 1])
def test_the_first_rounds_fleet_checks_wait_for_every_hosts_first_reading(forks: int) -> None:
    """A host judged against only the hosts read before it would say "ok (compared with no other host)"
    in its first cycle and "drift" in its second: a change that never happened. The wait happens outside
    the fork slots, so with fewer forks than hosts the later hosts still get their turn."""
    import threading

    watcher: Any = _two_host_watcher()
    seen: dict[str, list[str]] = {}

    def first_cycle(host: str, delay: float) -> None:
        time.sleep(delay)
        with watcher._lock:
            watcher._latest[host] = f"reading of {host}"
        seen[host] = sorted(watcher._wait_first_round(host, forks=forks))

    threads = [threading.Thread(target=first_cycle, args=("gpu01", 0.0)),
               threading.Thread(target=first_cycle, args=("gpu02", 0.3))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert seen == {"gpu01": ["gpu01", "gpu02"], "gpu02": ["gpu01", "gpu02"]}
    # Later cycles never wait: every host has had its first.
    started = time.monotonic()
    assert sorted(watcher._wait_first_round("gpu01", forks=forks)) == ["gpu01", "gpu02"]
    assert time.monotonic() - started < 0.2


def test_an_empty_history_says_why_it_is_empty(capsys: pytest.CaptureFixture[str]) -> None:
    from provisioner.output import watch_report

    watch_report.history([], [], False, host="gpu99", known=["gpu01", "gpu02"])
    watch_report.history([], [], False, host="gpu01", since=7200, known=["gpu01"])
    watch_report.history([], [], False, since=5400)
    watch_report.history([], [], False)
    assert capsys.readouterr().out.splitlines() == [
        "nothing recorded for host gpu99 (hosts recorded: gpu01, gpu02)",
        "nothing recorded for gpu01 in the last 2h",
        "nothing recorded in the last 90m",
        "nothing recorded",
    ]


def test_hosts_are_every_host_with_a_result_in_order_found_through_the_index(tmp_path: Path) -> None:
    names = ["gpu10", "gpu2", "GPU1", "gpu1", "gpu-a", "gpu\u00e9"]
    with History(tmp_path / "h.sqlite") as history:
        assert history.hosts() == []
        run = history.start_run("watch")
        history.add_results(run, [_row(name, float(at)) for at in range(3) for name in names])
        assert history.hosts() == sorted(set(names))  # what SELECT DISTINCT ... ORDER BY gave
    with sqlite3.connect(tmp_path / "h.sqlite") as db:
        plan = " ".join(row[-1] for row in db.execute(
            "EXPLAIN QUERY PLAN SELECT (SELECT MIN(host) FROM results WHERE host > 'gpu1')"))
    assert "USING COVERING INDEX results_host_at" in plan, plan
