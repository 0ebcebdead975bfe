"""Parse RDMA port error counters: the sysfs files (`port_counters`) and `perfquery [-x]` (`perfquery`).

sysfs: `grep -r -H . */ports/*/counters */ports/*/hw_counters` run in `class/infiniband` prints
`mlx5_0/ports/1/counters/symbol_error:0` per file. Some drivers also keep counters for the whole device in
`DEVICE/hw_counters` (the kernel's device-level hw_counters group: EFA's `cmds_err`, hfi1's `RcvOverflow,32`,
mlx5's in switchdev mode); those lines, `efa_0/hw_counters/cmds_err:0`, go to `devices`. A line
`@@interval SECONDS` separates a first reading from a second one taken that many seconds later (the rate
check); `later` and `later_devices` hold the second.

perfquery: `# Port counters: Lid 3 port 1 (CapMask: ...)` or `# Port extended counters: ...` starts a
port, then `Name:.......value`. Names are mapped to the sysfs names (SymbolErrorCounter -> symbol_error,
PortXmitPkts -> port_xmit_packets) so one playbook limit reads either source.

A counter file the kernel could not read is not a zero: `N/A (no PMA)` (what `show_pma_counter` prints for a
device without a performance-management agent, e.g. iWARP) and the reader's own complaint when stderr is in
the output (`grep: PATH: Permission denied`) put the counter in `unreadable` with what was printed, so
`value()` has nothing for it. A whole folder the reader could not read (`grep: mlx5_0/ports/1/counters: Permission
denied`, or `Input/output error`, `Too many levels of symbolic links`) is named in its set's `unreadable_folders`
with the reason: a counter that folder would hold is then unreadable too (`unread_folder()`), not one the port
lacks. A path the reader found no file at (`No such file or directory`, an unmatched
glob) goes to `absent`. A counter stuck at the top of its width (`symbol_error` 65535, a 32-bit
`port_xmit_wait` 4294967295) no longer counts: it is named in `saturated`: its increase reads 0 whatever the link does.

Both: lines that fit nowhere are listed in `unplaced`; a port header with no counters after it, a first
reading without its second, or a last line cut before its value makes the result incomplete.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from provisioner.parsers._shell import is_shell
from provisioner.parsers._text import Collector, Fact, Line, Parsed, content_lines, fail, number

# A counter's name is its file name as the driver spells it: hfi1 appends `,32` to its 32-bit hw_counters
# (`SwLinkUp,32`) and has device counters with blanks inside (`Pio Reserved 30`), so anything but a slash or a
# colon belongs to it, blanks only between other characters.
_NAME = r"(?P<name>[^/\s:](?:[^/:\n]*[^/\s:])?)"
# DEVICE/ports/N/GROUP/NAME, or DEVICE/hw_counters/NAME for the device's own (no `counters` group there). The
# lookbehind keeps `mlx5_0/ports/1/hw_counters/x` from reading as a device named `1`.
_WHERE = (r"^(?:.*/)?(?:(?P<device>[^/\s]+)/ports/(?P<port>[0-9]+)/(?P<group>counters|hw_counters)"
          r"|(?<!ports/)(?P<whole>[^/\s]+)/hw_counters)/" + _NAME)
_SYSFS = re.compile(_WHERE + r":(?P<value>.*)$")
# A reader's error on stderr when 2>&1 kept it: GNU grep and coreutils print `PROG: FILE: strerror`.
_READ_ERROR = re.compile(r"^(?P<prog>grep|cat|head|tail):\s+(?P<path>\S.*?):\s+(?P<reason>[A-Z][^:]*)$")
_COUNTER_PATH = re.compile(_WHERE + "$")
# A counters folder itself, when the reader could not open or list it: DEVICE/ports/N/GROUP or DEVICE/hw_counters.
_FOLDER_PATH = re.compile(r"^(?:.*/)?(?:(?P<device>[^/\s]+)/ports/(?P<port>[0-9]+)/(?P<group>counters|hw_counters)"
                          r"|(?<!ports/)(?P<whole>[^/\s]+)/hw_counters)/?$")
# The start of a counter line the output stopped inside (before its `:VALUE`, or right after the colon).
_SYSFS_CUT = re.compile(r"^(?:.*/)?[^/\s:]+/(?:ports(?:/[0-9]*(?:/\w*(?:/[^/\s:]*:?)?)?)?|hw_c\w*(?:/[^/\s:]*:?)?)$")
_NOT_AVAILABLE = re.compile(r"^N/A\b", re.IGNORECASE)
# The line resources/port_counters.py puts between a rate check's two readings (every source's).
INTERVAL = re.compile(r"^@@interval\s+(?P<seconds>[0-9.]+)$")
_PERF_HEADER = re.compile(
    r"^#\s*Port (?:extended )?counters:\s*Lid\s+(?P<lid>[0-9]+)\s+port\s+(?P<port>[0-9]+)", re.IGNORECASE
)
_PERF_VALUE = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9]*):\.*\s*(?P<value>\S+)$")
# What a perfquery line looks like when the output stops inside it: a port header before its `port N`,
# or a counter name whose dots or value were not printed yet.
_PERF_CUT = re.compile(r"^#\s*Port\b[^()]*$|^[A-Za-z][A-Za-z0-9]*(?::\.*)?$", re.IGNORECASE)

# perfquery's names for what sysfs calls counters/<name>; any other name is turned into snake_case.
# PortXmitData/PortRcvData (port_xmit_data, port_rcv_data) count 4-byte words, not octets (IB PortCounters:
# octets divided by 4), in sysfs and perfquery alike. They are kept as read: a `max` or `max_rate` limit on them
# is in words, and nothing in fabnet turns them into bytes or a bandwidth; one that does must multiply by 4.
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

# Widths (bits) of the IB PortCounters fields the kernel serves under counters/ (drivers/infiniband/core/
# sysfs.c, the PORT_PMA_ATTR table); perfquery reads the same attribute. The data and packet counters
# are 32 bits there and 64 in the extended set, so they are checked against both ceilings.
COUNTER_BITS: dict[str, int] = {
    "symbol_error": 16, "link_error_recovery": 8, "link_downed": 8, "port_rcv_errors": 16,
    "port_rcv_remote_physical_errors": 16, "port_rcv_switch_relay_errors": 16, "port_xmit_discards": 16,
    "port_xmit_constraint_errors": 8, "port_rcv_constraint_errors": 8, "local_link_integrity_errors": 4,
    "excessive_buffer_overrun_errors": 4, "VL15_dropped": 16, "port_xmit_wait": 32,
}
_CEILINGS = {(1 << 32) - 1, (1 << 64) - 1}
# What the kernel serves under a port's counters/: the PMA's PortCounters and their extended packet counts, a
# fixed table (drivers/infiniband/core/sysfs.c). Every other counter is a driver's, under hw_counters/.
PMA_COUNTERS = frozenset(PERFQUERY_NAMES.values())


def folder_of(name: str) -> str:
    """The folder of a port that holds the counter: `counters` for the PMA's, `hw_counters` for a driver's."""
    return "counters" if name in PMA_COUNTERS else "hw_counters"


def saturated(name: str, value: int, narrow: bool = True) -> bool:
    """True when `value` is the all-ones ceiling of the counter: it stopped counting there (IB counters
    do not wrap). `narrow` False (perfquery -x, whose error counters may be 64-bit) checks 64 bits only."""
    bits = COUNTER_BITS.get(name) if narrow else None
    if bits is not None:
        return value == (1 << bits) - 1
    return value in (_CEILINGS if narrow else {(1 << 64) - 1})


class PortCounterSet(Fact):
    """One port's counters: `counters` (IB port counters) and `hw_counters` (the driver's, e.g. RoCE)."""

    device: str | None = None
    port: int
    lid: int | None = None
    counters: dict[str, int] = Field(default_factory=dict)
    hw_counters: dict[str, int] = Field(default_factory=dict)
    # name -> what was printed instead of a number (`N/A (no PMA)`, `Permission denied`): never a zero.
    unreadable: dict[str, str] = Field(default_factory=dict)
    saturated: list[str] = Field(default_factory=list)  # names at the ceiling of their width
    # group (`counters`, `hw_counters`) -> why the reader could not read that whole folder (`Permission denied`)
    unreadable_folders: dict[str, str] = Field(default_factory=dict)

    def value(self, name: str) -> int | None:
        """A counter by its sysfs name, from either group; None when it is absent or unreadable."""
        return self.counters.get(name, self.hw_counters.get(name))

    def unread_folder(self, name: str) -> tuple[str, str] | None:
        """(the folder's path, what the reader printed) when the counter has no value because the folder that
        would hold it could not be read: then it is unreadable, not absent."""
        group = folder_of(name)
        if self.value(name) is not None or name in self.unreadable or group not in self.unreadable_folders:
            return None
        return f"{self.device}/ports/{self.port}/{group}", self.unreadable_folders[group]


class DeviceCounterSet(Fact):
    """A device's own counters (`DEVICE/hw_counters`): the driver counts them for the device, not a port."""

    device: str
    hw_counters: dict[str, int] = Field(default_factory=dict)
    unreadable: dict[str, str] = Field(default_factory=dict)
    saturated: list[str] = Field(default_factory=list)
    unreadable_folders: dict[str, str] = Field(default_factory=dict)  # `hw_counters` -> why it could not be read

    def value(self, name: str) -> int | None:
        return self.hw_counters.get(name)

    def unread_folder(self, name: str) -> tuple[str, str] | None:
        """As PortCounterSet's: the device has one folder, hw_counters, that holds any counter of its own."""
        if self.value(name) is not None or name in self.unreadable or "hw_counters" not in self.unreadable_folders:
            return None
        return f"{self.device}/hw_counters", self.unreadable_folders["hw_counters"]


class PortCounters(Parsed):
    ports: list[PortCounterSet] = Field(default_factory=list)
    devices: list[DeviceCounterSet] = Field(default_factory=list)  # device-level hw_counters, sysfs only
    interval_s: float | None = None
    later: list[PortCounterSet] = Field(default_factory=list)
    later_devices: list[DeviceCounterSet] = Field(default_factory=list)
    absent: list[str] = Field(default_factory=list)  # paths the reader found no file at


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


# A reading's sets by (device, port); port None is the device's own set.
_Reading = dict[tuple[str | None, int | None], dict[str, Any]]


def _ordered(table: _Reading) -> list[PortCounterSet]:
    ports = []
    for entry in table.values():
        if entry["port"] is None:
            continue
        values = {**entry["hw_counters"], **entry["counters"]}
        ports.append(PortCounterSet.model_validate(
            {**entry, "saturated": [name for name, value in values.items() if saturated(name, value)]}))
    return ports


def _devices(table: _Reading) -> list[DeviceCounterSet]:
    return [DeviceCounterSet(device=e["device"], hw_counters=e["hw_counters"], unreadable=e["unreadable"],
                             saturated=[n for n, v in e["hw_counters"].items() if saturated(n, v)],
                             unreadable_folders=e["unreadable_folders"])
            for e in table.values() if e["port"] is None]


def _port_entry(reading: _Reading, m: re.Match[str]) -> dict[str, Any]:
    whole = m.group("whole")
    key = (whole, None) if whole else (m.group("device"), int(m.group("port")))
    return reading.setdefault(key, {"device": key[0], "port": key[1], "counters": {}, "hw_counters": {},
                                    "unreadable": {}, "unreadable_folders": {}})


def parse_port_counters(text: str) -> PortCounters:
    kind = "port_counters"
    readings: list[_Reading] = [{}]
    interval: float | None = None
    absent: list[str] = []
    found = Collector(kind)

    def handle(line: Line) -> None:
        nonlocal interval
        body = line.stripped
        if m := INTERVAL.match(body):
            if interval is not None:
                fail(kind, "a second @@interval line", line)
            interval = float(m.group("seconds"))
            readings.append({})
            return
        if m := _READ_ERROR.match(body):
            _read_error(m, line)
            return
        m = _SYSFS.match(body)
        if not m:
            fail(kind, "expected DEVICE/ports/N/counters/NAME:VALUE (or hw_counters, or DEVICE/hw_counters)", line)
        entry = _port_entry(readings[-1], m)
        value = m.group("value").strip()
        if _NOT_AVAILABLE.match(value):
            entry["unreadable"][m.group("name")] = value
            return
        entry[m.group("group") or "hw_counters"][m.group("name")] = _count(value, line, kind)

    def _read_error(m: re.Match[str], line: Line) -> None:
        path, reason = m.group("path"), m.group("reason").strip()
        counter = _COUNTER_PATH.match(path)
        if "No such file" in reason or any(c in path for c in "*?["):
            absent.append(path)
        elif counter:
            entry = _port_entry(readings[-1], counter)
            entry["unreadable"][counter.group("name")] = reason
        elif folder := _FOLDER_PATH.match(path):
            # The set is made even with nothing read from it: a port whose one folder failed is still a port the
            # host has, and its counters are ones it could not read.
            entry = _port_entry(readings[-1], folder)
            entry["unreadable_folders"][folder.group("group") or "hw_counters"] = reason
        else:
            fail(kind, f"{m.group('prog')} could not read {path}: {reason}", line)

    lines = [line for line in content_lines(text) if not is_shell(line, kind)]
    for line in lines:
        found.attempt(line, handle)
    if interval is not None and not readings[1]:
        found.lack(f"the second reading, {interval:g} s after the first")
    last = lines[-1] if lines else None
    if last and found.unplaced and found.unplaced[-1].line == last.number and _SYSFS_CUT.match(last.stripped):
        # grep prints path, colon and value in one write: a last line that stops before the value was cut.
        found.lack(f"the rest of line {lines[-1].number} ({lines[-1].stripped!r})")
    completeness = found.result("no counter line (DEVICE/ports/N/counters/NAME:VALUE)") if lines else {}
    return PortCounters(
        ports=_ordered(readings[0]),
        devices=_devices(readings[0]),
        interval_s=interval,
        later=_ordered(readings[1]) if interval is not None else [],
        later_devices=_devices(readings[1]) if interval is not None else [],
        absent=absent,
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
                          "line": line, "extended": "extended" in body.lower()})
            return
        m = _PERF_VALUE.match(body)
        if not m:
            fail(kind, "expected 'CounterName:........value' or '# Port counters: Lid N port N'", line)
        if not ports:
            fail(kind, "counter before any '# Port counters: Lid N port N' line", line)
        if m.group("name") in _NOT_COUNTERS:
            return
        ports[-1]["counters"][_snake(m.group("name"))] = _count(m.group("value"), line, kind)

    lines = [line for line in content_lines(text) if not is_shell(line, kind)]
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
        ports=[PortCounterSet(port=e["port"], lid=e["lid"], counters=e["counters"],
                              saturated=[n for n, v in e["counters"].items() if saturated(n, v, not e["extended"])])
               for e in ports if e["counters"]],
        **completeness,
    )
