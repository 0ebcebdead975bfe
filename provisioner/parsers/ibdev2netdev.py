"""Parse `ibdev2netdev` (and `-v`): which network interface each RDMA device port backs, and its state.

    mlx5_0 port 1 ==> ens4f0 (Up)
    0000:3b:00.0 mlx5_0 (MT4119 - MCX516A) CX516A - ConnectX-5 fw 16.28.2006 port 1 (ACTIVE) ==> ens1f0 (Up)

Kernels without `dev_id` in sysfs get the script's old style, which prints no state:

    mlx4_0 port 1 <===> eth2

The new style always prints the state in parentheses (`Up`, `Down`, or `NA` and `()` when the netdev has
no carrier file), so a `==>` line without it was cut short and the output is incomplete. No devices prints
nothing, which is an empty list. Lines of another shape are listed in `unplaced`; only output where no line
is a link raises ParseError.
"""

from __future__ import annotations

import re

from provisioner.parsers._shell import is_shell
from provisioner.parsers._text import Collector, Fact, Line, Parsed, content_lines, fail

KIND = "ibdev2netdev"

_LEFT = re.compile(
    r"^(?:(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F])\s+)?(?P<device>[^\s()]+)"
    r"(?P<description>.*?)\s+port\s+(?P<port>[0-9]+)(?:\s+\((?P<port_state>[^)]*)\))?$",
    re.ASCII,
)
_RIGHT = re.compile(r"^(?P<netdev>[^\s()]+)(?:\s+\((?P<state>[^)]*)\))?$")
_CUT = re.compile(r"\sport(?:\s|$)|==>|<=+$")
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
    lines = [line for line in content_lines(text) if not is_shell(line, KIND)]

    def add(line: Line) -> None:
        link = _link(line)
        links.append(link)
        if link.state is None and "<===>" not in line.stripped:
            found.lack(f"the state of {link.device} port {link.port} ({link.netdev}), cut at line {line.number}")

    for line in lines:
        found.attempt(line, add)
    if lines and found.unplaced and found.unplaced[-1].line == lines[-1].number and _CUT.search(lines[-1].stripped):
        # The last line stopped inside a link (`... ==> ens1f0 (U`): the rest of it is missing.
        found.lack(f"the rest of line {lines[-1].number} ({lines[-1].stripped!r})")
    if not lines:
        return Ibdev2netdev(links=[])
    return Ibdev2netdev(links=links, **found.result())


def _link(line: Line) -> Ibdev2netdevLink:
    body = line.stripped
    old_style = "<===>" in body
    left, sep, right = body.partition("<===>" if old_style else "==>")
    if not sep:
        fail(KIND, "expected 'DEVICE port N ==> NETDEV (State)'", line)
    lm = _LEFT.match(left.strip())
    rm = _RIGHT.match(right.strip())
    if not lm or not rm or (old_style and rm.group("state") is not None):
        fail(KIND, "expected 'DEVICE port N ==> NETDEV (State)' or 'DEVICE port N <===> NETDEV'", line)
    description = lm.group("description").strip() or None
    fw = _FW.search(description or "")
    return Ibdev2netdevLink(
        device=lm.group("device"),
        port=int(lm.group("port")),
        netdev=rm.group("netdev"),
        state=rm.group("state").strip() if rm.group("state") is not None else None,
        pci=lm.group("pci"),
        port_state=lm.group("port_state").strip() if lm.group("port_state") is not None else None,
        fw=fw.group("fw") if fw else None,
        description=description,
    )
