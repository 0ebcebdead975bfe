"""Pure functions from real tool output to typed facts, one module per kind of output.

`parse(kind, text)` is the entry point for callers that want plain data; each module's
`parse_<kind>(text)` returns a frozen pydantic model for callers that want typed fields, with
`complete`, `missing` and `unplaced` saying how much of the tool's output was there. Output with
nothing of the tool's in it raises `provisioner.errors.ParseError` with the 1-based line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from provisioner.errors import ParseError
from provisioner.parsers.ibdev2netdev import parse_ibdev2netdev
from provisioner.parsers.ibstat import parse_ibstat
from provisioner.parsers.ibstatus import parse_ibstatus
from provisioner.parsers.ibv_devinfo import parse_ibv_devinfo
from provisioner.parsers.mlnx_qos import parse_mlnx_qos
from provisioner.parsers.nccl_debug import parse_nccl_debug
from provisioner.parsers.nccl_tests import parse_nccl_tests
from provisioner.parsers.nvidia_smi_topo import parse_nvidia_smi_topo
from provisioner.parsers.ofed_info import parse_ofed_info
from provisioner.parsers.port_counters import parse_perfquery, parse_port_counters
from provisioner.parsers.rdma_link import parse_rdma_link
from provisioner.parsers.rdma_qos_script import parse_rdma_qos_script
from provisioner.parsers.show_gids import parse_show_gids
from provisioner.parsers.traffic_class import parse_traffic_class

PARSERS: dict[str, Callable[[str], BaseModel]] = {
    "ibdev2netdev": parse_ibdev2netdev,
    "ibstat": parse_ibstat,
    "ibstatus": parse_ibstatus,
    "ibv_devinfo": parse_ibv_devinfo,
    "mlnx_qos": parse_mlnx_qos,
    "nccl_debug": parse_nccl_debug,
    "nccl_tests": parse_nccl_tests,
    "nvidia_smi_topo": parse_nvidia_smi_topo,
    "ofed_info": parse_ofed_info,
    "perfquery": parse_perfquery,
    "port_counters": parse_port_counters,
    "rdma_link": parse_rdma_link,
    "rdma_qos_script": parse_rdma_qos_script,
    "show_gids": parse_show_gids,
    "traffic_class": parse_traffic_class,
}

KINDS: list[str] = sorted(PARSERS)


def parse(kind: str, text: str) -> dict[str, Any]:
    """Parse `text` as output of `kind` and return the facts as JSON-ready data."""
    parser = PARSERS.get(kind)
    if parser is None:
        raise ParseError(kind, f"unknown kind; known kinds: {', '.join(KINDS)}")
    return parser(text).model_dump(mode="json")


__all__ = ["KINDS", "PARSERS", "parse"]
