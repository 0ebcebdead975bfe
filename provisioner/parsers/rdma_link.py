"""Parse `rdma link` / `rdma link show` (iproute2): per RDMA port, its state and the netdev behind it.

Each line is `link DEV/PORT` followed by `key value` pairs (`state ACTIVE physical_state LINK_UP
netdev eth0`, plus `subnet_prefix`, `lid`, ... on InfiniBand). Indented `key: value` lines (`-d` detail
such as `caps: <...>`) attach to the link above. Older iproute2 prints `0/1: mlx5_0/1: state ACTIVE ...`
(device index and port first). No RDMA devices prints nothing: an empty list. Other lines are listed in
`unplaced`; only output where no line is a link raises ParseError. `rdma -j link` prints a JSON array of
`{"ifname": DEV, "port": N, "state": ..., "netdev": ..., "netdev_index": ...}`, read the same way.

A link line without its `state` (every `rdma link` line has one), or with a key left without its value,
is the output stopping inside that line: the link is named in `missing`, not listed.
"""

from __future__ import annotations

import json
import re

from pydantic import Field

from provisioner.parsers._shell import is_shell
from provisioner.parsers._text import Collector, Fact, Line, Parsed, content_lines, fail

KIND = "rdma_link"

_LINK = re.compile(
    r"^(?:link\s+|[0-9]+/[0-9]+:\s*)(?P<device>[^\s/]+)/(?P<port>[0-9]+):?(?:\s+(?P<rest>.*))?$", re.ASCII
)
_DEV = re.compile(r"^[0-9]+:\s*\S+:\s+node_type\s", re.ASCII)  # `rdma dev`: `0: mlx5_0: node_type ca fw ...`
_DETAIL = re.compile(r"^(?P<key>[A-Za-z_][\w-]*)\s*:\s*(?P<value>.*)$")


class RdmaLink(Fact):
    device: str
    port: int
    state: str
    physical_state: str | None = None
    netdev: str | None = None
    attributes: dict[str, str] = Field(default_factory=dict)


class RdmaLinks(Parsed):
    links: list[RdmaLink]


def _from_json(lines: list[Line], found: Collector) -> list[tuple[str, int, dict[str, str]]]:
    """`rdma -j link [show]` (compact or `-p` pretty): one array of link objects."""
    text = "\n".join(line.text for line in lines)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        found.recognised += 1  # it opened as the tool's JSON: the output stops inside it
        found.lack(f"the rest of the JSON array (cut at line {lines[0].number + err.lineno - 1})")
        return []
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        fail(KIND, "rdma -j link prints an array of link objects", lines[0])
    entries = []
    for item in data:
        if not {"ifname", "port", "state"} <= item.keys():
            found.place_nowhere(lines[0], f"link object without ifname, port or state: {item}")
            continue
        attributes = {key: (" ".join(map(str, value)) if isinstance(value, list) else str(value))
                      for key, value in item.items() if key not in ("ifname", "port", "ifindex")}
        entries.append((str(item["ifname"]), int(item["port"]), attributes))
    found.recognised += 1
    return entries


def parse_rdma_link(text: str) -> RdmaLinks:
    entries: list[tuple[str, int, dict[str, str]]] = []
    found = Collector(KIND)

    def handle(line: Line) -> None:
        body = line.stripped
        if m := _LINK.match(body):
            tokens = (m.group("rest") or "").split()
            attributes = dict(zip(tokens[::2], tokens[1::2], strict=False))
            if "state" not in attributes and {"physical_state", "netdev"} & set(tokens):
                fail(KIND, "link has no state", line)  # rdma prints state before these: not a cut
            if "state" not in attributes or len(tokens) % 2:
                found.lack(f"link {m.group('device')}/{m.group('port')} (its line stops before "
                           f"{'its state' if 'state' not in attributes else 'the value of ' + tokens[-1]})")
                return
            entries.append((m.group("device"), int(m.group("port")), attributes))
            return
        if entries and line.indent and (m := _DETAIL.match(body)):
            entries[-1][2][m.group("key")] = m.group("value").strip()
            return
        if _DEV.match(body):
            fail(KIND, "an 'rdma dev' line (a device, not a link: no port state)", line)
        fail(KIND, "expected 'link DEV/PORT state ... physical_state ... [netdev ...]'", line)

    lines = [line for line in content_lines(text) if not is_shell(line, KIND)]
    if lines and lines[0].stripped.startswith("["):
        entries = _from_json(lines, found)
        lines = []
    for line in lines:
        found.attempt(line, handle)
    completeness = found.result() if found.recognised or found.unplaced or found.missing else {}
    return RdmaLinks(**completeness, links=[
        RdmaLink(
            device=device,
            port=port,
            state=attrs["state"],
            physical_state=attrs.get("physical_state"),
            netdev=attrs.get("netdev"),
            attributes=attrs,
        )
        for device, port, attrs in entries
    ])
