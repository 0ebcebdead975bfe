"""`mlnx_qos`: show and set a netdev's DCB state (trust, PFC, DSCP map, ETS, buffers), kept per node."""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .context import Ctx, make_parser
from .core import BUFFER_TOTAL, TSA_VALUES, Env, HwError, ToolExit, read_json, state_lock, write_atomic
from .hw import Hw, _expect, _int_list
from .kmod import rdma_present
from .links import netdev_exists

if TYPE_CHECKING:
    import argparse


@dataclass
class Qos:
    dcbx: str = "os"
    trust: str = "pcp"
    pfc: list[int] = field(default_factory=lambda: [0] * 8)
    dscp2prio: list[int] = field(default_factory=lambda: [d >> 3 for d in range(64)])
    prio_tc: list[int] = field(default_factory=lambda: [1, 0, 2, 3, 4, 5, 6, 7])
    tsa: list[str] = field(default_factory=lambda: ["vendor"] * 8)
    tcbw: list[int] = field(default_factory=lambda: [100] * 8)
    cable_len: int = 7
    prio2buffer: list[int] = field(default_factory=lambda: [0] * 8)
    buffer_size: list[int] = field(default_factory=lambda: [BUFFER_TOTAL, 0, 0, 0, 0, 0, 0, 0])

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str) -> Qos:
        q = cls()
        if "dcbx" in data and data["dcbx"] is not None:
            if data["dcbx"] not in ("os", "fw"):
                raise HwError(f"{where}.dcbx: expected os or fw, got {data['dcbx']!r}")
            q.dcbx = data["dcbx"]
        if data.get("trust") is not None:
            if data["trust"] not in ("pcp", "dscp"):
                raise HwError(f"{where}.trust: expected pcp or dscp, got {data['trust']!r}")
            q.trust = data["trust"]
        for key, low, high in (("pfc", 0, 1), ("prio_tc", 0, 7), ("tcbw", 0, 100), ("prio2buffer", 0, 7),
                               ("buffer_size", 0, 1 << 30)):
            if data.get(key) is not None:
                setattr(q, key, _int_list(data[key], f"{where}.{key}", 8, low, high))
        if data.get("tsa") is not None:
            tsa = data["tsa"]
            if not isinstance(tsa, list) or len(tsa) != 8 or any(t not in TSA_VALUES for t in tsa):
                raise HwError(f"{where}.tsa: expected 8 of {'/'.join(TSA_VALUES)}, got {tsa!r}")
            q.tsa = list(tsa)
        if data.get("cable_len") is not None:
            q.cable_len = _expect(data["cable_len"], int, f"{where}.cable_len", "an integer")
        mapping = data.get("dscp2prio")
        if isinstance(mapping, list):
            q.dscp2prio = _int_list(mapping, f"{where}.dscp2prio", 64, 0, 7)
        elif isinstance(mapping, dict):
            for dscp, prio in mapping.items():
                d = int(dscp) if str(dscp).isdigit() else -1
                if not 0 <= d <= 63 or not isinstance(prio, int) or not 0 <= prio <= 7:
                    raise HwError(f"{where}.dscp2prio: bad entry {dscp!r}: {prio!r}")
                q.dscp2prio[d] = prio
        elif mapping is not None:
            raise HwError(f"{where}.dscp2prio: expected a list of 64 priorities or an object")
        return q


def qos_file(env: Env, netdev: str) -> Path:
    return env.qos_dir / f"{netdev}.json"


def load_qos(env: Env, hw: Hw, netdev: str) -> Qos:
    live = read_json(qos_file(env, netdev))
    if isinstance(live, dict):
        return Qos.from_json(live, str(qos_file(env, netdev)))
    return Qos.from_json(hw.qos.get(netdev, {}), f"hw.json: qos.{netdev}")


def render_qos(q: Qos) -> str:
    lines = [f"DCBX mode: {'OS controlled' if q.dcbx == 'os' else 'Firmware controlled'}",
             f"Priority trust state: {q.trust}"]
    if q.trust == "dscp":
        lines.append("dscp2prio mapping:")
        for prio in range(8):
            dscps = [d for d in range(63, -1, -1) if q.dscp2prio[d] == prio]
            lines.append(f"\tprio:{prio} dscp:" + "".join(f"{d:02d}," for d in dscps))
    lines.append("Receive buffer size (bytes): " + "".join(f"{size}," for size in q.buffer_size))
    lines.append(f"Cable len: {q.cable_len}")
    lines.append("PFC configuration:")
    lines.append("\tpriority    " + "   ".join(str(p) for p in range(8)))
    lines.append("\tenabled     " + "".join(f"{v}   " for v in q.pfc))
    lines.append("\tbuffer      " + "".join(f"{v}   " for v in q.prio2buffer))
    for tc in range(8):
        bw = f", bw: {q.tcbw[tc]}%" if q.tsa[tc] == "ets" else ""
        lines.append(f"tc: {tc} ratelimit: unlimited, tsa: {q.tsa[tc]}{bw}")
        lines += [f"\t priority:  {prio}" for prio in range(8) if q.prio_tc[prio] == tc]
    return "\n".join(lines) + "\n"


def _csv_ints(option: str, text: str, length: int, low: int, high: int) -> list[int]:
    parts = text.split(",")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != length or not all(low <= v <= high for v in values):
        raise ToolExit(f"{option}: expected {length} comma-separated integers from {low} to {high}, "
                       f"got {text!r}", 1)
    return values


def cmd_mlnx_qos(ctx: Ctx, args: list[str]) -> int:
    parser = make_parser(ctx.name, "Show or set the QoS of a netdev.")
    parser.add_argument("-i", "--interface", dest="intf", required=True)
    parser.add_argument("-f", "--pfc")
    parser.add_argument("-p", "--prio_tc")
    parser.add_argument("-s", "--tsa")
    parser.add_argument("-t", "--tcbw")
    parser.add_argument("-d", "--dcbx", choices=("os", "fw"))
    parser.add_argument("--trust", choices=("pcp", "dscp"))
    parser.add_argument("--dscp2prio", action="append", default=[])
    parser.add_argument("--cable_len", type=int)
    parser.add_argument("--prio2buffer")
    parser.add_argument("--buffer_size")
    opts = parser.parse_args(args)
    intf: str = opts.intf
    if not netdev_exists(ctx.env, intf):
        raise ToolExit(f"Netlink error: No such device: {intf}", 1)
    if ctx.hw.hca_for_netdev(intf) is None or not rdma_present(ctx.env, ctx.hw):
        # A netdev without a ConnectX behind it has no DCB support to talk to.
        raise ToolExit(f"Netlink error: Operation not supported: {intf}", 1)

    with state_lock(ctx.env) if _has_setter(opts) else contextlib.nullcontext():
        q = load_qos(ctx.env, ctx.hw, intf)
        if _has_setter(opts):
            _apply_qos(q, opts)
            write_atomic(qos_file(ctx.env, intf), json.dumps(q.to_json(), indent=1) + "\n")
    ctx.out.append(render_qos(q))
    return 0


def _has_setter(opts: argparse.Namespace) -> bool:
    return any(getattr(opts, key) not in (None, []) for key in (
        "pfc", "prio_tc", "tsa", "tcbw", "dcbx", "trust", "dscp2prio", "cable_len", "prio2buffer",
        "buffer_size"))


def _apply_qos(q: Qos, opts: argparse.Namespace) -> None:
    """Validates everything first, so a rejected call changes nothing, as with the kernel's DCB calls."""
    fields: dict[str, Any] = {k: (list(v) if isinstance(v, list) else v) for k, v in q.to_json().items()}
    new = Qos(**fields)
    if opts.dcbx:
        new.dcbx = opts.dcbx
    if opts.trust:
        new.trust = opts.trust
    if opts.pfc is not None:
        new.pfc = _csv_ints("--pfc", opts.pfc, 8, 0, 1)
    if opts.prio_tc is not None:
        new.prio_tc = _csv_ints("--prio_tc", opts.prio_tc, 8, 0, 7)
    if opts.tsa is not None:
        tsa = opts.tsa.split(",")
        if len(tsa) != 8 or any(t not in TSA_VALUES for t in tsa):
            raise ToolExit(f"--tsa: expected 8 comma-separated values of {', '.join(TSA_VALUES)}, "
                           f"got {opts.tsa!r}", 1)
        new.tsa = tsa
    if opts.tcbw is not None:
        new.tcbw = _csv_ints("--tcbw", opts.tcbw, 8, 0, 100)
    if "ets" in new.tsa and (opts.tsa is not None or opts.tcbw is not None):
        total = sum(bw for bw, tsa in zip(new.tcbw, new.tsa, strict=True) if tsa == "ets")
        if total != 100:
            raise ToolExit(f"Bad ETS configuration: the bandwidths of the ets traffic classes must sum "
                           f"to 100%, not {total}% (set them with --tcbw)", 1)
    for entry in opts.dscp2prio:
        m = re.fullmatch(r"(set|del),(\d+),(\d+)", entry)
        if not m or not 0 <= int(m.group(2)) <= 63 or not 0 <= int(m.group(3)) <= 7:
            raise ToolExit(f"--dscp2prio: expected set,DSCP,PRIO or del,DSCP,PRIO with DSCP 0..63 and "
                           f"PRIO 0..7, got {entry!r}", 1)
        action, dscp, prio = m.group(1), int(m.group(2)), int(m.group(3))
        if action == "set":
            new.dscp2prio[dscp] = prio
        elif new.dscp2prio[dscp] != prio:
            raise ToolExit(f"--dscp2prio: DSCP {dscp} is mapped to priority {new.dscp2prio[dscp]}, "
                           f"not {prio}", 1)
        else:
            new.dscp2prio[dscp] = 0  # the driver sends a deleted DSCP back to priority 0
    if opts.cable_len is not None:
        if not 0 <= opts.cable_len <= 1000:
            raise ToolExit(f"--cable_len: expected 0..1000 meters, got {opts.cable_len}", 1)
        new.cable_len = opts.cable_len
    if opts.prio2buffer is not None:
        new.prio2buffer = _csv_ints("--prio2buffer", opts.prio2buffer, 8, 0, 7)
    if opts.buffer_size is not None:
        sizes = _csv_ints("--buffer_size", opts.buffer_size, 8, 0, 1 << 30)
        if sum(sizes) > BUFFER_TOTAL * 2:
            raise ToolExit(f"--buffer_size: {sum(sizes)} bytes exceed the port's {BUFFER_TOTAL * 2}", 1)
        new.buffer_size = sizes
    q.__dict__.update(new.__dict__)
