"""`show_gids`: the GID table of each RDMA port, as the Mellanox script prints it."""

from __future__ import annotations

from .context import Ctx
from .core import ToolExit
from .links import port_gids, read_link


def cmd_show_gids(ctx: Ctx, args: list[str]) -> int:
    if len(args) > 2 or any(a.startswith("-") for a in args):
        raise ToolExit(f"Usage: {ctx.name} [DEV [PORT]]", 1)
    hcas = ctx.hcas()
    if args:
        hcas = [h for h in hcas if h.name == args[0]]
    if len(args) == 2:
        hcas = [h for h in hcas if str(h.port) == args[1]]
    ctx.print("DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV")
    ctx.print("---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---")
    count = 0
    for hca in hcas:
        link = read_link(ctx.env, hca)
        for gid in port_gids(hca, link):
            # The script pads an address with two spaces; a GID without one gets two empty columns.
            ipv4 = f"{gid.ipv4}  \t" if gid.ipv4 else "\t\t"
            ctx.print(f"{hca.name}\t{hca.port}\t{gid.index}\t{gid.full}\t{ipv4}{gid.version}\t{hca.netdev}")
            count += 1
    ctx.print(f"n_gids_found={count}")
    return 0
