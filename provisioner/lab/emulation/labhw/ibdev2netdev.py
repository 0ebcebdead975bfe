"""`ibdev2netdev`: which netdev each RDMA port drives."""

from __future__ import annotations

from .context import Ctx
from .core import CA_NAMES, ToolExit
from .links import read_link


def cmd_ibdev2netdev(ctx: Ctx, args: list[str]) -> int:
    verbose = False
    for arg in args:
        if arg == "-v":
            verbose = True
        else:
            raise ToolExit(f"Usage: {ctx.name} [-v]", 1)
    for hca in ctx.hcas():
        link = read_link(ctx.env, hca)
        state = "Up" if link.up else "Down"
        if verbose:
            ctx.print(f"{hca.pci} {hca.name} ({hca.ca_type} - {hca.board_id}) "
                      f"{CA_NAMES.get(hca.ca_type, 'ConnectX')} fw {hca.fw_ver} port {hca.port} "
                      f"({'ACTIVE' if link.up else 'DOWN'}) ==> {hca.netdev} ({state})")
        else:
            ctx.print(f"{hca.name} port {hca.port} ==> {hca.netdev} ({state})")
    return 0
