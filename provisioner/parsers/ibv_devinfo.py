"""Parse `ibv_devinfo` and `ibv_devinfo -v`: devices, their ports and (with -v) GID tables.

Structure, not columns: `hca_id:` starts a device, `port: N` a port, `GID[ N]:` a GID of that port.
Between them: `key: value`, `key = value` and `label<tab or 2+ spaces>value` attributes; lines indented
deeper than the `key:` line above them continue that key as a flag list (`device_cap_flags`,
`*_odp_caps`), though a `key:<gap>value` attribute line there is no flag (in output filtered by grep, port
lines under the last mask) and is unplaced; indented sentences of two or more words (`Multi-Packet RQ is not
supported`) are kept as notes.
A `key:` with no value may instead open a block of its own `key: value` lines (rdma-core's `tso_caps:`,
`rss_caps:`, `cq moderation caps:`): those are attributes named `block.key`, and a nested `key:` opens a
nested block (`tso_caps.supported_qp` then holds its flags), so two blocks' `supported_qp` stay apart.
Anything else, and anything before the first `hca_id:`, is listed in `unplaced`. A port without its
`state` line or a device without ports was cut off: it is left out (or kept without ports) and named in
`missing`. Only output with nothing recognisable raises ParseError.
"""

from __future__ import annotations

import re

from pydantic import Field

from provisioner.errors import ParseError
from provisioner.parsers._gid import gid_of
from provisioner.parsers._shell import is_shell
from provisioner.parsers._text import Collector, Fact, Line, Parsed, Unplaced, content_lines, fail, to_int
from provisioner.parsers.hca_faults import is_fault

KIND = "ibv_devinfo"

_HCA = re.compile(r"^hca_id:\s*(?P<name>\S+)$")
_PORT = re.compile(r"^port:\s*(?P<port>\S+)$")
_DEVICE_PORTS = re.compile(r"^Device ports:$")
_GID = re.compile(r"^GID\[\s*(?P<index>[0-9]+)\s*\]:\s*(?P<gid>[^\s,]+)\s*(?:,\s*(?P<type>.+))?$", re.ASCII)
_KEY_VALUE = re.compile(r"^(?P<key>[A-Za-z_][\w .()/-]*?)\s*:\s*(?P<value>.*)$")
_KEY_EQUALS = re.compile(r"^(?P<key>[A-Za-z_][\w .()/-]*?)\s*=\s*(?P<value>\S.*)$")
_KEY_GAP = re.compile(r"^(?P<key>[A-Za-z_][\w .()/-]*?)(?:\t+|\s{2,})(?P<value>\S+)$")
# ibv_devinfo prints an attribute as `key:` and a gap (tabs, or spaces where tabs were expanded) before its value;
# a flag under a mask is a bare name, or `Unknown flags: 0x...` with one space.
_GAPPED_ATTRIBUTE = re.compile(r"^[A-Za-z_]\w*:(?:\t|\s{2,})\S", re.ASCII)
_NOTE = re.compile(r"^[A-Za-z][\w .,()/+-]*$")
_STATE = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:\s*\(\s*(?P<code>[0-9]+)\s*\))?$", re.ASCII)
_MTU = re.compile(r"^(?P<mtu>[0-9]+)(?:\s*\(\s*[0-9]+\s*\))?$", re.ASCII)
_NO_DEVICES = re.compile(r"^No IB devices found\.?$", re.IGNORECASE)
# Lines every ibv_devinfo since libibverbs 1.1 prints for each device and each port, before the optional
# ones (board_id, link_layer, the -v fields): a record without one of them was cut short.
_DEVICE_LINES = ("transport", "fw_ver", "node_guid", "sys_image_guid", "vendor_id", "vendor_part_id", "hw_ver",
                 "phys_port_cnt")
_PORT_LINES = ("max_mtu", "active_mtu", "sm_lid", "port_lid", "port_lmc")


class Gid(Fact):
    """`type` is `IB`, `RoCE v1` or `RoCE v2` as printed (IB when the port is InfiniBand and none is)."""

    index: int
    gid: str  # as printed: full or short form, by rdma-core release
    gid_normal: str  # the full form (see _gid.normal_gid): compare this one
    type: str | None = None


class IbvPort(Fact):
    port: int
    state: str
    state_code: int | None = None
    max_mtu: int | None = None
    active_mtu: int | None = None
    link_layer: str | None = None
    sm_lid: int | None = None
    port_lid: int | None = None
    phys_state: str | None = None
    active_width: str | None = None
    active_speed: str | None = None
    attributes: dict[str, str] = Field(default_factory=dict)
    gids: list[Gid] = Field(default_factory=list)


class IbvDevice(Fact):
    name: str
    transport: str | None = None
    fw_ver: str | None = None
    node_guid: str | None = None
    sys_image_guid: str | None = None
    vendor_id: str | None = None
    vendor_part_id: int | None = None
    hw_ver: str | None = None
    board_id: str | None = None
    phys_port_cnt: int | None = None
    attributes: dict[str, str] = Field(default_factory=dict)
    flags: dict[str, list[str]] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    ports: list[IbvPort]


class IbvDevinfo(Parsed):
    devices: list[IbvDevice]
    faults: list[Unplaced] = Field(default_factory=list)  # HCA kernel/firmware fault lines pasted in


class _Port:
    def __init__(self, line: Line, number: int) -> None:
        self.line = line
        self.number = number
        self.attributes: dict[str, str] = {}
        self.attribute_lines: dict[str, Line] = {}
        self.gids: list[Gid] = []
        self.found = Collector(KIND)  # the parse's own collector, once build() is given it

    def build(self, device: str, found: Collector) -> IbvPort:
        attrs, lines = self.attributes, self.attribute_lines
        if not attrs.get("state"):
            fail(KIND, f"port {self.number} of {device} has no state line (truncated record?)", self.line)
        state = _STATE.match(attrs["state"])
        if not state:
            fail(KIND, "port state is not like PORT_ACTIVE (4)", lines["state"])
        if absent := [key for key in _PORT_LINES if not attrs.get(key)]:
            found.lack(f"port {self.number} of {device}: {', '.join(absent)}")
        self.found = found
        phys = _STATE.match(attrs.get("phys_state", ""))
        return IbvPort(
            port=self.number,
            state=state.group("name"),
            state_code=int(state.group("code")) if state.group("code") else None,
            max_mtu=self._mtu("max_mtu"),
            active_mtu=self._mtu("active_mtu"),
            link_layer=attrs.get("link_layer"),
            sm_lid=self._int("sm_lid"),
            port_lid=self._int("port_lid"),
            phys_state=phys.group("name") if phys else attrs.get("phys_state"),
            active_width=attrs.get("active_width"),
            active_speed=attrs.get("active_speed"),
            attributes=attrs,
            gids=self.gids,
        )

    def _mtu(self, key: str) -> int | None:
        if not self.attributes.get(key):
            return None
        m = _MTU.match(self.attributes[key])
        if not m:
            self.found.place_nowhere(self.attribute_lines[key], f"{key} is not like 4096 (5)")
            return None
        return int(m.group("mtu"))

    def _int(self, key: str) -> int | None:
        return _integer(self.attributes, self.attribute_lines, key, self.found)


def _integer(attrs: dict[str, str], lines: dict[str, Line], key: str, found: Collector) -> int | None:
    """The value of `key`; None when absent, empty (the record's completeness says so) or not a number
    (its line is then listed in `unplaced`, and the rest of the record still counts)."""
    if not attrs.get(key):
        return None
    try:
        return to_int(KIND, attrs[key], lines[key], key)
    except ParseError as err:
        found.place_nowhere(lines[key], err)
        return None


class _Device:
    def __init__(self, line: Line, name: str) -> None:
        self.line = line
        self.name = name
        self.attributes: dict[str, str] = {}
        self.attribute_lines: dict[str, Line] = {}
        self.flags: dict[str, list[str]] = {}
        self.notes: list[str] = []
        self.ports: list[_Port] = []

    def build(self, found: Collector) -> IbvDevice:
        attrs = self.attributes
        if not self.ports:
            found.lack(f"ports of {self.name}")
        ports = self._ports(found)
        if absent := [key for key in _DEVICE_LINES if not attrs.get(key)]:
            found.lack(f"{self.name}: {', '.join(absent)}")

        def integer(key: str) -> int | None:
            return _integer(attrs, self.attribute_lines, key, found)

        return IbvDevice(
            name=self.name,
            transport=attrs.get("transport"),
            fw_ver=attrs.get("fw_ver"),
            node_guid=attrs.get("node_guid"),
            sys_image_guid=attrs.get("sys_image_guid"),
            vendor_id=attrs.get("vendor_id"),
            vendor_part_id=integer("vendor_part_id"),
            hw_ver=attrs.get("hw_ver"),
            board_id=attrs.get("board_id"),
            phys_port_cnt=integer("phys_port_cnt"),
            attributes=attrs,
            flags=self.flags,
            notes=self.notes,
            ports=ports,
        )


    def _ports(self, found: Collector) -> list[IbvPort]:
        ports = []
        for port in self.ports:
            try:
                ports.append(port.build(self.name, found))
            except ParseError as err:
                found.lack(f"port {port.number} of {self.name}: {err.message}")
        return ports


def _gid(line: Line, match: re.Match[str], port: _Port) -> Gid:
    value = match.group("gid")
    normal = gid_of(KIND, value, line)
    kind = match.group("type")
    if kind is None and (port.attributes.get("link_layer") or "").lower() == "infiniband":
        kind = "IB"
    return Gid(index=int(match.group("index")), gid=value, gid_normal=normal, type=kind.strip() if kind else None)


def parse_ibv_devinfo(text: str) -> IbvDevinfo:
    devices: list[_Device] = []
    device: _Device | None = None
    port: _Port | None = None
    # The open `key:` lines that deeper lines may continue, outermost first: (line, dotted name, opens a block).
    headings: list[tuple[Line, str, bool]] = []
    found = Collector(KIND)

    def handle(line: Line) -> None:
        nonlocal device, port
        body = line.stripped
        if m := _HCA.match(body):
            device = _Device(line, m.group("name"))
            devices.append(device)
            port = None
            headings.clear()
            return
        if device is None:
            fail(KIND, "expected 'hca_id:' to start a device", line)
        if _DEVICE_PORTS.match(body):
            headings.clear()
            return
        if m := _PORT.match(body):
            port = _Port(line, to_int(KIND, m.group("port"), line, "port number"))
            device.ports.append(port)
            headings.clear()
            return
        if body.startswith("GID["):
            gid_match = _GID.match(body)
            if port is None or not gid_match:
                fail(KIND, "GID line outside a port or not like 'GID[ 0]: fe80:...[, RoCE v2]'", line)
            port.gids.append(_gid(line, gid_match, port))
            return
        while headings and line.indent <= headings[-1][0].indent:
            headings.pop()
        target = port if port is not None else device
        if headings:
            _, name, block = headings[-1]
            m = _KEY_VALUE.match(body)
            # Under a mask (`device_cap_flags: 0x...`) every line is a flag, `Unknown flags: 0x...` too;
            # under a bare `key:` a `name: value` line is one of the block's own attributes.
            if not block and _GAPPED_ATTRIBUTE.match(body):
                # An attribute where a flag was due: the lines between were filtered out (`| grep`).
                fail(KIND, f"an attribute line where a flag of {name} was due (lines left out before it?)", line)
            if not block or not m:
                device.flags.setdefault(name, []).append(body)
                return
            key = f"{name}.{m.group('key').strip()}"
            target.attributes[key] = m.group("value").strip()
            target.attribute_lines[key] = line
            headings.append((line, key, not m.group("value").strip()))
            return
        m = _KEY_VALUE.match(body) or _KEY_EQUALS.match(body) or _KEY_GAP.match(body)
        if m:
            key = m.group("key").strip()
            target.attributes[key] = m.group("value").strip()
            target.attribute_lines[key] = line
            if m.re is _KEY_VALUE:
                headings.append((line, key, not m.group("value").strip()))
            return
        if line.indent and " " in body and _NOTE.match(body):
            device.notes.append(body)
            return
        fail(KIND, "line fits no ibv_devinfo structure", line)

    faults: list[Unplaced] = []
    lines = content_lines(text)
    for line in lines:
        if is_shell(line, KIND):
            continue
        if device is None and _NO_DEVICES.match(line.stripped):
            found.recognised += 1
            continue
        if is_fault(line.text):
            faults.append(Unplaced(line=line.number, text=line.text, reason="HCA kernel or firmware fault"))
            continue
        found.attempt(line, handle)
    built = [d.build(found) for d in devices]
    completeness = found.result() if found.recognised or found.unplaced else {}
    return IbvDevinfo(devices=built, faults=faults, **completeness)
