"""Parse `rdma link` / `rdma link show` (iproute2): per RDMA port, its state and the netdev behind it.

Each line is `link DEV/PORT` followed by `key value` pairs (`state ACTIVE physical_state LINK_UP
netdev eth0`, plus `subnet_prefix`, `lid`, ... on InfiniBand). Indented `key: value` lines (`-d` detail
such as `caps: <...>`) attach to the link above. Older iproute2 prints `0/1: mlx5_0/1: state ACTIVE ...`
(device index and port first). No RDMA devices prints nothing: an empty list. Other lines are listed in
`unplaced`; only output where no line is a link raises ParseError.
"""

from __future__ import annotations

import re

from pydantic import Field

from provisioner.parsers._text import Collector, Fact, Line, Parsed, content_lines, fail, is_prompt

KIND = "rdma_link"

_LINK = re.compile(
    r"^(?:link\s+|[0-9]+/[0-9]+:\s*)(?P<device>[^\s/]+)/(?P<port>[0-9]+):?(?:\s+(?P<rest>.*))?$", re.ASCII
)
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


def parse_rdma_link(text: str) -> RdmaLinks:
    entries: list[tuple[str, int, dict[str, str]]] = []
    found = Collector(KIND)

    def handle(line: Line) -> None:
        body = line.stripped
        if m := _LINK.match(body):
            tokens = (m.group("rest") or "").split()
            if len(tokens) % 2:
                fail(KIND, "attributes after 'link DEV/PORT' must be 'key value' pairs", line)
            attributes = dict(zip(tokens[::2], tokens[1::2], strict=True))
            if "state" not in attributes:
                fail(KIND, "link has no state", line)
            entries.append((m.group("device"), int(m.group("port")), attributes))
            return
        if entries and line.indent and (m := _DETAIL.match(body)):
            entries[-1][2][m.group("key")] = m.group("value").strip()
            return
        fail(KIND, "expected 'link DEV/PORT state ... physical_state ... [netdev ...]'", line)

    lines = [line for line in content_lines(text) if not is_prompt(line)]
    for line in lines:
        found.attempt(line, handle)
    completeness = found.result() if lines else {}
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
