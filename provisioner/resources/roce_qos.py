"""`roce_qos`: the lossless-RoCE settings of one NIC port, read with the tools and files that set them.

A spec names the netdev or the RDMA device; the other one is looked up on the host, inside each
probe's shell, so every probe still runs in the one exec (roce_lookup.py).
Only what the spec sets is probed. ECN is on for a priority when both its notification-point
(`roce_np`) and reaction-point (`roce_rp`) switches are 1, off when both are 0; anything else is drift.
Port 1 of the RDMA device is the one read (RoCE NICs have one port per device).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from provisioner.errors import ParseError
from provisioner.load.specs import RoceQosSpec
from provisioner.parsers._text import require_complete
from provisioner.parsers.dcb import parse_dcb, qos_of
from provisioner.parsers.ibv_devinfo import IbvPort, parse_ibv_devinfo
from provisioner.parsers.mlnx_qos import MlnxQos, parse_mlnx_qos
from provisioner.parsers.show_gids import parse_show_gids
from provisioner.parsers.traffic_class import parse_traffic_class
from provisioner.resources.base import (
    Check,
    HostContext,
    Probe,
    ProbeFailed,
    ResourceType,
    Results,
    compare,
    drift,
    error,
    errors_for,
    ok,
    read_tree_command,
    read_value_command,
    stdout_of,
)
from provisioner.resources.roce_lookup import PORT, Var, with_device, with_netdev, word

if TYPE_CHECKING:  # for the annotation only: the remedy's own module imports the steps
    from provisioner.resources.steps import Step

KIND = "roce_qos"

QOS_ATTRIBUTES = ("trust", "pfc", "dscp2prio", "tsa", "tcbw")
DEVINFO_ATTRIBUTES = ("port_state", "active_mtu", "gid_index")


# ------------------------------------------------------------------------------------- probe commands


def _qos_read(netdev: str, sysfs_root: str) -> str:
    """Shell printing the port's DCB state: iproute2's `dcb` (a C tool, a few ms) where it can answer,
    else `mlnx_qos` (Python, tens of ms).

    `dcb` is not asked where the driver has a sysfs `qos/trust` (MLNX_OFED's older mlx5): there the trust
    mode lives outside the DCB app table, and only mlnx_qos reads it. A `dcb` that is missing, too old
    for `app`, or refused by the driver falls back to mlnx_qos, whose errors are the ones reported. One
    `dcb` in batch mode reads all three, its commands from a here-document (no process writes them), and
    prints nothing once one fails. A playbook's name (checked at validate time) goes into a quoted
    here-document, never expanded; the probe's own `"$netdev"` is expanded, its value never read as code.
    """
    dev = word(netdev)
    end = "__fn_dcb" if isinstance(netdev, Var) else "'__fn_dcb'"
    return (
        f"if [ ! -e {word(f'{sysfs_root}/class/net/', netdev, '/qos/trust')} ] && "
        f"__fn_q=$(dcb -N -b - 2>/dev/null <<{end}\n"
        f"app show dev {dev} dscp-prio\npfc show dev {dev} prio-pfc\nets show dev {dev} tc-tsa tc-bw prio-tc\n"
        f"__fn_dcb\n); then printf '%s\\n' \"$__fn_q\"; else mlnx_qos -i {dev}; fi"
    )


def _mlnx_qos(spec: RoceQosSpec, ctx: HostContext) -> Probe:
    return Probe(with_netdev(spec, lambda netdev: _qos_read(netdev, ctx.sysfs_root), ctx.sysfs_root))


def _ecn(spec: RoceQosSpec, ctx: HostContext) -> Probe:
    def command(netdev: str) -> str:
        base = (f"{ctx.sysfs_root}/class/net/", netdev, "/ecn/")
        return read_tree_command(word(*base, "roce_np/enable"), word(*base, "roce_rp/enable"))

    return Probe(with_netdev(spec, command, ctx.sysfs_root))


def _cnp_dscp(spec: RoceQosSpec, ctx: HostContext) -> Probe:
    return Probe(with_netdev(
        spec, lambda netdev: read_value_command(word(f"{ctx.sysfs_root}/class/net/", netdev, "/ecn/roce_np/cnp_dscp")),
        ctx.sysfs_root,
    ))


def _traffic_class(spec: RoceQosSpec, ctx: HostContext) -> Probe:
    return Probe(with_device(
        spec,
        lambda dev: read_value_command(word(f"{ctx.sysfs_root}/class/infiniband/", dev, f"/tc/{PORT}/traffic_class")),
        ctx.sysfs_root,
    ))


def _roce_tos(spec: RoceQosSpec, ctx: HostContext) -> Probe:
    return Probe(with_device(spec, lambda dev: "cma_roce_tos -d " + word(dev), ctx.sysfs_root))


def _last(program: str) -> Callable[[str], str]:
    """`program DEV` as a probe's last command; `exec`'d after a device lookup (a fork saved: eval forks)."""
    return lambda dev: ("exec " if isinstance(dev, Var) else "") + program + " " + word(dev)


def _ibv_devinfo(spec: RoceQosSpec, ctx: HostContext) -> Probe:
    return Probe(with_device(spec, _last("ibv_devinfo -v -d"), ctx.sysfs_root))


def _show_gids(spec: RoceQosSpec, ctx: HostContext) -> Probe:  # GID types where ibv_devinfo prints none
    return Probe(with_device(spec, _last("show_gids"), ctx.sysfs_root))


def probes(spec: RoceQosSpec, ctx: HostContext) -> list[Probe]:
    found: list[Probe] = []
    if any(getattr(spec, name) is not None for name in QOS_ATTRIBUTES):
        found.append(_mlnx_qos(spec, ctx))
    if spec.ecn is not None:
        found.append(_ecn(spec, ctx))
    if spec.cnp_dscp is not None:
        found.append(_cnp_dscp(spec, ctx))
    if spec.traffic_class is not None:
        found.append(_traffic_class(spec, ctx))
    if spec.roce_tos is not None:
        found.append(_roce_tos(spec, ctx))
    if any(getattr(spec, name) is not None for name in DEVINFO_ATTRIBUTES):
        found.append(_ibv_devinfo(spec, ctx))
    if spec.gid_index is not None:
        found.append(_show_gids(spec, ctx))  # GID types where ibv_devinfo does not print them
    return found


# ----------------------------------------------------------------------------------------- evaluation


def _priorities(values: list[int]) -> str:
    return ",".join(str(v) for v in sorted(values)) or "none"


def _per_tc(values: Sequence[object]) -> str:
    return ",".join(str(v) for v in values)


_DCB_PFC_ROW = re.compile(r"^\s*prio-pfc\s", re.MULTILINE)


def _parse_qos(text: str) -> MlnxQos:
    """The QoS facts from whichever tool answered: `dcb` always prints a `prio-pfc` row, mlnx_qos never."""
    if _DCB_PFC_ROW.search(text):
        return require_complete(qos_of(require_complete(parse_dcb(text), "dcb")), "dcb")
    return require_complete(parse_mlnx_qos(text), "mlnx_qos")


def _qos_checks(spec: RoceQosSpec, qos: MlnxQos) -> list[Check]:
    checks: list[Check] = []
    if spec.trust is not None:
        checks.append(compare("trust", spec.trust, qos.trust or "unknown"))
    if spec.pfc is not None:
        checks.append(compare("pfc", _priorities(spec.pfc), _priorities(qos.pfc_enabled)))
    if spec.dscp2prio is not None:
        for dscp, prio in sorted(spec.dscp2prio.items()):
            if dscp in qos.dscp2prio:
                checks.append(compare(f"dscp2prio[{dscp}]", prio, qos.dscp2prio[dscp]))
            else:
                why = f" (trust {qos.trust})" if qos.trust and qos.trust != "dscp" else ""
                checks.append(drift(f"dscp2prio[{dscp}]", prio, "none", f"no mapping for this DSCP{why}"))
    by_tc = {tc.tc: tc for tc in qos.tcs}
    if spec.tsa is not None:
        actual = [(by_tc[tc].tsa or "?") if tc in by_tc else "?" for tc in range(8)]
        checks.append(compare("tsa", _per_tc(list(spec.tsa)), _per_tc(actual)))
    if spec.tcbw is not None:
        # mlnx_qos prints a bandwidth only for ets classes; any other class gets none (0%).
        actual_bw = [(by_tc[tc].bw or 0) if tc in by_tc else 0 for tc in range(8)]
        checks.append(compare("tcbw", _per_tc(list(spec.tcbw)), _per_tc(actual_bw)))
    return checks


def _qos_attributes(spec: RoceQosSpec) -> list[tuple[str, object]]:
    attributes: list[tuple[str, object]] = []
    if spec.trust is not None:
        attributes.append(("trust", spec.trust))
    if spec.pfc is not None:
        attributes.append(("pfc", _priorities(spec.pfc)))
    for dscp, prio in sorted((spec.dscp2prio or {}).items()):
        attributes.append((f"dscp2prio[{dscp}]", prio))
    if spec.tsa is not None:
        attributes.append(("tsa", _per_tc(list(spec.tsa))))
    if spec.tcbw is not None:
        attributes.append(("tcbw", _per_tc(list(spec.tcbw))))
    return attributes


_ECN_LINE = re.compile(r"/(?P<point>roce_np|roce_rp)/enable/(?P<prio>[0-7]):(?P<value>.*)$")


def parse_ecn(text: str) -> dict[str, dict[int, int]]:
    """`grep -r -H .` of the ECN enable files -> {"roce_np": {prio: 0|1}, "roce_rp": {...}}."""
    values: dict[str, dict[int, int]] = {"roce_np": {}, "roce_rp": {}}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        match = _ECN_LINE.search(line.rstrip())
        if not match or match["value"].strip() not in ("0", "1"):
            raise ParseError("ecn", "expected 'PATH/roce_np|roce_rp/enable/N:0|1'", line=number, text=line)
        values[match["point"]][int(match["prio"])] = int(match["value"])
    for point, by_prio in values.items():
        missing = [str(p) for p in range(8) if p not in by_prio]
        if missing:
            raise ParseError("ecn", f"no {point} value for priorit{'y' if len(missing) == 1 else 'ies'} "
                                    f"{','.join(missing)}")
    return values


def _ecn_check(spec: RoceQosSpec, values: dict[str, dict[int, int]]) -> Check:
    assert spec.ecn is not None
    on = [p for p in range(8) if values["roce_np"][p] == values["roce_rp"][p] == 1]
    partial = [p for p in range(8) if values["roce_np"][p] != values["roce_rp"][p]]
    actual = _priorities(on)
    message = ""
    if partial:
        halves = [f"{p} ({'roce_np' if values['roce_np'][p] else 'roce_rp'} only)" for p in partial]
        actual += "; half on: " + ", ".join(halves)
        message = "ECN needs both roce_np and roce_rp enabled for a priority"
    verdict = ok if on == sorted(spec.ecn) and not partial else drift
    return verdict("ecn", _priorities(spec.ecn), actual, message)


def _single_int(text: str, what: str) -> int:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    match = re.search(r"([0-9]+)$", lines[-1]) if lines else None
    if not match:
        raise ParseError(what, "expected a number", line=len(lines) or None, text=lines[-1] if lines else None)
    return int(match[1])


def _port(text: str) -> tuple[str, IbvPort]:
    """The device ibv_devinfo names and the port read, so that show_gids rows can be matched to both."""
    devices = require_complete(parse_ibv_devinfo(text), "ibv_devinfo").devices
    ports = [(device.name, port) for device in devices[:1] for port in device.ports]
    if not ports:
        raise ProbeFailed("ibv_devinfo: no device or port in the output")
    return next((p for p in ports if p[1].port == PORT), ports[0])


def _gid_check(spec: RoceQosSpec, device: str, port: IbvPort, show_gids: str | None) -> Check:
    index = spec.gid_index
    assert index is not None
    desired = f"index {index}: RoCE v2"
    gid = next((g for g in port.gids if g.index == index), None)
    kind = gid.type if gid else None
    if gid is not None and kind is None and show_gids is not None:
        try:
            rows = require_complete(parse_show_gids(show_gids), "show_gids").gids
        except ParseError:
            rows = []
        # The row of this device's port at this index, holding the same GID: show_gids may list several
        # devices, and prints the full form where ibv_devinfo may print the short one, so the normal forms
        # are compared. A row with another GID means the table changed between the two reads: no answer.
        row = next((r for r in rows if (r.device, r.port, r.index, r.gid_normal)
                    == (device, port.port, index, gid.gid_normal)), None)
        kind = {"v1": "RoCE v1", "v2": "RoCE v2"}.get(row.version, row.version) if row else None
    if gid is None:
        return drift("gid_index", desired, f"no index {index}")
    if kind is None:
        return error("gid_index", desired, f"GID index {index} exists but neither ibv_devinfo nor show_gids "
                                           "says its type")
    actual = f"index {index}: {kind}"
    return (ok if kind == "RoCE v2" else drift)("gid_index", desired, actual)


def _devinfo_checks(spec: RoceQosSpec, results: Results, ctx: HostContext) -> list[Check]:
    attributes: list[tuple[str, object]] = []
    if spec.port_state is not None:
        attributes.append(("port_state", spec.port_state))
    if spec.active_mtu is not None:
        attributes.append(("active_mtu", spec.active_mtu))
    if spec.gid_index is not None:
        attributes.append(("gid_index", f"index {spec.gid_index}: RoCE v2"))
    try:
        device, port = _port(stdout_of(results, _ibv_devinfo(spec, ctx), "ibv_devinfo -v"))
    except (ProbeFailed, ParseError) as exc:
        return errors_for(attributes, str(exc))
    checks: list[Check] = []
    if spec.port_state is not None:
        state = port.state.lower().removeprefix("port_")
        checks.append(compare("port_state", spec.port_state, state))
    if spec.active_mtu is not None:
        checks.append(compare("active_mtu", spec.active_mtu, port.active_mtu or "unknown"))
    if spec.gid_index is not None:
        result = results.get(_show_gids(spec, ctx))
        show_gids = result.stdout if result is not None and result.exit_code == 0 else None
        checks.append(_gid_check(spec, device, port, show_gids))
    return checks


def evaluate(spec: RoceQosSpec, results: Results, ctx: HostContext) -> list[Check]:
    checks: list[Check] = []
    if any(getattr(spec, name) is not None for name in QOS_ATTRIBUTES):
        try:
            qos = _parse_qos(stdout_of(results, _mlnx_qos(spec, ctx), "mlnx_qos"))
        except (ProbeFailed, ParseError) as exc:
            checks += errors_for(_qos_attributes(spec), str(exc))
        else:
            checks += _qos_checks(spec, qos)
    if spec.ecn is not None:
        try:
            checks.append(_ecn_check(spec, parse_ecn(stdout_of(results, _ecn(spec, ctx), "reading ECN switches"))))
        except (ProbeFailed, ParseError) as exc:
            checks.append(error("ecn", _priorities(spec.ecn), str(exc)))
    if spec.cnp_dscp is not None:
        try:
            text = stdout_of(results, _cnp_dscp(spec, ctx), "reading cnp_dscp")
            checks.append(compare("cnp_dscp", spec.cnp_dscp, _single_int(text, "cnp_dscp")))
        except (ProbeFailed, ParseError) as exc:
            checks.append(error("cnp_dscp", spec.cnp_dscp, str(exc)))
    if spec.traffic_class is not None:
        try:
            setting = require_complete(parse_traffic_class(stdout_of(results, _traffic_class(spec, ctx),
                                                                     "reading traffic_class")), "traffic_class")
            actual = "unset" if setting.tclass is None else setting.tclass
            checks.append(compare("traffic_class", spec.traffic_class, actual))
        except (ProbeFailed, ParseError) as exc:
            checks.append(error("traffic_class", spec.traffic_class, str(exc)))
    if spec.roce_tos is not None:
        try:
            text = stdout_of(results, _roce_tos(spec, ctx), "cma_roce_tos")
            checks.append(compare("roce_tos", spec.roce_tos, _single_int(text, "cma_roce_tos")))
        except (ProbeFailed, ParseError) as exc:
            checks.append(error("roce_tos", spec.roce_tos, str(exc)))
    if any(getattr(spec, name) is not None for name in DEVINFO_ATTRIBUTES):
        checks += _devinfo_checks(spec, results, ctx)
    return checks


def remedy(spec: RoceQosSpec, results: Results, ctx: HostContext, checks: list[Check]) -> list[Step]:
    """The steps, from roce_fix: imported only when something is to be changed, not by an audit."""
    from provisioner.resources import roce_fix

    return roce_fix.remedy(spec, results, ctx, checks)


RESOURCE = ResourceType(KIND, RoceQosSpec, probes, evaluate, remedy=remedy,
                        # QoS settings are read and written with the OFED stack's tools.
                        needs=("ofed",), examples=(
    {"interface": "ens1f0np0", "trust": "dscp", "pfc": [3], "ecn": [3], "dscp2prio": {26: 3}, "traffic_class": 106,
     "cnp_dscp": 48, "roce_tos": 106, "port_state": "active", "active_mtu": 4096, "gid_index": 3,
     "tsa": ["ets"] * 8, "tcbw": [10] * 7 + [30]},
    {"rdma_device": "mlx5_1", "trust": "dscp", "pfc": [3]},
))
