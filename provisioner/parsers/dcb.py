"""Parse iproute2 `dcb` reports (`dcb [-N] app|pfc|ets show dev IF [KEYWORD...]`), one or several run in a row.

`dcb` prints `keyword value` pairs (`pfc-cap 8`, `willing off`) and mapping rows (`prio-pfc 0:off ... 7:on`,
`tc-tsa 0:ets ...`, `dscp-prio 0:0 CS3:3`). Releases and callers lay them out differently: one row per line,
several on one line (`pfc-cap 8 prio-pfc 0:off ... delay 0`), or a row wrapped over lines. So the text is
read as a stream of words, not as fixed lines: a keyword starts a pair or a row, `KEY:VALUE` words belong
to the row before them. DSCP values come as numbers (`-N`) or as the names iproute2's `rt_dsfield` gives
them (`CS3`, `AF41`, `EF`, ...). Keywords fabnet does not know are kept in `other`. A row of the per-priority
or per-class tables with fewer than eight entries was cut off (`complete` False). `dcb dcbx show` prints
bare flags (`host ieee`) and `dcb apptrust show` an `order: port pcp ...` line; both are kept.

`dcb -j` prints one JSON object per command (`{"pfc_cap":8,"prio_pfc":[false,...]}`; the app table as
`[[DSCP,PRIO],...]`, since iproute2 6.5 with a `" "` string in each pair). An object is read back as the
words the text form prints, so both forms pass the same checks; an object cut short is `missing`.

`qos_of(report)` turns a report of the three objects into the `mlnx_qos` facts, read the way `mlnx_qos`
reads the same kernel state: trust is `dscp` exactly when the DSCP app table has entries.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from pydantic import Field

from provisioner.errors import ParseError
from provisioner.parsers._shell import is_shell
from provisioner.parsers._text import Collector, Line, Parsed, content_lines, fail
from provisioner.parsers.mlnx_qos import MlnxQos, QosTrafficClass

KIND = "dcb"

# DSCP names: those of iproute2's rt_dsfield file (DS field = DSCP << 2), plus the RFC names CS0, VA and LE.
DSCP_NAMES: dict[str, int] = {
    "default": 0, "CS0": 0, "CS1": 8, "CS2": 16, "CS3": 24, "CS4": 32, "CS5": 40, "CS6": 48, "CS7": 56,
    "AF11": 10, "AF12": 12, "AF13": 14, "AF21": 18, "AF22": 20, "AF23": 22, "AF31": 26, "AF32": 28,
    "AF33": 30, "AF41": 34, "AF42": 36, "AF43": 38, "EF": 46, "VA": 44, "LE": 1,
}
TSA_NAMES = ("strict", "cbs", "ets", "vendor")

_KEYWORD = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$", re.ASCII)
_ITEM = re.compile(r"^(?P<key>[^:\s]+):(?P<value>[^:\s]+)$")
_ON_OFF = {"on": True, "off": False}
# Keywords followed by one value; every other keyword starts a row of KEY:VALUE items.
_SINGLE = frozenset({"pfc-cap", "macsec-bypass", "delay", "willing", "ets-cap", "cbs", "total-size"})
# Rows with one entry per priority or traffic class: the tool always prints all eight.
# `dcb dcbx show`: flags printed as bare words (JSON: true/false, `lld_managed`).
_FLAGS = frozenset({"host", "lld-managed", "cee", "ieee", "static"})
_ORDER = "order:"  # `dcb apptrust show`: the rest of the line is the trust order
_EIGHT = frozenset({"prio-pfc", "tc-tsa", "tc-bw", "pg-bw", "prio-tc", "reco-tc-tsa", "reco-tc-bw",
                    "reco-prio-tc", "requests", "indications", "prio-buffer"})


class DcbReport(Parsed):
    """What `dcb ... show` printed. Priority and class tables are keyed by priority or class (0-7).

    `dscp_prio` keeps (DSCP, priority) pairs in order: the app table may give one DSCP several priorities.
    """

    pfc_cap: int | None = None
    macsec_bypass: bool | None = None
    delay: int | None = None
    prio_pfc: dict[int, bool] = Field(default_factory=dict)
    willing: bool | None = None
    ets_cap: int | None = None
    cbs: bool | None = None
    tc_tsa: dict[int, str] = Field(default_factory=dict)
    tc_bw: dict[int, int] = Field(default_factory=dict)
    pg_bw: dict[int, int] = Field(default_factory=dict)
    prio_tc: dict[int, int] = Field(default_factory=dict)
    dscp_prio: list[tuple[int, int]] = Field(default_factory=list)
    default_prio: list[int] = Field(default_factory=list)
    dcbx: list[str] = Field(default_factory=list)
    apptrust_order: list[str] = Field(default_factory=list)
    other: dict[str, str] = Field(default_factory=dict)

    @property
    def dscp_map(self) -> dict[int, int]:
        """DSCP -> priority; a DSCP given several priorities gets the highest, as DCB rewrite tables do."""
        mapping: dict[int, int] = {}
        for dscp, prio in self.dscp_prio:
            mapping[dscp] = max(prio, mapping.get(dscp, prio))
        return mapping


class _Row:
    """One keyword's row: its single value, or its KEY:VALUE items already converted."""

    def __init__(self, keyword: str, line: Line) -> None:
        self.keyword = keyword
        self.line = line
        self.value: object = None
        self.items: list[tuple[object, object]] = []

    def takes_items(self) -> bool:
        return self.keyword not in _SINGLE and self.keyword not in _FLAGS


class _Builder:
    """Collects rows line by line; a line with a word that fits nowhere adds nothing."""

    def __init__(self) -> None:
        self.rows: list[_Row] = []
        self.open: _Row | None = None  # the row a line starting with items continues

    def feed(self, line: Line) -> None:
        words = line.stripped.split()
        rows: list[_Row] = []
        carried: list[tuple[object, object]] = []
        index = 0
        while index < len(words):
            word = words[index]
            row = rows[-1] if rows else self.open
            items = rows[-1].items if rows else carried
            if row is not None and row.takes_items() and (_ITEM.match(word) or _bare_priority(row, word)):
                items.append(_item(row.keyword, word, len(row.items) + len(items), line))
            elif word == _ORDER:
                row = _Row(_ORDER, line)
                row.items = [(position, name) for position, name in enumerate(words[index + 1:])]
                rows.append(row)
                break
            elif word in _FLAGS:
                row = _Row(word, line)
                row.value = True
                rows.append(row)
            elif _KEYWORD.match(word):
                row = _Row(word, line)
                if word in _SINGLE:
                    if index + 1 >= len(words):
                        fail(KIND, f"{word!r} without its value", line)
                    index += 1
                    row.value = _single(word, words[index], line)
                rows.append(row)
            else:
                fail(KIND, f"{word!r} is neither a dcb keyword nor a KEY:VALUE item of one", line)
            index += 1
        if self.open is not None:
            self.open.items += carried
        self.rows += rows
        if rows:
            self.open = rows[-1]

    def fields(self, found: Collector) -> dict[str, object]:
        """The report's fields; a keyword that got no value (`dcb pfc show dev eth1` pasted as output)
        makes its line unplaced, and a text of such keywords only is not a dcb report."""
        fields: dict[str, object] = {"dcbx": [row.keyword for row in self.rows if row.keyword in _FLAGS]}
        other: dict[str, str] = {}
        empty = [row for row in self.rows if row.takes_items() and not row.items and row.keyword != _ORDER]
        if len(empty) == len(self.rows):
            fail(KIND, "no dcb keyword with a value found", self.rows[0].line if self.rows else None)
        for line in dict.fromkeys(row.line for row in empty):
            words = ", ".join(row.keyword for row in empty if row.line is line)
            found.place_nowhere(line, f"keywords without entries: {words}")
        for row in self.rows:
            if row in empty or row.keyword in _FLAGS:
                continue
            if row.keyword == _ORDER:
                fields["apptrust_order"] = [str(name) for _, name in row.items]
                continue
            name = row.keyword.replace("-", "_")
            if row.keyword in _SINGLE and name in DcbReport.model_fields:
                fields[name] = row.value
            elif row.keyword in _SINGLE:
                other[row.keyword] = str(row.value)
            elif row.keyword in ("dscp-prio", "default-prio"):
                fields[name] = [pair if row.keyword == "dscp-prio" else pair[1] for pair in row.items]
            elif name in DcbReport.model_fields:
                fields[name] = dict(row.items)
            else:
                other[row.keyword] = " ".join(f"{key}:{value}" for key, value in row.items)
            if row.keyword in _EIGHT:
                keys = {str(key) for key, _ in row.items}
                absent = [str(i) for i in range(8) if str(i) not in keys]
                if absent:
                    found.lack(f"{row.keyword} entries for {', '.join(absent)}")
        fields["other"] = other
        return fields


def _bare_priority(row: _Row, word: str) -> bool:
    """`default-prio 3 5`: the one row whose items are bare priorities."""
    return row.keyword == "default-prio" and word.isdigit()


def _number(value: str, high: int, line: Line, what: str) -> int:
    if not value.isdigit() or int(value) > high:
        fail(KIND, f"{what} {value!r} is not a number from 0 to {high}", line)
    return int(value)


def _on_off(value: str, line: Line) -> bool:
    if value not in _ON_OFF:
        fail(KIND, f"expected on or off, got {value!r}", line)
    return _ON_OFF[value]


def _single(keyword: str, value: str, line: Line) -> object:
    if keyword in ("macsec-bypass", "willing", "cbs"):
        return _on_off(value, line)
    if keyword == "total-size":
        return value
    return _number(value, 1 << 31, line, keyword)


def _item(keyword: str, word: str, position: int, line: Line) -> tuple[object, object]:
    """One item of a row, converted for the rows fabnet reads and kept as text for the others."""
    if keyword == "default-prio":
        return position, _number(word, 7, line, "priority")
    key, _, value = word.partition(":")
    if keyword == "dscp-prio":
        dscp = DSCP_NAMES[key] if key in DSCP_NAMES else _number(key, 63, line, "DSCP")
        return dscp, _number(value, 7, line, "priority")
    if keyword not in ("prio-pfc", "tc-tsa", "tc-bw", "pg-bw", "prio-tc"):
        return key, value
    index = _number(key, 7, line, "priority or traffic class")
    if keyword == "prio-pfc":
        return index, _on_off(value, line)
    if keyword == "tc-tsa":
        if value not in TSA_NAMES:
            fail(KIND, f"unknown transmission selection algorithm {value!r}", line)
        return index, value
    if keyword in ("tc-bw", "pg-bw"):
        return index, _number(value, 100, line, "bandwidth share")
    return index, _number(value, 7, line, "traffic class")


_KNOWN = _SINGLE | _EIGHT | {"dscp-prio", "pcp-prio", "default-prio", "buffer-size", "tc-maxrate"}


def _cut_inside(last: Line, builder: _Builder, refused: bool) -> bool:
    """True when the output stops inside the last line's last word: `pfc-cap 8 macsec-by`, `prio-pfc 0:off 1:o`.

    That line was refused, or its last keyword got no value, and it reads whole once that word is dropped
    (or it is a lone prefix of a keyword). A refused word elsewhere in the line is a bad value, not a cut.
    """
    words = last.stripped.split()
    rows = [row for row in builder.rows if row.line is last]
    if not refused and (not rows or rows[-1].items or not rows[-1].takes_items() or rows[-1].keyword == _ORDER):
        return False  # the line was read whole
    if len(words) == 1:
        return any(keyword.startswith(words[0]) for keyword in _KNOWN)
    probe = _Builder()
    probe.open = builder.open if not rows else None
    try:
        probe.feed(Line(last.number, " ".join(words[:-1]), last.raw))
    except ParseError:
        return False
    # every row before the last is whole; the last may have lost all its entries to the cut (`prio-tc 0:`)
    return all(row.items or not row.takes_items() for row in probe.rows[:-1])


def _json_words(data: object, line: Line) -> str:
    """The words the text form prints for one `dcb -j` object."""
    if not isinstance(data, dict):
        fail(KIND, "a dcb JSON value must be an object", line)
    words: list[str] = []
    for key, value in data.items():
        keyword = key.replace("_", "-")
        if keyword in _FLAGS:
            words += [keyword] if value is True else []
        elif keyword == "order" and isinstance(value, list):
            words += [_ORDER, *map(str, value)]
        elif isinstance(value, list):
            words.append(keyword)
            for position, item in enumerate(value):
                words.append(_json_item(keyword, position, item, line))
        else:
            words += [keyword, _json_scalar(value, line)]
    return " ".join(words)


def _json_scalar(value: object, line: Line) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (int, str)) and str(value).strip() and " " not in str(value):
        return str(value)
    fail(KIND, f"unexpected dcb JSON value {value!r}", line)


def _json_item(keyword: str, position: int, item: object, line: Line) -> str:
    if keyword == "default-prio":
        return _json_scalar(item, line)
    if isinstance(item, list):  # an app table entry: [key, priority] (6.5+: [key, priority, " "])
        pair = [part for part in item if not (isinstance(part, str) and not part.strip())]
        if len(pair) != 2:
            fail(KIND, f"app table entry {item!r} is not a [key, priority] pair", line)
        return f"{_json_scalar(pair[0], line)}:{_json_scalar(pair[1], line)}"
    return f"{position}:{_json_scalar(item, line)}"


def _json_feeder(data: object, builder: _Builder) -> Callable[[Line], None]:
    def feed(line: Line) -> None:
        builder.feed(Line(line.number, _json_words(data, line), line.raw, line.prefix))

    return feed


def _feed_json(lines: list[Line], builder: _Builder, found: Collector) -> None:
    """Objects of `dcb -j` (compact or `-p` pretty), one per command; text between them is unplaced."""
    text = "\n".join(line.text for line in lines)
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line.text) + 1)

    def line_at(offset: int) -> Line:
        index = max(i for i, start in enumerate(starts) if start <= offset)
        return lines[index]

    decoder = json.JSONDecoder()
    position = 0
    while position < len(text):
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            break
        first = line_at(position)
        try:
            data, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as err:
            if text[position] == "{" and err.pos >= starts[-1]:  # it fails on the last line: cut there
                found.recognised += 1  # the start of an object was there: the output stops inside it
                found.lack(f"the JSON object from line {first.number} (cut short)")
                return
            found.place_nowhere(first, f"not a dcb JSON object: {err.msg}")
            following = [start for start in starts if start > position]
            position = following[0] if following else len(text)
            continue
        found.attempt(first, _json_feeder(data, builder))
        position = end


def parse_dcb(text: str) -> DcbReport:
    found = Collector(KIND)
    builder = _Builder()
    lines = [line for line in content_lines(text) if not is_shell(line, KIND)]
    if lines and lines[0].stripped[:1] in ("{", "["):
        _feed_json(lines, builder, found)
    else:
        accepted = [found.attempt(line, builder.feed) for line in lines]
        if lines and _cut_inside(lines[-1], builder, not accepted[-1]):
            found.lack(f"the rest of line {lines[-1].number} (cut inside a word)")
    found.result("no dcb keyword found")  # raises when no line was one
    fields = builder.fields(found)
    return DcbReport(**fields, **found.result())


def qos_of(report: DcbReport) -> MlnxQos:
    """The mlnx_qos facts of a report with the app table's DSCP rows, `prio-pfc` and the ETS rows.

    Like mlnx_qos, a traffic class gets a bandwidth only when it is an `ets` class, and trust is `dscp`
    exactly when the DSCP app table has entries (mlx5 switches to DSCP trust with the first entry).
    """
    needed = {"prio-pfc": report.prio_pfc, "tc-tsa": report.tc_tsa, "tc-bw": report.tc_bw,
              "prio-tc": report.prio_tc}
    absent = [name for name, table in needed.items() if not table]
    if absent:
        fail(KIND, f"no {', '.join(absent)} in the dcb output")
    classes = []
    for tc in range(8):
        tsa = report.tc_tsa.get(tc)
        classes.append(QosTrafficClass(
            tc=tc, tsa=tsa, bw=report.tc_bw.get(tc) if tsa == "ets" else None,
            priorities=[prio for prio, owner in sorted(report.prio_tc.items()) if owner == tc],
        ))
    return MlnxQos(
        trust="dscp" if report.dscp_prio else "pcp",
        dscp2prio=report.dscp_map,
        cable_len=report.delay,
        pfc_priorities=list(range(8)),
        pfc_enabled=[prio for prio in range(8) if report.prio_pfc.get(prio)],
        tcs=classes,
        complete=report.complete,
        missing=report.missing,
    )
