"""`fabnet-lab-init`: write the node's sysfs-style files from hw.json and drop live state."""

from __future__ import annotations

import shutil
from pathlib import Path

from .context import Ctx
from .core import LAB_INFO, Env, ToolExit, write_atomic
from .hw import Hw, _expect, _int_list


def init_tree(env: Env, hw: Hw) -> list[Path]:
    """Write the node's sysfs-style files from the profile and drop live state; returns the files written."""
    written: list[Path] = []

    def put(path: Path, text: str) -> None:
        write_atomic(path, text)
        written.append(path)

    for stale in [*env.sys.glob("class/net/*/device"), *env.sys.glob("class/infiniband/*/device")]:
        shutil.rmtree(stale)
    for hca in hw.hcas:
        for link in env.pci_function_links(hca.netdev, hca.name):
            link.mkdir(parents=True, exist_ok=True)
        ecn = hw.ecn.get(hca.netdev, {})
        base = env.ecn_dir(hca.netdev)
        for kind, key in (("roce_np", "np"), ("roce_rp", "rp")):
            values = ecn.get(key)
            where = f"hw.json: ecn.{hca.netdev}.{key}"
            values = [0] * 8 if values is None else _int_list(values, where, 8, 0, 1)
            for prio, value in enumerate(values):
                put(base / kind / "enable" / str(prio), f"{value}\n")
        cnp = ecn.get("cnp_dscp")
        cnp = 48 if cnp is None else _expect(cnp, int, f"hw.json: ecn.{hca.netdev}.cnp_dscp", "an integer")
        put(base / "roce_np" / "cnp_dscp", f"{cnp}\n")
        tclass = hw.traffic_class.get(hca.name)
        put(env.traffic_class_file(hca.name, hca.port), "" if tclass is None else f"Global tclass={tclass}\n")
        put(env.roce_tos_file(hca.name, hca.port), f"{hw.roce_tos.get(hca.name, 0)}\n")
    # Outputs the fast path kept were for the old state.
    shutil.rmtree(env.root / "cache", ignore_errors=True)
    env.qos_dir.mkdir(parents=True, exist_ok=True)
    for live in [*env.qos_dir.glob("*.json"), env.modules_file]:
        live.unlink(missing_ok=True)
    return written


def cmd_init(ctx: Ctx, args: list[str]) -> int:
    if args:
        raise ToolExit(f"Usage: {ctx.name}", 1)
    written = init_tree(ctx.env, ctx.hw)
    ctx.print(f"{LAB_INFO}: wrote {len(written)} files under {ctx.env.sys}; live state reset")
    return 0
