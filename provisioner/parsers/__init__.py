"""Pure functions from real tool output to typed facts, one module per kind of output.

`parse(kind, text)` is the entry point for callers that want plain data; each module's
`parse_<kind>(text)` returns a frozen pydantic model for callers that want typed fields, with
`complete`, `missing` and `unplaced` saying how much of the tool's output was there. Output with
nothing of the tool's in it raises `provisioner.errors.ParseError` with the 1-based line.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING, Any

from provisioner.errors import ParseError

if TYPE_CHECKING:
    from pydantic import BaseModel

# kind -> (module, function). A parser's module (and its pydantic models) is imported when first used:
# `fabnet parse KIND` then loads one parser, not all of them.
_WHERE: dict[str, tuple[str, str]] = {
    "dcb": ("dcb", "parse_dcb"),
    "ethtool_stats": ("ethtool_stats", "parse_ethtool_stats"),
    "ibdev2netdev": ("ibdev2netdev", "parse_ibdev2netdev"),
    "ibstat": ("ibstat", "parse_ibstat"),
    "ibstatus": ("ibstatus", "parse_ibstatus"),
    "ibv_devinfo": ("ibv_devinfo", "parse_ibv_devinfo"),
    "mlnx_qos": ("mlnx_qos", "parse_mlnx_qos"),
    "nccl_debug": ("nccl_debug", "parse_nccl_debug"),
    "nccl_tests": ("nccl_tests", "parse_nccl_tests"),
    "nvidia_smi_topo": ("nvidia_smi_topo", "parse_nvidia_smi_topo"),
    "ofed_info": ("ofed_info", "parse_ofed_info"),
    "perfquery": ("port_counters", "parse_perfquery"),
    "port_counters": ("port_counters", "parse_port_counters"),
    "rdma_link": ("rdma_link", "parse_rdma_link"),
    "rdma_qos_script": ("rdma_qos_script", "parse_rdma_qos_script"),
    "show_gids": ("show_gids", "parse_show_gids"),
    "traffic_class": ("traffic_class", "parse_traffic_class"),
}

_NCCL_TESTS = tuple(f"{name}_perf" for name in (
    "all_reduce", "all_gather", "alltoall", "broadcast", "gather", "hypercube", "reduce", "reduce_scatter",
    "scatter", "sendrecv"))

# kind -> the commands that print it. Operators paste whole terminal sessions: a parser skips its own
# command line (`ibstat`, root's `# ibstat`, `sudo /usr/sbin/ibstat | grep mlx5`) as it skips any prompt line
# (see `_text.is_shell`). Another tool's command without a prompt stays unplaced: it is not this output.
COMMANDS: dict[str, tuple[str, ...]] = {
    "dcb": ("dcb",),
    "ethtool_stats": ("ethtool",),
    "ibdev2netdev": ("ibdev2netdev",),
    "ibstat": ("ibstat",),
    "ibstatus": ("ibstatus",),
    "ibv_devinfo": ("ibv_devinfo",),
    "mlnx_qos": ("mlnx_qos",),
    "nccl_debug": _NCCL_TESTS,  # NCCL_DEBUG=INFO is most often pasted from an nccl-tests run
    "nccl_tests": _NCCL_TESTS,
    "nvidia_smi_topo": ("nvidia-smi", "ibstatus"),  # `nvidia-smi topo -m`, often followed by `ibstatus`
    "ofed_info": ("ofed_info", "hca_self_test.ofed"),
    "perfquery": ("perfquery",),
    "port_counters": ("grep", "cat"),  # the sysfs counter files, read as the probe reads them
    "rdma_link": ("rdma",),
    "rdma_qos_script": ("rdma-qos.sh",),
    "show_gids": ("show_gids",),
    "traffic_class": ("cat",),  # the sysfs/configfs traffic_class file
}


def _lazily(module: str, function: str) -> Callable[[str], BaseModel]:
    def parse_with(text: str) -> BaseModel:
        parser: Callable[[str], BaseModel] = getattr(import_module(f"provisioner.parsers.{module}"), function)
        return parser(text)

    parse_with.__name__ = function
    return parse_with


PARSERS: dict[str, Callable[[str], BaseModel]] = {kind: _lazily(*where) for kind, where in _WHERE.items()}

KINDS: list[str] = sorted(PARSERS)


def parse(kind: str, text: str) -> dict[str, Any]:
    """Parse `text` as output of `kind` and return the facts as JSON-ready data."""
    parser = PARSERS.get(kind)
    if parser is None:
        raise ParseError(kind, f"unknown kind; known kinds: {', '.join(KINDS)}")
    return parser(text).model_dump(mode="json")


__all__ = ["COMMANDS", "KINDS", "PARSERS", "parse"]
