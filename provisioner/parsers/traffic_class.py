"""Parse an RDMA device's default traffic class (`/sys/class/infiniband/DEV/tc/PORT/traffic_class`).

The file reads `Global tclass=106` once set and is empty when unset (`tclass` is then None).
"""

from __future__ import annotations

import re

from provisioner.parsers._text import Line, Parsed, Unplaced, content_lines, fail, is_prompt

KIND = "traffic_class"

_TCLASS = re.compile(
    r"^(?:(?P<scope>Global)\s+)?tclass\s*=\s*(?P<value>[0-9]+)$|^(?P<bare>[0-9]+)$", re.ASCII
)


class TrafficClassSetting(Parsed):
    """`tclass` is the IP traffic class (DSCP << 2 | ECN) RDMA connections use; None when unset."""

    tclass: int | None = None
    scope: str | None = None

    @property
    def dscp(self) -> int | None:
        return None if self.tclass is None else self.tclass >> 2


def parse_traffic_class_value(kind: str, value: str, line: Line) -> TrafficClassSetting:
    """Parse one traffic_class value as found on `line` (also used where a script echoes the file)."""
    value = value.strip()
    if not value:
        return TrafficClassSetting()
    match = _TCLASS.fullmatch(value)
    if not match:
        fail(kind, "expected 'Global tclass=N' or an empty value", line)
    tclass = int(match.group("value") or match.group("bare"))
    if tclass > 255:
        fail(kind, f"traffic class {tclass} out of range 0-255", line)
    scope = match.group("scope")
    return TrafficClassSetting(tclass=tclass, scope=scope.lower() if scope else None)


def parse_traffic_class(text: str) -> TrafficClassSetting:
    lines = [line for line in content_lines(text) if not is_prompt(line)]
    if not lines:
        return TrafficClassSetting()
    setting = parse_traffic_class_value(KIND, lines[0].stripped, lines[0])
    if len(lines) > 1:
        others = [Unplaced(line=o.number, text=o.text, reason="the file holds one line") for o in lines[1:]]
        setting = setting.model_copy(update={"unplaced": others})
    return setting
