"""Inventory variables that name interfaces and paths on a host (`data_iface`, `fabnet_data_ifaces`,
`fabnet_management_interfaces`, `fabnet_sysfs_root`) or the host's name in Slurm (`fabnet_slurm_node`),
checked when the inventory loads.

They reach sysfs paths (`/sys/class/net/IFACE/mtu`), `ping -I`, GLOO_SOCKET_IFNAME and the boot-time
replay scripts of roce_qos, so each must be what the kernel would accept (`names.netdev`, the check the
playbook's `interface:` fields use) or a plain absolute path: `../../etc` as an interface name would walk
out of /sys/class/net. One that holds one name (`data_iface`, `fabnet_sysfs_root`, `fabnet_slurm_node`) must
be text: an unquoted `yes` would otherwise be the name `True`. Every reader of these variables splits a list
the same way, here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from provisioner.errors import ConfigError
from provisioner.load import names
from provisioner.load.templating import has_template
from provisioner.load.yamlsrc import Origin

DATA_IFACES = "fabnet_data_ifaces"
DATA_IFACE = "data_iface"
MANAGEMENT_IFACES = "fabnet_management_interfaces"
SYSFS_ROOT = "fabnet_sysfs_root"
# The host's NodeName in Slurm where it differs from its inventory name (scheduler/names.py).
SLURM_NODE = "fabnet_slurm_node"


def iface_list(value: Any) -> list[str]:
    """The interface names a list variable holds: a YAML list, or one string of names between commas."""
    if value is None:
        return []
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    return [text for text in (str(item).strip() for item in items if item is not None) if text]


def _templated(value: Any) -> bool:
    return isinstance(value, str) and has_template(value)


def _sysfs_root(value: str) -> str:
    # `/sys/` is as good as `/sys`: readers strip the trailing '/'.
    return names.file_path(value.rstrip("/") or "/")


def _checks() -> list[tuple[str, Callable[[str], str], bool]]:
    """(variable, check of one name, whether a templated value is left alone). The data interfaces are
    read literally by the smoke test, which skips a value it would have to render (it asks the host
    instead), and a rendered `interface:` field is checked by the playbook's model; the management
    interfaces and the sysfs root are never rendered, so a template there could only be used as text."""
    return [(DATA_IFACE, names.netdev, True), (DATA_IFACES, names.netdev, True),
            (MANAGEMENT_IFACES, names.netdev, False), (SYSFS_ROOT, _sysfs_root, False),
            (SLURM_NODE, names.slurm_node, False)]


# What a variable of one value holds: read as text, a YAML boolean (`yes`, `on`, `true` unquoted) would be the
# name `True`, and a list or a mapping its Python spelling.
_ONE = {DATA_IFACE: "one interface name", SYSFS_ROOT: "one path", SLURM_NODE: "one Slurm node name"}


def _kind(value: Any) -> str | None:
    """What a value of one name must not be, in the words of the error; None for text or a number."""
    if isinstance(value, bool):
        return "a boolean (YAML reads an unquoted yes, no, true, false, on or off as one; quote the name)"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return None


def _refused(var: str, message: str, origins: Mapping[str, Origin]) -> ConfigError:
    origin = origins.get(var)
    return origin.error(message, key=origin.key or var) if origin is not None else ConfigError(message, key=var)


def check_device_vars(values: Mapping[str, Any], origins: Mapping[str, Origin]) -> None:
    """Raise ConfigError (with the file, line and key where the variable was set) for the first of these
    variables that holds a name the kernel would refuse, a path that is not plain, or, where one name is
    wanted, a boolean, a list or a mapping."""
    for var, check, skip_templates in _checks():
        value = values.get(var)
        if value is None:
            continue
        if var in _ONE and (kind := _kind(value)) is not None:
            raise _refused(var, f"{var} must be {_ONE[var]}, not {kind}", origins)
        items = iface_list(value) if var in (DATA_IFACES, MANAGEMENT_IFACES) else [str(value).strip()]
        for item in items:
            if skip_templates and _templated(item):
                continue
            try:
                check(item)
            except ValueError as exc:
                raise _refused(var, f"{var} '{names.shown(item)}': {exc}", origins) from None


__all__ = ["DATA_IFACE", "DATA_IFACES", "MANAGEMENT_IFACES", "SLURM_NODE", "SYSFS_ROOT", "check_device_vars",
           "iface_list"]
