"""`ethtool -S IFACE`: the driver's statistics, from a file per counter the lab writes for the netdev (an mlx5
port's names). Only `-S`/`--statistics` is emulated: fabnet reads nothing else with ethtool."""

from __future__ import annotations

from .context import Ctx
from .core import ToolExit


def cmd_ethtool(ctx: Ctx, args: list[str]) -> int:
    if len(args) != 2 or args[0] not in ("-S", "--statistics"):
        raise ToolExit(f"{ctx.name}: only `-S DEVNAME` is emulated on this lab node", 1)
    netdev = args[1]
    if not (ctx.env.net / netdev).exists():
        raise ToolExit("Cannot get stats strings information: No such device", 96)  # as ethtool 6.1 exits
    stats = ctx.env.nic_stats_dir(netdev)
    files = sorted(stats.iterdir()) if stats.is_dir() else []
    if not files:
        raise ToolExit("no stats available", 94)  # ethtool 6.1 on a netdev whose driver has none (lo)
    ctx.print("NIC statistics:")
    for path in files:
        ctx.print(f"     {path.name}: {path.read_text().strip() or 0}")
    return 0
