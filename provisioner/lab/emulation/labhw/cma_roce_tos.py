"""`cma_roce_tos`: show or set rdma_cm's default RoCE ToS of a device port."""

from __future__ import annotations

from .context import Ctx, make_parser
from .core import Env, ToolExit, read_text, state_lock, write_atomic
from .hw import Hca, Hw


def read_roce_tos(env: Env, hw: Hw, hca: Hca) -> int:
    text = read_text(env.roce_tos_file(hca.name, hca.port))
    if text is not None and text.strip().isdigit():
        return int(text.strip())
    return hw.roce_tos.get(hca.name, 0)


def cmd_cma_roce_tos(ctx: Ctx, args: list[str]) -> int:
    parser = make_parser(ctx.name, "Show or set the default RoCE ToS of rdma_cm.")
    parser.add_argument("-d", dest="dev", default="mlx5_0")
    parser.add_argument("-p", dest="port", type=int, default=1)
    parser.add_argument("-t", dest="tos", type=int)
    opts = parser.parse_args(args)
    hca = next((h for h in ctx.hcas() if h.name == opts.dev), None)
    if hca is None:
        raise ToolExit(f"{ctx.name}: device {opts.dev} not found", 1)
    if opts.port != hca.port:
        raise ToolExit(f"{ctx.name}: port {opts.port} of {opts.dev} not found", 1)
    if opts.tos is None:
        ctx.print(str(read_roce_tos(ctx.env, ctx.hw, hca)))
        return 0
    if not 0 <= opts.tos <= 255:
        raise ToolExit(f"{ctx.name}: ToS must be 0..255, got {opts.tos}", 1)
    with state_lock(ctx.env):
        write_atomic(ctx.env.roce_tos_file(hca.name, hca.port), f"{opts.tos}\n")
    return 0
