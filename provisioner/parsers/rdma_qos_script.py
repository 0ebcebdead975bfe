"""Parse the RoCE QoS report of a `rdma-qos.sh q` style script: per device, an mlnx_qos excerpt plus the
ECN enable flags, CNP DSCP, `cma_roce_tos` and default traffic class it reads from sysfs/configfs.

Each `======== show configuration for device NETDEV / RDMADEV========` banner starts a device section;
lines before any banner form one section without names. The mlnx_qos part is parsed by the mlnx_qos
parser, so the same lines are accepted there (only trust and PFC are printed by the script).

The script prints each section in one order (banner, trust, PFC, `ECN Enabled` for priorities 0-7 of each
role, CNP DSCP, `cma_roce_tos`, the traffic_class file) and echoes that file with `$(cat ...)`, so its
address rule lines follow the `QOS for rdma:` line on lines of their own. Output that stops before the last
section's ECN block is whole, before a kind of line the earlier sections have, or inside the last line's
label or value, was cut: the result is incomplete.
"""

from __future__ import annotations

import re

from pydantic import Field

from provisioner.errors import ParseError
from provisioner.parsers._shell import is_shell
from provisioner.parsers._text import Collector, Fact, Line, Parsed, content_lines, fail, to_int
from provisioner.parsers.mlnx_qos import MlnxQos, parse_mlnx_qos_lines
from provisioner.parsers.traffic_class import TclassRule, cut_inside, is_rule, parse_rule, parse_traffic_class_value

KIND = "rdma_qos_script"

_BANNER = re.compile(r"^={3,}\s*(?P<title>.*?)\s*=*$")
_BANNER_DEVICE = re.compile(r"device\s+(?P<netdev>[^\s/]+)\s*/\s*(?P<device>[^\s=]+)")
_ECN = re.compile(
    r"^ECN Enabled for priority\s+(?P<prio>\S+?)\s*:\s*(?P<path>\S+)\s*=\s*(?P<value>\S+)$"
)
_ECN_ROLE = re.compile(r"/ecn/(?P<role>roce_\w+)/enable/")
_CNP = re.compile(r"^QOS for CNP:\s*(?P<path>\S+)\s*=\s*(?P<value>\S+)$")
_TOS = re.compile(r"^cma_roce_tos:\s*(?P<value>\S*)$")  # empty when the tool wrote only to stderr
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
    traffic_class_rules: list[TclassRule] = Field(default_factory=list)


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
        self.rules: list[TclassRule] = []
        self.kinds: list[str] = []  # the kinds of script line seen, in order
        self.ecn_lines = 0
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
            traffic_class_rules=self.rules,
        )


def _flag(value: str, line: Line) -> bool:
    number = to_int(KIND, value, line, "ECN enable flag")
    if number not in (0, 1):
        fail(KIND, "ECN enable flag must be 0 or 1", line)
    return number == 1


# The labels the script prints, for telling a last line cut inside one (`ECN Enabled for prio`).
_LABELS = ("ECN Enabled for priority ", "QOS for CNP: ", "cma_roce_tos: ", "QOS for rdma: ", "========")


def _cut_inside(line: Line) -> bool:
    """True when the last line stops inside a script line: its label, or before its value is whole."""
    body = " ".join(line.stripped.split())
    if any(label.startswith(body) for label in _LABELS):
        return True  # a label alone, `cma_roce_tos:` too: the script prints the traffic class after it
    if body.startswith("========"):
        return not body.endswith("=")
    if body.startswith("ECN Enabled for priority "):
        return not _ECN.match(body)  # stops before ` = N`
    if body.startswith("QOS for CNP: "):
        return not _CNP.match(body)
    if m := _RDMA_TCLASS.match(body):
        return cut_inside(m.group("value"))
    return body.startswith("QOS for rdma: ") or (is_rule(body) and cut_inside(body))


_QOS_LABELS = ("Priority trust state:", "PFC configuration:", "priority", "enabled", "buffer")
_SHORT_ROW = re.compile(r"has (?P<got>\d+) values for (?P<want>\d+)")


def _check_last_section(sections: list[_Section], lines: list[Line], found: Collector) -> None:
    """The script ends every section with the traffic_class file (`QOS for rdma:` and its rule lines): a
    last section without it was cut. A last line it holds that the mlnx_qos part refused for being short
    (a label cut, a PFC row with fewer values) is part of that cut, not a stray line."""
    if not sections or sections[-1].kinds[-1:] == ["rdma"]:
        return
    last = sections[-1]
    found.lack(f"section {last.netdev or ''}/{last.device or ''}: its lines up to 'QOS for rdma:' (the "
               f"output stops at line {lines[-1].number})")
    end = lines[-1]
    body = " ".join(end.stripped.split())

    def cut(reason: str) -> bool:
        if any(label.startswith(body) for label in _QOS_LABELS):
            return True
        m = _SHORT_ROW.search(reason)
        return m is not None and int(m.group("got")) < int(m.group("want"))

    found.unplaced = [u for u in found.unplaced if u.line != end.number or not cut(u.reason or "")]


def parse_rdma_qos_script(text: str) -> RdmaQosScript:
    lines = [line for line in content_lines(text) if not is_shell(line, KIND)]
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
        if is_rule(body) and current.kinds[-1:] == ["rdma"]:
            current.rules.append(parse_rule(KIND, line))  # the echoed file's next lines
        elif m := _ECN.match(body):
            role_match = _ECN_ROLE.search(m.group("path"))
            role = role_match.group("role") if role_match else m.group("path")
            prio = to_int(KIND, m.group("prio"), line, "ECN priority")
            current.ecn.setdefault(role, {})[prio] = _flag(m.group("value"), line)
            current.ecn_lines += 1
            current.kinds.append("ecn")
        elif m := _CNP.match(body):
            current.cnp_dscp = to_int(KIND, m.group("value"), line, "CNP DSCP")
            current.kinds.append("cnp")
        elif m := _TOS.match(body):
            value = m.group("value")
            current.cma_roce_tos = to_int(KIND, value, line, "cma_roce_tos") if value else None
            current.kinds.append("tos")
        elif m := _RDMA_TCLASS.match(body):
            value = m.group("value")
            if is_rule(value):  # no global class: the file's first line is a rule
                current.rules.append(parse_rule(KIND, Line(line.number, value, line.raw)))
            else:
                current.traffic_class = parse_traffic_class_value(KIND, value, line).tclass
            current.kinds.append("rdma")
        else:
            current.qos_lines.append(line)
            return
        current.script_lines += 1

    for line in lines[:-1]:
        found.attempt(line, handle)
    if _cut_inside(lines[-1]):
        found.lack(f"the rest of line {lines[-1].number} (cut inside '{lines[-1].stripped}')")
        found.recognised += 1
    else:
        found.attempt(lines[-1], handle)
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
    _check_last_section(sections, lines, found)
    # Lines handed to the mlnx_qos part were accepted here; they count only if that part understood them.
    understood = sum(1 for s in sections if s.banner is not None) + sum(s.script_lines for s in sections)
    understood += sum(len(s.qos_lines) for s in sections) - len(found.unplaced)
    if understood <= 0 and found.unplaced:
        u = found.unplaced[0]
        raise ParseError(KIND, u.reason or "line fits no part of the report", line=u.line, text=u.text)
    return RdmaQosScript(devices=devices, **found.result())
