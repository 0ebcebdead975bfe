"""Parse `ibstatus`: one block per port, `Infiniband device 'mlx5_0' port 1 status:` then `key: value` lines.

A block without a `state` or `rate` line is a truncated record: it is left out and named in `missing`.
Lines of another shape are listed in `unplaced`.
"""

from __future__ import annotations

import re

from pydantic import Field

from provisioner.errors import ParseError
from provisioner.parsers._text import Collector, Fact, Line, Parsed, content_lines, fail, is_prompt, number

KIND = "ibstatus"

HEADER = re.compile(
    r"^Infiniband device\s+'(?P<device>[^']+)'\s+port\s+(?P<port>[0-9]+)\s+status:$", re.ASCII
)
_KEY_VALUE = re.compile(r"^(?P<key>[A-Za-z][\w ]*?)\s*:\s*(?P<value>.*)$")
_CODED = re.compile(r"^(?P<code>[0-9]+)\s*:\s*(?P<name>\S.*)$", re.ASCII)
_RATE = re.compile(r"^(?P<rate>[0-9.]+)\s*Gb/sec(?:\s*\((?P<detail>[^)]*)\))?$", re.ASCII)


class IbStatusPort(Fact):
    """`state` is e.g. ACTIVE (`state_code` 4), `phys_state` LinkUp (5); `rate` in Gb/s."""

    device: str
    port: int
    default_gid: str | None = None
    base_lid: str | None = None
    sm_lid: str | None = None
    state: str
    state_code: int | None = None
    phys_state: str | None = None
    phys_state_code: int | None = None
    rate: int | float
    rate_detail: str | None = None
    link_layer: str | None = None
    attributes: dict[str, str] = Field(default_factory=dict)


class IbStatus(Parsed):
    ports: list[IbStatusPort]


def _coded(value: str | None) -> tuple[str | None, int | None]:
    if value is None:
        return None, None
    m = _CODED.match(value)
    return (m.group("name").strip(), int(m.group("code"))) if m else (value, None)


def _build(kind: str, header: Line, device: str, port: int, attrs: dict[str, str],
           lines: dict[str, Line]) -> IbStatusPort:
    for key in ("state", "rate"):
        if key not in attrs:
            fail(kind, f"device {device} port {port} has no {key} line (truncated record?)", header)
    rate = _RATE.match(attrs["rate"])
    rate_value = number(rate.group("rate")) if rate else None
    if rate is None or rate_value is None:
        fail(kind, "rate is not like '100 Gb/sec (4X EDR)'", lines["rate"])
    state, state_code = _coded(attrs["state"])
    phys, phys_code = _coded(attrs.get("phys state"))
    return IbStatusPort(
        device=device,
        port=port,
        default_gid=attrs.get("default gid"),
        base_lid=attrs.get("base lid"),
        sm_lid=attrs.get("sm lid"),
        state=state or attrs["state"],
        state_code=state_code,
        phys_state=phys,
        phys_state_code=phys_code,
        rate=rate_value,
        rate_detail=rate.group("detail"),
        link_layer=attrs.get("link_layer"),
        attributes=attrs,
    )


def parse_ibstatus_lines(kind: str, lines: list[Line], found: Collector | None = None) -> list[IbStatusPort]:
    """Parse non-blank ibstatus lines; `kind` names the output in errors (other kinds embed ibstatus).

    With a Collector, lines that fit nowhere and truncated blocks are recorded in it instead of raising.
    """
    ports: list[IbStatusPort] = []
    current: tuple[Line, str, int] | None = None
    attrs: dict[str, str] = {}
    attr_lines: dict[str, Line] = {}

    def close() -> None:
        if current is None:
            return
        try:
            ports.append(_build(kind, *current, attrs, attr_lines))
        except ParseError as err:
            if found is None:
                raise
            found.lack(f"device {current[1]} port {current[2]}: {err.message}")

    def handle(line: Line) -> None:
        nonlocal current, attrs, attr_lines
        body = line.stripped
        if m := HEADER.match(body):
            close()
            current, attrs, attr_lines = (line, m.group("device"), int(m.group("port"))), {}, {}
            return
        if current is None:
            fail(kind, "expected \"Infiniband device 'NAME' port N status:\"", line)
        m = _KEY_VALUE.match(body)
        if not m:
            fail(kind, "line fits no ibstatus structure", line)
        key = m.group("key").strip().lower()
        attrs[key] = m.group("value").strip()
        attr_lines[key] = line

    for line in lines:
        if is_prompt(line):
            continue
        if found is None:
            handle(line)
        else:
            found.attempt(line, handle)
    close()
    return ports


def parse_ibstatus(text: str) -> IbStatus:
    found = Collector(KIND)
    lines = content_lines(text)
    ports = parse_ibstatus_lines(KIND, lines, found)
    completeness = found.result() if lines else {}
    return IbStatus(ports=ports, **completeness)
