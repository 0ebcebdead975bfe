"""`lsmod` and `modprobe`: emulated modules merged with the host's real ones; load and unload with deps."""

from __future__ import annotations

import json
import os

from .context import Ctx
from .core import MODULES, ToolExit, exec_real, real_binary, state_lock, write_atomic
from .kmod import holders, module_deps, module_state

LSMOD_HEADER = "Module                  Size  Used by"


def _lsmod_line(name: str, state: dict[str, bool]) -> str:
    users = holders(name, state)
    line = f"{name:<19} {MODULES.get(name, (16384, ()))[0]:>8}  {len(users)}"
    return line + (f" {','.join(users)}" if users else "")


def cmd_lsmod(ctx: Ctx, args: list[str]) -> int:
    if args:
        raise ToolExit(f"Usage: {ctx.name}", 1)
    import subprocess

    state = module_state(ctx.env, ctx.hw)
    real_lines: list[str] = []
    binary = real_binary("lsmod")
    if binary:
        try:
            proc = subprocess.run([binary], capture_output=True, text=True, timeout=10, check=False)
            real_lines = proc.stdout.splitlines()[1:] if proc.returncode == 0 else []
        except (OSError, subprocess.SubprocessError):
            real_lines = []
    # The host's own modules stay, except where the emulation speaks for a module.
    kept = [line for line in real_lines if line.split()[:1] and line.split()[0] not in state]
    emulated = [_lsmod_line(name, state) for name, loaded in state.items() if loaded]
    ctx.print("\n".join([LSMOD_HEADER, *emulated, *kept]))
    return 0


def cmd_modprobe(ctx: Ctx, args: list[str]) -> int:
    names = [arg for arg in args if not arg.startswith("-")]
    flags = [arg for arg in args if arg.startswith("-")]
    remove = bool({"-r", "--remove"} & set(flags))
    quiet = bool({"-q", "--quiet"} & set(flags))
    every = bool({"-a", "--all"} & set(flags))
    dry = bool({"-n", "--dry-run", "--show"} & set(flags))
    if not names:
        exec_real(ctx.name, args, "modprobe: ERROR: missing parameters. See -h.")
    modules = names if (remove or every) else names[:1]
    state = module_state(ctx.env, ctx.hw)
    emulated = [m for m in modules if m.replace("-", "_") in state]
    others = [m for m in modules if m.replace("-", "_") not in state]
    if not emulated:
        exec_real(ctx.name, args, "\n".join(
            f"modprobe: FATAL: Module {m} not found in directory /lib/modules/{os.uname().release}"
            for m in others))
    failures: list[str] = []
    with state_lock(ctx.env):
        state = module_state(ctx.env, ctx.hw)
        for raw in emulated:
            name = raw.replace("-", "_")
            failures += _unload(name, state) if remove else _load(name, state)
        if not dry:
            write_atomic(ctx.env.modules_file, json.dumps(state, indent=1, sort_keys=True) + "\n")
    code = 1 if failures else 0
    if others:
        import subprocess

        binary = real_binary(ctx.name)
        if binary is None:
            failures += [f"modprobe: FATAL: Module {m} not found in directory /lib/modules/"
                         f"{os.uname().release}" for m in others]
            code = 1
        else:
            code = subprocess.run([binary, *flags, *others], check=False).returncode or code
    if failures and not quiet:
        raise ToolExit("\n".join(failures), 1)
    return code


def _load(name: str, state: dict[str, bool]) -> list[str]:
    for dep in module_deps(name):
        if dep in state:
            _load(dep, state)
    state[name] = True
    return []


def _unload(name: str, state: dict[str, bool]) -> list[str]:
    if not state.get(name):
        return [f"modprobe: FATAL: Module {name} is not in kernel."]
    if holders(name, state):
        return [f"modprobe: FATAL: Module {name} is in use."]
    state[name] = False
    # Like modprobe -r, take out the dependencies nothing else needs any more.
    for dep in module_deps(name):
        if state.get(dep) and not holders(dep, state):
            _unload(dep, state)
    return []
