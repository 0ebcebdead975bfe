"""Ansible's YAML inventory format read into an `InventoryGraph`, as Ansible's yaml plugin reads it.

Where Ansible only warns (an unknown key in a group, a group that is not a mapping, a host written as a
number) fabnet warns too, naming file and line; it refuses only what would select the wrong hosts.
"""

from __future__ import annotations

import shlex
from typing import Any

from provisioner.load.hostrange import HostRangeError, expand_host_range, split_host_port
from provisioner.load.invgraph import InventoryGraph, check_name
from provisioner.load.yamlsrc import KeyPath, Sourced

# The refusal of a plugin configuration (`plugin: constructed`, `plugin: aws_ec2`...), then save_as_static's advice.
PLUGIN_REFUSED = "an inventory plugin configuration: fabnet does not run inventory plugins; "


def save_as_static(source: str, what: str = "it") -> str:
    """What to do with an inventory only Ansible can run (a script or a plugin configuration): its
    `--list --yaml` output is a static YAML inventory that Ansible and fabnet both read."""
    return (f"save what Ansible makes of {what} as a static inventory (ansible-inventory -i {shlex.quote(source)} "
            "--list --yaml > hosts.yml) and give that file instead")

_SECTIONS = ("vars", "children", "hosts")


def type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)


class YamlInventoryReader:
    def __init__(self, graph: InventoryGraph, src: Sourced) -> None:
        self.graph = graph
        self.src = src

    def warn(self, message: str, path: KeyPath) -> None:
        self.graph.warnings.append(f"{self.src.origin(path)}: {self.src.key(path)}: {message}")

    def read(self) -> None:
        data = self.src.data
        if not isinstance(data, dict):
            raise self.src.error(
                "an inventory is a mapping of groups (all:, gpu:, ...) to their hosts, vars and children; "
                f"got {type_name(data)}"
            )
        if data.get("plugin"):
            raise self.src.error(PLUGIN_REFUSED + save_as_static(self.src.file), ("plugin",))
        for name, body in data.items():
            if name in _SECTIONS and not isinstance(body, dict | None):
                raise self.src.error(f"top-level keys are group names; put {name}: under a group, e.g. all:",
                                     (str(name),))
            self._group(str(name), body, (str(name),))

    def _group(self, name: str, body: Any, path: KeyPath) -> str | None:
        if not isinstance(body, dict | None):
            self.warn(f"not a group definition ({type_name(body)}), skipped as Ansible skips it", path)
            return None
        if not name:
            raise self.src.error("a group needs a name", path)
        self.graph.add_group(name, self.src.origin(path))
        if body is None:
            return name
        for key, value in body.items():
            where = (*path, str(key))
            if key in _SECTIONS and isinstance(value, str):
                if key == "hosts" and ("," in value or " " in value.strip()):
                    raise self.src.error(
                        f"hosts is a mapping of host names; this string would be read by Ansible as ONE host "
                        f"named {value!r}", where)
                self.warn(f"a string where a mapping belongs; read as {{{value}: null}}, as Ansible does", where)
                value = {value: None}
            if key in _SECTIONS and not isinstance(value, dict | None):
                raise self.src.error(f"{key} of group {name!r} must be a mapping; got {type_name(value)}", where)
            if key not in _SECTIONS:
                self.warn(f"unknown key in group {name!r}, skipped as Ansible skips it; allowed: vars, children, hosts",
                          where)
                continue
            if value is None:
                continue
            if key == "vars":
                for var, var_value in value.items():
                    if not isinstance(var, str):
                        raise self.src.error(f"a variable name must be a string, got {var!r}", (*where, str(var)))
                    self.graph.set_group_var(name, var, var_value, self.src.origin((*where, var)))
            elif key == "children":
                for child, child_body in value.items():
                    child_path = (*where, str(child))
                    added = self._group(str(child), child_body, child_path)
                    if added is not None:
                        self.graph.add_child(name, added, self.src.origin(child_path))
            else:
                for host_key, host_vars in value.items():
                    self._hosts(name, host_key, host_vars, (*where, str(host_key)))
        return name

    def _hosts(self, group: str, key: Any, body: Any, path: KeyPath) -> None:
        if not isinstance(key, str):
            if isinstance(key, bool) or not isinstance(key, int | float):
                raise self.src.error(f"a host name must be a string, got {key!r}", path)
            self.warn(f"host name {key!r} is a number; read as the string {str(key)!r} (Ansible 2.19 refuses it: "
                      "quote it)", path)
            key = str(key)
        if body is not None and not isinstance(body, dict):
            raise self.src.error(f"a host entry is a mapping of its vars (or nothing); got {type_name(body)}", path)
        origin = self.src.origin(path)
        check_name("host name", key, origin)
        base, port = split_host_port(key)
        try:
            names = expand_host_range(base)
        except HostRangeError as exc:
            raise self.src.error(str(exc), path) from None
        for host in names:
            self.graph.add_host(host, group, port, origin)
            for var, value in (body or {}).items():
                if not isinstance(var, str):
                    raise self.src.error(f"a variable name must be a string, got {var!r}", (*path, str(var)))
                self.graph.set_host_var(host, var, value, self.src.origin((*path, var)))


def read_yaml_inventory(graph: InventoryGraph, src: Sourced) -> None:
    """Add one YAML inventory file's groups, hosts and vars to `graph`. Raises ConfigError."""
    YamlInventoryReader(graph, src).read()


__all__ = ["read_yaml_inventory", "type_name"]
