"""Small inline SVG charts for the HTML report: a heatmap, a line chart and a timeline of marks.

Every text that reaches the SVG (labels, tooltips) is escaped here with html.escape; callers pass plain
strings. No script, no external asset: the page opens the same from a file, a mail or a ticket.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

FONT = 'font-family="sans-serif" font-size="11"'


def _color(fraction: float, low: tuple[int, int, int], high: tuple[int, int, int]) -> str:
    f = min(1.0, max(0.0, fraction))
    r, g, b = (round(a + (z - a) * f) for a, z in zip(low, high, strict=True))
    return f"rgb({r},{g},{b})"


def heatmap(rows: Sequence[str], columns: Sequence[str], values: dict[tuple[str, str], float], *,
            unit: str = "", higher_is_better: bool = False, empty: str = "-", floor: float | None = None,
            key: str = "data-cell") -> str:
    """A grid of coloured cells with their values; red is bad (high, or low where higher is better), the
    scale running from `floor` (else the lowest value) to the highest. NaN is a failed cell. Each cell
    with a value carries `key`="row|column", so a page can be checked (or scripted) cell by cell."""
    if not rows or not columns:
        return "<p>nothing to show</p>"
    longest = 6 * max(len(c) for c in columns)
    cell, left, top = 46, max(60, 7 * max(len(r) for r in rows)), max(40, longest)
    width, height = left + cell * len(columns) + 10 + longest, top + cell * len(rows) + 10
    shown = [v for v in values.values() if not math.isnan(v)]
    low, high = (min(shown), max(shown)) if shown else (0.0, 1.0)
    if floor is not None:
        low = min(floor, low)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" {FONT}>']
    for j, column in enumerate(columns):
        x = left + j * cell + cell / 2
        parts.append(f'<text x="{x}" y="{top - 6}" transform="rotate(-35 {x} {top - 6})">{escape(column)}</text>')
    for i, row in enumerate(rows):
        y = top + i * cell
        parts.append(f'<text x="{left - 6}" y="{y + cell / 2 + 4}" text-anchor="end">{escape(row)}</text>')
        for j, column in enumerate(columns):
            x = left + j * cell
            value = values.get((row, column))
            if value is None:
                fill, label = "#f2f2f2", empty
            elif math.isnan(value):
                fill, label = "#9e3a3a", "failed"
            else:
                spread = (value - low) / (high - low) if high > low else (0.0 if value == 0 else 1.0)
                bad = 1 - spread if higher_is_better else spread
                fill = _color(bad, (220, 240, 220), (230, 80, 70))
                label = f"{value:.3g}"
            tip = f"{row} / {column}: {label}{unit if value is not None and not math.isnan(value) else ''}"
            mark = "" if value is None else f' {key}="{escape(f"{row}|{column}")}"'
            parts.append(f'<rect x="{x}" y="{y}" width="{cell - 2}" height="{cell - 2}" fill="{fill}"{mark}>'
                         f"<title>{escape(tip)}</title></rect>")
            ink = ' fill="#fff"' if value is not None and math.isnan(value) else ""
            parts.append(f'<text x="{x + cell / 2 - 1}" y="{y + cell / 2 + 4}" text-anchor="middle"{ink}>'
                         f"{escape(label)}</text>")
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class Series:
    name: str
    points: Sequence[tuple[float, float]]
    color: str
    dashed: bool = False


def lines(series: Sequence[Series], *, x_label: str, y_label: str, log_x: bool = False,
          x_text: Callable[[float], str] = "{:.0f}".format) -> str:
    """A line chart; x on a log2 axis where asked (message sizes)."""
    points = [p for s in series for p in s.points]
    if not points:
        return "<p>nothing to show</p>"
    right = 50 + 7 * max(len(s.name) for s in series)
    width, height, left, bottom, top = 500 + right, 300, 60, 40, 20

    def fx(x: float) -> float:
        return math.log2(x) if log_x and x > 0 else x

    xs = [fx(x) for x, _ in points]
    x0, x1 = min(xs), max(xs)
    y1 = max(y for _, y in points) * 1.1 or 1.0
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (fx(x) - x0) / ((x1 - x0) or 1) * plot_w

    def py(y: float) -> float:
        return top + plot_h - y / y1 * plot_h

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" {FONT}>',
             f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#333"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#333"/>',
             f'<text x="{left + plot_w / 2}" y="{height - 6}" text-anchor="middle">{escape(x_label)}</text>',
             f'<text x="14" y="{top + plot_h / 2}" transform="rotate(-90 14 {top + plot_h / 2})" '
             f'text-anchor="middle">{escape(y_label)}</text>']
    for k in range(5):
        value = y1 * k / 4
        parts.append(f'<text x="{left - 4}" y="{py(value) + 4}" text-anchor="end">{value:.3g}</text>')
    for x in sorted({x for x, _ in points}):
        parts.append(f'<text x="{px(x)}" y="{top + plot_h + 14}" text-anchor="middle">'
                     f"{escape(x_text(x))}</text>")
    for n, s in enumerate(series):
        ordered = sorted(s.points)
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in ordered)
        dash = ' stroke-dasharray="5,4"' if s.dashed else ""
        parts.append(f'<polyline points="{path}" fill="none" stroke="{s.color}" stroke-width="2"{dash}/>')
        for x, y in ordered:
            parts.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{s.color}">'
                         f"<title>{escape(f'{s.name}: {x_text(x)} -> {y:.4g}')}</title></circle>")
        ly = top + 14 + 16 * n
        parts.append(f'<line x1="{width - right + 10}" y1="{ly - 4}" x2="{width - right + 30}" y2="{ly - 4}" '
                     f'stroke="{s.color}" stroke-width="2"{dash}/>')
        parts.append(f'<text x="{width - right + 34}" y="{ly}">{escape(s.name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class Mark:
    row: str
    at: float
    color: str
    tip: str


def timeline(rows: Sequence[str], marks: Sequence[Mark], start: float, end: float,
             legend: Sequence[tuple[str, str]], stamp: str = "") -> str:
    """One lane per row (host), a mark per event at its time; hover for what it was."""
    if not rows:
        return "<p>nothing to show</p>"
    lane, left = 26, max(70, 7 * max(len(r) for r in rows))
    width = max(900, left + sum(20 + 7 * len(label) for label, _ in legend) + 20)
    plot_w = width - left - 20
    height = 30 + lane * len(rows) + 40
    span = (end - start) or 1.0
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" {FONT}>']
    for i, row in enumerate(rows):
        y = 20 + i * lane
        parts.append(f'<text x="{left - 6}" y="{y + 4}" text-anchor="end">{escape(row)}</text>')
        parts.append(f'<line x1="{left}" y1="{y}" x2="{left + plot_w}" y2="{y}" stroke="#ddd"/>')
    index = {row: i for i, row in enumerate(rows)}
    for mark in marks:
        if mark.row not in index:
            continue
        x = left + (mark.at - start) / span * plot_w
        y = 20 + index[mark.row] * lane
        parts.append(f'<circle cx="{x:.1f}" cy="{y}" r="5" fill="{mark.color}" fill-opacity="0.8">'
                     f"<title>{escape(mark.tip)}</title></circle>")
    base = 20 + lane * len(rows)
    if stamp:
        parts.append(f'<text x="{left}" y="{base}">{escape(stamp)}</text>')
    x = left
    for label, color in legend:
        parts.append(f'<circle cx="{x + 5}" cy="{base + 16}" r="5" fill="{color}"/>'
                     f'<text x="{x + 14}" y="{base + 20}">{escape(label)}</text>')
        x += 20 + 7 * len(label)
    parts.append("</svg>")
    return "".join(parts)
