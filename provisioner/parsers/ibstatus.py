"""Parse `ibstatus`: one block per port, `Infiniband device 'mlx5_0' port 1 status:` then `key: value` lines.

rdma-core's script (infiniband-diags/scripts/ibstatus, `port_status`) prints the same seven lines for every
port, each value read from sysfs or the word `unknown` when the file is unreadable (`rate` is then None,
never a number). So the output was cut when the last block lacks a line the earlier blocks have, when a
block stops before its `state` or `rate` (it is left out), or when the last line stops inside its value:
a state or physical state that is not one of the kernel's names, a rate without its closing `)`, a GID
short of its eight groups. Those make the result incomplete (`missing`); lines of another shape are
listed in `unplaced`.
"""

from __future__ import annotations

import re

from pydantic import Field

from provisioner.errors import ParseError
from provisioner.parsers._shell import is_shell
from provisioner.parsers._text import Collector, Fact, Line, Parsed, content_lines, fail, number

KIND = "ibstatus"

HEADER = re.compile(
    r"^Infiniband device\s+'(?P<device>[^']+)'\s+port\s+(?P<port>[0-9]+)\s+status:$", re.ASCII
)
_KEY_VALUE = re.compile(r"^(?P<key>[A-Za-z][\w ]*?)\s*:\s*(?P<value>.*)$")
_CODED = re.compile(r"^(?P<code>[0-9]+)\s*:\s*(?P<name>\S.*)$", re.ASCII)
_RATE = re.compile(r"^(?P<rate>[0-9.]+)\s*Gb/sec(?:\s*\((?P<detail>[^)]*)\))?$", re.ASCII)
UNKNOWN = "unknown"  # what the script prints for a sysfs file it cannot read

# The whole forms of each value as the kernel writes them (drivers/infiniband/core/sysfs.c: state_show,
# phys_state_show via ib_port_phys_state_str, rate_show, link_layer_show, show_port_gid), used only to
# tell whether the last line of the output was cut inside its value.
_STATES = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}
_PHYS_STATES = {"Sleep", "Polling", "Disabled", "PortConfigurationTraining", "LinkUp", "LinkErrorRecovery",
                "Phy Test", "<unknown>"}
_WHOLE: dict[str, re.Pattern[str]] = {
    "default gid": re.compile(r"^(?:[0-9a-f]{4}:){7}[0-9a-f]{4}$", re.IGNORECASE),
    "base lid": re.compile(r"^0x[0-9a-f]+$", re.IGNORECASE),
    "sm lid": re.compile(r"^0x[0-9a-f]+$", re.IGNORECASE),
    "state": re.compile(r"^[0-9]+: (?:" + "|".join(sorted(_STATES)) + r")$"),
    "phys state": re.compile(r"^[0-9]+: (?:" + "|".join(re.escape(n) for n in sorted(_PHYS_STATES)) + r")$"),
    "rate": re.compile(r"^[0-9.]+ Gb/sec \([0-9]+X[^()]*\)$"),
    "link_layer": re.compile(r"^(?:InfiniBand|Ethernet|Unknown|IB)$"),
}
_HEADER_START = "Infiniband device '"
_HEADER_TAIL = re.compile(r"^ port [0-9]+ status:$")


def _header_cut(text: str) -> bool:
    """True for a header line the output stopped inside (`Infiniband device 'mlx5_1' po`)."""
    if len(text) <= len(_HEADER_START):
        return _HEADER_START.startswith(text)
    if not text.startswith(_HEADER_START):
        return False
    _, quote, rest = text[len(_HEADER_START):].partition("'")
    if not quote:
        return True
    return any(_HEADER_TAIL.match(rest + ending) for ending in (" port 1 status:", "1 status:", " status:",
                                                                  "status:", "tatus:", "atus:", "tus:", "us:",
                                                                  "s:", ":", "ort 1 status:", "rt 1 status:",
                                                                  "t 1 status:"))


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
    rate: int | float | None  # None when the script printed `unknown`
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
    if (rate is None or rate_value is None) and attrs["rate"].lower() != UNKNOWN:
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
        rate_detail=rate.group("detail") if rate else None,
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
    previous_keys: list[str] = []

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

    seen: set[str] = set()  # keys of every block before the last one
    for line in lines:
        if is_shell(line, kind):
            continue
        if found is None:
            handle(line)
        else:
            found.attempt(line, handle)
        if HEADER.match(line.stripped):
            seen |= set(previous_keys)
            previous_keys = []
        elif current is not None:
            previous_keys = list(attrs)
    close()
    if found is not None and current is not None:
        _check_last_block(current, attrs, attr_lines, seen, lines, found)
    return ports


def _check_last_block(header: tuple[Line, str, int], attrs: dict[str, str], attr_lines: dict[str, Line],
                      earlier: set[str], lines: list[Line], found: Collector) -> None:
    """Record in `found` where the output stopped inside its last block (see the module's docstring)."""
    _, device, port = header
    body = [line for line in lines if not is_shell(line, found.kind)]
    last = body[-1] if body else None
    if last is not None and found.unplaced and found.unplaced[-1].line == last.number:
        if _header_cut(last.stripped) or any(key.startswith(last.stripped.rstrip(":").strip().lower())
                                                   for key in _WHOLE):
            found.lack(f"the rest of line {last.number} ({last.stripped!r})")
        return
    lacking = [key for key in _WHOLE if key in earlier and key not in attrs]
    if lacking:
        found.lack(f"device {device} port {port}: {', '.join(lacking)} (the output stops before them)")
    if last is None:
        return
    for key, whole in _WHOLE.items():
        value = attrs.get(key)
        if attr_lines.get(key) is last and value is not None and value.lower() != UNKNOWN and not whole.match(value):
            found.lack(f"the rest of line {last.number} ({last.stripped!r})")


def parse_ibstatus(text: str) -> IbStatus:
    found = Collector(KIND)
    lines = content_lines(text)
    ports = parse_ibstatus_lines(KIND, lines, found)
    completeness = found.result() if lines else {}
    return IbStatus(ports=ports, **completeness)
