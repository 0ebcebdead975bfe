"""Parse RDMA port error counters: the sysfs files (`port_counters`) and `perfquery [-x]` (`perfquery`).

sysfs: `grep -r -H . */ports/*/counters */ports/*/hw_counters` run in `class/infiniband` prints
`mlx5_0/ports/1/counters/symbol_error:0` per file. A line `@@interval SECONDS` separates a first reading
from a second one taken that many seconds later (the rate check); `later` holds the second.

perfquery: `# Port counters: Lid 3 port 1 (CapMask: ...)` or `# Port extended counters: ...` starts a
port, then `Name:.......value`. Names are mapped to the sysfs names (SymbolErrorCounter -> symbol_error,
PortXmitPkts -> port_xmit_packets) so one playbook limit reads either source.

Both: lines that fit nowhere are listed in `unplaced`; a port header with no counters after it, or a
first reading without its second, makes the result incomplete.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from provisioner.parsers._text import Collector, Fact, Line, Parsed, content_lines, fail, is_prompt, number

_SYSFS = re.compile(
    r"^(?:.*/)?(?P<device>[^/\s]+)/ports/(?P<port>[0-9]+)/(?P<group>counters|hw_counters)/(?P<name>[\w.-]+)"
    r":(?P<value>.*)$"
)
_INTERVAL = re.compile(r"^@@interval\s+(?P<seconds>[0-9.]+)$")
_PERF_HEADER = re.compile(
    r"^#\s*Port (?:extended )?counters:\s*Lid\s+(?P<lid>[0-9]+)\s+port\s+(?P<port>[0-9]+)", re.IGNORECASE
)
_PERF_VALUE = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9]*):\.*\s*(?P<value>\S+)$")
# What a perfquery line looks like when the output stops inside it: a port header before its `port N`,
# or a counter name whose dots or value were not printed yet.
_PERF_CUT = re.compile(r"^#\s*Port\b[^()]*$|^[A-Za-z][A-Za-z0-9]*(?::\.*)?$", re.IGNORECASE)

# perfquery's names for what sysfs calls counters/<name>; any other name is turned into snake_case.
PERFQUERY_NAMES: dict[str, str] = {
    "SymbolErrorCounter": "symbol_error",
    "LinkErrorRecoveryCounter": "link_error_recovery",
    "LinkDownedCounter": "link_downed",
    "PortRcvErrors": "port_rcv_errors",
    "PortRcvRemotePhysicalErrors": "port_rcv_remote_physical_errors",
    "PortRcvSwitchRelayErrors": "port_rcv_switch_relay_errors",
    "PortXmitDiscards": "port_xmit_discards",
    "PortXmitConstraintErrors": "port_xmit_constraint_errors",
    "PortRcvConstraintErrors": "port_rcv_constraint_errors",
    "LocalLinkIntegrityErrors": "local_link_integrity_errors",
    "ExcessiveBufferOverrunErrors": "excessive_buffer_overrun_errors",
    "VL15Dropped": "VL15_dropped",
    "PortXmitWait": "port_xmit_wait",
    "PortXmitData": "port_xmit_data",
    "PortRcvData": "port_rcv_data",
    "PortXmitPkts": "port_xmit_packets",
    "PortRcvPkts": "port_rcv_packets",
    "PortUnicastXmitPkts": "unicast_xmit_packets",
    "PortUnicastRcvPkts": "unicast_rcv_packets",
    "PortMulticastXmitPkts": "multicast_xmit_packets",
    "PortMulticastRcvPkts": "multicast_rcv_packets",
}
_NOT_COUNTERS = {"PortSelect", "CounterSelect", "CounterSelect2"}


class PortCounterSet(Fact):
    """One port's counters: `counters` (IB port counters) and `hw_counters` (the driver's, e.g. RoCE)."""

    device: str | None = None
    port: int
    lid: int | None = None
    counters: dict[str, int] = Field(default_factory=dict)
    hw_counters: dict[str, int] = Field(default_factory=dict)

    def value(self, name: str) -> int | None:
        """A counter by its sysfs name, from either group."""
        return self.counters.get(name, self.hw_counters.get(name))


class PortCounters(Parsed):
    ports: list[PortCounterSet] = Field(default_factory=list)
    interval_s: float | None = None
    later: list[PortCounterSet] = Field(default_factory=list)


def _snake(name: str) -> str:
    return PERFQUERY_NAMES.get(name) or re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _count(value: str, line: Line, kind: str) -> int:
    # Counters are unsigned; some drivers print hex.
    value = value.strip()
    if re.fullmatch(r"0x[0-9a-fA-F]+", value):
        return int(value, 16)
    parsed = number(value)
    if not isinstance(parsed, int) or parsed < 0:
        fail(kind, f"counter value is not a non-negative integer: {value!r}", line)
    return parsed


def _ordered(table: dict[tuple[str | None, int], dict[str, Any]]) -> list[PortCounterSet]:
    return [PortCounterSet.model_validate(entry) for entry in table.values()]


def parse_port_counters(text: str) -> PortCounters:
    kind = "port_counters"
    readings: list[dict[tuple[str | None, int], dict[str, Any]]] = [{}]
    interval: float | None = None
    found = Collector(kind)

    def handle(line: Line) -> None:
        nonlocal interval
        body = line.stripped
        if m := _INTERVAL.match(body):
            if interval is not None:
                fail(kind, "a second @@interval line", line)
            interval = float(m.group("seconds"))
            readings.append({})
            return
        m = _SYSFS.match(body)
        if not m:
            fail(kind, "expected DEVICE/ports/N/counters/NAME:VALUE (or hw_counters)", line)
        key = (m.group("device"), int(m.group("port")))
        entry = readings[-1].setdefault(key, {"device": key[0], "port": key[1], "counters": {}, "hw_counters": {}})
        entry[m.group("group")][m.group("name")] = _count(m.group("value"), line, kind)

    lines = [line for line in content_lines(text) if not is_prompt(line)]
    for line in lines:
        found.attempt(line, handle)
    if interval is not None and not readings[1]:
        found.lack(f"the second reading, {interval:g} s after the first")
    completeness = found.result("no counter line (DEVICE/ports/N/counters/NAME:VALUE)") if lines else {}
    return PortCounters(
        ports=_ordered(readings[0]),
        interval_s=interval,
        later=_ordered(readings[1]) if interval is not None else [],
        **completeness,
    )


def parse_perfquery(text: str) -> PortCounters:
    kind = "perfquery"
    ports: list[dict[str, Any]] = []
    found = Collector(kind)

    def handle(line: Line) -> None:
        body = line.stripped
        if m := _PERF_HEADER.match(body):
            ports.append({"port": int(m.group("port")), "lid": int(m.group("lid")), "counters": {},
                          "line": line})
            return
        m = _PERF_VALUE.match(body)
        if not m:
            fail(kind, "expected 'CounterName:........value' or '# Port counters: Lid N port N'", line)
        if not ports:
            fail(kind, "counter before any '# Port counters: Lid N port N' line", line)
        if m.group("name") in _NOT_COUNTERS:
            return
        ports[-1]["counters"][_snake(m.group("name"))] = _count(m.group("value"), line, kind)

    lines = [line for line in content_lines(text) if not is_prompt(line)]
    for line in lines:
        found.attempt(line, handle)
    for entry in ports:
        if not entry["counters"]:
            found.lack(f"counters of lid {entry['lid']} port {entry['port']}")
    if lines and found.unplaced and found.unplaced[-1].line == lines[-1].number and _PERF_CUT.match(lines[-1].stripped):
        # The last line is a header or counter the output stopped inside: what follows it is missing.
        found.lack(f"the rest of line {lines[-1].number} ({lines[-1].stripped!r})")
    if len(ports) > 1 and 0 < len(ports[-1]["counters"]) < max(len(e["counters"]) for e in ports[:-1]):
        # perfquery prints the same counters for every port it is asked about: fewer on the last is a cut.
        found.lack(f"counters of lid {ports[-1]['lid']} port {ports[-1]['port']} after the "
                   f"{len(ports[-1]['counters'])} printed")
    completeness = found.result("no '# Port counters' header or counter line")
    return PortCounters(
        ports=[PortCounterSet(port=e["port"], lid=e["lid"], counters=e["counters"]) for e in ports if e["counters"]],
        **completeness,
    )
