"""`ofed_info`: the OFED version string from the profile."""

from __future__ import annotations

import re

from .context import Ctx
from .core import ToolExit


def ofed_parts(ofed: str) -> tuple[str | None, str | None]:
    """Version number and OFED base of a MLNX_OFED string.

    `MLNX_OFED_LINUX-23.10-1.1.9.0` -> (`23.10-1.1.9.0`, `OFED-23.10-1.1.9`); (None, None) for other strings.
    """
    m = re.fullmatch(r"MLNX_OFED_LINUX-(?P<ver>\S+?):?", ofed.strip())
    if not m:
        return None, None
    version = m.group("ver")
    head, _, build = version.partition("-")
    parts = build.split(".")
    base_build = ".".join(parts[:3]) if len(parts) > 3 else build
    return version, f"OFED-{head}-{base_build}" if build else f"OFED-{head}"


def cmd_ofed_info(ctx: Ctx, args: list[str]) -> int:
    ofed = ctx.hw.ofed
    if ofed is None:
        raise ToolExit(f"{ctx.name}: command not found", 127)
    ofed = ofed.strip()
    is_mlnx = ofed.startswith("MLNX_OFED_LINUX-")
    label = ofed if ofed.endswith(":") or not is_mlnx else ofed + ":"
    version, base = ofed_parts(ofed)
    if args in ([], ["-s"]):
        if args or not base:
            ctx.print(label)
        else:
            ctx.print(f"{ofed.rstrip(':')} ({base}):")
            ctx.print()
        return 0
    if args == ["-n"]:
        ctx.print(version or ofed)
        return 0
    raise ToolExit("Usage: ofed_info [-s|-n]\n\t-s\tshow the version\n\t-n\tshow the version number", 1)
