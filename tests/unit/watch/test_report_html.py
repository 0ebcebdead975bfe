"""The HTML page from the history: self-contained, every host-derived string escaped, the sections filled
from what the history holds (drift, pairs, busbw by size, timeline)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from provisioner.history.store import Event, Result, Run
from provisioner.output import html_report, svg

EVIL = '<script>alert("x")</script>'


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += attrs


def _page() -> str:
    runs = [Run(1, "smoke", 10.0, 20.0, "inv", None, "pass", {
        "results": [{"size": 1 << 20, "busbw": 5.0}, {"size": 1 << 26, "busbw": 11.0}],
        "pairs": [{"hosts": [EVIL, "gpu02"], "busbw": 3.5, "ok": True}, {"hosts": ["gpu01", "gpu03"], "busbw": None,
                                                                           "ok": False}]}),
            Run(2, "audit", 30.0, 31.0, "inv", "pb", "drifted", {})]
    results = [Result(2, "audit", EVIL, 30.0, "drifted", [{"kind": "sysctl", "target": EVIL, "attribute": "value"}],
                      {}, None, None),
               Result(2, "audit", "gpu02", 30.0, "in_sync", [], {}, None, None)]
    events = [Event(2, EVIL, 30.0, "drift_new", f"sysctl {EVIL}: value", EVIL, None, None),
              Event(2, "gpu02", 40.0, "counter_rose", "mlx5_0/1 symbol_error", "+40 in 2 s (20/s)", 40, 20.0)]
    return html_report.render(runs, results, events, start=0.0, end=100.0, source="/tmp/h.sqlite")


def test_host_text_is_escaped_everywhere() -> None:
    page = _page()
    assert EVIL not in page and "<script" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    parsed = _Tags()
    parsed.feed(page)
    assert "script" not in parsed.tags


def test_the_page_is_self_contained() -> None:
    page = _page()
    parsed = _Tags()
    parsed.feed(page)
    assert not [value for name, value in parsed.attrs if name in ("src", "href") and value]
    assert not re.search(r"url\(|@import|https?://(?!www\.w3\.org/2000/svg)", page)
    assert page.count("<svg") == 4  # drift, pairs, busbw by size, timeline


def test_sections_show_the_historys_data() -> None:
    page = _page()
    assert ">3.5<" in page and ">failed<" in page  # the pair matrix, a failed pair named as such
    assert ">1M<" in page and ">64M<" in page  # busbw by size, sizes as people write them
    assert "median of 1 smoke runs" in page
    assert "+40 in 2 s (20/s)" in page  # the timeline's table
    assert "No smoke" not in page


def test_empty_history_says_so() -> None:
    page = html_report.render([], [], [], start=0.0, end=1.0, source="h")
    assert "No audit, apply or watch results" in page and "No smoke test" in page
    assert "No changes recorded" in page


def test_heatmap_colours_bad_cells_red() -> None:
    chart = svg.heatmap(["a"], ["x", "y"], {("a", "x"): 0.0, ("a", "y"): 4.0}, floor=0)
    fills = re.findall(r'fill="(rgb\([^)]*\))"', chart)
    assert fills == ["rgb(220,240,220)", "rgb(230,80,70)"]


def test_a_pair_measured_again_shows_its_best_as_the_verdict_used_it() -> None:
    pairs = [{"hosts": ["gpu04", "gpu01"], "busbw": 0.7, "ok": True, "round": 1},
             {"hosts": ["gpu01", "gpu04"], "busbw": 0.3, "ok": True, "round": 3, "role": "suspect"},
             {"hosts": ["gpu04", "gpu01"], "busbw": None, "ok": False, "round": 3, "role": "suspect"},
             {"hosts": ["gpu02", "gpu03"], "busbw": None, "ok": False, "round": 1},
             {"hosts": ["gpu02", "gpu03"], "busbw": 0.2, "ok": True, "round": 3, "role": "control"}]
    page = html_report.render([Run(1, "smoke", 10.0, 20.0, "inv", None, "pass", {"pairs": pairs})], [], [],
                              start=0.0, end=100.0, source="h")
    assert ">0.7<" in page and ">0.3<" not in page
    assert ">0.2<" in page and ">failed<" not in page
