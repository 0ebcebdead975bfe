"""`fabnet report --html`: one self-contained page from the run history.

Drift by host and kind (each host's latest result), the pairwise bandwidth of the last smoke test that
ran pairs, the last smoke's bus bandwidth by message size against the fleet's median over the window, and
a timeline per host of drift, counters, link flaps and hosts down. All text from the history is escaped
with html.escape (svg.py does the same for the charts); the page loads nothing from anywhere.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from html import escape

from provisioner.history.store import Event, Result, Run
from provisioner.output import svg

COLORS = {"drift_new": "#d62728", "drift_changed": "#ff7f0e", "drift_gone": "#2ca02c", "counter_rose": "#e377c2",
          "counter_unreadable": "#f7b6d2", "counter_readable": "#98df8a", "device_gone": "#7f0000",
          "device_back": "#006d2c", "device_new": "#238b45", "port_gone": "#b15928", "port_back": "#41ab5d",
          "port_new": "#74c476", "counter_gone": "#c51b7d",
          "counter_back": "#a1d99b", "counters_reset": "#c7e9c0",
          "link_flap": "#9467bd", "link_reset": "#6a3d9a", "link_gone": "#3f007d", "link_moved": "#bcbddc",
          "link_back": "#9e9ac8", "link_down": "#8c564b",
          "link_up": "#7fbf7f",
          "host_down": "#111111", "host_back": "#17becf", "reconnected": "#bcbd22"}
STYLE = """
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1100px; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 32px; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 13px; } td, th { border: 1px solid #ddd; padding: 3px 8px; }
th { background: #f4f4f4; text-align: left; } .muted { color: #777; font-size: 13px; }
"""


def _stamp(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def _size(n: float) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g}{unit}"
    return f"{n:g}"


def _latest(results: Sequence[Result]) -> dict[str, Result]:
    latest: dict[str, Result] = {}
    for r in results:
        if r.command != "smoke":
            latest[r.host] = r
    return latest


def drift_section(results: Sequence[Result]) -> str:
    latest = _latest(results)
    hosts = sorted(latest)
    values: dict[tuple[str, str], float] = {}
    for host, r in latest.items():
        for item in r.drift:
            key = (host, str(item.get("kind")))
            values[key] = values.get(key, 0) + 1
    kinds = sorted({kind for _, kind in values})
    if not hosts:
        return "<p>No audit, apply or watch results in this window.</p>"
    rows = "".join(
        f"<tr><td>{escape(h)}</td><td>{escape(latest[h].verdict)}</td><td>{escape(latest[h].command)}</td>"
        f"<td>{_stamp(latest[h].at)}</td><td>{len(latest[h].drift)}</td></tr>" for h in hosts)
    table = ("<table><tr><th>host</th><th>verdict</th><th>by</th><th>at</th><th>drift items</th></tr>"
             f"{rows}</table>")
    chart = svg.heatmap(hosts, kinds, values, floor=0) if kinds else "<p>No drift on any host.</p>"
    return chart + table


def last_pairs(runs: Sequence[Run]) -> Run | None:
    return next((r for r in reversed(runs) if r.command == "smoke" and r.detail.get("pairs")), None)


def pairs_section(runs: Sequence[Run]) -> str:
    run = last_pairs(runs)
    if run is None:
        return "<p>No smoke test in this window ran pairs (pairs run when the fleet is below its threshold).</p>"
    values: dict[tuple[str, str], float] = {}
    for pair in run.detail["pairs"]:
        hosts = [str(h) for h in pair.get("hosts", [])]
        busbw = pair.get("busbw")
        if len(hosts) == 2:  # a pair that failed shows as failed, not as missing
            value = float(busbw) if isinstance(busbw, int | float) and pair.get("ok", True) else math.nan
            before = values.get((hosts[0], hosts[1]), math.nan)
            if not math.isnan(before):  # a pair measured again (a suspect confirmed) shows its best, as judged
                value = before if math.isnan(value) else max(before, value)
            values[(hosts[0], hosts[1])] = values[(hosts[1], hosts[0])] = value
    names = sorted({h for pair in values for h in pair})
    chart = svg.heatmap(names, names, values, unit=" GB/s", higher_is_better=True, key="data-pair")
    return (f'<p class="muted">Smoke run {run.id} at {_stamp(run.started)}: bus bandwidth of each pair, GB/s '
            "(- : not paired).</p>" + chart)


def busbw_section(runs: Sequence[Run]) -> str:
    smokes = [r for r in runs if r.command == "smoke" and r.detail.get("results")]
    if not smokes:
        return "<p>No smoke test with results in this window.</p>"
    by_size: dict[float, list[float]] = {}
    for run in smokes:
        for row in run.detail["results"]:
            if isinstance(row.get("size"), int | float) and isinstance(row.get("busbw"), int | float):
                by_size.setdefault(float(row["size"]), []).append(float(row["busbw"]))
    last = smokes[-1]
    mine = [(float(r["size"]), float(r["busbw"])) for r in last.detail["results"]
            if isinstance(r.get("size"), int | float) and isinstance(r.get("busbw"), int | float)]
    median = [(size, statistics.median(values)) for size, values in sorted(by_size.items())]
    chart = svg.lines([svg.Series(f"last smoke (run {last.id})", mine, "#1f77b4"),
                       svg.Series(f"median of {len(smokes)} smoke runs", median, "#999999", dashed=True)],
                      x_label="message size", y_label="busbw GB/s", log_x=True, x_text=_size)
    return chart


def timeline_section(events: Sequence[Event], results: Sequence[Result], start: float, end: float) -> str:
    hosts = sorted({e.host for e in events} | {r.host for r in results})
    marks = [svg.Mark(e.host, e.at, COLORS[e.kind], f"{_stamp(e.at)} {e.kind} {e.subject} {e.detail}".strip())
             for e in events if e.kind in COLORS]
    chart = svg.timeline(hosts, marks, start, end, [(k, c) for k, c in COLORS.items()],
                         stamp=f"{_stamp(start)} to {_stamp(end)}")
    listed = [e for e in events if e.kind != "watching"][-200:]
    rows = "".join(f"<tr><td>{_stamp(e.at)}</td><td>{escape(e.host)}</td><td>{escape(e.kind)}</td>"
                   f"<td>{escape(e.subject)}</td><td>{escape(e.detail)}</td></tr>" for e in listed)
    table = ("<table><tr><th>at</th><th>host</th><th>change</th><th>what</th><th>detail</th></tr>"
             f"{rows}</table>") if rows else "<p>No changes recorded in this window.</p>"
    return chart + table


def _first(events: Sequence[Event], results: Sequence[Result], start: float, end: float) -> float:
    """Where the timeline starts: at the first record of the window, so a short history is not a dot at
    the right edge of a week."""
    times = [e.at for e in events] + [r.at for r in results]
    if not times:
        return start
    first = max(start, min(times))
    return max(start, first - 0.02 * (end - first))


def render(runs: Sequence[Run], results: Sequence[Result], events: Sequence[Event], *, start: float,
           end: float, source: str) -> str:
    counts = {command: sum(1 for r in runs if r.command == command) for command in ("audit", "apply", "smoke", "watch")}
    summary = ", ".join(f"{n} {command}" for command, n in counts.items() if n) or "no runs"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width\"><title>fabnet report</title>"
        f"<style>{STYLE}</style></head><body>"
        f"<h1>fabnet report</h1><p class=\"muted\">{_stamp(start)} to {_stamp(end)} from {escape(source)}: "
        f"{escape(summary)}.</p>"
        f"<h2>Drift by host and kind</h2>{drift_section(results)}"
        f"<h2>Pairwise bandwidth (last smoke with pairs)</h2>{pairs_section(runs)}"
        f"<h2>Bus bandwidth by message size</h2>{busbw_section(runs)}"
        f"<h2>Timeline</h2>{timeline_section(events, results, _first(events, results, start, end), end)}"
        "</body></html>\n")
