"""`interface`: live MTU and admin state of a netdev, and whether the MTU is in the boot-time config.

The netdev is named, or found from an RDMA device with `rdma link show` (`ibdev2netdev` as fallback).
Every interface resource of a host shares the same `ip -j -d link show` and config-file probes.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from collections.abc import Callable
from typing import Any

import yaml

from provisioner.errors import ParseError
from provisioner.load.specs import InterfaceSpec
from provisioner.parsers._text import require_complete
from provisioner.parsers.ibdev2netdev import parse_ibdev2netdev
from provisioner.parsers.rdma_link import parse_rdma_link
from provisioner.resources.base import (
    Check,
    HostContext,
    Probe,
    ProbeFailed,
    Results,
    compare,
    drift,
    error,
    errors_for,
    ok,
    parse_file_listing,
    print_files_command,
    probe_error,
    sh,
    stdout_of,
)

KIND = "interface"  # its ResourceType (RESOURCE) is in interface_fix, beside the remedy

IP_LINK = Probe(sh("ip", "-j", "-d", "link", "show"))
RDMA_LINK = Probe(sh("rdma", "link", "show"))
IBDEV2NETDEV = Probe(sh("ibdev2netdev"))

NETPLAN_DIR = "/etc/netplan/"
NETWORKD_DIR = "/etc/systemd/network/"
NM_DIR = "/etc/NetworkManager/system-connections/"
IFCFG_DIR = "/etc/sysconfig/network-scripts/"
IFUPDOWN_FILE = "/etc/network/interfaces"

BOOT_CONFIG = Probe(
    print_files_command(
        NETPLAN_DIR + "*.yaml",
        NETPLAN_DIR + "*.yml",
        NETWORKD_DIR + "*.network",
        NETWORKD_DIR + "*.link",
        NM_DIR + "*",
        IFCFG_DIR + "ifcfg-*",
        IFUPDOWN_FILE,
        IFUPDOWN_FILE + ".d/*",
    )
)


# ---------------------------------------------------------------------------------------- the netdev


def netdev_probes(name: str | None, rdma_device: str | None) -> list[Probe]:
    return [IP_LINK] if name is not None else [IP_LINK, RDMA_LINK, IBDEV2NETDEV]


def _netdev_from_rdma_link(text: str, device: str) -> str | None:
    links = require_complete(parse_rdma_link(text), "rdma_link").links
    ports = [link for link in links if link.device == device and link.netdev]
    ports.sort(key=lambda link: link.port != 1)  # port 1 first: the one RoCE uses on single-port NICs
    return ports[0].netdev if ports else None


def _netdev_from_ibdev2netdev(text: str, device: str) -> str | None:
    ports = [link for link in require_complete(parse_ibdev2netdev(text), "ibdev2netdev").links if link.device == device]
    ports.sort(key=lambda link: link.port != 1)
    return ports[0].netdev if ports else None


def netdev_of(name: str | None, rdma_device: str | None, results: Results) -> str | None:
    """The netdev the spec is about; None when the RDMA device is not on the host.

    ProbeFailed when neither `rdma link show` nor `ibdev2netdev` could be read.
    """
    if name is not None:
        return name
    assert rdma_device is not None  # the spec models require one of the two
    problems: list[str] = []
    answered = False
    sources: list[tuple[Probe, str, Callable[[str, str], str | None]]] = [
        (RDMA_LINK, "rdma link show", _netdev_from_rdma_link),
        (IBDEV2NETDEV, "ibdev2netdev", _netdev_from_ibdev2netdev),
    ]
    for probe, what, find in sources:
        result = results.get(probe)
        reason = probe_error(result, what)
        if reason is not None or result is None:
            problems.append(reason or what)
            continue
        try:
            netdev = find(result.stdout, rdma_device)
        except ParseError as exc:
            problems.append(str(exc))
            continue
        if netdev:
            return netdev
        answered = True
    if answered:
        return None
    raise ProbeFailed(f"cannot find the netdev of RDMA device {rdma_device}: " + "; ".join(problems))


def ip_links(results: Results) -> dict[str, dict[str, Any]]:
    """`ip -j -d link show` as name -> link object; alternative names (altnames) are keys too."""
    text = stdout_of(results, IP_LINK, "ip -j -d link show")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProbeFailed(f"ip -j -d link show: not JSON: {exc}") from None
    if not isinstance(data, list):
        raise ProbeFailed("ip -j -d link show: expected a JSON list of links")
    links: dict[str, dict[str, Any]] = {}
    for link in data:
        if isinstance(link, dict) and isinstance(link.get("ifname"), str):
            altnames = link.get("altnames")
            for alias in [link["ifname"], *(altnames if isinstance(altnames, list) else [])]:
                links.setdefault(alias, link)
    return links


def live_mtu(link: dict[str, Any]) -> int:
    mtu = link.get("mtu")
    if not isinstance(mtu, int) or isinstance(mtu, bool):
        raise ProbeFailed(f"ip -j -d link show: {link.get('ifname')} has no numeric mtu")
    return mtu


# ------------------------------------------------------------------------------ boot-time configuration

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


def _ini(text: str) -> list[tuple[str, str, str]]:
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


def _networkd(files: dict[str, str], netdev: str, suffix: str, section: str) -> tuple[int | None, str] | None:
    """The first matching `.network` / `.link` file (systemd applies only the first, in name order)."""
    for path in sorted((p for p in files if p.startswith(NETWORKD_DIR) and p.endswith(suffix)),
                       key=lambda p: p.rsplit("/", 1)[-1]):
        entries = _ini(files[path])
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


_NETPLAN_SECTIONS = (
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
        for section in _NETPLAN_SECTIONS:
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
        entries = _ini(files[path])
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


def _shell_vars(text: str) -> dict[str, str]:
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
        values = _shell_vars(files[path])
        device = values.get("DEVICE") or path.rsplit("ifcfg-", 1)[-1]
        if device != netdev or values.get("ONBOOT", "yes").lower() in ("no", "false", "0"):
            continue
        mtu = _int(values.get("MTU", ""))
        if mtu:
            return mtu, path
    return None


_IFUPDOWN_STANZAS = {
    "iface", "mapping", "auto", "source", "source-directory", "rename", "no-auto-down", "no-scripts",
}
_IP_LINK_MTU = re.compile(r"\bip\s+link\s+set\s+(?:dev\s+)?(?P<dev>\S+)\s+(?:.*\s)?mtu\s+(?P<mtu>[0-9]+)\b")


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
            if words[0] in _IFUPDOWN_STANZAS or words[0].startswith("allow-"):
                current = words[1] if words[0] == "iface" and len(words) > 1 else None
                continue
            if current != netdev:
                continue
            if words[0] == "mtu" and len(words) > 1 and words[1].isdigit():
                return int(words[1]), path
            if words[0] in ("up", "post-up", "pre-up"):
                hook = _IP_LINK_MTU.search(" ".join(words[1:]))
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
        lambda f, n: _networkd(f, n, ".network", "Link"),
        _network_manager,
        _ifcfg,
        _ifupdown,
        lambda f, n: _networkd(f, n, ".link", "Link"),
    ]
    for read in readers:
        found = read(files, netdev)
        if found is not None and found[0] is not None:
            return found
    return None, None


# --------------------------------------------------------------------------------------------- resource


def probes(spec: InterfaceSpec, ctx: HostContext) -> list[Probe]:
    found = netdev_probes(spec.name, spec.rdma_device)
    if spec.persistent and spec.mtu is not None:
        found.append(BOOT_CONFIG)
    return found


def _attributes(spec: InterfaceSpec) -> list[tuple[str, object]]:
    attributes: list[tuple[str, object]] = []
    if spec.mtu is not None:
        attributes.append(("mtu", spec.mtu))
    attributes.append(("link", spec.state))
    if spec.persistent and spec.mtu is not None:
        attributes.append(("mtu_persistent", spec.mtu))
    return attributes


def _link_check(spec: InterfaceSpec, link: dict[str, Any]) -> Check:
    flags = [str(f) for f in link.get("flags", [])]
    actual = "up" if "UP" in flags else "down"
    operstate = str(link.get("operstate", "UNKNOWN"))
    message = ""
    if actual == "up" and operstate not in ("UP", "UNKNOWN"):
        message = f"admin up, operstate {operstate}" + (" (no carrier)" if "NO-CARRIER" in flags else "")
    return compare("link", spec.state, actual, message)


def _persistence_check(spec: InterfaceSpec, netdev: str, results: Results) -> Check:
    assert spec.mtu is not None
    try:
        listing = parse_file_listing(stdout_of(results, BOOT_CONFIG, "reading the network config files"))
        mtu, source = persistent_mtu(listing.files, netdev)
    except (ProbeFailed, ParseError) as exc:
        return error("mtu_persistent", spec.mtu, str(exc))
    if mtu is None:
        if listing.unreadable:
            return error("mtu_persistent", spec.mtu,
                         f"no MTU found for {netdev}, but cannot read {', '.join(listing.unreadable)}")
        return drift("mtu_persistent", spec.mtu, "none in boot config",
                     f"no boot-time network config sets the MTU of {netdev}")
    actual = f"{mtu} in {source}"
    return (ok if mtu == spec.mtu else drift)("mtu_persistent", spec.mtu, actual)


def evaluate(spec: InterfaceSpec, results: Results, ctx: HostContext) -> list[Check]:
    attributes = _attributes(spec)
    try:
        netdev = netdev_of(spec.name, spec.rdma_device, results)
        links = ip_links(results) if netdev is not None else {}
        link = links.get(netdev) if netdev is not None else None
        mtu = live_mtu(link) if link is not None else None
    except (ProbeFailed, ParseError) as exc:
        return errors_for(attributes, str(exc))
    if netdev is None or link is None:
        what = f"RDMA device {spec.rdma_device} not found" if netdev is None else f"no interface {netdev}"
        return [drift(attribute, desired, "absent", what) for attribute, desired in attributes]
    checks: list[Check] = []
    if spec.mtu is not None:
        checks.append(compare("mtu", spec.mtu, mtu))
    checks.append(_link_check(spec, link))
    if spec.persistent and spec.mtu is not None:
        checks.append(_persistence_check(spec, netdev, results))
    return checks
