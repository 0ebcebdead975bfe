"""The inventory as `ansible-inventory` shows it: `--list` JSON, `--host` vars and the `--graph` tree, so
an operator can diff what fabnet sees with what Ansible sees."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from provisioner.load.ansible_tags import hide_passwords, to_json_value
from provisioner.load.inventory import Inventory

PROFILE = "inventory_legacy"  # what ansible-core 2.19's ansible-inventory names its JSON encoding


def host_vars(inventory: Inventory, host: str, *, tag_unsafe: bool = True) -> dict[str, Any]:
    """A host's resolved variables, templates unrendered. `--list` tags `!unsafe` values, `--host` does not.
    Plain passwords (ansible_become_password...) are hidden: unlike ansible-inventory, fabnet never prints one."""
    values: dict[str, Any] = to_json_value(hide_passwords(dict(inventory.hosts[host].vars)), tag_unsafe=tag_unsafe)
    return values


def list_json(inventory: Inventory, hosts: Iterable[str] | None = None) -> dict[str, Any]:
    """`ansible-inventory --list`: groups with their own hosts and child groups (empty groups left out),
    then `_meta.hostvars`; `hosts` restricts it as `--limit` does."""
    available = set(inventory.hosts if hosts is None else hosts)
    result: dict[str, Any] = {}
    seen: set[str] = set()

    def add(group: str) -> None:
        body: dict[str, Any] = {}
        if group != "all":
            own = [h for h in inventory.group_hosts.get(group, []) if h in available]
            if own:
                body["hosts"] = own
        children = inventory.children.get(group, [])
        if children:
            body["children"] = list(children)
        result[group] = body
        for child in children:
            if child not in seen:
                seen.add(child)
                add(child)
        if not body:
            del result[group]

    add("all")
    meta: dict[str, Any] = {"hostvars": {}, "profile": PROFILE}
    for name in inventory.group_order["all"]:
        if name in available and inventory.hosts[name].vars:
            meta["hostvars"][name] = host_vars(inventory, name)
    result["_meta"] = meta
    return result


def graph_lines(inventory: Inventory, group: str = "all") -> list[str]:
    """`ansible-inventory --graph [GROUP]`: the group tree with each group's own hosts."""

    def name(text: str, depth: int) -> str:
        return "  |" * depth + "--" + text if depth else text

    def walk(current: str, depth: int) -> list[str]:
        lines = [name(f"@{current}:", depth)]
        for child in inventory.children.get(current, []):
            lines.extend(walk(child, depth + 1))
        if current != "all":
            lines.extend(name(host, depth + 1) for host in inventory.group_hosts.get(current, []))
        return lines

    return walk(group, 0)


__all__ = ["PROFILE", "graph_lines", "host_vars", "list_json"]
