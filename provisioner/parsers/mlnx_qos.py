"""Parse `mlnx_qos -i IFACE`: trust mode, DSCP-to-priority map, PFC, buffers and traffic classes.

Handles the older layout (no receive buffer line, no `buffer` row) and the newer one, and per-tc
priorities printed either one per line or several on one line. Releases that still configured the egress
map through tc_wrap list under a `tc:` the socket priorities it carries (`skprio: 2 (tos: 8)`, or
`skprio: 0 (vlan 100)` for a VLAN's egress map): those go to that class's `skprios`. Unknown `key: value` lines are kept
in `extra`; any other line that fits none of the blocks is listed in `unplaced`. Every layout prints a
PFC block with its `enabled` row and then one `tc:` entry per class, whose priorities together are 0-7;
a `dscp2prio mapping:` block maps all 64 DSCP values. Output that stops before any of these is
incomplete. Only output with no mlnx_qos line raises ParseError.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from provisioner.parsers._shell import is_shell
from provisioner.parsers._text import Collector, Fact, Line, Parsed, content_lines, fail, is_int, to_int

KIND = "mlnx_qos"

_DCBX = re.compile(r"^DCBX mode:\s*(?P<value>.*)$")
_TRUST = re.compile(r"^Priority trust (?:state|mode):\s*(?P<value>\S+)$")
_DSCP_HEADER = re.compile(r"^dscp2prio mapping:$")
_DSCP_ROW = re.compile(r"^prio:\s*(?P<prio>\S+)\s+dscp:\s*(?P<dscps>.*)$")
_RX_BUFFER = re.compile(r"^Receive buffer size \(bytes\):\s*(?P<value>.*)$")
_CABLE = re.compile(r"^Cable len(?:gth)?:\s*(?P<value>.*)$")
_PFC_HEADER = re.compile(r"^PFC configuration:$")
_PFC_PRIORITIES = re.compile(r"^priority(?P<values>(?:\s+\S+)+)$")
_PFC_ROW = re.compile(r"^(?P<name>[A-Za-z_]+)(?P<values>(?:\s+\S+)+)$")
_TC = re.compile(r"^tc:\s*(?P<tc>\S+)(?:\s+(?P<rest>.*))?$")
_TC_PRIORITY = re.compile(r"^(?:priority|up):(?P<values>.*)$")
_SKPRIO = re.compile(
    r"^skprio:\s*(?P<skprio>[0-9]+)(?:\s*\((?:vlan\s+(?P<vlan>[0-9]+))?\s*(?:tos:\s*(?P<tos>[0-9]+))?\s*\))?$",
    re.ASCII,
)
_KEY_VALUE = re.compile(r"^(?P<key>[A-Za-z][\w ()/.-]*?)\s*:\s*(?P<value>.*)$")
_RX_ITEM = re.compile(r"^(?P<key>[A-Za-z_]\w*)\s*=\s*(?P<value>[0-9]+)$", re.ASCII)


class QosSkprio(Fact):
    """A socket priority the tc carries (older releases): the IP TOS that maps to it, and the VLAN whose
    egress map sends it there (None: the device's own map)."""

    skprio: int
    tos: int | None = None
    vlan: int | None = None


class QosTrafficClass(Fact):
    """One `tc:` entry: its scheduler (`tsa`), ETS share (`bw`, percent) and the priorities mapped to it."""

    tc: int
    tsa: str | None = None
    bw: int | None = None
    ratelimit: str | None = None
    priorities: list[int] = Field(default_factory=list)
    skprios: list[QosSkprio] = Field(default_factory=list)
    attributes: dict[str, str] = Field(default_factory=dict)


class MlnxQos(Parsed):
    """What `mlnx_qos -i IFACE` reports. `pfc_buffer` is indexed by priority; dict keys are ints."""

    dcbx_mode: str | None = None
    trust: str | None = None
    dscp2prio: dict[int, int] = Field(default_factory=dict)
    receive_buffer: list[int] | None = None
    receive_buffer_attributes: dict[str, int] = Field(default_factory=dict)
    cable_len: int | None = None
    pfc_priorities: list[int] = Field(default_factory=list)
    pfc_enabled: list[int] = Field(default_factory=list)
    pfc_buffer: list[int] | None = None
    pfc_rows: dict[str, list[int]] = Field(default_factory=dict)
    tcs: list[QosTrafficClass] = Field(default_factory=list)
    ratelimit: dict[int, str] = Field(default_factory=dict)
    extra: dict[str, str] = Field(default_factory=dict)


def _ints(kind: str, values: list[str], line: Line, what: str) -> list[int]:
    return [to_int(kind, v, line, what) for v in values]


def _tc_attributes(kind: str, rest: str, line: Line) -> dict[str, str]:
    attributes: dict[str, str] = {}
    for part in rest.split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition(":")
        if not sep or not key.strip():
            fail(kind, f"tc attribute is not 'key: value': {part!r}", line)
        attributes[key.strip().lower()] = value.strip()
    return attributes


class _Builder:
    """Accumulates one mlnx_qos report; `feed` returns False for a line it does not recognise."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.block: str | None = None
        self.dcbx_mode: str | None = None
        self.trust: str | None = None
        self.dscp2prio: dict[int, int] = {}
        self.dscp_header = False
        self.receive_buffer: list[int] | None = None
        self.receive_buffer_attributes: dict[str, int] = {}
        self.cable_len: int | None = None
        self.pfc_priorities: list[int] | None = None
        self.pfc_header: Line | None = None
        self.pfc_rows: dict[str, list[int]] = {}
        self.tcs: list[dict[str, Any]] = []
        self.extra: dict[str, str] = {}

    def feed(self, line: Line) -> bool:
        kind, body = self.kind, line.stripped
        if m := _DSCP_ROW.match(body):
            if self.block != "dscp2prio":
                fail(kind, "dscp mapping row outside the dscp2prio block", line)
            prio = to_int(kind, m.group("prio"), line, "priority")
            if not 0 <= prio <= 7:
                fail(kind, f"priority {prio} out of range 0-7", line)
            for item in m.group("dscps").split(","):
                if not item.strip():
                    continue
                dscp = to_int(kind, item, line, "dscp")
                if not 0 <= dscp <= 63:
                    fail(kind, f"dscp {dscp} out of range 0-63", line)
                if dscp in self.dscp2prio:
                    fail(kind, f"dscp {dscp} mapped twice", line)
                self.dscp2prio[dscp] = prio
            return True
        if m := _TC_PRIORITY.match(body):
            if self.block != "tc":
                fail(kind, "tc priority line before any 'tc:' line", line)
            self.tcs[-1]["priorities"].extend(_ints(kind, m.group("values").split(), line, "priority"))
            return True
        if m := _SKPRIO.match(body):
            # Not a `key: value` for `extra`: one line per socket priority, each belonging to the tc above.
            if self.block != "tc":
                fail(kind, "skprio line before any 'tc:' line", line)
            self.tcs[-1]["skprios"].append(QosSkprio(
                skprio=int(m.group("skprio")),
                tos=int(m.group("tos")) if m.group("tos") else None,
                vlan=int(m.group("vlan")) if m.group("vlan") else None,
            ))
            return True
        if _PFC_PRIORITIES.match(body) and ":" not in body:
            values = _PFC_PRIORITIES.match(body).group("values").split()  # type: ignore[union-attr]
            self.pfc_priorities = _ints(kind, values, line, "PFC priority")
            self.pfc_header = line
            self.block = "pfc"
            return True
        if self.block == "pfc" and ":" not in body and (m := _PFC_ROW.match(body)):
            if self.pfc_priorities is None:
                fail(kind, "PFC row before the 'priority' header row", line)
            values = _ints(kind, m.group("values").split(), line, f"PFC {m.group('name')} value")
            if len(values) != len(self.pfc_priorities):
                fail(kind, f"PFC {m.group('name')} row has {len(values)} values for "
                           f"{len(self.pfc_priorities)} priorities", line)
            if m.group("name") == "enabled" and any(v not in (0, 1) for v in values):
                fail(kind, "PFC enabled flags must be 0 or 1", line)
            self.pfc_rows[m.group("name")] = values
            return True
        if m := _TC.match(body):
            tc = to_int(kind, m.group("tc"), line, "tc")
            attributes = _tc_attributes(kind, m.group("rest") or "", line)
            self.tcs.append({"tc": tc, "attributes": attributes, "priorities": [], "skprios": [], "line": line})
            self.block = "tc"
            return True
        if _DSCP_HEADER.match(body):
            self.block = "dscp2prio"
            self.dscp_header = True
            return True
        if _PFC_HEADER.match(body):
            self.block = "pfc"
            return True
        if m := _DCBX.match(body):
            self.dcbx_mode = m.group("value").strip() or None
        elif m := _TRUST.match(body):
            self.trust = m.group("value").lower()
        elif m := _RX_BUFFER.match(body):
            self._receive_buffer(m.group("value"), line)
        elif m := _CABLE.match(body):
            self.cable_len = to_int(kind, m.group("value"), line, "cable length")
        elif m := _KEY_VALUE.match(body):
            self.extra[m.group("key").strip()] = m.group("value").strip()
        else:
            return False
        self.block = None
        return True

    def _receive_buffer(self, value: str, line: Line) -> None:
        sizes: list[int] = []
        # Values end with a comma, and newer tools append `name=value` totals after the sizes.
        for item in value.split(","):
            item = item.strip()
            if not item:
                continue
            if is_int(item):
                sizes.append(int(item))
            elif m := _RX_ITEM.match(item):
                self.receive_buffer_attributes[m.group("key")] = int(m.group("value"))
            else:
                fail(self.kind, f"receive buffer size is not a number: {item!r}", line)
        self.receive_buffer = sizes

    def check_whole(self, found: Collector) -> None:
        """What a whole `mlnx_qos -i` report has and a cut one lacks, in the order the report prints it."""
        if self.dscp_header and len(self.dscp2prio) < 64:
            found.lack(f"dscp2prio rows ({len(self.dscp2prio)} of the 64 DSCP values were printed)")
        if self.receive_buffer == []:  # `Receive buffer size (bytes):` alone
            found.lack("the receive buffer sizes")
        if self.pfc_header is None:
            found.lack("the PFC configuration block")
        elif "enabled" not in self.pfc_rows:
            found.lack("the PFC 'enabled' row")
        if not self.tcs:
            found.lack("the traffic classes ('tc:' entries)")
        elif unmapped := sorted(set(range(8)) - {p for entry in self.tcs for p in entry["priorities"]}):
            found.lack(f"the tc entries of priorities {', '.join(map(str, unmapped))}")

    def build(self, found: Collector) -> MlnxQos:
        tcs = []
        for entry in self.tcs:
            attributes: dict[str, str] = entry["attributes"]
            bw_text = attributes.get("bw")
            bw: int | None = None
            if bw_text is not None:
                if not is_int(bw_text.rstrip("%")):
                    fail(self.kind, f"tc bandwidth is not a percentage: {bw_text!r}", entry["line"])
                bw = int(bw_text.rstrip("%"))
            tcs.append(QosTrafficClass(
                tc=entry["tc"],
                tsa=attributes.get("tsa"),
                bw=bw,
                ratelimit=attributes.get("ratelimit"),
                priorities=entry["priorities"],
                skprios=entry["skprios"],
                attributes=attributes,
            ))
        priorities = self.pfc_priorities or []
        enabled = self.pfc_rows.get("enabled")
        if self.pfc_header is not None and enabled is None:
            found.lack("the PFC 'enabled' row")
        buffer = self.pfc_rows.get("buffer")
        return MlnxQos(
            dcbx_mode=self.dcbx_mode,
            trust=self.trust,
            dscp2prio=dict(sorted(self.dscp2prio.items())),
            receive_buffer=self.receive_buffer,
            receive_buffer_attributes=self.receive_buffer_attributes,
            cable_len=self.cable_len,
            pfc_priorities=priorities,
            pfc_enabled=sorted(p for p, flag in zip(priorities, enabled, strict=True) if flag == 1) if enabled else [],
            pfc_buffer=[b for _, b in sorted(zip(priorities, buffer, strict=True))] if buffer else None,
            pfc_rows=self.pfc_rows,
            tcs=tcs,
            ratelimit={tc.tc: tc.ratelimit for tc in tcs if tc.ratelimit is not None},
            extra=self.extra,
            **found.result("no mlnx_qos line found"),
        )


def parse_mlnx_qos_lines(kind: str, lines: list[Line], *, require_trust_or_pfc: bool = True) -> MlnxQos:
    """Parse the given non-blank lines as one mlnx_qos report; used by other kinds that embed one."""
    builder = _Builder(kind)
    found = Collector(kind)

    def handle(line: Line) -> None:
        if not builder.feed(line):
            fail(kind, "line fits no mlnx_qos block", line)

    for line in lines:
        if not is_shell(line, kind):
            found.attempt(line, handle)
    if require_trust_or_pfc:
        builder.check_whole(found)  # an embedded excerpt (rdma_qos_script) is judged by its container
    if require_trust_or_pfc and builder.trust is None and builder.pfc_priorities is None:
        if not lines:
            fail(kind, "empty output")
        if found.first_error is not None:
            raise found.first_error  # the first line that is not mlnx_qos output
        fail(kind, "no 'Priority trust state' line and no PFC configuration: not mlnx_qos output")
    if not require_trust_or_pfc:
        found.recognised += 1  # an embedded part may be empty or all noise: its container decides
    return builder.build(found)


def parse_mlnx_qos(text: str) -> MlnxQos:
    return parse_mlnx_qos_lines(KIND, content_lines(text))
