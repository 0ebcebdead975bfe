"""Ansible's TOML inventory format (its toml plugin, tried for `.toml` files after the ini plugin fails)
read into an `InventoryGraph`: the same groups as YAML, but `children` is a list of group names and every
host entry a table of its vars."""

from __future__ import annotations

import tomllib
from typing import Any

from provisioner.errors import ConfigError
from provisioner.load.inventory_yaml import PLUGIN_REFUSED, read_yaml_inventory, save_as_static, type_name
from provisioner.load.invgraph import InventoryGraph
from provisioner.load.yamlsrc import Sourced


def read_toml_inventory(graph: InventoryGraph, text: str, file: str) -> None:
    """Add one TOML inventory file to `graph`. Raises ConfigError where Ansible's toml plugin fails."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not a valid TOML inventory: {exc}", file=file) from None
    if not data:
        raise ConfigError("an empty TOML inventory (Ansible refuses it)", file=file)
    if data.get("plugin"):
        raise ConfigError(PLUGIN_REFUSED + save_as_static(file), file=file, key="plugin")
    groups = {str(name): _group(str(name), body, file) for name, body in data.items()}
    read_yaml_inventory(graph, Sourced(groups, file))


def _group(name: str, body: Any, file: str) -> Any:
    """One TOML group in the YAML reader's shape; a body that is not a table is left for it to skip."""
    if not isinstance(body, dict):
        return body
    shaped: dict[str, Any] = {}
    for key, value in body.items():
        where = f"{name}.{key}"
        if key == "vars" and not isinstance(value, dict):
            raise ConfigError(f"vars of group {name!r} must be a table; got {type_name(value)}", file=file, key=where)
        if key == "children":
            if not isinstance(value, list):
                raise ConfigError(f"children of group {name!r} must be a list of group names; got "
                                  f"{type_name(value)}", file=file, key=where)
            value = {str(child): {} for child in value}
        if key == "hosts":
            if not isinstance(value, dict):
                raise ConfigError(f"hosts of group {name!r} must be a table; got {type_name(value)}", file=file,
                                  key=where)
            for host, host_vars in value.items():
                if not isinstance(host_vars, dict):
                    raise ConfigError(f"host {host!r} must be a table of its vars; got {type_name(host_vars)}",
                                      file=file, key=f"{where}.{host}")
        shaped[key] = value
    return shaped


__all__ = ["read_toml_inventory"]
