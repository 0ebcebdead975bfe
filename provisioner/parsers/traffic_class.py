"""Parse an RDMA device's default traffic class (`/sys/class/infiniband/DEV/tc/PORT/traffic_class`).

MLNX_OFED's mlx5_ib prints `Global tclass=N` once a global class is set, then one line per address rule
(`src_ip=A,dst_ip=B/LEN,tclass=N`, or `src_ip6=`/`dst_ip6=`): the addresses in that order, each followed
by a comma, the class last. The file is empty when nothing is set (`tclass` is then None). A bare number
(`106`, as rdma_cm's configfs `default_roce_tos` or `cma_roce_tos` print it) is read as the class too.
The kernel ends every line with a line break, so a last line that stops inside one of these forms
(`Global tcl`, `dst_ip=10.0.0.0/8,tcl`) was cut: the result is incomplete, never an error.
"""

from __future__ import annotations

import ipaddress
import re

from pydantic import Field

from provisioner.parsers._shell import is_shell
from provisioner.parsers._text import Collector, Fact, Line, Parsed, content_lines, fail

KIND = "traffic_class"

_GLOBAL = "Global tclass="
_TCLASS = re.compile(
    r"^(?:(?P<scope>Global)\s+)?tclass\s*=\s*(?P<value>[0-9]+)$|^(?P<bare>[0-9]+)$", re.ASCII
)
# The address keys a rule line may hold, in the order the driver prints them.
_ADDRESS_KEYS = ("src_ip", "dst_ip", "src_ip6", "dst_ip6")
_VALUE_CHARS = re.compile(r"[0-9A-Fa-f.:/]*", re.ASCII)


class TclassRule(Fact):
    """A traffic class for RoCE connections matching addresses; `dst_ip` keeps its prefix (`10.0.0.0/8`)."""

    tclass: int
    src_ip: str | None = None
    dst_ip: str | None = None
    src_ip6: str | None = None
    dst_ip6: str | None = None


class TrafficClassSetting(Parsed):
    """`tclass` is the global IP traffic class (DSCP << 2 | ECN) RDMA connections use; None when unset.
    `rules` are the per-address classes, which apply only where no global class is set."""

    tclass: int | None = None
    scope: str | None = None
    rules: list[TclassRule] = Field(default_factory=list)

    @property
    def dscp(self) -> int | None:
        return None if self.tclass is None else self.tclass >> 2


def _class_number(kind: str, value: str, line: Line) -> int:
    tclass = int(value)
    if tclass > 255:
        fail(kind, f"traffic class {tclass} out of range 0-255", line)
    return tclass


def parse_traffic_class_value(kind: str, value: str, line: Line) -> TrafficClassSetting:
    """Parse one traffic_class value as found on `line` (also used where a script echoes the file)."""
    value = value.strip()
    if not value:
        return TrafficClassSetting()
    match = _TCLASS.fullmatch(value)
    if not match:
        fail(kind, "expected 'Global tclass=N' or an empty value", line)
    tclass = _class_number(kind, match.group("value") or match.group("bare"), line)
    scope = match.group("scope")
    return TrafficClassSetting(tclass=tclass, scope=scope.lower() if scope else None)


def _address(kind: str, key: str, value: str, line: Line) -> str:
    try:
        if key == "dst_ip":
            network = ipaddress.IPv4Network(value if "/" in value else f"{value}/32", strict=False)
            return f"{value.split('/')[0]}/{network.prefixlen}"
        if key == "src_ip":
            return str(ipaddress.IPv4Address(value))
        return str(ipaddress.IPv6Address(value))
    except ValueError:
        fail(kind, f"{key} is not an address: {value!r}", line)


def parse_rule(kind: str, line: Line) -> TclassRule:
    """One address rule line (`src_ip=...,dst_ip=.../24,tclass=N`)."""
    items = line.stripped.split(",")
    last = items.pop().strip()
    if not last.startswith("tclass="):
        fail(kind, "an address rule ends with 'tclass=N'", line)
    number = last[len("tclass="):]
    if not number.isdigit():
        fail(kind, f"traffic class is not a number: {number!r}", line)
    fields: dict[str, str] = {}
    order = 0
    for item in (i.strip() for i in items):
        key, sep, value = item.partition("=")
        if not sep or key not in _ADDRESS_KEYS:
            fail(kind, f"unknown rule item {item!r}", line)
        if _ADDRESS_KEYS.index(key) < order or key in fields:
            fail(kind, f"rule item {key!r} out of order or repeated", line)
        order = _ADDRESS_KEYS.index(key)
        fields[key] = _address(kind, key, value, line)
    if not fields:
        fail(kind, "an address rule names no address", line)
    return TclassRule(tclass=_class_number(kind, number, line), **fields)


def is_rule(text: str) -> bool:
    """True for a line shaped like an address rule (used where a script echoes the file after a label)."""
    return text.strip().split("=", 1)[0] in _ADDRESS_KEYS


def cut_inside(text: str) -> bool:
    """True when `text` is a whole form of this file cut short: `Global tcl`, `Global tclass=`,
    `dst_ip=10.0.0.0/8,tcl`, `src_ip=10.0.0.1,` (a rule stops only after its class)."""
    text = " ".join(text.split())
    if not text:
        return False
    if _GLOBAL.startswith(text):
        return True
    if text.startswith(_GLOBAL):
        return False  # `Global tclass=` and its digits: whole, or a bad value
    items = text.split(",")
    last = items.pop()
    for item in items:
        key, sep, value = item.strip().partition("=")
        if not sep or key not in _ADDRESS_KEYS or not _VALUE_CHARS.fullmatch(value):
            return False
    if not items and not any(k.startswith(last) or last.startswith(k + "=") for k in _ADDRESS_KEYS):
        return False  # a first item must begin an address key
    key, sep, value = last.partition("=")
    if not sep:
        return any(name.startswith(key) for name in (*_ADDRESS_KEYS, "tclass"))
    if key == "tclass":
        return value == ""  # `tclass=1` is whole (the rule just reads its class); only no digits is a cut
    return key in _ADDRESS_KEYS and bool(_VALUE_CHARS.fullmatch(value))


def parse_traffic_class(text: str) -> TrafficClassSetting:
    lines = [line for line in content_lines(text) if not is_shell(line, KIND)]
    if not lines:
        return TrafficClassSetting()
    found = Collector(KIND)
    setting = TrafficClassSetting()
    rules: list[TclassRule] = []
    global_line: Line | None = None

    def handle(line: Line) -> None:
        nonlocal setting, global_line
        if is_rule(line.text):
            rules.append(parse_rule(KIND, line))
            return
        if global_line is not None:
            fail(KIND, f"a second global class (the first is on line {global_line.number})", line)
        if rules:
            fail(KIND, "the global class comes before the address rules", line)
        setting = parse_traffic_class_value(KIND, line.stripped, line)
        global_line = line

    last = lines[-1]
    for line in lines[:-1]:
        found.attempt(line, handle)
    if cut_inside(last.stripped):
        found.lack(f"the rest of line {last.number} (cut inside '{last.stripped}')")
        found.recognised += 1  # a form of this file, only shorter
    else:
        found.attempt(last, handle)
    return setting.model_copy(update={**found.result(), "rules": rules})
