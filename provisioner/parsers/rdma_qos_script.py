"""Parse the RoCE QoS report of a `rdma-qos.sh q` style script: per device, an mlnx_qos excerpt plus the
ECN enable flags, CNP DSCP, `cma_roce_tos` and default traffic class it reads from sysfs/configfs.

Each `======== show configuration for device NETDEV / RDMADEV========` banner starts a device section;
lines before any banner form one section without names. The mlnx_qos part is parsed by the mlnx_qos
parser, so the same lines are accepted there (only trust and PFC are printed by the script).
"""

from __future__ import annotations

import re

from pydantic import Field

from provisioner.errors import ParseError
from provisioner.parsers._text import Collector, Fact, Line, Parsed, content_lines, fail, is_prompt, to_int
from provisioner.parsers.mlnx_qos import MlnxQos, parse_mlnx_qos_lines
from provisioner.parsers.traffic_class import parse_traffic_class_value

KIND = "rdma_qos_script"

_BANNER = re.compile(r"^={3,}\s*(?P<title>.*?)\s*=*$")
_BANNER_DEVICE = re.compile(r"device\s+(?P<netdev>[^\s/]+)\s*/\s*(?P<device>[^\s=]+)")
_ECN = re.compile(
    r"^ECN Enabled for priority\s+(?P<prio>\S+?)\s*:\s*(?P<path>\S+)\s*=\s*(?P<value>\S+)$"
)
_ECN_ROLE = re.compile(r"/ecn/(?P<role>roce_\w+)/enable/")
_CNP = re.compile(r"^QOS for CNP:\s*(?P<path>\S+)\s*=\s*(?P<value>\S+)$")
_TOS = re.compile(r"^cma_roce_tos:\s*(?P<value>\S+)$")
_RDMA_TCLASS = re.compile(r"^QOS for rdma:\s*(?P<path>\S+)\s*=\s*(?P<value>.*)$")


class RdmaQosDevice(Fact):
    """One device section. `ecn` maps role (`roce_np` notification point, `roce_rp` reaction point)
    to priority -> enabled; `ecn_priorities` lists priorities enabled for every role shown."""

    netdev: str | None = None
    device: str | None = None
    qos: MlnxQos
    ecn: dict[str, dict[int, bool]] = Field(default_factory=dict)
    ecn_priorities: list[int] = Field(default_factory=list)
    cnp_dscp: int | None = None
    cma_roce_tos: int | None = None
    traffic_class: int | None = None


class RdmaQosScript(Parsed):
    devices: list[RdmaQosDevice]


class _Section:
    def __init__(self, banner: Line | None, netdev: str | None, device: str | None) -> None:
        self.banner = banner
        self.netdev = netdev
        self.device = device
        self.qos_lines: list[Line] = []
        self.ecn: dict[str, dict[int, bool]] = {}
        self.cnp_dscp: int | None = None
        self.cma_roce_tos: int | None = None
        self.traffic_class: int | None = None
        self.script_lines = 0

    def build(self) -> RdmaQosDevice:
        if not self.qos_lines and not self.script_lines:
            fail(KIND, "device section has no configuration lines", self.banner)
        qos = parse_mlnx_qos_lines(KIND, self.qos_lines, require_trust_or_pfc=False)
        roles = [set(p for p, on in flags.items() if on) for flags in self.ecn.values()]
        return RdmaQosDevice(
            netdev=self.netdev,
            device=self.device,
            qos=qos,
            ecn=self.ecn,
            ecn_priorities=sorted(set.intersection(*roles)) if roles else [],
            cnp_dscp=self.cnp_dscp,
            cma_roce_tos=self.cma_roce_tos,
            traffic_class=self.traffic_class,
        )


def _flag(value: str, line: Line) -> bool:
    number = to_int(KIND, value, line, "ECN enable flag")
    if number not in (0, 1):
        fail(KIND, "ECN enable flag must be 0 or 1", line)
    return number == 1


def parse_rdma_qos_script(text: str) -> RdmaQosScript:
    lines = [line for line in content_lines(text) if not is_prompt(line)]
    if not lines:
        fail(KIND, "empty output")
    sections: list[_Section] = []
    current: _Section | None = None
    found = Collector(KIND)

    def handle(line: Line) -> None:
        nonlocal current
        body = line.stripped
        if m := _BANNER.match(body):
            names = _BANNER_DEVICE.search(m.group("title"))
            current = _Section(line, names.group("netdev") if names else None,
                               names.group("device") if names else None)
            sections.append(current)
            return
        if current is None:
            current = _Section(None, None, None)
            sections.append(current)
        if m := _ECN.match(body):
            role_match = _ECN_ROLE.search(m.group("path"))
            role = role_match.group("role") if role_match else m.group("path")
            prio = to_int(KIND, m.group("prio"), line, "ECN priority")
            current.ecn.setdefault(role, {})[prio] = _flag(m.group("value"), line)
        elif m := _CNP.match(body):
            current.cnp_dscp = to_int(KIND, m.group("value"), line, "CNP DSCP")
        elif m := _TOS.match(body):
            current.cma_roce_tos = to_int(KIND, m.group("value"), line, "cma_roce_tos")
        elif m := _RDMA_TCLASS.match(body):
            current.traffic_class = parse_traffic_class_value(KIND, m.group("value"), line).tclass
        else:
            current.qos_lines.append(line)
            return
        current.script_lines += 1

    for line in lines:
        found.attempt(line, handle)
    devices = []
    for section in sections:
        try:
            device = section.build()
        except ParseError as err:
            found.lack(f"section {section.netdev or ''}/{section.device or ''}: {err.message}")
            continue
        found.unplaced += device.qos.unplaced
        found.missing += [m for m in device.qos.missing if m not in found.missing]
        devices.append(device)
    # Lines handed to the mlnx_qos part were accepted here; they count only if that part understood them.
    understood = sum(1 for s in sections if s.banner is not None) + sum(s.script_lines for s in sections)
    understood += sum(len(s.qos_lines) for s in sections) - len(found.unplaced)
    if understood <= 0 and found.unplaced:
        u = found.unplaced[0]
        raise ParseError(KIND, u.reason or "line fits no part of the report", line=u.line, text=u.text)
    return RdmaQosScript(devices=devices, **found.result())
