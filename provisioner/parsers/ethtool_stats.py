"""Parse `ethtool -S IFACE`, the NIC driver's own statistics (`ethtool_stats`).

ethtool prints `NIC statistics:` and then one indented `NAME: VALUE` line per counter (five spaces, or tabs in
some builds). NAME is the driver's string as it is, so it may hold spaces, brackets, dots and colons: bnxt_en and
bnx2x print per-ring counters as `[0]: rx_discards`, ice `rx_crc_errors.nic`, bnx2x `Tx LPI entry count`. A line
is therefore split at its LAST colon: the value after it must be an unsigned integer, and all before it is the
name, kept verbatim (only the indentation goes) so a playbook names a counter as ethtool prints it.

A line `@@interval SECONDS` separates a first reading from a second one taken that many seconds later (the rate
check); `later` holds the second, as for the sysfs counters.

Not statistics: what ethtool says instead when the driver has none or the interface cannot be asked
(`no stats available`, `Cannot get stats strings information: Operation not supported`, `netlink error: ...`)
is a ParseError naming that line when nothing else was printed. A `NIC statistics:` line with no counters
after it, a first reading without its second, or a last line cut before its value makes the result incomplete.
"""

from __future__ import annotations

import re

from pydantic import Field

from provisioner.parsers._shell import is_shell
from provisioner.parsers._text import Collector, Line, Parsed, content_lines, fail
from provisioner.parsers.port_counters import INTERVAL

KIND = "ethtool_stats"

_HEADER = re.compile(r"^NIC statistics:$")
_VALUE = re.compile(r"[0-9]+", re.ASCII)
# ethtool's own complaints (ethtool.c and netlink/*.c print these instead of statistics).
_ETHTOOL_ERROR = re.compile(r"^(?:Cannot [a-z].*|no stats available|netlink error:.*|No data available)$")


class EthtoolStats(Parsed):
    """One interface's driver counters, by the name ethtool printed, and a second reading when there was one."""

    counters: dict[str, int] = Field(default_factory=dict)
    interval_s: float | None = None
    later: dict[str, int] = Field(default_factory=dict)
    # Names printed more than once in one reading (the last value is kept): a limit on such a name is ambiguous.
    repeated: list[str] = Field(default_factory=list)


def _split(line: Line) -> tuple[str, int]:
    name, colon, value = line.stripped.rpartition(":")
    name, value = name.strip(), value.strip()
    if not colon or not name:
        fail(KIND, "expected 'NAME: VALUE' (a counter line) or 'NIC statistics:'", line)
    if not _VALUE.fullmatch(value):
        fail(KIND, f"the value of {name!r} is not an unsigned integer: {value!r}", line)
    return name, int(value)


def parse_ethtool_stats(text: str) -> EthtoolStats:
    readings: list[dict[str, int]] = [{}]
    headers: list[Line | None] = [None]
    repeated: list[str] = []
    interval: float | None = None
    found = Collector(KIND)

    def handle(line: Line) -> None:
        nonlocal interval
        body = line.stripped
        if m := INTERVAL.match(body):
            if interval is not None:
                fail(KIND, "a second @@interval line", line)
            interval = float(m.group("seconds"))
            readings.append({})
            headers.append(None)
            return
        if _HEADER.match(body):
            if headers[-1] is not None or readings[-1]:
                fail(KIND, "a second 'NIC statistics:' line in one reading (two outputs run together)", line)
            headers[-1] = line
            return
        if _ETHTOOL_ERROR.match(body):
            fail(KIND, f"ethtool printed no statistics: {body}", line)
        name, value = _split(line)
        if name in readings[-1] and name not in repeated:
            repeated.append(name)
        readings[-1][name] = value

    lines = [line for line in content_lines(text) if not is_shell(line, KIND)]
    for line in lines:
        found.attempt(line, handle)
    for header, reading in zip(headers, readings, strict=True):
        if header is not None and not reading:
            found.lack(f"the counters after 'NIC statistics:' (line {header.number})")
    if interval is not None and not readings[1] and headers[1] is None:
        found.lack(f"the second reading, {interval:g} s after the first")
    last = lines[-1] if lines else None
    if last and found.unplaced and found.unplaced[-1].line == last.number and not last.stripped.startswith("@@"):
        # ethtool writes each counter line whole: a last line that does not parse is where the output was cut.
        found.lack(f"the rest of line {last.number} ({last.stripped!r})")
    completeness = found.result("no 'NIC statistics:' or 'NAME: VALUE' line")
    return EthtoolStats(counters=readings[0], interval_s=interval,
                        later=readings[1] if interval is not None else {}, repeated=repeated, **completeness)
