"""`roce_qos` remedies: mlnx_qos for trust/PFC/DSCP map/ETS, the sysfs ECN and traffic-class files,
cma_roce_tos; and a boot-time replay, because none of these survive a reboot or a driver reload.

The port's netdev or RDMA device is looked up on the host exactly as the probes do (roce_qos.py), so
a spec naming either one works. `port_state`, `active_mtu` and `gid_index` have no remedy of their
own: they follow the link, the netdev MTU and the addresses, which other resources set.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Callable

from provisioner.load.specs import RoceQosSpec
from provisioner.resources.base import Check, HostContext, Results, read_value_command, sh
from provisioner.resources.roce_lookup import PORT, with_device, with_netdev, word
from provisioner.resources.roce_qos import _priorities
from provisioner.resources.steps import (
    PHASE_QOS,
    Step,
    file_step,
    setting_undo,
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


# What the undo of the mlnx_qos step puts back, read from `mlnx_qos -i` (the tool that sets it; the
# probe may have read `dcb` instead) as `KEY=VALUE` words in the order FABNET_QOS_KEYS names them:
# `trust`, `pfc` (the enabled row as 0/1 bits) and `dscp2prio[N]` (N's priority; `none`: not mapped).
_QOS_READ = (
    'BEGIN {n = split(ENVIRON["FABNET_QOS_KEYS"], keys, " ")} '
    '/^[ \\t]*Priority trust (state|mode):/ {v["trust"] = $NF} '
    '/^[ \\t]*enabled([ \\t]|$)/ && !("pfc" in v) {s = $2; for (i = 3; i <= NF; i++) s = s "," $i; v["pfc"] = s} '
    '/^[ \\t]*prio:.*dscp:/ {s = $0; sub(/^[ \\t]*prio:[ \\t]*/, "", s); p = s; sub(/[ \\t].*/, "", p); '
    'sub(/.*dscp:/, "", s); gsub(/[ \\t]/, "", s); m = split(s, ds, ","); '
    'for (i = 1; i <= m; i++) if (ds[i] != "") v["dscp2prio[" ds[i] + 0 "]"] = p} '
    'END {if (NR) for (i = 1; i <= n; i++) printf "%s=%s ", keys[i], ((keys[i] in v) ? v[keys[i]] : "none")}'
)
# The number a traffic_class file ("Global tclass=106") or `cma_roce_tos` ends its last line with, as
# the probes' parsers take it.
_LAST_NUMBER = "{sub(/[ \\t\\r]+$/, \"\")} NF {l = $0} END {if (match(l, /[0-9]+$/)) print substr(l, RSTART)}"
_HALF = re.compile(r"\b([0-7]) \((roce_np|roce_rp) only\)")


def _undo_qos(spec: RoceQosSpec, drifted: dict[str, Check]) -> tuple[list[str], list[tuple[str, str, str]]]:
    """mlnx_qos options putting back what drifted, and for the undo's guard each value as (the key
    `_QOS_READ` prints it under, what the run set, what was read before). TSA and bandwidth are not put back."""
    args: list[str] = []
    values: list[tuple[str, str, str]] = []
    if "trust" in drifted and drifted["trust"].actual in ("pcp", "dscp"):
        args += ["--trust", str(drifted["trust"].actual)]
        values.append(("trust", str(spec.trust), str(drifted["trust"].actual)))
    old_pfc = _listed(drifted["pfc"].actual) if "pfc" in drifted else None
    if old_pfc is not None:
        args += ["--pfc", _bits(old_pfc)]
        values.append(("pfc", _bits(spec.pfc or []), _bits(old_pfc)))
    for attribute, check in sorted(drifted.items()):
        if attribute.startswith("dscp2prio[") and check.actual is not None and check.actual.isdigit():
            dscp = int(attribute[10:-1])
            args += ["--dscp2prio", f"set,{dscp},{check.actual}"]
            values.append((f"dscp2prio[{dscp}]", str((spec.dscp2prio or {})[dscp]), check.actual))
    return args, values


def _ecn_old(actual: str | None) -> tuple[list[int], list[int]] | None:
    """The roce_np and roce_rp priorities that were on, from the ECN check's `actual` ("3; half on: 4
    (roce_np only)"), so that an undo puts back a half-on priority as it was."""
    on = _listed(actual)
    if on is None or actual is None:
        return None
    halves = _HALF.findall(actual.partition(";")[2])
    return (on + [int(p) for p, point in halves if point == "roce_np"],
            on + [int(p) for p, point in halves if point == "roce_rp"])


def _write(path_parts: tuple[str, ...], value: str) -> str:
    return f"printf '%s\\n' {sh(value)} > {word(*path_parts)}"


def _ecn_path(ctx: HostContext, netdev: str, point: str, prio: int) -> tuple[str, ...]:
    return (f"{ctx.sysfs_root}/class/net/", netdev, f"/ecn/{point}/enable/{prio}")


def _ecn_bits(np: list[int], rp: list[int]) -> str:
    """The 16 switches as `_ecn_read` prints them: roce_np for priorities 0-7, then roce_rp."""
    return " ".join("1" if p in on else "0" for on in (np, rp) for p in range(8))


def _ecn_read(ctx: HostContext, netdev: str) -> str:
    return "cat -- " + " ".join(word(*_ecn_path(ctx, netdev, point, prio))
                                for point in ("roce_np", "roce_rp") for prio in range(8))


def _ecn_write(ctx: HostContext, netdev: str, np: list[int], rp: list[int]) -> str:
    return "; ".join(_write(_ecn_path(ctx, netdev, point, prio), "1" if prio in on else "0")
                     for point, on in (("roce_np", np), ("roce_rp", rp)) for prio in range(8))


def _ecn_commands(spec: RoceQosSpec, ctx: HostContext, on: list[int]) -> str:
    return with_netdev(spec, lambda n: _ecn_write(ctx, n, on, on), ctx.sysfs_root)


def _cnp_path(ctx: HostContext, netdev: str) -> str:
    return word(f"{ctx.sysfs_root}/class/net/", netdev, "/ecn/roce_np/cnp_dscp")


def _tclass_path(ctx: HostContext, device: str) -> str:
    return word(f"{ctx.sysfs_root}/class/infiniband/", device, f"/tc/{PORT}/traffic_class")


def _cnp_command(spec: RoceQosSpec, ctx: HostContext, value: int) -> str:
    return with_netdev(spec, lambda n: f"printf '%s\\n' {sh(str(value))} > {_cnp_path(ctx, n)}", ctx.sysfs_root)


def _tclass_command(spec: RoceQosSpec, ctx: HostContext, value: int) -> str:
    return with_device(spec, lambda d: f"printf '%s\\n' {sh(str(value))} > {_tclass_path(ctx, d)}", ctx.sysfs_root)


def _tos_command(spec: RoceQosSpec, ctx: HostContext, value: int) -> str:
    return with_device(spec, lambda d: "cma_roce_tos -d " + word(d) + " -t " + sh(str(value)), ctx.sysfs_root)


def _mlnx_qos_command(spec: RoceQosSpec, ctx: HostContext, args: list[str]) -> str:
    return with_netdev(spec, lambda n: "mlnx_qos -i " + word(n) + " " + sh(*args) + " >/dev/null", ctx.sysfs_root)


def _guarded(spec: RoceQosSpec, ctx: HostContext, name: str, on_netdev: bool, read: Callable[[str], str],
             values: tuple[str, str], undo: Callable[[str], str]) -> str:
    """An undo putting back a setting only while it reads as the run set it (`values`: set, old), the
    port's netdev (`on_netdev`) or RDMA device looked up first as the step did (steps.setting_undo)."""
    lookup = with_netdev if on_netdev else with_device
    return lookup(spec, lambda x: setting_undo(name, read(x), values[0], values[1], undo(x)), ctx.sysfs_root)


def _back(write: Callable[[str, str], str], value: str, where: str) -> str:
    return write(where, value)


def _undos(spec: RoceQosSpec, ctx: HostContext, drifted: dict[str, Check]) -> dict[str, str]:
    """The guarded undo of each runtime step, by action; a setting whose old value was not read has none."""
    undos: dict[str, str] = {}
    target = spec.target()
    args, values = _undo_qos(spec, drifted)
    if args:
        env = "FABNET_QOS_KEYS=" + shlex.quote(" ".join(key for key, _, _ in values))
        undos["mlnx_qos"] = _guarded(
            spec, ctx, f"{target} QoS", True,
            lambda n: f"mlnx_qos -i {word(n)} 2>/dev/null | {env} awk {shlex.quote(_QOS_READ)}",
            (" ".join(f"{key}={new}" for key, new, _ in values), " ".join(f"{key}={was}" for key, _, was in values)),
            lambda n: "mlnx_qos -i " + word(n) + " " + sh(*args) + " >/dev/null")
    ecn_old = _ecn_old(drifted["ecn"].actual) if "ecn" in drifted and spec.ecn is not None else None
    if ecn_old is not None and spec.ecn is not None:
        wanted = spec.ecn
        undos["ecn"] = _guarded(spec, ctx, f"{target} ECN", True, lambda n: _ecn_read(ctx, n),
                                (_ecn_bits(wanted, wanted), _ecn_bits(*ecn_old)),
                                lambda n: _ecn_write(ctx, n, *ecn_old))
    last = f" 2>/dev/null | awk {shlex.quote(_LAST_NUMBER)}"
    reads: dict[str, tuple[bool, Callable[[str], str], Callable[[str, str], str]]] = {
        "cnp_dscp": (True, lambda n: read_value_command(_cnp_path(ctx, n)),
                     lambda n, v: f"printf '%s\\n' {sh(v)} > {_cnp_path(ctx, n)}"),
        "traffic_class": (False, lambda d: f"{{ {read_value_command(_tclass_path(ctx, d))}; }}{last}",
                          lambda d, v: f"printf '%s\\n' {sh(v)} > {_tclass_path(ctx, d)}"),
        "roce_tos": (False, lambda d: "cma_roce_tos -d " + word(d) + last,
                     lambda d, v: "cma_roce_tos -d " + word(d) + " -t " + sh(v)),
    }
    for attribute, (on_netdev, read, write) in reads.items():
        was = drifted[attribute].actual if attribute in drifted else None
        if was is not None and was.isdigit():
            undos[attribute] = _guarded(spec, ctx, f"{target} {attribute}", on_netdev, read,
                                        (str(getattr(spec, attribute)), was), functools.partial(_back, write, was))
    return undos


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
    # Each undo puts its setting back only while it still reads as this run set it (or as it was).
    undos = _undos(spec, ctx, drifted)
    steps: list[Step] = []
    qos_attributes = {a for a in drifted if a in ("trust", "pfc", "tsa", "tcbw") or a.startswith("dscp2prio[")}
    if qos_attributes:
        args = _mlnx_qos_args(spec, qos_attributes)
        steps.append(Step(target, "mlnx_qos", _mlnx_qos_command(spec, ctx, args), "mlnx_qos " + sh(*args),
                          undo=undos.get("mlnx_qos"), phase=PHASE_QOS))
    if "ecn" in drifted and spec.ecn is not None:
        steps.append(Step(target, "ecn", _ecn_commands(spec, ctx, spec.ecn),
                          f"ECN roce_np/roce_rp enable: priorities {_priorities(spec.ecn)} on, others off",
                          undo=undos.get("ecn"), phase=PHASE_QOS))
    builders: tuple[tuple[str, Callable[[int], str]], ...] = (
        ("cnp_dscp", lambda v: _cnp_command(spec, ctx, v)),
        ("traffic_class", lambda v: _tclass_command(spec, ctx, v)),
        ("roce_tos", lambda v: _tos_command(spec, ctx, v)))
    for attribute, build in builders:
        if attribute not in drifted:
            continue
        value = getattr(spec, attribute)
        steps.append(Step(target, attribute, build(value), f"set {attribute} {value}",
                          undo=undos.get(attribute), phase=PHASE_QOS))
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

