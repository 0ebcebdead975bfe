"""Dispatch: which module implements each command, `--lab-info`, and telling the fast path what it may keep."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable

from .context import Ctx
from .core import INIT_COMMAND, LAB_INFO, Env, ToolExit

# command -> (module in this package, function). Only the command's own module is imported: every
# call that reaches Python starts a fresh interpreter.
COMMANDS: dict[str, tuple[str, str]] = {
    "ofed_info": ("ofed_info", "cmd_ofed_info"),
    "mlnx_qos": ("mlnx_qos", "cmd_mlnx_qos"),
    "dcb": ("dcb", "cmd_dcb"),
    "ibv_devinfo": ("ibv_devinfo", "cmd_ibv_devinfo"),
    "ibstat": ("ibstat", "cmd_ibstat"),
    "ibstatus": ("ibstat", "cmd_ibstatus"),
    "ibdev2netdev": ("ibdev2netdev", "cmd_ibdev2netdev"),
    "show_gids": ("show_gids", "cmd_show_gids"),
    "rdma": ("rdma", "cmd_rdma"),
    "nvidia-smi": ("nvidia_smi", "cmd_nvidia_smi"),
    "cma_roce_tos": ("cma_roce_tos", "cmd_cma_roce_tos"),
    "lsmod": ("lsmod", "cmd_lsmod"),
    "modprobe": ("lsmod", "cmd_modprobe"),
    "ethtool": ("ethtool", "cmd_ethtool"),
    INIT_COMMAND: ("init", "cmd_init"),
}

# Read-only calls whose output depends only on what the fast path (labhw-run.c) fingerprints: the
# profile, live state files, netdevs and addresses, hostname, /proc/modules. Setters, `mlnx_qos` (Python
# on real nodes too, so it keeps a Python's cost) and the clock-stamped `nvidia-smi` table are never kept.
CACHEABLE: dict[str, Callable[[list[str]], bool]] = {
    "ofed_info": lambda args: True,
    "ibv_devinfo": lambda args: True,
    "ibstat": lambda args: True,
    "ibstatus": lambda args: True,
    "ibdev2netdev": lambda args: True,
    "show_gids": lambda args: True,
    "rdma": lambda args: True,
    "dcb": lambda args: importlib.import_module(f"{__package__}.dcb").cacheable(args),
    "nvidia-smi": lambda args: bool(args),
    "cma_roce_tos": lambda args: "-t" not in args and not any(a.startswith("-t") for a in args),
    "lsmod": lambda args: True,
}
CACHE_FD_ENV = "FABNET_LAB_CACHE_FD"


def lab_info(name: str, env: Env) -> str:
    return (f"{name}: {LAB_INFO} (no real hardware behind it); profile {env.hw_file}, "
            f"live state under {env.root}, netdevs read from {env.net}")


def handler_for(name: str) -> Callable[[Ctx, list[str]], int]:
    module, function = COMMANDS[name]
    handler: Callable[[Ctx, list[str]], int] = getattr(importlib.import_module(f"{__package__}.{module}"), function)
    return handler


def _mark_cacheable(name: str, args: list[str]) -> None:
    """Tell the fast path that called us (through an inherited descriptor) that it may keep this output."""
    fd = os.environ.get(CACHE_FD_ENV, "")
    if not fd.isdigit() or not CACHEABLE.get(name, lambda a: False)(args):
        return
    try:
        os.write(int(fd), b"1")
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    if len(argv) >= 3 and argv[1] == "--as":
        name, args = argv[2], argv[3:]
    else:
        name, args = os.path.basename(argv[0]).removesuffix(".py"), argv[1:]
    env = Env.from_environ()
    if name not in COMMANDS:
        if args[:1] == ["--lab-info"] or name in ("labhw", "__main__"):
            print(f"{LAB_INFO}: run as `labhw --as NAME [ARGS]`; NAME is one of {', '.join(COMMANDS)}",
                  file=sys.stderr if args[:1] != ["--lab-info"] else sys.stdout)
            return 0 if args[:1] == ["--lab-info"] else 2
        print(f"{LAB_INFO}: unknown command {name!r}", file=sys.stderr)
        return 2
    if args[:1] == ["--lab-info"]:
        print(lab_info(name, env))
        return 0
    ctx = Ctx(name, env)
    try:
        code = handler_for(name)(ctx, args)
    except ToolExit as exc:
        sys.stdout.write("".join(ctx.out))
        sys.stdout.flush()
        if exc.message:
            print(exc.message, file=sys.stderr)
        return exc.code
    sys.stdout.write("".join(ctx.out))
    if code == 0:
        sys.stdout.flush()
        _mark_cacheable(name, args)
    return code
