"""`roce_qos` remedies: mlnx_qos for trust/PFC/DSCP map/ETS, the sysfs ECN and traffic-class files,
cma_roce_tos; and a boot-time replay, because none of these survive a reboot or a driver reload.

The port's netdev or RDMA device is looked up on the host exactly as the probes do (roce_qos.py), so
a spec naming either one works. `port_state`, `active_mtu` and `gid_index` have no remedy of their
own: they follow the link, the netdev MTU and the addresses, which other resources set.
"""

from __future__ import annotations

from collections.abc import Callable

from provisioner.load.specs import RoceQosSpec
from provisioner.resources import roce_qos
from provisioner.resources.base import Check, HostContext, ResourceType, Results, sh
from provisioner.resources.roce_qos import PORT, _priorities, _with_device, _with_netdev, _word
from provisioner.resources.steps import (
    PHASE_QOS,
    Step,
    file_step,
)

REPLAY_DIR = "/etc/fabnet/roce-qos/"
REPLAY_UNIT = "fabnet-roce-qos.service"
REPLAY_UNIT_PATH = "/etc/systemd/system/" + REPLAY_UNIT
REPLAY_UNIT_TEXT = (
    "# Managed by fabnet: replays the RoCE QoS settings, which do not survive a reboot or driver reload.\n"
    "[Unit]\nDescription=fabnet RoCE QoS settings\nAfter=network-pre.target openibd.service\n"
    "Wants=network-pre.target\n\n"
    "[Service]\nType=oneshot\nRemainAfterExit=yes\n"
    f"ExecStart=/bin/sh -c 'for f in {REPLAY_DIR}*.sh; do [ -e \"$f\" ] && /bin/sh \"$f\"; done; true'\n\n"
    "[Install]\nWantedBy=multi-user.target\n"
)


def _bits(priorities: list[int]) -> str:
    return ",".join("1" if p in priorities else "0" for p in range(8))


def _listed(text: str | None) -> list[int] | None:
    """A Check's `actual` of priorities ("3", "3,4", "none", "3; half on: ...") back to a list."""
    if text is None:
        return None
    head = text.split(";", 1)[0].strip()
    if head == "none":
        return []
    try:
        return [int(p) for p in head.split(",")]
    except ValueError:
        return None


def _mlnx_qos_args(spec: RoceQosSpec, attributes: set[str] | None) -> list[str]:
    """mlnx_qos options setting the spec's values (only those in `attributes`; all when None)."""
    def wanted(name: str) -> bool:
        return getattr(spec, name, None) is not None and (attributes is None or name in attributes)

    args: list[str] = []
    if wanted("trust"):
        args += ["--trust", str(spec.trust)]
    if wanted("pfc"):
        args += ["--pfc", _bits(spec.pfc or [])]
    for dscp, prio in sorted((spec.dscp2prio or {}).items()):
        if attributes is None or f"dscp2prio[{dscp}]" in attributes:
            args += ["--dscp2prio", f"set,{dscp},{prio}"]
    if spec.tsa is not None and (attributes is None or {"tsa", "tcbw"} & attributes):
        args += ["--tsa", ",".join(spec.tsa)]
    if spec.tcbw is not None and (attributes is None or {"tsa", "tcbw"} & attributes):
        args += ["--tcbw", ",".join(str(b) for b in spec.tcbw)]
    return args


def _undo_qos_args(drifted: dict[str, Check]) -> list[str]:
    args: list[str] = []
    if "trust" in drifted and drifted["trust"].actual in ("pcp", "dscp"):
        args += ["--trust", str(drifted["trust"].actual)]
    old_pfc = _listed(drifted["pfc"].actual) if "pfc" in drifted else None
    if old_pfc is not None:
        args += ["--pfc", _bits(old_pfc)]
    for attribute, check in sorted(drifted.items()):
        if attribute.startswith("dscp2prio[") and check.actual is not None and check.actual.isdigit():
            args += ["--dscp2prio", f"set,{attribute[10:-1]},{check.actual}"]
    return args


def _write(path_parts: tuple[str, ...], value: str) -> str:
    return f"printf '%s\\n' {sh(value)} > {_word(*path_parts)}"


def _ecn_commands(spec: RoceQosSpec, ctx: HostContext, on: list[int]) -> str:
    def command(netdev: str) -> str:
        writes = []
        for point in ("roce_np", "roce_rp"):
            for prio in range(8):
                path = (f"{ctx.sysfs_root}/class/net/", netdev, f"/ecn/{point}/enable/{prio}")
                writes.append(_write(path, "1" if prio in on else "0"))
        return "; ".join(writes)

    return _with_netdev(spec, command, ctx.sysfs_root)


def _cnp_command(spec: RoceQosSpec, ctx: HostContext, value: int) -> str:
    return _with_netdev(spec, lambda n: _write((f"{ctx.sysfs_root}/class/net/", n, "/ecn/roce_np/cnp_dscp"),
                                               str(value)), ctx.sysfs_root)


def _tclass_command(spec: RoceQosSpec, ctx: HostContext, value: int) -> str:
    return _with_device(spec, lambda d: _write(
        (f"{ctx.sysfs_root}/class/infiniband/", d, f"/tc/{PORT}/traffic_class"), str(value)), ctx.sysfs_root)


def _tos_command(spec: RoceQosSpec, ctx: HostContext, value: int) -> str:
    return _with_device(spec, lambda d: "cma_roce_tos -d " + _word(d) + " -t " + sh(str(value)), ctx.sysfs_root)


def _mlnx_qos_command(spec: RoceQosSpec, ctx: HostContext, args: list[str]) -> str:
    return _with_netdev(spec, lambda n: "mlnx_qos -i " + _word(n) + " " + sh(*args) + " >/dev/null", ctx.sysfs_root)


def replay_script(spec: RoceQosSpec, ctx: HostContext) -> str:
    """Every setting of the spec, as a script the boot-time unit runs."""
    lines = ["#!/bin/sh", f"# Managed by fabnet: RoCE QoS of {spec.target()}, replayed at boot.", "set -e"]
    args = _mlnx_qos_args(spec, None)
    if args:
        lines.append(f"( {_mlnx_qos_command(spec, ctx, args)} )")
    if spec.ecn is not None:
        lines.append(f"( {_ecn_commands(spec, ctx, spec.ecn)} )")
    if spec.cnp_dscp is not None:
        lines.append(f"( {_cnp_command(spec, ctx, spec.cnp_dscp)} )")
    if spec.traffic_class is not None:
        lines.append(f"( {_tclass_command(spec, ctx, spec.traffic_class)} )")
    if spec.roce_tos is not None:
        lines.append(f"( {_tos_command(spec, ctx, spec.roce_tos)} )")
    return "\n".join(lines) + "\n"


def remedy(spec: RoceQosSpec, results: Results, ctx: HostContext, checks: list[Check]) -> list[Step]:
    target = spec.target()
    drifted = {c.attribute: c for c in checks if c.status == "drift"}
    steps: list[Step] = []
    qos_attributes = {a for a in drifted if a in ("trust", "pfc", "tsa", "tcbw") or a.startswith("dscp2prio[")}
    if qos_attributes:
        args = _mlnx_qos_args(spec, qos_attributes)
        undo = _undo_qos_args(drifted)
        steps.append(Step(target, "mlnx_qos", _mlnx_qos_command(spec, ctx, args), "mlnx_qos " + sh(*args),
                          undo=_mlnx_qos_command(spec, ctx, undo) if undo else None, phase=PHASE_QOS))
    if "ecn" in drifted and spec.ecn is not None:
        old = _listed(drifted["ecn"].actual)
        steps.append(Step(target, "ecn", _ecn_commands(spec, ctx, spec.ecn),
                          f"ECN roce_np/roce_rp enable: priorities {_priorities(spec.ecn)} on, others off",
                          undo=_ecn_commands(spec, ctx, old) if old is not None else None, phase=PHASE_QOS))
    builders: tuple[tuple[str, Callable[[int], str]], ...] = (
        ("cnp_dscp", lambda v: _cnp_command(spec, ctx, v)),
        ("traffic_class", lambda v: _tclass_command(spec, ctx, v)),
        ("roce_tos", lambda v: _tos_command(spec, ctx, v)))
    for attribute, build in builders:
        if attribute not in drifted:
            continue
        value = getattr(spec, attribute)
        was = drifted[attribute].actual
        steps.append(Step(target, attribute, build(value), f"set {attribute} {value}",
                          undo=build(int(was)) if was and was.isdigit() else None, phase=PHASE_QOS))
    if steps:
        name = (spec.interface or spec.rdma_device or "port").replace("/", "_")
        steps.append(file_step(target, "persist", f"{REPLAY_DIR}{name}.sh", replay_script(spec, ctx).encode(),
                               phase=PHASE_QOS, mode="0755", owner="root", group="root"))
        steps.append(file_step(target, "unit", REPLAY_UNIT_PATH, REPLAY_UNIT_TEXT.encode(), phase=PHASE_QOS,
                               mode="0644", owner="root", group="root"))
        steps.append(Step(target, "enable", "systemctl daemon-reload && " + sh("systemctl", "enable", REPLAY_UNIT),
                          f"systemctl enable {REPLAY_UNIT} (replays the settings at boot)",
                          undo=sh("systemctl", "disable", REPLAY_UNIT), phase=PHASE_QOS))
    return steps


RESOURCE = ResourceType(roce_qos.KIND, RoceQosSpec, roce_qos.probes, roce_qos.evaluate, remedy=remedy,
                        # QoS settings are read and written with the OFED stack's tools.
                        needs=("ofed",), examples=(
    {"interface": "ens1f0np0", "trust": "dscp", "pfc": [3], "ecn": [3], "dscp2prio": {26: 3}, "traffic_class": 106,
     "cnp_dscp": 48, "roce_tos": 106, "port_state": "active", "active_mtu": 4096, "gid_index": 3,
     "tsa": ["ets"] * 8, "tcbw": [10] * 7 + [30]},
    {"rdma_device": "mlx5_1", "trust": "dscp", "pfc": [3]},
))
