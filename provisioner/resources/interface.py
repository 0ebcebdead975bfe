"""`interface`: live MTU and admin state of a netdev, and whether the MTU is in the boot-time config.

The netdev is named, or found from an RDMA device with `rdma link show` (`ibdev2netdev` as fallback).
Every interface resource of a host shares the same `ip -j -d link show` and config-file probes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from provisioner.errors import ParseError
from provisioner.load.specs import InterfaceSpec
from provisioner.parsers._text import require_complete
from provisioner.parsers.boot_mtu import (
    IFCFG_DIR,
    IFUPDOWN_FILE,
    NETPLAN_DIR,
    NETWORKD_DIR,
    NM_DIR,
    persistent_mtu,
)
from provisioner.parsers.ibdev2netdev import parse_ibdev2netdev
from provisioner.parsers.rdma_link import parse_rdma_link
from provisioner.resources.base import (
    Check,
    HostContext,
    Probe,
    ProbeFailed,
    ResourceType,
    Results,
    compare,
    drift,
    error,
    errors_for,
    files_probe,
    ok,
    parse_file_listing,
    probe_error,
    sh,
    stdout_of,
)

if TYPE_CHECKING:  # for the annotation only: the remedy's own module imports the steps
    from provisioner.resources.steps import Step

KIND = "interface"

IP_LINK = Probe(sh("ip", "-j", "-d", "link", "show"))
RDMA_LINK = Probe(sh("rdma", "link", "show"))
IBDEV2NETDEV = Probe(sh("ibdev2netdev"))
NO_NETDEV = "no netdev"  # the `actual` of every check when the RDMA device has no netdev to set


BOOT_CONFIG = files_probe(
    NETPLAN_DIR + "*.yaml",
    NETPLAN_DIR + "*.yml",
    NETWORKD_DIR + "*.network",
    NETWORKD_DIR + "*.link",
    NM_DIR + "*",
    IFCFG_DIR + "ifcfg-*",
    IFUPDOWN_FILE,
    IFUPDOWN_FILE + ".d/*",
)


# ---------------------------------------------------------------------------------------- the netdev


def netdev_probes(name: str | None, rdma_device: str | None) -> list[Probe]:
    return [IP_LINK] if name is not None else [IP_LINK, RDMA_LINK, IBDEV2NETDEV]


class NoNetdev(Exception):
    """The RDMA device is on the host, but none of its ports has a netdev: an InfiniBand port while
    IPoIB is not loaded, or a device that never has one (AWS EFA). Not a missing device."""


# A finder gives the netdev of a device's port, or None, and the device's ports it saw without one.
Found = tuple[str | None, list[str]]


def _netdev_from_rdma_link(text: str, device: str) -> Found:
    links = [link for link in require_complete(parse_rdma_link(text), "rdma_link").links if link.device == device]
    ports = [link for link in links if link.netdev]
    ports.sort(key=lambda link: link.port != 1)  # port 1 first: the one RoCE uses on single-port NICs
    bare = [f"{link.device}/{link.port} (state {link.state}"
            + (f", physical_state {link.physical_state})" if link.physical_state else ")")
            for link in links if not link.netdev]
    return (ports[0].netdev if ports else None), bare


def _netdev_from_ibdev2netdev(text: str, device: str) -> Found:
    ports = [link for link in require_complete(parse_ibdev2netdev(text), "ibdev2netdev").links if link.device == device]
    ports.sort(key=lambda link: link.port != 1)
    return (ports[0].netdev if ports else None), []


def netdev_of(name: str | None, rdma_device: str | None, results: Results) -> str | None:
    """The netdev the spec is about; None when the RDMA device is not on the host.

    ProbeFailed when neither `rdma link show` nor `ibdev2netdev` could be read; NoNetdev when the device
    is listed but no source names a netdev for it.
    """
    if name is not None:
        return name
    assert rdma_device is not None  # the spec models require one of the two
    problems: list[str] = []
    answered = False
    bare: list[str] = []
    sources: list[tuple[Probe, str, Callable[[str, str], Found]]] = [
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
            netdev, without = find(result.stdout, rdma_device)
        except ParseError as exc:
            problems.append(str(exc))
            continue
        if netdev:
            return netdev
        answered = True
        bare += [f"`{what}` lists {port}" for port in without]
    if bare:
        # `rdma link` lists every port of a device, netdev or not (an IB port without IPoIB reads
        # `link mlx5_7/1 subnet_prefix ... state DOWN physical_state POLLING`): the device is there.
        raise NoNetdev(f"RDMA device {rdma_device} has no netdev: " + "; ".join(bare)
                       + " without one (an InfiniBand port without IPoIB, a device that has none such as EFA,"
                       " or a kernel too old to name it)")
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


def _flags(link: dict[str, Any]) -> list[str]:
    flags = link.get("flags")
    return [str(f) for f in flags] if isinstance(flags, list) else []


def bond_of(link: dict[str, Any]) -> str | None:
    """The bond (or team) `link` is a member of: the SLAVE flag (bridge ports and VRF members have none), or
    `-d`'s `info_slave_kind`; its MTU is the bond's to set."""
    master = link.get("master")
    info = link.get("linkinfo")
    kind = info.get("info_slave_kind") if isinstance(info, dict) else None
    if isinstance(master, str) and ("SLAVE" in _flags(link) or kind in ("bond", "team")):
        return master
    return None


def _mtu_check(spec: InterfaceSpec, link: dict[str, Any], mtu: int | None) -> Check:
    bond = bond_of(link)
    message = ""
    if bond is not None and mtu != spec.mtu:
        message = f"{link.get('ifname')} is a member of bond {bond}, which sets its members' MTU: set it on {bond}"
    return compare("mtu", spec.mtu, mtu, message)


def _link_check(spec: InterfaceSpec, link: dict[str, Any]) -> Check:
    flags = _flags(link)
    actual = "up" if "UP" in flags else "down"
    operstate = str(link.get("operstate", "UNKNOWN"))
    message = ""
    # operstate UNKNOWN is what drivers without operstate support report (lo, tun, some IPoIB): NO-CARRIER
    # is then the only sign the link is missing.
    if actual == "up" and (operstate not in ("UP", "UNKNOWN") or "NO-CARRIER" in flags):
        message = f"admin up, operstate {operstate}" + (" (no carrier)" if "NO-CARRIER" in flags else "")
        lower = link.get("link")
        if operstate == "LOWERLAYERDOWN" and isinstance(lower, str):
            message += f": {lower}, the device it rides on, is down"
    return compare("link", spec.state, actual, message)


def _persistence_check(spec: InterfaceSpec, netdev: str, results: Results, bond: str | None = None) -> Check:
    """The MTU the boot-time config gives `netdev`; a bond member's comes from its bond when its own files
    set none (networkd, netplan and ifcfg set members from the bond)."""
    assert spec.mtu is not None
    try:
        listing = parse_file_listing(stdout_of(results, BOOT_CONFIG, "reading the network config files"))
        mtu, source = persistent_mtu(listing.files, netdev)
        if mtu is None and bond is not None:
            mtu, source = persistent_mtu(listing.files, bond)
            source = f"{source} (bond {bond})" if mtu is not None else source
    except (ProbeFailed, ParseError) as exc:
        return error("mtu_persistent", spec.mtu, str(exc))
    which = f"{netdev} or its bond {bond}" if bond is not None else netdev
    if mtu is None:
        if listing.unreadable:
            return error("mtu_persistent", spec.mtu,
                         f"no MTU found for {which}, but cannot read {', '.join(listing.unreadable)}")
        return drift("mtu_persistent", spec.mtu, "none in boot config",
                     f"no boot-time network config sets the MTU of {which}")
    actual = f"{mtu} in {source}"
    return (ok if mtu == spec.mtu else drift)("mtu_persistent", spec.mtu, actual)


def evaluate(spec: InterfaceSpec, results: Results, ctx: HostContext) -> list[Check]:
    attributes = _attributes(spec)
    try:
        netdev = netdev_of(spec.name, spec.rdma_device, results)
        links = ip_links(results) if netdev is not None else {}
        link = links.get(netdev) if netdev is not None else None
        mtu = live_mtu(link) if link is not None else None
    except NoNetdev as exc:
        return [drift(attribute, desired, NO_NETDEV, str(exc)) for attribute, desired in attributes]
    except (ProbeFailed, ParseError) as exc:
        return errors_for(attributes, str(exc))
    if netdev is None or link is None:
        what = f"RDMA device {spec.rdma_device} not found" if netdev is None else f"no interface {netdev}"
        return [drift(attribute, desired, "absent", what) for attribute, desired in attributes]
    checks: list[Check] = []
    if spec.mtu is not None:
        checks.append(_mtu_check(spec, link, mtu))
    checks.append(_link_check(spec, link))
    if spec.persistent and spec.mtu is not None:
        checks.append(_persistence_check(spec, netdev, results, bond_of(link)))
    return checks


def remedy(spec: InterfaceSpec, results: Results, ctx: HostContext, checks: list[Check]) -> list[Step]:
    """The steps, from interface_fix: imported only when something is to be changed, not by an audit."""
    from provisioner.resources import interface_fix

    return interface_fix.remedy(spec, results, ctx, checks)


RESOURCE = ResourceType(KIND, InterfaceSpec, probes, evaluate, remedy=remedy, examples=(
    {"name": "ens1f0np0", "mtu": 9000, "state": "up", "persistent": True},
    {"rdma_device": "mlx5_1", "mtu": 4200},
))
