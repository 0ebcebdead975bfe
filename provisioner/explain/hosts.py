"""Which inventory host a name or address in a log is: by inventory name, short name, Slurm node name
(`fabnet_slurm_node`), or any address the inventory gives the host (ansible_host, and variables holding IP
addresses such as data_ip), and whether a name in a log is a placeholder a poster put in place of a host's."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from typing import Any


def _addresses(address: str, variables: Mapping[str, Any]) -> set[str]:
    found = {address}
    for value in variables.values():
        if isinstance(value, str):
            try:
                found.add(str(ipaddress.ip_address(value)))
            except ValueError:
                continue
    return found


def map_hosts(seen: Iterable[str], inventory: Iterable[tuple[str, str, Mapping[str, Any]]],
              node_names: Mapping[str, str] | None = None) -> dict[str, str]:
    """{name or address in the log: inventory host} for those that match one host; others are left out.
    `node_names` (host -> its Slurm node name) lets srun's and Slurm's own lines name a host too."""
    by_key: dict[str, set[str]] = {}
    for name, address, variables in inventory:
        keys = {name, name.split(".")[0]} | _addresses(address, variables)
        if node_names and name in node_names:
            keys.add(node_names[name])
        for key in keys:
            by_key.setdefault(key.lower(), set()).add(name)
    mapped = {}
    for item in seen:
        candidates = by_key.get(item.lower()) or by_key.get(item.split(".")[0].lower()) or set()
        if len(candidates) == 1:
            mapped[item] = next(iter(candidates))
    return mapped


# What posters put in place of a host's name or address: an ellipsis (`...-48`), a run of x or * (`xxx`,
# `***`), an IPv4 address with x for some of its numbers (`10.x.x.x`), a bracketed placeholder (`<hostname>`,
# `{host}`, `[REDACTED]`; with no colon, since `[::1]` and `[fe80::1]` are IPv6 addresses as torch and gloo
# write them). A single x elsewhere is part of a real name (`master-x`, `x.example.com`).
_REDACTED = re.compile(r"\.\.\.|\u2026|\*|^[<{\[][^:]*[>}\]]$|(?:^|[.\-_])x{2,}(?:$|[.\-_])|"
                       r"^(?=[0-9.]*x)(?:(?:[0-9]{1,3}|x)\.){3}(?:[0-9]{1,3}|x)(?::[0-9]+)?$|redacted|^hostname$",
                       re.I)


def redacted(name: str) -> bool:
    """Whether a host name or address in a log is a placeholder a poster wrote instead of the real one."""
    return bool(_REDACTED.search(name.strip()))
