#!/usr/bin/python3
"""Emulated NIC, RDMA and GPU tools for the fabnet lab's virtual nodes, which have no such hardware.

One stdlib-only script (Python 3.11, no fabnet imports: it runs on the node). It prints the real tools'
formats byte for byte (tabs included); what it reports comes from the node's profile (`hw.json`), from
state that setters persist, and, for link state, MTU, MAC and addresses, from the node's real data netdev.
Every command answers `--lab-info` (as its first argument) with a line saying it is this emulation.

Invocation
    labhw.py --as NAME [ARGS...]      run as command NAME; the lab's wrappers in /usr/local/sbin do this
    NAME [ARGS...]                    the same when the basename of argv[0] is NAME (a symlink)
    labhw.py --as fabnet-lab-init     write the node's sysfs-style files from hw.json and drop live state

Commands
    ofed_info [-s|-n]                          mlnx_qos -i IF [setters]
    ibv_devinfo [-d DEV] [-i PORT] [-v] [-l]   ibstat [-l|-p|-s] [DEV [PORT]]   ibstatus [DEV[:PORT]]
    ibdev2netdev [-v]                          show_gids [DEV [PORT]]
    rdma [-j] [-p] link|dev [show [DEV[/PORT]]]   (other rdma objects run the real rdma)
    nvidia-smi [-L | topo -m | --query-gpu=F,.. --format=csv[,noheader][,nounits]]
    cma_roce_tos [-d DEV] [-p PORT] [-t TOS]   lsmod   modprobe [-r] [-q] [-a] [-n] NAME...

Environment
    FABNET_LAB_HW_ROOT    state root (default /var/lib/fabnet-lab)
    FABNET_LAB_NET_SYSFS  where netdevs are read (default /sys/class/net)

Files under the state root (all writes are atomic: a temporary file in the same directory, then rename)
    hw.json                              the profile; written by the lab builder, only read here
    qos/<netdev>.json                    live mlnx_qos state after the first setter (before: hw.json "qos")
    modules.json                         live loaded/unloaded state of emulated modules after a modprobe
    sys/class/net/<netdev>/ecn/roce_np/enable/<0..7>, sys/class/net/<netdev>/ecn/roce_rp/enable/<0..7>
                                         `0` or `1`, like the mlx5 ECN knobs
    sys/class/net/<netdev>/ecn/roce_np/cnp_dscp
    sys/class/infiniband/<dev>/tc/<port>/traffic_class
                                         empty when unset, `Global tclass=N` when set; the real file takes
                                         `N` and reads back `Global tclass=N`, so readers accept both
    sys/kernel/config/rdma_cm/<dev>/ports/<port>/default_roce_tos   what cma_roce_tos reads and writes

hw.json schema: every key is optional and `{}` means one ConnectX-7 `mlx5_0` on `eth1` and eight H100s.
A `null` value means "use the default", except for "ofed" where it means OFED is not installed.
    "ofed": "MLNX_OFED_LINUX-23.10-1.1.9.0"      string printed by `ofed_info -s` (`:` added for MLNX_OFED)
    "gpus": {
        "count": 8, "model": "NVIDIA H100 80GB HBM3", "driver": "535.129.03", "cuda": "12.2",
        "memory_mib": 81559,
        "nvlink": "NV18",                          GPU-to-GPU cell of `topo -m`; null: NODE/SYS by NUMA
        "numa_nodes": 2,                           GPU i is on NUMA node i * numa_nodes // count
        "cpu_affinity": ["0-51,104-155", "52-103,156-207"],   one entry per NUMA node
        "pci": ["0000:18:00.0", ...], "uuids": ["GPU-...", ...]   default: derived per node
    }
    "hcas": [{                                     default: one HCA with the values below
        "name": "mlx5_0", "port": 1, "netdev": "eth1",   defaults for hcas[i]: mlx5_<i>, 1, eth<i+1>
        "ca_type": "MT4129", "vendor_part_id": 4129, "fw_ver": "28.39.2048", "board_id": "MT_0000000838",
        "node_guid": "58a2:e103:002a:09b8",        or "0x58a2e103002a09b8"; default: from the netdev MAC
        "sys_image_guid": null,                    default: node_guid
        "rate": 400,                               Gb/s while the link is up (ibstat `Rate`)
        "pci": "0000:0c:00.0",                     HCAs on the same bus:device are PIX in `topo -m`
        "numa": 0                                  default: spread evenly over gpus.numa_nodes
    }]
    "modules": {"nvidia_peermem": false, ...}      loaded or not; merged over MODULES below
    "qos": {"eth1": {                              starting mlnx_qos state of a netdev
        "trust": "pcp", "pfc": [0,0,0,0,0,0,0,0], "dscp2prio": {"26": 3} or 64 priorities,
        "prio_tc": [1,0,2,3,4,5,6,7], "tsa": ["vendor", ...8], "tcbw": [100, ...8], "cable_len": 7,
        "dcbx": "os" or "fw", "prio2buffer": [0, ...8], "buffer_size": [524160,0,0,0,0,0,0,0]}}
    "ecn": {"eth1": {"np": [0, ...8], "rp": [0, ...8], "cnp_dscp": 48}}
    "traffic_class": {"mlx5_0": 106}               default: unset (empty file)
    "roce_tos": {"mlx5_0": 0}
    "topo": {"GPU0/NIC0": "PIX"}                    overrides single cells of `nvidia-smi topo -m`

Behaviour that follows the real hardware
    A port is PORT_ACTIVE / Active / LINK_UP / (Up) when its netdev's operstate is `up`, or `unknown`
    with carrier 1; otherwise PORT_DOWN / Down / DISABLED / (Down), and ibstat's Rate drops to 10.
    active_mtu is the largest IB MTU (256..4096) that fits in the netdev MTU minus 96 bytes of RoCE v2
    headers: 1500 -> 1024 (3), 4200 and 9000 -> 4096 (5).
    GIDs per port: 0/1 the fe80 GID from the MAC (EUI-64) as RoCE v1/v2, then a v1/v2 pair for each IPv4
    address (`::ffff:a.b.c.d`) and each global IPv6 address of the netdev (read with `ip -j addr`).
    RDMA devices exist while mlx5_core and mlx5_ib are loaded (ibv_devinfo also needs ib_uverbs);
    GPUs exist while nvidia is loaded. modprobe loads dependencies and refuses to remove a module in use.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

# Every tool call starts a fresh interpreter, so modules only some commands need are imported there.
if TYPE_CHECKING:
    import argparse

LAB_INFO = "fabnet lab emulation"
DEFAULT_ROOT = "/var/lib/fabnet-lab"
DEFAULT_NET_SYSFS = "/sys/class/net"
INIT_COMMAND = "fabnet-lab-init"

DEFAULT_OFED = "MLNX_OFED_LINUX-23.10-1.1.9.0"
DEFAULT_GPU_MODEL = "NVIDIA H100 80GB HBM3"
DEFAULT_GPU_PCI = ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                   "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"]
DEFAULT_CPU_AFFINITY = ["0-51,104-155", "52-103,156-207"]

# name: (size in bytes as lsmod shows it, modules it needs). Sizes are those of a typical 6.x kernel.
MODULES: dict[str, tuple[int, tuple[str, ...]]] = {
    "mlx5_core": (2437120, ()),
    "ib_core": (491520, ()),
    "mlx5_ib": (495616, ("mlx5_core", "ib_core")),
    "ib_uverbs": (196608, ("ib_core",)),
    "ib_umad": (45056, ("ib_core",)),
    "rdma_cm": (147456, ("ib_core",)),
    "rdma_ucm": (36864, ("rdma_cm", "ib_uverbs", "ib_core")),
    "nvidia": (56705024, ()),
    "nvidia_uvm": (1794048, ("nvidia",)),
    "nvidia_peermem": (16384, ("nvidia", "ib_core")),
}
DEFAULT_LOADED = {name: name != "nvidia_peermem" for name in MODULES}

IB_MTUS = [(4096, 5), (2048, 4), (1024, 3), (512, 2), (256, 1)]
ROCE_V2_OVERHEAD = 96
# Gb/s -> (width, IB speed name); the names drive ibstatus, the enums below ibv_devinfo -v.
RATES = {10: ("4X", "SDR"), 20: ("4X", "DDR"), 40: ("4X", "QDR"), 56: ("4X", "FDR"), 25: ("1X", "EDR"),
         50: ("1X", "HDR"), 100: ("4X", "EDR"), 200: ("4X", "HDR"), 400: ("4X", "NDR"), 800: ("4X", "XDR")}
WIDTH_ENUM = {"1X": 1, "4X": 2, "8X": 4, "12X": 8, "2X": 16}
SPEED_ENUM = {"SDR": (1, "2.5 Gbps"), "DDR": (2, "5.0 Gbps"), "QDR": (4, "10.0 Gbps"),
              "FDR": (16, "14.0 Gbps"), "EDR": (32, "25.0 Gbps"), "HDR": (64, "50.0 Gbps"),
              "NDR": (128, "100.0 Gbps"), "XDR": (256, "200.0 Gbps")}
CA_NAMES = {"MT4099": "ConnectX-3", "MT4115": "ConnectX-4", "MT4117": "ConnectX-4 Lx", "MT4119": "ConnectX-5",
            "MT4121": "ConnectX-5 Ex", "MT4123": "ConnectX-6", "MT4125": "ConnectX-6 Dx",
            "MT4127": "ConnectX-6 Lx", "MT4129": "ConnectX-7", "MT4131": "ConnectX-8"}
TSA_VALUES = ("ets", "strict", "vendor")
BUFFER_TOTAL = 524160


class ToolExit(Exception):
    """Ends a command: `message` goes to stderr (when not empty) and `code` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class HwError(ToolExit):
    """hw.json (or a live state file) holds something this emulation cannot use."""

    def __init__(self, message: str) -> None:
        super().__init__(f"{LAB_INFO}: {message}", 1)


# ---------------------------------------------------------------------------------------------------
# Paths and files


@dataclass(frozen=True)
class Env:
    root: Path
    net: Path

    @classmethod
    def from_environ(cls) -> Env:
        return cls(Path(os.environ.get("FABNET_LAB_HW_ROOT") or DEFAULT_ROOT),
                   Path(os.environ.get("FABNET_LAB_NET_SYSFS") or DEFAULT_NET_SYSFS))

    @property
    def hw_file(self) -> Path:
        return self.root / "hw.json"

    @property
    def qos_dir(self) -> Path:
        return self.root / "qos"

    @property
    def modules_file(self) -> Path:
        return self.root / "modules.json"

    @property
    def sys(self) -> Path:
        return self.root / "sys"

    def ecn_dir(self, netdev: str) -> Path:
        return self.sys / "class/net" / netdev / "ecn"

    def traffic_class_file(self, dev: str, port: int) -> Path:
        return self.sys / "class/infiniband" / dev / "tc" / str(port) / "traffic_class"

    def roce_tos_file(self, dev: str, port: int) -> Path:
        return self.sys / "kernel/config/rdma_cm" / dev / "ports" / str(port) / "default_roce_tos"


def write_atomic(path: Path, text: str) -> None:
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def state_lock(env: Env) -> Iterator[None]:
    """Serialises read-modify-write of live state: two setters at once must not lose an update."""
    env.root.mkdir(parents=True, exist_ok=True)
    with open(env.root / ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_json(path: Path) -> Any:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise HwError(f"cannot read {path}: {exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise HwError(f"{path}: not valid JSON: {exc}") from exc


def read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


# ---------------------------------------------------------------------------------------------------
# The profile (hw.json)


@dataclass
class Gpus:
    count: int = 8
    model: str = DEFAULT_GPU_MODEL
    driver: str = "535.129.03"
    cuda: str = "12.2"
    memory_mib: int = 81559
    nvlink: str | None = "NV18"
    numa_nodes: int = 2
    cpu_affinity: list[str] = field(default_factory=lambda: list(DEFAULT_CPU_AFFINITY))
    pci: list[str] = field(default_factory=list)
    uuids: list[str] = field(default_factory=list)

    def numa(self, index: int) -> int:
        return index * self.numa_nodes // max(self.count, 1)

    def bus_id(self, index: int) -> str:
        if index < len(self.pci):
            return self.pci[index]
        if index < len(DEFAULT_GPU_PCI):
            return DEFAULT_GPU_PCI[index]
        return f"0000:{(0xE0 + index) % 256:02x}:00.0"

    def uuid(self, index: int) -> str:
        if index < len(self.uuids):
            return self.uuids[index]
        import socket
        import uuid

        seed = f"fabnet-lab/{socket.gethostname()}/{self.model}/{index}"
        return f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, seed)}"


@dataclass
class Hca:
    name: str
    port: int
    netdev: str
    ca_type: str
    fw_ver: str
    vendor_part_id: int
    board_id: str
    node_guid: int | None
    sys_image_guid: int | None
    rate: int
    pci: str
    numa: int


@dataclass
class Hw:
    ofed: str | None
    gpus: Gpus
    hcas: list[Hca]
    modules: dict[str, bool]
    qos: dict[str, dict[str, Any]]
    ecn: dict[str, dict[str, Any]]
    traffic_class: dict[str, int | None]
    roce_tos: dict[str, int]
    topo: dict[str, str]

    def hca_for_netdev(self, netdev: str) -> Hca | None:
        return next((h for h in self.hcas if h.netdev == netdev), None)


def _expect(value: Any, kind: type, where: str, what: str) -> Any:
    # bool is an int in Python, but a profile that says `"count": true` holds a mistake worth reporting.
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise HwError(f"{where}: expected {what}, got {value!r}")
    return value


def _opt(data: dict[str, Any], key: str, kind: type, default: Any, where: str, what: str) -> Any:
    value = data.get(key)
    if value is None:
        return default
    return _expect(value, kind, f"hw.json: {where}.{key}" if where else f"hw.json: {key}", what)


def parse_guid(value: Any, where: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        text = text[2:] if text.startswith("0x") else text
        text = text.replace(":", "")
        if re.fullmatch(r"[0-9a-f]{1,16}", text):
            return int(text, 16)
    raise HwError(f"hw.json: {where}: expected a GUID like 58a2:e103:002a:09b8, got {value!r}")


def _int_list(value: Any, where: str, length: int, low: int, high: int) -> list[int]:
    if not isinstance(value, list) or len(value) != length or not all(
            isinstance(v, int) and not isinstance(v, bool) and low <= v <= high for v in value):
        raise HwError(f"{where}: expected {length} integers from {low} to {high}, got {value!r}")
    return list(value)


def load_hw(env: Env) -> Hw:
    data = read_json(env.hw_file)
    if data is None:
        data = {}
    _expect(data, dict, "hw.json", "an object")

    ofed = data.get("ofed", DEFAULT_OFED)
    if ofed is not None:
        _expect(ofed, str, "hw.json: ofed", "a string or null")

    g = _opt(data, "gpus", dict, {}, "", "an object")
    gpus = Gpus()
    gpus.count = _opt(g, "count", int, gpus.count, "gpus", "an integer")
    if gpus.count < 0:
        raise HwError("hw.json: gpus.count: must not be negative")
    gpus.model = _opt(g, "model", str, gpus.model, "gpus", "a string")
    gpus.driver = _opt(g, "driver", str, gpus.driver, "gpus", "a string")
    gpus.cuda = _opt(g, "cuda", str, gpus.cuda, "gpus", "a string")
    gpus.memory_mib = _opt(g, "memory_mib", int, gpus.memory_mib, "gpus", "an integer")
    gpus.nvlink = g.get("nvlink", gpus.nvlink)
    if gpus.nvlink is not None:
        _expect(gpus.nvlink, str, "hw.json: gpus.nvlink", "a string like NV18, or null")
    gpus.numa_nodes = max(1, _opt(g, "numa_nodes", int, gpus.numa_nodes, "gpus", "an integer"))
    gpus.cpu_affinity = _opt(g, "cpu_affinity", list, gpus.cpu_affinity, "gpus", "a list of strings")
    gpus.pci = _opt(g, "pci", list, [], "gpus", "a list of PCI addresses")
    gpus.uuids = _opt(g, "uuids", list, [], "gpus", "a list of strings")

    raw_hcas = data.get("hcas")
    if raw_hcas is None:
        raw_hcas = [{}]
    _expect(raw_hcas, list, "hw.json: hcas", "a list")
    hcas: list[Hca] = []
    for i, h in enumerate(raw_hcas):
        where = f"hcas[{i}]"
        _expect(h, dict, f"hw.json: {where}", "an object")
        ca_type = _opt(h, "ca_type", str, "MT4129", where, "a string")
        digits = re.sub(r"\D", "", ca_type)
        rate = _opt(h, "rate", int, 400, where, "an integer")
        if rate not in RATES:
            raise HwError(f"hw.json: {where}.rate: {rate} is not one of {sorted(RATES)}")
        node_guid = parse_guid(h["node_guid"], f"{where}.node_guid") if h.get("node_guid") is not None \
            else None
        sys_guid = parse_guid(h["sys_image_guid"], f"{where}.sys_image_guid") \
            if h.get("sys_image_guid") is not None else None
        hcas.append(Hca(
            name=_opt(h, "name", str, f"mlx5_{i}", where, "a string"),
            port=_opt(h, "port", int, 1, where, "an integer"),
            netdev=_opt(h, "netdev", str, f"eth{i + 1}", where, "a string"),
            ca_type=ca_type,
            fw_ver=_opt(h, "fw_ver", str, "28.39.2048", where, "a string"),
            vendor_part_id=_opt(h, "vendor_part_id", int, int(digits) if digits else 4129, where,
                                "an integer"),
            board_id=_opt(h, "board_id", str, "MT_0000000838", where, "a string"),
            node_guid=node_guid,
            sys_image_guid=sys_guid,
            rate=rate,
            pci=_opt(h, "pci", str, f"0000:{(0x0C + 0x13 * i) % 256:02x}:00.0", where, "a string"),
            numa=_opt(h, "numa", int, i * gpus.numa_nodes // max(len(raw_hcas), 1), where, "an integer"),
        ))
    names = [h.name for h in hcas]
    if len(set(names)) != len(names):
        raise HwError(f"hw.json: hcas: device names repeat: {names}")

    modules = dict(DEFAULT_LOADED)
    for name, loaded in _opt(data, "modules", dict, {}, "", "an object").items():
        modules[name.replace("-", "_")] = _expect(loaded, bool, f"hw.json: modules.{name}", "true or false")

    qos = _opt(data, "qos", dict, {}, "", "an object")
    for netdev, q in qos.items():
        _expect(q, dict, f"hw.json: qos.{netdev}", "an object")
    ecn = _opt(data, "ecn", dict, {}, "", "an object")
    for netdev, e in ecn.items():
        _expect(e, dict, f"hw.json: ecn.{netdev}", "an object")
    traffic_class = {dev: parse_tclass(v, f"traffic_class.{dev}")
                     for dev, v in _opt(data, "traffic_class", dict, {}, "", "an object").items()}
    roce_tos: dict[str, int] = {}
    for dev, v in _opt(data, "roce_tos", dict, {}, "", "an object").items():
        if v is not None:
            roce_tos[dev] = _expect(v, int, f"hw.json: roce_tos.{dev}", "an integer")
    topo = {str(k): _expect(v, str, f"hw.json: topo.{k}", "a string")
            for k, v in _opt(data, "topo", dict, {}, "", "an object").items()}
    return Hw(ofed, gpus, hcas, modules, qos, ecn, traffic_class, roce_tos, topo)


def parse_tclass(value: Any, where: str) -> int | None:
    """`106`, `"106"`, `"tclass=106"` and `"Global tclass=106"` all mean traffic class 106."""
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and (m := re.fullmatch(r"\s*(?:Global\s+)?(?:tclass=)?(\d+)\s*", value)):
        number = int(m.group(1))
    else:
        raise HwError(f"hw.json: {where}: expected a traffic class like 106, got {value!r}")
    if not 0 <= number <= 255:
        raise HwError(f"hw.json: {where}: traffic class must be 0..255, got {number}")
    return number


# ---------------------------------------------------------------------------------------------------
# The node's real netdevs, and what RDMA derives from them


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


# ---------------------------------------------------------------------------------------------------
# Kernel modules


def module_state(env: Env, hw: Hw) -> dict[str, bool]:
    state = dict(hw.modules)
    live = read_json(env.modules_file)
    if isinstance(live, dict):
        state.update({k: bool(v) for k, v in live.items() if k in state})
    return state


def module_deps(name: str) -> tuple[str, ...]:
    return MODULES.get(name, (16384, ()))[1]


def holders(name: str, state: dict[str, bool]) -> list[str]:
    return [m for m, loaded in state.items() if loaded and name in module_deps(m)]


def rdma_present(env: Env, hw: Hw) -> bool:
    mods = module_state(env, hw)
    return mods.get("mlx5_core", True) and mods.get("mlx5_ib", True)


def verbs_present(env: Env, hw: Hw) -> bool:
    return rdma_present(env, hw) and module_state(env, hw).get("ib_uverbs", True)


def gpus_present(env: Env, hw: Hw) -> bool:
    return module_state(env, hw).get("nvidia", True)


# ---------------------------------------------------------------------------------------------------
# Command context


@dataclass
class Ctx:
    name: str
    env: Env
    _hw: Hw | None = None
    out: list[str] = field(default_factory=list)

    @property
    def hw(self) -> Hw:
        if self._hw is None:
            self._hw = load_hw(self.env)
        return self._hw

    def print(self, text: str = "") -> None:
        self.out.append(text + "\n")

    def hcas(self) -> list[Hca]:
        return self.hw.hcas if rdma_present(self.env, self.hw) else []


def make_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """An argparse parser that reports errors the way these tools do: message on stderr, status 1."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            raise ToolExit(f"{self.prog}: {message}\n{self.format_usage().rstrip()}", 1)

    return Parser(prog=prog, description=description)


def real_binary(name: str) -> str | None:
    """The distribution's own binary, never one of the lab's wrappers in /usr/local."""
    for directory in ("/usr/sbin", "/sbin", "/usr/bin", "/bin"):
        path = os.path.join(directory, name)
        if os.access(path, os.X_OK) and not os.path.realpath(path).startswith("/usr/local/"):
            return path
    return None


def exec_real(name: str, args: list[str], missing: str) -> NoReturn:
    binary = real_binary(name)
    if binary is None:
        raise ToolExit(missing, 1)
    sys.stdout.flush()
    os.execv(binary, [name, *args])


# ---------------------------------------------------------------------------------------------------
# ofed_info


def ofed_parts(ofed: str) -> tuple[str | None, str | None]:
    """Version number and OFED base of a MLNX_OFED string.

    `MLNX_OFED_LINUX-23.10-1.1.9.0` -> (`23.10-1.1.9.0`, `OFED-23.10-1.1.9`); (None, None) for other strings.
    """
    m = re.fullmatch(r"MLNX_OFED_LINUX-(?P<ver>\S+?):?", ofed.strip())
    if not m:
        return None, None
    version = m.group("ver")
    head, _, build = version.partition("-")
    parts = build.split(".")
    base_build = ".".join(parts[:3]) if len(parts) > 3 else build
    return version, f"OFED-{head}-{base_build}" if build else f"OFED-{head}"


def cmd_ofed_info(ctx: Ctx, args: list[str]) -> int:
    ofed = ctx.hw.ofed
    if ofed is None:
        raise ToolExit(f"{ctx.name}: command not found", 127)
    ofed = ofed.strip()
    is_mlnx = ofed.startswith("MLNX_OFED_LINUX-")
    label = ofed if ofed.endswith(":") or not is_mlnx else ofed + ":"
    version, base = ofed_parts(ofed)
    if args in ([], ["-s"]):
        if args or not base:
            ctx.print(label)
        else:
            ctx.print(f"{ofed.rstrip(':')} ({base}):")
            ctx.print()
        return 0
    if args == ["-n"]:
        ctx.print(version or ofed)
        return 0
    raise ToolExit("Usage: ofed_info [-s|-n]\n\t-s\tshow the version\n\t-n\tshow the version number", 1)


# ---------------------------------------------------------------------------------------------------
# mlnx_qos


@dataclass
class Qos:
    dcbx: str = "os"
    trust: str = "pcp"
    pfc: list[int] = field(default_factory=lambda: [0] * 8)
    dscp2prio: list[int] = field(default_factory=lambda: [d >> 3 for d in range(64)])
    prio_tc: list[int] = field(default_factory=lambda: [1, 0, 2, 3, 4, 5, 6, 7])
    tsa: list[str] = field(default_factory=lambda: ["vendor"] * 8)
    tcbw: list[int] = field(default_factory=lambda: [100] * 8)
    cable_len: int = 7
    prio2buffer: list[int] = field(default_factory=lambda: [0] * 8)
    buffer_size: list[int] = field(default_factory=lambda: [BUFFER_TOTAL, 0, 0, 0, 0, 0, 0, 0])

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str) -> Qos:
        q = cls()
        if "dcbx" in data and data["dcbx"] is not None:
            if data["dcbx"] not in ("os", "fw"):
                raise HwError(f"{where}.dcbx: expected os or fw, got {data['dcbx']!r}")
            q.dcbx = data["dcbx"]
        if data.get("trust") is not None:
            if data["trust"] not in ("pcp", "dscp"):
                raise HwError(f"{where}.trust: expected pcp or dscp, got {data['trust']!r}")
            q.trust = data["trust"]
        for key, low, high in (("pfc", 0, 1), ("prio_tc", 0, 7), ("tcbw", 0, 100), ("prio2buffer", 0, 7),
                               ("buffer_size", 0, 1 << 30)):
            if data.get(key) is not None:
                setattr(q, key, _int_list(data[key], f"{where}.{key}", 8, low, high))
        if data.get("tsa") is not None:
            tsa = data["tsa"]
            if not isinstance(tsa, list) or len(tsa) != 8 or any(t not in TSA_VALUES for t in tsa):
                raise HwError(f"{where}.tsa: expected 8 of {'/'.join(TSA_VALUES)}, got {tsa!r}")
            q.tsa = list(tsa)
        if data.get("cable_len") is not None:
            q.cable_len = _expect(data["cable_len"], int, f"{where}.cable_len", "an integer")
        mapping = data.get("dscp2prio")
        if isinstance(mapping, list):
            q.dscp2prio = _int_list(mapping, f"{where}.dscp2prio", 64, 0, 7)
        elif isinstance(mapping, dict):
            for dscp, prio in mapping.items():
                d = int(dscp) if str(dscp).isdigit() else -1
                if not 0 <= d <= 63 or not isinstance(prio, int) or not 0 <= prio <= 7:
                    raise HwError(f"{where}.dscp2prio: bad entry {dscp!r}: {prio!r}")
                q.dscp2prio[d] = prio
        elif mapping is not None:
            raise HwError(f"{where}.dscp2prio: expected a list of 64 priorities or an object")
        return q


def qos_file(env: Env, netdev: str) -> Path:
    return env.qos_dir / f"{netdev}.json"


def load_qos(env: Env, hw: Hw, netdev: str) -> Qos:
    live = read_json(qos_file(env, netdev))
    if isinstance(live, dict):
        return Qos.from_json(live, str(qos_file(env, netdev)))
    return Qos.from_json(hw.qos.get(netdev, {}), f"hw.json: qos.{netdev}")


def render_qos(q: Qos) -> str:
    lines = [f"DCBX mode: {'OS controlled' if q.dcbx == 'os' else 'Firmware controlled'}",
             f"Priority trust state: {q.trust}"]
    if q.trust == "dscp":
        lines.append("dscp2prio mapping:")
        for prio in range(8):
            dscps = [d for d in range(63, -1, -1) if q.dscp2prio[d] == prio]
            lines.append(f"\tprio:{prio} dscp:" + "".join(f"{d:02d}," for d in dscps))
    lines.append("Receive buffer size (bytes): " + "".join(f"{size}," for size in q.buffer_size))
    lines.append(f"Cable len: {q.cable_len}")
    lines.append("PFC configuration:")
    lines.append("\tpriority    " + "   ".join(str(p) for p in range(8)))
    lines.append("\tenabled     " + "".join(f"{v}   " for v in q.pfc))
    lines.append("\tbuffer      " + "".join(f"{v}   " for v in q.prio2buffer))
    for tc in range(8):
        bw = f", bw: {q.tcbw[tc]}%" if q.tsa[tc] == "ets" else ""
        lines.append(f"tc: {tc} ratelimit: unlimited, tsa: {q.tsa[tc]}{bw}")
        lines += [f"\t priority:  {prio}" for prio in range(8) if q.prio_tc[prio] == tc]
    return "\n".join(lines) + "\n"


def _csv_ints(option: str, text: str, length: int, low: int, high: int) -> list[int]:
    parts = text.split(",")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != length or not all(low <= v <= high for v in values):
        raise ToolExit(f"{option}: expected {length} comma-separated integers from {low} to {high}, "
                       f"got {text!r}", 1)
    return values


def cmd_mlnx_qos(ctx: Ctx, args: list[str]) -> int:
    parser = make_parser(ctx.name, "Show or set the QoS of a netdev.")
    parser.add_argument("-i", "--interface", dest="intf", required=True)
    parser.add_argument("-f", "--pfc")
    parser.add_argument("-p", "--prio_tc")
    parser.add_argument("-s", "--tsa")
    parser.add_argument("-t", "--tcbw")
    parser.add_argument("-d", "--dcbx", choices=("os", "fw"))
    parser.add_argument("--trust", choices=("pcp", "dscp"))
    parser.add_argument("--dscp2prio", action="append", default=[])
    parser.add_argument("--cable_len", type=int)
    parser.add_argument("--prio2buffer")
    parser.add_argument("--buffer_size")
    opts = parser.parse_args(args)
    intf: str = opts.intf
    if not netdev_exists(ctx.env, intf):
        raise ToolExit(f"Netlink error: No such device: {intf}", 1)
    if ctx.hw.hca_for_netdev(intf) is None or not rdma_present(ctx.env, ctx.hw):
        # A netdev without a ConnectX behind it has no DCB support to talk to.
        raise ToolExit(f"Netlink error: Operation not supported: {intf}", 1)

    with state_lock(ctx.env) if _has_setter(opts) else contextlib.nullcontext():
        q = load_qos(ctx.env, ctx.hw, intf)
        if _has_setter(opts):
            _apply_qos(q, opts)
            write_atomic(qos_file(ctx.env, intf), json.dumps(q.to_json(), indent=1) + "\n")
    ctx.out.append(render_qos(q))
    return 0


def _has_setter(opts: argparse.Namespace) -> bool:
    return any(getattr(opts, key) not in (None, []) for key in (
        "pfc", "prio_tc", "tsa", "tcbw", "dcbx", "trust", "dscp2prio", "cable_len", "prio2buffer",
        "buffer_size"))


def _apply_qos(q: Qos, opts: argparse.Namespace) -> None:
    """Validates everything first, so a rejected call changes nothing, as with the kernel's DCB calls."""
    new = Qos(**{k: (list(v) if isinstance(v, list) else v) for k, v in q.to_json().items()})
    if opts.dcbx:
        new.dcbx = opts.dcbx
    if opts.trust:
        new.trust = opts.trust
    if opts.pfc is not None:
        new.pfc = _csv_ints("--pfc", opts.pfc, 8, 0, 1)
    if opts.prio_tc is not None:
        new.prio_tc = _csv_ints("--prio_tc", opts.prio_tc, 8, 0, 7)
    if opts.tsa is not None:
        tsa = opts.tsa.split(",")
        if len(tsa) != 8 or any(t not in TSA_VALUES for t in tsa):
            raise ToolExit(f"--tsa: expected 8 comma-separated values of {', '.join(TSA_VALUES)}, "
                           f"got {opts.tsa!r}", 1)
        new.tsa = tsa
    if opts.tcbw is not None:
        new.tcbw = _csv_ints("--tcbw", opts.tcbw, 8, 0, 100)
    if "ets" in new.tsa and (opts.tsa is not None or opts.tcbw is not None):
        total = sum(bw for bw, tsa in zip(new.tcbw, new.tsa, strict=True) if tsa == "ets")
        if total != 100:
            raise ToolExit(f"Bad ETS configuration: the bandwidths of the ets traffic classes must sum "
                           f"to 100%, not {total}% (set them with --tcbw)", 1)
    for entry in opts.dscp2prio:
        m = re.fullmatch(r"(set|del),(\d+),(\d+)", entry)
        if not m or not 0 <= int(m.group(2)) <= 63 or not 0 <= int(m.group(3)) <= 7:
            raise ToolExit(f"--dscp2prio: expected set,DSCP,PRIO or del,DSCP,PRIO with DSCP 0..63 and "
                           f"PRIO 0..7, got {entry!r}", 1)
        action, dscp, prio = m.group(1), int(m.group(2)), int(m.group(3))
        if action == "set":
            new.dscp2prio[dscp] = prio
        elif new.dscp2prio[dscp] != prio:
            raise ToolExit(f"--dscp2prio: DSCP {dscp} is mapped to priority {new.dscp2prio[dscp]}, "
                           f"not {prio}", 1)
        else:
            new.dscp2prio[dscp] = 0  # the driver sends a deleted DSCP back to priority 0
    if opts.cable_len is not None:
        if not 0 <= opts.cable_len <= 1000:
            raise ToolExit(f"--cable_len: expected 0..1000 meters, got {opts.cable_len}", 1)
        new.cable_len = opts.cable_len
    if opts.prio2buffer is not None:
        new.prio2buffer = _csv_ints("--prio2buffer", opts.prio2buffer, 8, 0, 7)
    if opts.buffer_size is not None:
        sizes = _csv_ints("--buffer_size", opts.buffer_size, 8, 0, 1 << 30)
        if sum(sizes) > BUFFER_TOTAL * 2:
            raise ToolExit(f"--buffer_size: {sum(sizes)} bytes exceed the port's {BUFFER_TOTAL * 2}", 1)
        new.buffer_size = sizes
    q.__dict__.update(new.__dict__)


# ---------------------------------------------------------------------------------------------------
# ibv_devinfo


def kv(indent: int, key: str, value: str, column: int) -> str:
    """A `key:<tabs>value` line whose value starts at `column` once tabs expand, as libibverbs prints."""
    position = 8 * indent + len(key)
    tabs = 0
    while position < column or tabs == 0:
        position = (position // 8 + 1) * 8
        tabs += 1
    return "\t" * indent + key + "\t" * tabs + value


DEVICE_CAP_BITS = {"RESIZE_MAX_WR": 0, "BAD_PKEY_CNTR": 1, "BAD_QKEY_CNTR": 2, "RAW_MULTI": 3,
                   "AUTO_PATH_MIG": 4, "CHANGE_PHY_PORT": 5, "UD_AV_PORT_ENFORCE": 6, "CURR_QP_STATE_MOD": 7,
                   "SHUTDOWN_PORT": 8, "INIT_TYPE": 9, "PORT_ACTIVE_EVENT": 10, "SYS_IMAGE_GUID": 11,
                   "RC_RNR_NAK_GEN": 12, "SRQ_RESIZE": 13, "N_NOTIFY_CQ": 14, "MEM_WINDOW": 17,
                   "UD_IP_CSUM": 18, "XRC": 20, "MEM_MGT_EXTENSIONS": 21, "MEM_WINDOW_TYPE_2B": 24,
                   "RAW_IP_CSUM": 26, "MANAGED_FLOW_STEERING": 29}
CX_CAP_FLAGS = ["BAD_PKEY_CNTR", "BAD_QKEY_CNTR", "AUTO_PATH_MIG", "CHANGE_PHY_PORT", "PORT_ACTIVE_EVENT",
                "SYS_IMAGE_GUID", "RC_RNR_NAK_GEN", "MEM_WINDOW", "UD_IP_CSUM", "XRC", "MEM_MGT_EXTENSIONS",
                "MEM_WINDOW_TYPE_2B", "RAW_IP_CSUM", "MANAGED_FLOW_STEERING"]


def _verbose_device(lines: list[str]) -> None:
    def d(key: str, value: object) -> None:
        lines.append(kv(1, key, str(value), 40))

    def flag(name: str) -> None:
        lines.append("\t\t\t\t\t" + name)

    d("max_mr_size:", "0xffffffffffffffff")
    d("page_size_cap:", "0xfffffffffffff000")
    d("max_qp:", 131072)
    d("max_qp_wr:", 32768)
    d("device_cap_flags:", f"0x{sum(1 << DEVICE_CAP_BITS[f] for f in CX_CAP_FLAGS):08x}")
    for name in CX_CAP_FLAGS:
        flag(name)
    for key, value in (("max_sge:", 30), ("max_sge_rd:", 30), ("max_cq:", 16777216), ("max_cqe:", 4194303),
                       ("max_mr:", 16777216), ("max_pd:", 8388608), ("max_qp_rd_atom:", 16),
                       ("max_ee_rd_atom:", 0), ("max_res_rd_atom:", 2097152), ("max_qp_init_rd_atom:", 16),
                       ("max_ee_init_rd_atom:", 0), ("atomic_cap:", "ATOMIC_HCA (1)"), ("max_ee:", 0),
                       ("max_rdd:", 0), ("max_mw:", 16777216), ("max_raw_ipv6_qp:", 0),
                       ("max_raw_ethy_qp:", 0), ("max_mcast_grp:", 2097152), ("max_mcast_qp_attach:", 240),
                       ("max_total_mcast_qp_attach:", 503316480), ("max_ah:", 2147483647), ("max_fmr:", 0),
                       ("max_srq:", 8388608), ("max_srq_wr:", 32767), ("max_srq_sge:", 31),
                       ("max_pkeys:", 128), ("local_ca_ack_delay:", 16)):
        d(key, value)
    lines.append("\tgeneral_odp_caps:")
    flag("ODP_SUPPORT")
    flag("ODP_SUPPORT_IMPLICIT")
    for transport in ("rc", "uc", "ud", "xrc"):
        lines.append(f"\t{transport}_odp_caps:")
        if transport == "uc":
            flag("NO SUPPORT")
        else:
            for cap in ("SUPPORT_SEND", "SUPPORT_RECV", "SUPPORT_WRITE", "SUPPORT_READ", "SUPPORT_SRQ"):
                flag(cap)
    d("completion timestamp_mask:", "0x7fffffffffffffff")
    d("hca_core_clock:", "1000000kHZ")
    lines.append("\traw packet caps:")
    for cap in ("C-VLAN stripping offload", "Scatter FCS offload", "IP csum offload", "Delay drop"):
        flag(cap)
    flags = sum(1 << DEVICE_CAP_BITS[f] for f in CX_CAP_FLAGS)
    d("device_cap_flags_ex:", f"0x{flags | 1 << 34 | 1 << 36:X}")
    flag("RAW_SCATTER_FCS")
    flag("PCI_WRITE_END_PADDING")
    d("max_wq_type_rq:", 8388608)
    d("num_comp_vectors:", 63)


def cmd_ibv_devinfo(ctx: Ctx, args: list[str]) -> int:
    parser = make_parser(ctx.name, "Print the attributes of RDMA devices.")
    parser.add_argument("-d", "--ib-dev", dest="dev")
    parser.add_argument("-i", "--ib-port", dest="port", type=int)
    parser.add_argument("-l", "--list", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true")
    opts = parser.parse_args(args)
    hcas = ctx.hw.hcas if verbs_present(ctx.env, ctx.hw) else []
    if opts.list:
        ctx.print(f"{len(hcas)} HCA{'' if len(hcas) == 1 else 's'} found:")
        for hca in hcas:
            ctx.print(f"\t{hca.name}")
        return 0
    if not hcas:
        raise ToolExit("No IB devices found", 255)
    if opts.dev is not None:
        hcas = [h for h in hcas if h.name == opts.dev]
        if not hcas:
            raise ToolExit(f"IB device '{opts.dev}' wasn't found", 255)
    if opts.port is not None and (opts.port < 1 or any(opts.port != h.port for h in hcas)):
        raise ToolExit("Invalid port requested for device", 255)
    lines: list[str] = []
    for hca in hcas:
        link = read_link(ctx.env, hca)
        lines.append(f"hca_id:\t{hca.name}")
        lines.append(kv(1, "transport:", "InfiniBand (0)", 40))
        lines.append(kv(1, "fw_ver:", hca.fw_ver, 40))
        lines.append(kv(1, "node_guid:", colon_guid(node_guid(hca, link)), 40))
        lines.append(kv(1, "sys_image_guid:", colon_guid(sys_image_guid(hca, link)), 40))
        lines.append(kv(1, "vendor_id:", "0x02c9", 40))
        lines.append(kv(1, "vendor_part_id:", str(hca.vendor_part_id), 40))
        lines.append(kv(1, "hw_ver:", "0x0", 40))
        lines.append(kv(1, "board_id:", hca.board_id, 40))
        lines.append(kv(1, "phys_port_cnt:", "1", 40))
        if opts.verbose:
            _verbose_device(lines)
        mtu, mtu_enum = active_mtu(link.mtu)
        lines.append(f"\t\tport:\t{hca.port}")
        lines.append(kv(3, "state:", "PORT_ACTIVE (4)" if link.up else "PORT_DOWN (1)", 48))
        lines.append(kv(3, "max_mtu:", "4096 (5)", 48))
        lines.append(kv(3, "active_mtu:", f"{mtu} ({mtu_enum})", 48))
        lines.append(kv(3, "sm_lid:", "0", 48))
        lines.append(kv(3, "port_lid:", "0", 48))
        lines.append(kv(3, "port_lmc:", "0x00", 48))
        lines.append(kv(3, "link_layer:", "Ethernet", 48))
        if opts.verbose:
            width, speed = RATES[hca.rate] if link.up else ("4X", "SDR")
            speed_enum, speed_text = SPEED_ENUM[speed]
            for key, value in (("max_msg_sz:", "0x40000000"), ("port_cap_flags:", "0x04010000"),
                               ("port_cap_flags2:", "0x0000"), ("max_vl_num:", "invalid value (0)"),
                               ("bad_pkey_cntr:", "0x0"), ("qkey_viol_cntr:", "0x0"), ("sm_sl:", "0"),
                               ("pkey_tbl_len:", "1"), ("gid_tbl_len:", "255"), ("subnet_timeout:", "0"),
                               ("init_type_reply:", "0"),
                               ("active_width:", f"{width} ({WIDTH_ENUM[width]})"),
                               ("active_speed:", f"{speed_text} ({speed_enum})"),
                               ("phys_state:", "LINK_UP (5)" if link.up else "DISABLED (3)")):
                lines.append(kv(3, key, value, 48))
            for gid in port_gids(hca, link):
                text = gid.full if gid.version == "v1" else gid.ntop
                kind = "RoCE v1" if gid.version == "v1" else "RoCE v2"
                lines.append(kv(3, f"GID[{gid.index:3d}]:", f"{text}, {kind}", 48))
        lines.append("")
    ctx.print("\n".join(lines))
    return 0


# ---------------------------------------------------------------------------------------------------
# ibstat, ibstatus, ibdev2netdev, show_gids, rdma


def _select_hca(ctx: Ctx, name: str) -> Hca:
    hca = next((h for h in ctx.hcas() if h.name == name), None)
    if hca is None:
        raise ToolExit(f"ibpanic: [{os.getpid()}] main: stat of IB device '{name}' failed: "
                       "No such file or directory", 255)
    return hca


def _ibstat_port(hca: Hca, link: Link, indent: str) -> list[str]:
    return [f"{indent}State: {'Active' if link.up else 'Down'}",
            f"{indent}Physical state: {'LinkUp' if link.up else 'Disabled'}",
            f"{indent}Rate: {hca.rate if link.up else 10}",
            f"{indent}Base lid: 0",
            f"{indent}LMC: 0",
            f"{indent}SM lid: 0",
            f"{indent}Capability mask: 0x00010000",
            f"{indent}Port GUID: 0x{port_guid(link):016x}",
            f"{indent}Link layer: Ethernet"]


def cmd_ibstat(ctx: Ctx, args: list[str]) -> int:
    parser = make_parser(ctx.name, "Show the state of RDMA devices and their ports.")
    parser.add_argument("-l", "--list_of_cas", action="store_true")
    parser.add_argument("-s", "--short", action="store_true")
    parser.add_argument("-p", "--port_list", action="store_true")
    parser.add_argument("ca", nargs="?")
    parser.add_argument("port", nargs="?", type=int)
    opts = parser.parse_args(args)
    hcas = [_select_hca(ctx, opts.ca)] if opts.ca else ctx.hcas()
    if opts.list_of_cas:
        for hca in hcas:
            ctx.print(hca.name)
        return 0
    if opts.port_list:
        for hca in hcas:
            ctx.print(f"0x{port_guid(read_link(ctx.env, hca)):016x}")
        return 0
    if opts.port is not None:
        hca = hcas[0]
        if opts.port != hca.port:
            raise ToolExit(f"ibpanic: [{os.getpid()}] main: stat of IB device '{hca.name}' port "
                           f"{opts.port} failed: No such file or directory", 255)
        ctx.print(f"CA: '{hca.name}'")
        ctx.print(f"Port {hca.port}:")
        ctx.print("\n".join(_ibstat_port(hca, read_link(ctx.env, hca), "")))
        return 0
    for hca in hcas:
        link = read_link(ctx.env, hca)
        ctx.print(f"CA '{hca.name}'")
        ctx.print(f"\tCA type: {hca.ca_type}")
        ctx.print("\tNumber of ports: 1")
        ctx.print(f"\tFirmware version: {hca.fw_ver}")
        ctx.print("\tHardware version: 0")
        ctx.print(f"\tNode GUID: 0x{node_guid(hca, link):016x}")
        ctx.print(f"\tSystem image GUID: 0x{sys_image_guid(hca, link):016x}")
        if not opts.short:
            ctx.print(f"\tPort {hca.port}:")
            ctx.print("\n".join(_ibstat_port(hca, link, "\t\t")))
    return 0


def cmd_ibstatus(ctx: Ctx, args: list[str]) -> int:
    if args[:1] in (["-h"], ["--help"]):
        ctx.print(f"Usage: {ctx.name} [devname[:port]]...")
        return 0
    selected: list[tuple[Hca, int | None]] = []
    for arg in args:
        name, _, port = arg.partition(":")
        selected.append((_select_hca(ctx, name), int(port) if port.isdigit() else None))
    if not args:
        selected = [(hca, None) for hca in ctx.hcas()]
    for hca, port in selected:
        if port is not None and port != hca.port:
            continue
        link = read_link(ctx.env, hca)
        gid = colon_guid(0xFE80 << 48) + ":" + colon_guid(port_guid(link))
        width, speed = RATES[hca.rate] if link.up else ("4X", "SDR")
        rate = hca.rate if link.up else 10
        ctx.print(f"Infiniband device '{hca.name}' port {hca.port} status:")
        ctx.print(f"\tdefault gid:\t {gid}")
        ctx.print("\tbase lid:\t 0x0")
        ctx.print("\tsm lid:\t\t 0x0")
        ctx.print(f"\tstate:\t\t {'4: ACTIVE' if link.up else '1: DOWN'}")
        ctx.print(f"\tphys state:\t {'5: LinkUp' if link.up else '3: Disabled'}")
        ctx.print(f"\trate:\t\t {rate} Gb/sec ({width} {speed})")
        ctx.print("\tlink_layer:\t Ethernet")
        ctx.print()
    return 0


def cmd_ibdev2netdev(ctx: Ctx, args: list[str]) -> int:
    verbose = False
    for arg in args:
        if arg == "-v":
            verbose = True
        else:
            raise ToolExit(f"Usage: {ctx.name} [-v]", 1)
    for hca in ctx.hcas():
        link = read_link(ctx.env, hca)
        state = "Up" if link.up else "Down"
        if verbose:
            ctx.print(f"{hca.pci} {hca.name} ({hca.ca_type} - {hca.board_id}) "
                      f"{CA_NAMES.get(hca.ca_type, 'ConnectX')} fw {hca.fw_ver} port {hca.port} "
                      f"({'ACTIVE' if link.up else 'DOWN'}) ==> {hca.netdev} ({state})")
        else:
            ctx.print(f"{hca.name} port {hca.port} ==> {hca.netdev} ({state})")
    return 0


def cmd_show_gids(ctx: Ctx, args: list[str]) -> int:
    if len(args) > 2 or any(a.startswith("-") for a in args):
        raise ToolExit(f"Usage: {ctx.name} [DEV [PORT]]", 1)
    hcas = ctx.hcas()
    if args:
        hcas = [h for h in hcas if h.name == args[0]]
    if len(args) == 2:
        hcas = [h for h in hcas if str(h.port) == args[1]]
    ctx.print("DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV")
    ctx.print("---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---")
    count = 0
    for hca in hcas:
        link = read_link(ctx.env, hca)
        for gid in port_gids(hca, link):
            # The script pads an address with two spaces; a GID without one gets two empty columns.
            ipv4 = f"{gid.ipv4}  \t" if gid.ipv4 else "\t\t"
            ctx.print(f"{hca.name}\t{hca.port}\t{gid.index}\t{gid.full}\t{ipv4}{gid.version}\t{hca.netdev}")
            count += 1
    ctx.print(f"n_gids_found={count}")
    return 0


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


# ---------------------------------------------------------------------------------------------------
# nvidia-smi

LEGEND = """Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks"""

NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
             "Make sure that the latest NVIDIA driver is installed and running.\n")


def _pci_device(address: str) -> str:
    return address.rsplit(".", 1)[0]


def topo_matrix(hw: Hw, hcas: list[Hca]) -> str:
    gpus = hw.gpus
    items: list[tuple[str, str, int]] = [(f"GPU{i}", "gpu", gpus.numa(i)) for i in range(gpus.count)]
    items += [(f"NIC{i}", "nic", hca.numa) for i, hca in enumerate(hcas)]

    def cell(a: int, b: int) -> str:
        (name_a, kind_a, numa_a), (name_b, kind_b, numa_b) = items[a], items[b]
        if a == b:
            return " X "
        override = hw.topo.get(f"{name_a}/{name_b}") or hw.topo.get(f"{name_b}/{name_a}")
        if override:
            return override
        if kind_a == kind_b == "gpu" and gpus.nvlink:
            return gpus.nvlink
        if kind_a == kind_b == "nic":
            pa, pb = hcas[a - gpus.count].pci, hcas[b - gpus.count].pci
            if _pci_device(pa) == _pci_device(pb):
                return "PIX"
        return "NODE" if numa_a == numa_b else "SYS"

    header = ["", *(name for name, _, _ in items)]
    if gpus.count:
        header += ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    lines = ["\t".join(header)]
    for a, (name, kind, numa) in enumerate(items):
        row = [name, *(cell(a, b) for b in range(len(items)))]
        if kind == "gpu":
            affinity = gpus.cpu_affinity[numa] if numa < len(gpus.cpu_affinity) else "N/A"
            # nvidia-smi pads these values to their header's width before the tab.
            row += [f"{affinity:<12}", f"{numa:<13}", "N/A"]
        lines.append("\t".join(row).rstrip())
    lines += ["", LEGEND]
    if hcas:
        lines += ["", "NIC Legend:", ""] + [f"  NIC{i}: {hca.name}" for i, hca in enumerate(hcas)]
    return "\n".join(lines) + "\n"


QUERY_FIELDS = ("index", "name", "uuid", "driver_version", "pci.bus_id", "memory.total", "count",
                "persistence_mode", "compute_cap")


def _query_value(hw: Hw, index: int, name: str, units: bool) -> str:
    gpus = hw.gpus
    domain, rest = gpus.bus_id(index).split(":", 1)
    values = {
        "index": str(index), "name": gpus.model, "uuid": gpus.uuid(index), "driver_version": gpus.driver,
        "pci.bus_id": f"{int(domain, 16):08X}:{rest.upper()}", "count": str(gpus.count),
        "memory.total": f"{gpus.memory_mib} MiB" if units else str(gpus.memory_mib),
        "persistence_mode": "Enabled", "compute_cap": "9.0",
    }
    return values[name]


def _smi_table(hw: Hw) -> str:
    import time

    gpus = hw.gpus

    def row(*cells: tuple[str, str, int]) -> str:
        parts = []
        for left, right, width in cells:
            parts.append(left + " " * max(1, width - len(left) - len(right)) + right)
        return "|" + "|".join(parts) + "|"

    line = "+" + "-" * 41 + "+" + "-" * 22 + "+" + "-" * 22 + "+"
    full = "+" + "-" * 87 + "+"
    out = [time.strftime("%a %b %d %H:%M:%S %Y"), full,
           row((f" NVIDIA-SMI {gpus.driver}",
                f"Driver Version: {gpus.driver}   CUDA Version: {gpus.cuda:<8}", 87)),
           "|" + "-" * 41 + "+" + "-" * 22 + "+" + "-" * 22 + "+",
           row((" GPU  Name", "Persistence-M ", 41), (" Bus-Id", "Disp.A ", 22),
               (" Volatile", "Uncorr. ECC ", 22)),
           row((" Fan  Temp   Perf", "Pwr:Usage/Cap ", 41), ("", "Memory-Usage ", 22),
               (" GPU-Util", "Compute M. ", 22)),
           row(("", "", 41), ("", "", 22), ("", "MIG M. ", 22)),
           "|" + "=" * 41 + "+" + "=" * 22 + "+" + "=" * 22 + "|"]
    for i in range(gpus.count):
        name = gpus.model if len(gpus.model) <= 26 else gpus.model[:23] + "..."
        domain, rest = gpus.bus_id(i).split(":", 1)
        bus = f"{int(domain, 16):08X}:{rest.upper()}"
        out.append(row((f" {i:>3}  {name}", "On  ", 41), (f" {bus}", "Off ", 22), ("", "0 ", 22)))
        out.append(row((" N/A   31C    P0", "70W / 700W ", 41),
                       ("", f"0MiB / {gpus.memory_mib}MiB ", 22), ("      0%", "Default ", 22)))
        out.append(row(("", "", 41), ("", "", 22), ("", "Disabled ", 22)))
        out.append(line)
    out += ["", full, row((" Processes:", "", 87)),
            row(("  GPU   GI   CI        PID   Type   Process name", "GPU Memory ", 87)),
            row(("        ID   ID", "Usage      ", 87)),
            "|" + "=" * 87 + "|",
            row(("  No running processes found", "", 87)), full]
    return "\n".join(out) + "\n"


def cmd_nvidia_smi(ctx: Ctx, args: list[str]) -> int:
    hw = ctx.hw
    if not gpus_present(ctx.env, hw):
        raise ToolExit(NO_DRIVER.rstrip(), 9)
    if hw.gpus.count == 0:
        raise ToolExit("No devices were found", 6)
    if args[:1] == ["topo"]:
        if args[1:] not in (["-m"], ["--matrix"]):
            raise ToolExit(f"{ctx.name} topo: only -m/--matrix is available here", 2)
        ctx.out.append(topo_matrix(hw, ctx.hcas()))
        return 0
    if args in (["-L"], ["--list-gpus"]):
        for i in range(hw.gpus.count):
            ctx.print(f"GPU {i}: {hw.gpus.model} (UUID: {hw.gpus.uuid(i)})")
        return 0
    if not args:
        ctx.out.append(_smi_table(hw))
        return 0
    query = fmt = None
    indices: list[int] | None = None
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg.startswith("--query-gpu="):
            query = arg.split("=", 1)[1]
        elif arg.startswith("--format="):
            fmt = arg.split("=", 1)[1]
        elif arg in ("-i", "--id") and rest:
            indices = [int(x) for x in rest.pop(0).split(",") if x.isdigit()]
        elif arg.startswith("--id="):
            indices = [int(x) for x in arg.split("=", 1)[1].split(",") if x.isdigit()]
        else:
            raise ToolExit("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.", 2)
    if query is None or fmt is None:
        raise ToolExit("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.", 2)
    fields = [f.strip() for f in query.split(",") if f.strip()]
    for name in fields:
        if name not in QUERY_FIELDS:
            raise ToolExit(f'Field "{name}" is not a valid field to query.', 2)
    options = fmt.split(",")
    if options[0] != "csv" or any(o not in ("noheader", "nounits") for o in options[1:]):
        raise ToolExit(f'"{fmt}" is not a valid format.', 2)
    units = "nounits" not in options
    if "noheader" not in options:
        ctx.print(", ".join(f"{n} [MiB]" if n == "memory.total" and units else n for n in fields))
    for i in indices if indices is not None else range(hw.gpus.count):
        if not 0 <= i < hw.gpus.count:
            raise ToolExit("No devices were found", 6)
        ctx.print(", ".join(_query_value(hw, i, n, units) for n in fields))
    return 0


# ---------------------------------------------------------------------------------------------------
# cma_roce_tos


def read_roce_tos(env: Env, hw: Hw, hca: Hca) -> int:
    text = read_text(env.roce_tos_file(hca.name, hca.port))
    if text is not None and text.strip().isdigit():
        return int(text.strip())
    return hw.roce_tos.get(hca.name, 0)


def cmd_cma_roce_tos(ctx: Ctx, args: list[str]) -> int:
    parser = make_parser(ctx.name, "Show or set the default RoCE ToS of rdma_cm.")
    parser.add_argument("-d", dest="dev", default="mlx5_0")
    parser.add_argument("-p", dest="port", type=int, default=1)
    parser.add_argument("-t", dest="tos", type=int)
    opts = parser.parse_args(args)
    hca = next((h for h in ctx.hcas() if h.name == opts.dev), None)
    if hca is None:
        raise ToolExit(f"{ctx.name}: device {opts.dev} not found", 1)
    if opts.port != hca.port:
        raise ToolExit(f"{ctx.name}: port {opts.port} of {opts.dev} not found", 1)
    if opts.tos is None:
        ctx.print(str(read_roce_tos(ctx.env, ctx.hw, hca)))
        return 0
    if not 0 <= opts.tos <= 255:
        raise ToolExit(f"{ctx.name}: ToS must be 0..255, got {opts.tos}", 1)
    with state_lock(ctx.env):
        write_atomic(ctx.env.roce_tos_file(hca.name, hca.port), f"{opts.tos}\n")
    return 0


# ---------------------------------------------------------------------------------------------------
# lsmod, modprobe

LSMOD_HEADER = "Module                  Size  Used by"


def _lsmod_line(name: str, state: dict[str, bool]) -> str:
    users = holders(name, state)
    line = f"{name:<19} {MODULES.get(name, (16384, ()))[0]:>8}  {len(users)}"
    return line + (f" {','.join(users)}" if users else "")


def cmd_lsmod(ctx: Ctx, args: list[str]) -> int:
    if args:
        raise ToolExit(f"Usage: {ctx.name}", 1)
    import subprocess

    state = module_state(ctx.env, ctx.hw)
    real_lines: list[str] = []
    binary = real_binary("lsmod")
    if binary:
        try:
            proc = subprocess.run([binary], capture_output=True, text=True, timeout=10, check=False)
            real_lines = proc.stdout.splitlines()[1:] if proc.returncode == 0 else []
        except (OSError, subprocess.SubprocessError):
            real_lines = []
    # The host's own modules stay, except where the emulation speaks for a module.
    kept = [line for line in real_lines if line.split()[:1] and line.split()[0] not in state]
    emulated = [_lsmod_line(name, state) for name, loaded in state.items() if loaded]
    ctx.print("\n".join([LSMOD_HEADER, *emulated, *kept]))
    return 0


def cmd_modprobe(ctx: Ctx, args: list[str]) -> int:
    names = [arg for arg in args if not arg.startswith("-")]
    flags = [arg for arg in args if arg.startswith("-")]
    remove = bool({"-r", "--remove"} & set(flags))
    quiet = bool({"-q", "--quiet"} & set(flags))
    every = bool({"-a", "--all"} & set(flags))
    dry = bool({"-n", "--dry-run", "--show"} & set(flags))
    if not names:
        exec_real(ctx.name, args, "modprobe: ERROR: missing parameters. See -h.")
    modules = names if (remove or every) else names[:1]
    state = module_state(ctx.env, ctx.hw)
    emulated = [m for m in modules if m.replace("-", "_") in state]
    others = [m for m in modules if m.replace("-", "_") not in state]
    if not emulated:
        exec_real(ctx.name, args, "\n".join(
            f"modprobe: FATAL: Module {m} not found in directory /lib/modules/{os.uname().release}"
            for m in others))
    failures: list[str] = []
    with state_lock(ctx.env):
        state = module_state(ctx.env, ctx.hw)
        for raw in emulated:
            name = raw.replace("-", "_")
            failures += _unload(name, state) if remove else _load(name, state)
        if not dry:
            write_atomic(ctx.env.modules_file, json.dumps(state, indent=1, sort_keys=True) + "\n")
    code = 1 if failures else 0
    if others:
        import subprocess

        binary = real_binary(ctx.name)
        if binary is None:
            failures += [f"modprobe: FATAL: Module {m} not found in directory /lib/modules/"
                         f"{os.uname().release}" for m in others]
            code = 1
        else:
            code = subprocess.run([binary, *flags, *others], check=False).returncode or code
    if failures and not quiet:
        raise ToolExit("\n".join(failures), 1)
    return code


def _load(name: str, state: dict[str, bool]) -> list[str]:
    for dep in module_deps(name):
        if dep in state:
            _load(dep, state)
    state[name] = True
    return []


def _unload(name: str, state: dict[str, bool]) -> list[str]:
    if not state.get(name):
        return [f"modprobe: FATAL: Module {name} is not in kernel."]
    if holders(name, state):
        return [f"modprobe: FATAL: Module {name} is in use."]
    state[name] = False
    # Like modprobe -r, take out the dependencies nothing else needs any more.
    for dep in module_deps(name):
        if state.get(dep) and not holders(dep, state):
            _unload(dep, state)
    return []


# ---------------------------------------------------------------------------------------------------
# fabnet-lab-init


def init_tree(env: Env, hw: Hw) -> list[Path]:
    """Write the node's sysfs-style files from the profile and drop live state; returns the files written."""
    written: list[Path] = []

    def put(path: Path, text: str) -> None:
        write_atomic(path, text)
        written.append(path)

    for hca in hw.hcas:
        ecn = hw.ecn.get(hca.netdev, {})
        base = env.ecn_dir(hca.netdev)
        for kind, key in (("roce_np", "np"), ("roce_rp", "rp")):
            values = ecn.get(key)
            where = f"hw.json: ecn.{hca.netdev}.{key}"
            values = [0] * 8 if values is None else _int_list(values, where, 8, 0, 1)
            for prio, value in enumerate(values):
                put(base / kind / "enable" / str(prio), f"{value}\n")
        cnp = ecn.get("cnp_dscp")
        cnp = 48 if cnp is None else _expect(cnp, int, f"hw.json: ecn.{hca.netdev}.cnp_dscp", "an integer")
        put(base / "roce_np" / "cnp_dscp", f"{cnp}\n")
        tclass = hw.traffic_class.get(hca.name)
        put(env.traffic_class_file(hca.name, hca.port), "" if tclass is None else f"Global tclass={tclass}\n")
        put(env.roce_tos_file(hca.name, hca.port), f"{hw.roce_tos.get(hca.name, 0)}\n")
    env.qos_dir.mkdir(parents=True, exist_ok=True)
    for live in [*env.qos_dir.glob("*.json"), env.modules_file]:
        live.unlink(missing_ok=True)
    return written


def cmd_init(ctx: Ctx, args: list[str]) -> int:
    if args:
        raise ToolExit(f"Usage: {ctx.name}", 1)
    written = init_tree(ctx.env, ctx.hw)
    ctx.print(f"{LAB_INFO}: wrote {len(written)} files under {ctx.env.sys}; live state reset")
    return 0


# ---------------------------------------------------------------------------------------------------
# Dispatch

COMMANDS: dict[str, Callable[[Ctx, list[str]], int]] = {
    "ofed_info": cmd_ofed_info,
    "mlnx_qos": cmd_mlnx_qos,
    "ibv_devinfo": cmd_ibv_devinfo,
    "ibstat": cmd_ibstat,
    "ibstatus": cmd_ibstatus,
    "ibdev2netdev": cmd_ibdev2netdev,
    "show_gids": cmd_show_gids,
    "rdma": cmd_rdma,
    "nvidia-smi": cmd_nvidia_smi,
    "cma_roce_tos": cmd_cma_roce_tos,
    "lsmod": cmd_lsmod,
    "modprobe": cmd_modprobe,
    INIT_COMMAND: cmd_init,
}


def lab_info(name: str, env: Env) -> str:
    return (f"{name}: {LAB_INFO} (no real hardware behind it); profile {env.hw_file}, "
            f"live state under {env.root}, netdevs read from {env.net}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    if len(argv) >= 3 and argv[1] == "--as":
        name, args = argv[2], argv[3:]
    else:
        name, args = os.path.basename(argv[0]).removesuffix(".py"), argv[1:]
    env = Env.from_environ()
    handler = COMMANDS.get(name)
    if handler is None:
        if args[:1] == ["--lab-info"] or name == "labhw":
            print(f"{LAB_INFO}: run as `labhw.py --as NAME [ARGS]`; NAME is one of {', '.join(COMMANDS)}",
                  file=sys.stderr if args[:1] != ["--lab-info"] else sys.stdout)
            return 0 if args[:1] == ["--lab-info"] else 2
        print(f"{LAB_INFO}: unknown command {name!r}", file=sys.stderr)
        return 2
    if args[:1] == ["--lab-info"]:
        print(lab_info(name, env))
        return 0
    ctx = Ctx(name, env)
    try:
        code = handler(ctx, args)
    except ToolExit as exc:
        sys.stdout.write("".join(ctx.out))
        sys.stdout.flush()
        if exc.message:
            print(exc.message, file=sys.stderr)
        return exc.code
    sys.stdout.write("".join(ctx.out))
    return code


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        # `... | head` closing the pipe early is not an error of the tool.
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        sys.exit(0)
