"""The node's real netdevs, and what RDMA derives from them: port state, active MTU, GUIDs, GIDs."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from .core import IB_MTUS, ROCE_V2_OVERHEAD, Env, read_text
from .hw import Hca


@dataclass
class Link:
    exists: bool
    up: bool
    mtu: int
    mac: bytes
    ifindex: int


def netdev_exists(env: Env, netdev: str) -> bool:
    return bool(netdev) and "/" not in netdev and (env.net / netdev).exists()


def read_link(env: Env, hca: Hca) -> Link:
    base = env.net / hca.netdev
    operstate = (read_text(base / "operstate") or "down").strip()
    carrier = (read_text(base / "carrier") or "0").strip()
    try:
        mtu = int((read_text(base / "mtu") or "1500").strip())
    except ValueError:
        mtu = 1500
    try:
        ifindex = int((read_text(base / "ifindex") or "0").strip())
    except ValueError:
        ifindex = 0
    mac = parse_mac(read_text(base / "address"))
    if mac is None:
        # No readable MAC: take the one a ConnectX derives its node GUID from.
        guid = (hca.node_guid or 0).to_bytes(8, "big")
        mac = guid[:3] + guid[5:]
    return Link(base.exists(), operstate == "up" or (operstate == "unknown" and carrier == "1"), mtu, mac,
                ifindex)


def parse_mac(text: str | None) -> bytes | None:
    if not text:
        return None
    parts = text.strip().split(":")
    if len(parts) != 6:
        return None
    try:
        return bytes(int(p, 16) for p in parts)
    except ValueError:
        return None


def active_mtu(netdev_mtu: int) -> tuple[int, int]:
    """RoCE's active MTU: the largest IB MTU that fits the netdev MTU after the RoCE v2 headers."""
    for size, enum in IB_MTUS:
        if size <= netdev_mtu - ROCE_V2_OVERHEAD:
            return size, enum
    return 256, 1


def eui64(mac: bytes) -> bytes:
    return bytes([mac[0] ^ 0x02, mac[1], mac[2], 0xFF, 0xFE, mac[3], mac[4], mac[5]])


def node_guid(hca: Hca, link: Link) -> int:
    if hca.node_guid is not None:
        return hca.node_guid
    mac = link.mac
    return int.from_bytes(mac[:3] + b"\x03\x00" + mac[3:], "big")


def sys_image_guid(hca: Hca, link: Link) -> int:
    return hca.sys_image_guid if hca.sys_image_guid is not None else node_guid(hca, link)


def port_guid(link: Link) -> int:
    return int.from_bytes(eui64(link.mac), "big")


def colon_guid(value: int) -> str:
    text = f"{value:016x}"
    return ":".join(text[i:i + 4] for i in range(0, 16, 4))


@dataclass
class Gid:
    index: int
    raw: bytes
    version: str  # "v1" or "v2"
    ipv4: str | None

    @property
    def full(self) -> str:
        return ":".join(self.raw[i:i + 2].hex() for i in range(0, 16, 2))

    @property
    def ntop(self) -> str:
        import ipaddress

        if self.raw[:12] == bytes(10) + b"\xff\xff":
            return "::ffff:" + ".".join(str(b) for b in self.raw[12:])
        return str(ipaddress.IPv6Address(self.raw))


def _ip_binary() -> str | None:
    import shutil

    found = shutil.which("ip")
    if found:
        return found
    return next((p for p in ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip") if os.access(p, os.X_OK)),
                None)


def netdev_addresses(netdev: str) -> list[tuple[str, str]]:
    """(family, address) of the netdev's IPv4 and global IPv6 addresses; [] when `ip` cannot tell."""
    import subprocess

    binary = _ip_binary()
    if binary is None:
        return []
    try:
        proc = subprocess.run([binary, "-j", "addr", "show", "dev", netdev], capture_output=True, text=True,
                              timeout=5, check=False)
        data = json.loads(proc.stdout) if proc.returncode == 0 else []
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError):
        return []
    found: list[tuple[str, str]] = []
    for link in data if isinstance(data, list) else []:
        if not isinstance(link, dict):
            continue
        for info in link.get("addr_info") or []:
            if not isinstance(info, dict) or not isinstance(info.get("local"), str):
                continue
            if info.get("family") == "inet":
                found.append(("inet", info["local"]))
            elif info.get("family") == "inet6" and info.get("scope") == "global":
                found.append(("inet6", info["local"]))
    return found


def port_gids(hca: Hca, link: Link) -> list[Gid]:
    import ipaddress

    raw = b"\xfe\x80" + bytes(6) + eui64(link.mac)
    gids = [Gid(0, raw, "v1", None), Gid(1, raw, "v2", None)]
    for family, address in netdev_addresses(hca.netdev):
        try:
            if family == "inet":
                ipv4 = str(ipaddress.IPv4Address(address))
                raw = bytes(10) + b"\xff\xff" + ipaddress.IPv4Address(address).packed
            else:
                ipv4, raw = None, ipaddress.IPv6Address(address).packed
        except ValueError:
            continue
        gids += [Gid(len(gids), raw, "v1", ipv4), Gid(len(gids) + 1, raw, "v2", ipv4)]
    return gids
