"""What `fabnet watch`, `fabnet history` and `fabnet runs` print: one line per change, tables of the past.

Every string from a host was cleaned when it was recorded; it is cleaned again here (idempotent), since a
history file may come from elsewhere.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from provisioner.output.core import clean, clean_data, count, one_line
from provisioner.output.report import info, warn
from provisioner.output.stdout import print_json, writing

LABELS = {
    "watching": "watching", "drift_new": "DRIFT", "drift_changed": "DRIFT CHANGED", "drift_gone": "drift gone",
    "counter_rose": "COUNTER", "counter_unreadable": "COUNTER UNREADABLE",
    "counter_readable": "counter readable", "device_gone": "DEVICE GONE", "device_back": "device back",
    "device_new": "device new", "port_gone": "PORT GONE", "port_back": "port back", "port_new": "port new",
    "counter_gone": "COUNTER GONE", "counter_back": "counter back", "counters_reset": "counters reset",
    "link_flap": "LINK FLAP", "link_reset": "LINK RESET", "link_gone": "LINK GONE",
    "link_moved": "link moved", "link_back": "link back",
    "link_down": "LINK DOWN", "link_up": "link up", "host_down": "HOST DOWN", "host_back": "host back",
    "reconnected": "reconnected",
}


def stamp(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(at))


def change_line(change: Any) -> str:
    subject = f" {change.subject}:" if change.subject else ""
    return f"{stamp(change.at)} {change.host} {LABELS.get(change.kind, change.kind)}{subject} {change.detail}"


def changes(found: Sequence[Any], as_json: bool) -> None:
    """Changes as they are found: lines for a person, or one JSON object a line (--json) for a program."""
    if as_json:
        with writing():
            for change in found:
                sys.stdout.write(json.dumps(clean_data(change.to_json()), ensure_ascii=True) + "\n")
        return
    for change in found:
        info(change_line(change))


def drained(actions: Sequence[Any], error: str | None) -> None:
    """What --drain-failed did, on stderr as audit's scheduler lines (standard output stays the changes)."""
    for action in actions:  # a reason may span lines: shown whole, on this one
        warn(one_line(f"slurm: {action.action} {action.host}: {action.detail}"))
    if error:
        warn(one_line(f"slurm: {error} (tried again at the next failing cycle)"))


def pruning(gone: int) -> None:
    """Progress of a long first prune (`watch --keep`), on stderr: standard output stays the changes."""
    print(f"history: {gone:,} watch rows older than --keep deleted so far", file=sys.stderr, flush=True)


def started(hosts: int, interval: float, history: str | None, prom: str | None) -> None:
    where = f"; history {history}" if history else ""
    served = f"; metrics on {prom}" if prom else ""
    info(f"watching {count(hosts, 'host')} every {interval:g} s{where}{served} (Ctrl-C or SIGTERM stops)")


def stopped(cycles: int, why: str) -> None:
    info(f"watch stopped ({why}) after {cycles} host cycles")


def history(events: Sequence[Any], results: Sequence[Any], as_json: bool, *, host: str | None = None,
            since: float | None = None, known: Sequence[str] | None = None) -> None:
    """What changed when: recorded changes, and each run's verdict where it differs from the host's last.
    With nothing to show, says why: `host` never recorded (`known`: the hosts that are), or nothing in
    the last `since` seconds."""
    if as_json:
        print_json({"schema": "fabnet/history/v1", "changes": [e.to_json() for e in events],
                    "results": [r.to_json() for r in results]})
        return
    lines: list[tuple[float, str]] = []
    for e in events:
        subject = f" {e.subject}:" if e.subject else ""
        lines.append((e.at, f"{stamp(e.at)} {e.host} {LABELS.get(e.kind, e.kind)}{subject} {e.detail}"))
    last: dict[str, str] = {}
    for r in results:
        if last.get(r.host) != r.verdict:
            note = f" ({len(r.drift)} drift items)" if r.drift else ""
            busbw = f" busbw {r.busbw:.3f} GB/s" if r.busbw is not None else ""
            lines.append((r.at, f"{stamp(r.at)} {r.host} {r.command}: {r.verdict}{note}{busbw}"))
            last[r.host] = r.verdict
    if not lines:
        info(_nothing(host, since, known))
    for _, line in sorted(lines, key=lambda pair: pair[0]):
        info(clean(line))


def _span(seconds: float) -> str:
    """60 -> "1m", 5400 -> "90m", 172800 -> "2d": as --since was probably written."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _nothing(host: str | None, since: float | None, known: Sequence[str] | None) -> str:
    if host is not None and known is not None and host not in known:
        shown = ", ".join(known[:10]) + (f" and {len(known) - 10} more" if len(known) > 10 else "")
        return f"nothing recorded for host {host}" + (f" (hosts recorded: {shown})" if known else "")
    window = f" in the last {_span(since)}" if since is not None else ""
    return f"nothing recorded{' for ' + host if host else ''}{window}"


def runs(found: Sequence[Any], as_json: bool) -> None:
    if as_json:
        print_json({"schema": "fabnet/runs/v1", "runs": [r.to_json() for r in found]})
        return
    if not found:
        info("no runs recorded")
    for r in found:
        took = f"{r.finished - r.started:.1f} s" if r.finished is not None else "unfinished"
        info(f"{r.id:>5}  {stamp(r.started)}  {r.command:<6} {r.verdict or '-':<16} {took:>10}  {r.inventory or ''}")
