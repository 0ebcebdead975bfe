"""`ibstat` and `ibstatus`: the infiniband-diags views of devices and ports."""

from __future__ import annotations

import os

from .context import Ctx, make_parser
from .core import RATES, ToolExit
from .hw import Hca
from .links import Link, colon_guid, node_guid, port_guid, read_link, sys_image_guid


def _select_hca(ctx: Ctx, name: str) -> Hca:
    hca = next((h for h in ctx.hcas() if h.name == name), None)
    if hca is None:
        raise ToolExit(f"ibpanic: [{os.getpid()}] main: stat of IB device '{name}' failed: "
                       "No such file or directory", 255)
    return hca


def _ibstat_port(hca: Hca, link: Link, indent: str) -> list[str]:
    return [f"{indent}State: {'Active' if link.up else 'Down'}",
            f"{indent}Physical state: {'LinkUp' if link.up else 'Disabled'}",
            f"{indent}Rate: {hca.rate if link.up else 10}",
            f"{indent}Base lid: 0",
            f"{indent}LMC: 0",
            f"{indent}SM lid: 0",
            f"{indent}Capability mask: 0x00010000",
            f"{indent}Port GUID: 0x{port_guid(link):016x}",
            f"{indent}Link layer: Ethernet"]


def cmd_ibstat(ctx: Ctx, args: list[str]) -> int:
    parser = make_parser(ctx.name, "Show the state of RDMA devices and their ports.")
    parser.add_argument("-l", "--list_of_cas", action="store_true")
    parser.add_argument("-s", "--short", action="store_true")
    parser.add_argument("-p", "--port_list", action="store_true")
    parser.add_argument("ca", nargs="?")
    parser.add_argument("port", nargs="?", type=int)
    opts = parser.parse_args(args)
    hcas = [_select_hca(ctx, opts.ca)] if opts.ca else ctx.hcas()
    if opts.list_of_cas:
        for hca in hcas:
            ctx.print(hca.name)
        return 0
    if opts.port_list:
        for hca in hcas:
            ctx.print(f"0x{port_guid(read_link(ctx.env, hca)):016x}")
        return 0
    if opts.port is not None:
        hca = hcas[0]
        if opts.port != hca.port:
            raise ToolExit(f"ibpanic: [{os.getpid()}] main: stat of IB device '{hca.name}' port "
                           f"{opts.port} failed: No such file or directory", 255)
        ctx.print(f"CA: '{hca.name}'")
        ctx.print(f"Port {hca.port}:")
        ctx.print("\n".join(_ibstat_port(hca, read_link(ctx.env, hca), "")))
        return 0
    for hca in hcas:
        link = read_link(ctx.env, hca)
        ctx.print(f"CA '{hca.name}'")
        ctx.print(f"\tCA type: {hca.ca_type}")
        ctx.print("\tNumber of ports: 1")
        ctx.print(f"\tFirmware version: {hca.fw_ver}")
        ctx.print("\tHardware version: 0")
        ctx.print(f"\tNode GUID: 0x{node_guid(hca, link):016x}")
        ctx.print(f"\tSystem image GUID: 0x{sys_image_guid(hca, link):016x}")
        if not opts.short:
            ctx.print(f"\tPort {hca.port}:")
            ctx.print("\n".join(_ibstat_port(hca, link, "\t\t")))
    return 0


def cmd_ibstatus(ctx: Ctx, args: list[str]) -> int:
    if args[:1] in (["-h"], ["--help"]):
        ctx.print(f"Usage: {ctx.name} [devname[:port]]...")
        return 0
    selected: list[tuple[Hca, int | None]] = []
    for arg in args:
        name, _, port_text = arg.partition(":")
        selected.append((_select_hca(ctx, name), int(port_text) if port_text.isdigit() else None))
    if not args:
        selected = [(hca, None) for hca in ctx.hcas()]
    for hca, port in selected:
        if port is not None and port != hca.port:
            continue
        link = read_link(ctx.env, hca)
        gid = colon_guid(0xFE80 << 48) + ":" + colon_guid(port_guid(link))
        width, speed = RATES[hca.rate] if link.up else ("4X", "SDR")
        rate = hca.rate if link.up else 10
        ctx.print(f"Infiniband device '{hca.name}' port {hca.port} status:")
        ctx.print(f"\tdefault gid:\t {gid}")
        ctx.print("\tbase lid:\t 0x0")
        ctx.print("\tsm lid:\t\t 0x0")
        ctx.print(f"\tstate:\t\t {'4: ACTIVE' if link.up else '1: DOWN'}")
        ctx.print(f"\tphys state:\t {'5: LinkUp' if link.up else '3: Disabled'}")
        ctx.print(f"\trate:\t\t {rate} Gb/sec ({width} {speed})")
        ctx.print("\tlink_layer:\t Ethernet")
        ctx.print()
    return 0
