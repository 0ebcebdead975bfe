"""Parse `ibstat`: channel adapters (CAs), their firmware and the state, rate and link layer of each port.

`CA 'name'` starts an adapter and `Port N:` one of its ports; every other line is `key: value`.
Incomplete records are facts too (`ibstat | grep mlx5` leaves only the CA names): they are returned
with None fields and described in `errors` (and `missing`: the result is then incomplete), as are skipped
shell lines (prompts, and `ibstat` itself pasted with or without one) and the divider a script prints
between adapters it asks about one at a time (`---- mlx5_1 ----`). Lines of any other shape, or key lines
before the first CA, are listed in `unplaced`; only output without any recognisable line raises ParseError.
"""

from __future__ import annotations

import re

from pydantic import Field

from provisioner.errors import ParseError
from provisioner.parsers._shell import is_shell
from provisioner.parsers._text import (
    Collector,
    Fact,
    Line,
    Parsed,
    Unplaced,
    content_lines,
    fail,
    number,
    to_int,
)
from provisioner.parsers.hca_faults import is_fault

KIND = "ibstat"

_CA = re.compile(r"^CA\s+'(?P<name>[^']+)'$")
_PORT = re.compile(r"^Port\s+(?P<port>\S+?)\s*:$")
_KEY_VALUE = re.compile(r"^(?P<key>[A-Za-z][\w /-]*?)\s*:\s*(?P<value>.*)$")
_NO_DEVICES = re.compile(r"^No IB devices found\.?$", re.IGNORECASE)
# A loop's `echo "---- $dev ----"` between two `ibstat $dev`: a title between two runs of one of `-`, `=`, `#`
# or `*`, three or more each. Its title is not read as a CA name: only `CA 'name'` starts an adapter.
_DIVIDER = re.compile(r"^(?P<c>[-=#*])(?P=c){2,}\s*[^-=#*\s](?:.*[^-=#*\s])?\s*(?P=c){3,}$")
# infiniband-diags' own messages (`ibpanic: [pid] main: stat of IB device 'mlx5_8' failed: ...`): a panic or
# an error ends ibstat before the adapters it had not printed yet; a warning changes nothing.
_DIAGNOSTIC = re.compile(r"^(?:[\w.-]+:\s+)?(?P<level>ibpanic|iberror|ibwarn|ibdebug):\s*(?P<message>.*)$")

_PORT_REQUIRED = ("State", "Physical state", "Rate", "Link layer")


class IbstatPort(Fact):
    port: int
    state: str | None = None
    physical_state: str | None = None
    rate: int | float | None = None
    base_lid: int | None = None
    sm_lid: int | None = None
    lmc: int | None = None
    capability_mask: str | None = None
    port_guid: str | None = None
    link_layer: str | None = None
    attributes: dict[str, str] = Field(default_factory=dict)


class IbstatCa(Fact):
    name: str
    type: str | None = None
    number_of_ports: int | None = None
    firmware: str | None = None
    hardware_version: str | None = None
    node_guid: str | None = None
    system_image_guid: str | None = None
    attributes: dict[str, str] = Field(default_factory=dict)
    ports: list[IbstatPort] = Field(default_factory=list)


class Ibstat(Parsed):
    cas: list[IbstatCa]
    faults: list[Unplaced] = Field(default_factory=list)  # HCA kernel/firmware fault lines pasted in
    errors: list[str] = Field(default_factory=list)


class _Record:
    def __init__(self, line: Line) -> None:
        self.line = line
        self.attributes: dict[str, str] = {}
        self.lines: dict[str, Line] = {}

    def integer(self, key: str, found: Collector, where: str) -> int | None:
        """The value of `key`, or None when absent; an empty value is output cut short, any other
        non-number a line that fits nowhere (the rest of the record still counts)."""
        if key not in self.attributes:
            return None
        if not self.attributes[key]:
            found.lack(f"{where}: {key} value")
            return None
        try:
            return to_int(KIND, self.attributes[key], self.lines[key], key)
        except ParseError as err:
            found.place_nowhere(self.lines[key], err)
            return None


class _Ca(_Record):
    def __init__(self, line: Line, name: str) -> None:
        super().__init__(line)
        self.name = name
        self.ports: list[tuple[int, _Record]] = []


def _build_port(ca: _Ca, number_: int, record: _Record, errors: list[str], found: Collector) -> IbstatPort:
    attrs = record.attributes
    missing = [key for key in _PORT_REQUIRED if not attrs.get(key)]  # `Link layer:` alone was cut
    if missing:
        errors.append(f"line {record.line.number}: CA '{ca.name}' port {number_} has no "
                      f"{', '.join(missing)} (incomplete record)")
        found.lack(f"CA '{ca.name}' port {number_}: {', '.join(missing)}")
    where = f"CA '{ca.name}' port {number_}"
    rate = None
    if attrs.get("Rate"):
        rate = number(attrs["Rate"])
        if rate is None:
            found.place_nowhere(record.lines["Rate"], f"rate is not a number: {attrs['Rate']!r}")
    elif "Rate" in attrs:
        found.lack(f"{where}: Rate value")
    return IbstatPort(
        port=number_,
        state=attrs.get("State") or None,
        physical_state=attrs.get("Physical state") or None,
        rate=rate,
        base_lid=record.integer("Base lid", found, where),
        sm_lid=record.integer("SM lid", found, where),
        lmc=record.integer("LMC", found, where),
        capability_mask=attrs.get("Capability mask"),
        port_guid=attrs.get("Port GUID"),
        link_layer=attrs.get("Link layer"),
        attributes=attrs,
    )


def _build_ca(ca: _Ca, errors: list[str], found: Collector) -> IbstatCa:
    count = ca.integer("Number of ports", found, f"CA '{ca.name}'")
    if not ca.ports:
        errors.append(f"line {ca.line.number}: CA '{ca.name}' has no port records (incomplete record)")
        found.lack(f"CA '{ca.name}': port records")
    elif count is not None and count != len(ca.ports):
        errors.append(f"line {ca.line.number}: CA '{ca.name}' reports {count} ports, "
                      f"found {len(ca.ports)} port records")
        if count > len(ca.ports):
            found.lack(f"CA '{ca.name}': {count - len(ca.ports)} of its {count} port records")
    attrs = ca.attributes
    # AWS EFA prints `CA type:`, `Firmware version:` and `Hardware version:` with nothing after them:
    # unknown, like a port's empty `State:`, not a version that is the empty string.
    return IbstatCa(
        name=ca.name,
        type=attrs.get("CA type") or None,
        number_of_ports=count,
        firmware=attrs.get("Firmware version") or None,
        hardware_version=attrs.get("Hardware version") or None,
        node_guid=attrs.get("Node GUID"),
        system_image_guid=attrs.get("System image GUID"),
        attributes=attrs,
        ports=[_build_port(ca, n, record, errors, found) for n, record in ca.ports],
    )


def parse_ibstat(text: str) -> Ibstat:
    cas: list[_Ca] = []
    errors: list[str] = []
    ca: _Ca | None = None
    port: _Record | None = None
    found = Collector(KIND)

    def handle(line: Line) -> None:
        nonlocal ca, port
        body = line.stripped
        if m := _CA.match(body):
            ca = _Ca(line, m.group("name"))
            cas.append(ca)
            port = None
            return
        if ca is None:
            fail(KIND, "expected \"CA 'name'\" to start an adapter record", line)
        if m := _PORT.match(body):
            port = _Record(line)
            ca.ports.append((to_int(KIND, m.group("port"), line, "port number"), port))
            return
        if m := _KEY_VALUE.match(body):
            record = port if port is not None else ca
            key = m.group("key").strip()
            record.attributes[key] = m.group("value").strip()
            record.lines[key] = line
            return
        fail(KIND, "line fits no ibstat structure", line)

    faults: list[Unplaced] = []
    lines = content_lines(text)
    for line in lines:
        body = line.stripped
        if is_shell(line, KIND):
            errors.append(f"line {line.number}: shell prompt line skipped: {body}")
            continue
        if _NO_DEVICES.match(body):
            found.recognised += 1
            continue
        if _DIVIDER.match(body):
            errors.append(f"line {line.number}: a script's divider skipped: {body}")
            continue
        if m := _DIAGNOSTIC.match(body):
            found.recognised += 1
            if m.group("level") in ("ibpanic", "iberror"):
                errors.append(f"line {line.number}: ibstat stopped: {body}")
                found.lack(f"the adapters after the last one printed (ibstat stopped: {m.group('message')})")
            else:
                errors.append(f"line {line.number}: ibstat's own {m.group('level')} line: {body}")
            continue
        if is_fault(line.text):
            faults.append(Unplaced(line=line.number, text=line.text, reason="HCA kernel or firmware fault"))
            continue
        found.attempt(line, handle)
    built = [_build_ca(c, errors, found) for c in cas]
    completeness = found.result() if found.recognised or found.unplaced else {}
    return Ibstat(cas=built, faults=faults, errors=errors, **completeness)
