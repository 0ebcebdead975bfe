"""What audit, apply and smoke keep in the history: their JSON documents turned into per-host rows.

Strings are cleaned as audit's JSON prints them (output.core.clean), so the history holds exactly what a
report would show; secret files are already fingerprints there. A history that cannot be written never
fails the command that recorded into it: the caller gets the reason to show as a warning.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from provisioner.history.store import History, HistoryError, default_path
from provisioner.output.core import clean
from provisioner.watch.drift import DriftItem, drift_diff, drift_items

ENV = "FABNET_HISTORY"  # a history file for every command; "off" keeps none
# Words an operator writes to switch a setting off or on: never taken as a file name in the working folder.
_OFF = frozenset({"off", "0", "false", "no", "none", "disabled"})
_ON = frozenset({"on", "1", "true", "yes", "default"})


def history_path(given: Path | None = None) -> Path | None:
    if given is not None:
        return given
    value = os.environ.get(ENV, "").strip()
    if value.lower() in _OFF:
        return None
    if not value or value.lower() in _ON:
        return default_path()
    return Path(value)


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _items(entries: Sequence[Mapping[str, Any]]) -> dict[str, DriftItem]:
    return {item.key: item for item in (DriftItem(**entry) for entry in entries)}


def host_row(host_doc: Mapping[str, Any], at: float, counters: Mapping[str, float] | None = None,
             busbw: float | None = None, seconds: float | None = None) -> dict[str, Any]:
    """One host of audit's JSON (or apply's after its re-check) as a history row; `seconds`: how long a
    watch cycle that started at `at` took."""
    # Only what the row keeps is cleaned: a watch writes a row per host per cycle, and the checks that are
    # ok (most of them) never reach it.
    return {"host": _clean(host_doc["name"]), "at": at, "verdict": _clean(host_doc.get("status")) or "unknown",
            "drift": [_clean(item.to_json()) for item in drift_items(host_doc).values()],
            "counters": dict(counters or {}), "busbw": busbw, "error": _clean(host_doc.get("error")),
            "seconds": seconds}


def audit_rows(doc: Mapping[str, Any], at: float) -> list[dict[str, Any]]:
    return [host_row(host, at) for host in doc.get("hosts", [])]


def apply_rows(doc: Mapping[str, Any], at: float) -> list[dict[str, Any]]:
    """Apply's hosts as they were after its re-check (before it, where nothing was re-checked)."""
    rows = []
    for host in doc.get("hosts", []):
        resources = [{**r, "checks": r.get("after") or r.get("before") or []} for r in host.get("resources", [])]
        rows.append(host_row({**host, "resources": resources}, at))
    return rows


def smoke_rows(doc: Mapping[str, Any], at: float) -> list[dict[str, Any]]:
    busbw, verdict = doc.get("avg_busbw"), str(doc.get("verdict"))
    return [{"host": clean(str(h["name"])), "at": at, "verdict": "failed" if h.get("failed") else verdict,
             "drift": [], "counters": {}, "busbw": busbw, "error": _clean(h.get("reason"))}
            for h in doc.get("hosts", [])]


def smoke_detail(doc: Mapping[str, Any]) -> dict[str, Any]:
    localisation = doc.get("localisation") or {}
    detail: dict[str, Any] = _clean({"verdict": doc.get("verdict"), "avg_busbw": doc.get("avg_busbw"),
                                     "results": doc.get("results", []),
                   # The pairs a localisation ran, else those measured after the sweep (every run of
                   # three hosts or more): either is the report's pairwise matrix.
                   "pairs": localisation.get("pairs") or doc.get("pair_figures", []), "reason": doc.get("reason")})
    return detail


def record(history: History, command: str, rows: Sequence[Mapping[str, Any]], *, verdict: str,
           inventory: str | None = None, playbook: str | None = None, detail: Mapping[str, Any] | None = None,
           at: float | None = None, seconds: float = 0.0) -> int:
    """One finished run (at `at`, after `seconds`): its rows, and the drift that changed on each host since
    its previous result."""
    now = time.time() if at is None else at
    changes = []
    for row in rows if command != "smoke" else ():  # smoke checks no drift: it says nothing of it
        previous = history.latest(str(row["host"]))
        if previous is not None and row["verdict"] != "unreachable" and previous.verdict != "unreachable":
            changes += [c.to_json() for c in drift_diff(str(row["host"]), now, _items(previous.drift),
                                                         _items(row["drift"]))]
    run = history.start_run(command, inventory, playbook, at=now - seconds)
    history.add_results(run, rows, changes)
    history.finish_run(run, verdict, detail, at=now)
    return run


def verdict_of(command: str, doc: Mapping[str, Any]) -> str:
    summary = doc.get("summary") or {}
    if command == "audit":
        return ("failed" if summary.get("unreachable") or summary.get("failed")
                else "drifted" if summary.get("drifted") else "in_sync")
    if command == "apply":
        return ("failed" if summary.get("failed") or summary.get("unreachable")
                else "changed" if summary.get("changed") else "ok")
    return str(doc.get("verdict"))


def record_safely(command: str, doc: Mapping[str, Any], path: Path | None = None) -> str | None:
    """Record a finished audit, apply or smoke document; None, or why the history was not written."""
    target = history_path(path)
    if target is None:
        return None
    now = time.time()
    verdict = verdict_of(command, doc)
    rows = {"audit": audit_rows, "apply": apply_rows, "smoke": smoke_rows}[command](doc, now)
    detail = smoke_detail(doc) if command == "smoke" else {}
    try:
        with History(target) as history:
            record(history, command, rows, verdict=verdict, inventory=_str(doc.get("inventory")),
                   playbook=_str(doc.get("playbook")), detail=detail, at=now, seconds=_seconds(doc))
    except HistoryError as exc:
        return f"history not recorded: {exc}"
    return None


def _str(value: object) -> str | None:
    return None if value is None else clean(str(value))


def _seconds(doc: Mapping[str, Any]) -> float:
    value = doc.get("seconds")
    return float(value) if isinstance(value, int | float) and value >= 0 else 0.0
