"""The node's profile, `hw.json`: GPUs, HCAs, modules and starting QoS, validated."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .core import (
    DEFAULT_CPU_AFFINITY,
    DEFAULT_GPU_MODEL,
    DEFAULT_GPU_PCI,
    DEFAULT_LOADED,
    DEFAULT_OFED,
    RATES,
    Env,
    HwError,
    read_json,
)


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
