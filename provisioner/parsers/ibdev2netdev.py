"""Parse `ibdev2netdev` (and `-v`): which network interface each RDMA device port backs, and its state.

    mlx5_0 port 1 ==> ens4f0 (Up)
    0000:3b:00.0 mlx5_0 (MT4119 - MCX516A) CX516A - ConnectX-5 fw 16.28.2006 port 1 (ACTIVE) ==> ens1f0 (Up)

No devices prints nothing, which is an empty list. Lines of another shape are listed in `unplaced`;
only output where no line is a link raises ParseError.
"""

from __future__ import annotations

import re

from provisioner.parsers._text import Collector, Fact, Line, Parsed, content_lines, fail, is_prompt

KIND = "ibdev2netdev"

_LEFT = re.compile(
    r"^(?:(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F])\s+)?(?P<device>[^\s()]+)"
    r"(?P<description>.*?)\s+port\s+(?P<port>[0-9]+)(?:\s+\((?P<port_state>[^)]*)\))?$",
    re.ASCII,
)
_RIGHT = re.compile(r"^(?P<netdev>[^\s()]+)(?:\s+\((?P<state>[^)]*)\))?$")
_FW = re.compile(r"\bfw\s+(?P<fw>[0-9][0-9.]*)")


class Ibdev2netdevLink(Fact):
    device: str
    port: int
    netdev: str
    state: str | None = None
    pci: str | None = None
    port_state: str | None = None
    fw: str | None = None
    description: str | None = None


class Ibdev2netdev(Parsed):
    links: list[Ibdev2netdevLink]


def parse_ibdev2netdev(text: str) -> Ibdev2netdev:
    links: list[Ibdev2netdevLink] = []
    found = Collector(KIND)
    lines = [line for line in content_lines(text) if not is_prompt(line)]
    for line in lines:
        found.attempt(line, lambda line: links.append(_link(line)))
    if not lines:
        return Ibdev2netdev(links=[])
    return Ibdev2netdev(links=links, **found.result())


def _link(line: Line) -> Ibdev2netdevLink:
    left, sep, right = line.stripped.partition("==>")
    if not sep:
        fail(KIND, "expected 'DEVICE port N ==> NETDEV (State)'", line)
    lm = _LEFT.match(left.strip())
    rm = _RIGHT.match(right.strip())
    if not lm or not rm:
        fail(KIND, "expected 'DEVICE port N ==> NETDEV (State)'", line)
    description = lm.group("description").strip() or None
    fw = _FW.search(description or "")
    return Ibdev2netdevLink(
        device=lm.group("device"),
        port=int(lm.group("port")),
        netdev=rm.group("netdev"),
        state=rm.group("state").strip() if rm.group("state") is not None else None,
        pci=lm.group("pci"),
        port_state=lm.group("port_state"),
        fw=fw.group("fw") if fw else None,
        description=description,
    )
