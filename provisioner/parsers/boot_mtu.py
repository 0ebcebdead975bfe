"""The MTU a netdev gets at boot, read from the configuration files of each network system: netplan,
systemd-networkd and udev `.link` files, NetworkManager, ifcfg and ifupdown. Pure functions of the files'
text (path -> text), as the interface resource's probe reads them.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Callable
from typing import Any

import yaml

from provisioner.errors import ParseError

NETPLAN_DIR = "/etc/netplan/"
NETWORKD_DIR = "/etc/systemd/network/"
NM_DIR = "/etc/NetworkManager/system-connections/"
IFCFG_DIR = "/etc/sysconfig/network-scripts/"
IFUPDOWN_FILE = "/etc/network/interfaces"


_MTU_BYTES = re.compile(r"^\s*(?P<n>[0-9]+)\s*(?P<unit>[KMG]?)\s*$", re.IGNORECASE)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        match = _MTU_BYTES.match(value)
        if match:
            # systemd sizes take 1024-based K/M/G suffixes (MTUBytes=9K is 9216).
            scale = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[match["unit"].lower()]
            return int(match["n"]) * scale
    return None


def ini(text: str) -> list[tuple[str, str, str]]:
    """(section, key, value) of an INI-style file in order; repeated keys kept (systemd and NM use them)."""
    entries: list[tuple[str, str, str]] = []
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        key, sep, value = line.partition("=")
        if sep:
            entries.append((section, key.strip(), value.strip()))
    return entries


def _glob_list_matches(patterns: list[str], netdev: str) -> bool:
    # systemd: a whitespace-separated list of shell globs; a leading '!' inverts the whole list.
    if patterns and patterns[0].startswith("!"):
        return not any(fnmatch.fnmatchcase(netdev, p.lstrip("!")) for p in patterns)
    return any(fnmatch.fnmatchcase(netdev, p) for p in patterns)


def networkd(files: dict[str, str], netdev: str, suffix: str, section: str) -> tuple[int | None, str] | None:
    """The first matching `.network` / `.link` file (systemd applies only the first, in name order)."""
    for path in sorted((p for p in files if p.startswith(NETWORKD_DIR) and p.endswith(suffix)),
                       key=lambda p: p.rsplit("/", 1)[-1]):
        entries = ini(files[path])
        names: list[str] = []
        other_match = False
        for sect, key, value in entries:
            if sect != "Match":
                continue
            if key == "Name" and not value:
                names = []  # an empty assignment resets the list
            elif key in ("Name", "OriginalName"):
                names += value.split()
            else:
                other_match = True
        if names:
            if not _glob_list_matches(names, netdev):
                continue
        elif other_match:
            continue  # matches by MAC, driver, path ...: not decidable from the name alone
        mtu = None
        for sect, key, value in entries:
            if sect == section and key == "MTUBytes":
                mtu = _int(value) if value else None
        return mtu, path
    return None


NETPLAN_SECTIONS = (
    "ethernets", "bonds", "bridges", "vlans", "tunnels", "vrfs", "wifis", "modems", "dummy-devices",
    "virtual-ethernets", "nm-devices",
)


def _netplan(files: dict[str, str], netdev: str) -> tuple[int | None, str] | None:
    # netplan merges its files in name order, later definitions overriding earlier ones.
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    mtu_source: dict[tuple[str, str], str] = {}
    for path in sorted((p for p in files if p.startswith(NETPLAN_DIR)), key=lambda p: p.rsplit("/", 1)[-1]):
        try:
            doc = yaml.safe_load(files[path]) or {}
        except yaml.YAMLError as exc:
            raise ParseError("netplan", f"{path}: {exc}".replace("\n", " ")) from None
        network = doc.get("network") if isinstance(doc, dict) else None
        if not isinstance(network, dict):
            continue
        for section in NETPLAN_SECTIONS:
            devices = network.get(section)
            if not isinstance(devices, dict):
                continue
            for ident, conf in devices.items():
                if not isinstance(conf, dict):
                    conf = {}
                key = (section, str(ident))
                merged.setdefault(key, {}).update(conf)
                if "mtu" in conf:
                    mtu_source[key] = path
    for key, conf in merged.items():
        match = conf.get("match")
        if isinstance(match, dict):
            if conf.get("set-name"):
                applies = conf["set-name"] == netdev
            elif isinstance(match.get("name"), str):
                applies = fnmatch.fnmatchcase(netdev, match["name"])
            else:
                applies = False  # by MAC or driver: not decidable from the name alone
        else:
            applies = key[1] == netdev
        if applies and key in mtu_source:
            return _int(conf.get("mtu")), mtu_source[key]
    return None


def _network_manager(files: dict[str, str], netdev: str) -> tuple[int | None, str] | None:
    for path in sorted(p for p in files if p.startswith(NM_DIR)):
        entries = ini(files[path])
        values = {(sect, key): value for sect, key, value in entries}
        if values.get(("connection", "interface-name")) != netdev:
            continue
        if values.get(("connection", "autoconnect"), "true").lower() in ("false", "no", "0"):
            continue  # not brought up at boot
        for sect in ("ethernet", "802-3-ethernet", "infiniband"):
            mtu = _int(values.get((sect, "mtu"), ""))
            if mtu:  # 0 means "automatic"
                return mtu, path
    return None


_BACKUP_SUFFIXES = ("~", ".bak", ".orig", ".rpmnew", ".rpmorig", ".rpmsave")


def shell_vars(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        try:
            words = shlex.split(value, comments=True)
        except ValueError:
            words = [value]
        values[key.strip()] = words[0] if words else ""
    return values


def _ifcfg(files: dict[str, str], netdev: str) -> tuple[int | None, str] | None:
    for path in sorted(p for p in files if p.startswith(IFCFG_DIR + "ifcfg-")):
        if path.endswith(_BACKUP_SUFFIXES):
            continue
        values = shell_vars(files[path])
        device = values.get("DEVICE") or path.rsplit("ifcfg-", 1)[-1]
        if device != netdev or values.get("ONBOOT", "yes").lower() in ("no", "false", "0"):
            continue
        mtu = _int(values.get("MTU", ""))
        if mtu:
            return mtu, path
    return None


IFUPDOWN_STANZAS = {
    "iface", "mapping", "auto", "source", "source-directory", "rename", "no-auto-down", "no-scripts",
}
IP_LINK_MTU = re.compile(r"\bip\s+link\s+set\s+(?:dev\s+)?(?P<dev>\S+)\s+(?:.*\s)?mtu\s+(?P<mtu>[0-9]+)\b")


def _ifupdown(files: dict[str, str], netdev: str) -> tuple[int | None, str] | None:
    paths = [p for p in files if p == IFUPDOWN_FILE] + sorted(
        p for p in files if p.startswith(IFUPDOWN_FILE + ".d/")
    )
    for path in paths:
        current: str | None = None
        for raw in files[path].replace("\\\n", " ").splitlines():
            words = raw.split("#", 1)[0].split()
            if not words:
                continue
            if words[0] in IFUPDOWN_STANZAS or words[0].startswith("allow-"):
                current = words[1] if words[0] == "iface" and len(words) > 1 else None
                continue
            if current != netdev:
                continue
            if words[0] == "mtu" and len(words) > 1 and words[1].isdigit():
                return int(words[1]), path
            if words[0] in ("up", "post-up", "pre-up"):
                hook = IP_LINK_MTU.search(" ".join(words[1:]))
                if hook and hook["dev"] == netdev:
                    return int(hook["mtu"]), path
    return None


def persistent_mtu(files: dict[str, str], netdev: str) -> tuple[int | None, str | None]:
    """The MTU `netdev` gets at boot from the config files given (path -> text), and the file saying so.

    Each system is read by its own rules: netplan merges its files in name order; systemd-networkd and
    udev apply the first matching `.network` / `.link` file (by `[Match] Name=` globs); NetworkManager
    profiles by `interface-name=` that autoconnect; ifcfg by `DEVICE=` or the file name, unless
    `ONBOOT=no`; ifupdown by `iface NAME` (`mtu N`, or an `ip link set NAME mtu N` hook). When several
    systems set it, the first in that order wins, and `.link` files come last because udev applies them
    before any network manager runs. Files matched by MAC address or driver only are not judged.
    Raises ParseError for a netplan file that is not YAML (netplan itself would refuse it).
    """
    readers: list[Callable[[dict[str, str], str], tuple[int | None, str] | None]] = [
        _netplan,
        lambda f, n: networkd(f, n, ".network", "Link"),
        _network_manager,
        _ifcfg,
        _ifupdown,
        lambda f, n: networkd(f, n, ".link", "Link"),
    ]
    for read in readers:
        found = read(files, netdev)
        if found is not None and found[0] is not None:
            return found
    return None, None
