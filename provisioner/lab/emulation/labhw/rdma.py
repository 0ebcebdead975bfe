"""`rdma link` and `rdma dev` (iproute2); other objects run the real `rdma`."""

from __future__ import annotations

import json
from typing import Any

from .context import Ctx
from .core import ToolExit, exec_real
from .links import colon_guid, node_guid, read_link, sys_image_guid


def cmd_rdma(ctx: Ctx, args: list[str]) -> int:
    as_json = pretty = False
    rest = list(args)
    while rest and rest[0].startswith("-"):
        flag = rest[0]
        if flag in ("-j", "-json", "--json"):
            as_json = True
        elif flag in ("-p", "-pretty", "--pretty"):
            pretty = True
        elif flag in ("-d", "-details", "--details"):
            pass
        else:
            exec_real(ctx.name, args, f'Unknown option "{flag}", try "{ctx.name} help".')
        rest.pop(0)
    obj = rest[0] if rest else ""
    if not obj or not ("link".startswith(obj) or "dev".startswith(obj)):
        exec_real(ctx.name, args, f'Object "{obj}" is unknown, try "{ctx.name} help".' if obj
                  else f"Usage: {ctx.name} [ OPTIONS ] OBJECT {{ COMMAND | help }}")
    command = rest[1] if len(rest) > 1 else "show"
    if command not in ("show", "list"):
        exec_real(ctx.name, args, f'Command "{command}" is unknown, try "{ctx.name} {obj} help".')
    target = rest[2] if len(rest) > 2 else None
    if target == "dev" and len(rest) > 3:
        target = rest[3]
    records: list[dict[str, Any]] = []
    lines: list[str] = []
    for index, hca in enumerate(ctx.hcas()):
        name, _, port = (target or "").partition("/")
        if target and (name != hca.name or (port and port != str(hca.port))):
            continue
        link = read_link(ctx.env, hca)
        if "link".startswith(obj):
            state, phys = ("ACTIVE", "LINK_UP") if link.up else ("DOWN", "DISABLED")
            records.append({"ifindex": index, "ifname": hca.name, "port": hca.port, "state": state,
                            "physical_state": phys, "netdev": hca.netdev, "netdev_index": link.ifindex})
            lines.append(f"link {hca.name}/{hca.port} state {state} physical_state {phys} "
                         f"netdev {hca.netdev}")
        else:
            guid = colon_guid(node_guid(hca, link))
            image = colon_guid(sys_image_guid(hca, link))
            records.append({"ifindex": index, "ifname": hca.name, "node_type": "ca", "fw": hca.fw_ver,
                            "node_guid": guid, "sys_image_guid": image})
            lines.append(f"{index}: {hca.name}: node_type ca fw {hca.fw_ver} node_guid {guid} "
                         f"sys_image_guid {image}")
    if target and not records:
        raise ToolExit(f'Wrong device name "{target}"', 1)
    if as_json:
        separators = None if pretty else (",", ":")
        ctx.print(json.dumps(records, indent=4 if pretty else None, separators=separators))
    elif lines:
        ctx.print("\n".join(lines))
    return 0
