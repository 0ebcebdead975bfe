"""A slow path NCCL chose without failing: GPUDirect RDMA turned off, so every transfer through the NIC is
staged in host memory (often several times slower, and no error anywhere).

Wording read (NCCL's net_ib and topology code, and the RDMA plugins, across releases): support checks
`NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)` (2.x up to the 2.1x releases, and the
HPC-X/UCX plugins as `NET/UCX :`, `NET/<plugin name> :`), then without ` (no module)`; the topology check
`NET/IB : GPU Direct RDMA Disabled for GPU 3 / HCA 0 (distance 4 >= 3)` (2.4 to 2.6) and
`GPU Direct RDMA Disabled for GPU 1b000 / HCA 0 (distance 5 > 4)` (2.7 on, a bus id or a rank). Sockets
never do GPUDirect: `NET/Socket : GPU Direct RDMA Disabled for HCA 0 'eth0'` is no finding.
"""

from __future__ import annotations

import re

from provisioner.explain.evidence import evidence, grep, hosts, multi_node
from provisioner.explain.logs import Log
from provisioner.explain.model import Cause
from provisioner.parsers._text import unique

_SUPPORT = re.compile(r"(?:NET/(?P<net>[^:]+?)\s*:\s*)?GPU Direct RDMA Disabled for HCA\s+(?P<index>[0-9]+)\s+"
                      r"'(?P<dev>[^']+)'(?P<module>\s*\(no module\))?")
_DISTANCE = re.compile(r"GPU Direct RDMA Disabled for GPU\s+(?P<gpu>\S+)\s*/\s*HCA\s+(?P<hca>\S+)\s*"
                       r"\(distance (?P<distance>[0-9]+) >=? (?P<level>[0-9]+)\)")
# NCCL 2.22.3 and older look only for nv_peer_mem's sysfs file: with the newer nvidia_peermem module loaded
# they still turn GPUDirect off (https://github.com/NVIDIA/nccl/issues/1676).
_PEERMEM_BLIND = (2, 22, 3)


def _version(logs: list[Log]) -> tuple[int, ...] | None:
    for log in logs:
        if log.nccl and log.nccl.nccl_version:
            parts = re.findall(r"[0-9]+", log.nccl.nccl_version)[:3]
            return tuple(int(p) for p in parts)
    return None


_CHANNEL = re.compile(r"\bChannel\s+[0-9]+.*\bvia\s+(?:P2P|SHM)")


def _one_node(logs: list[Log]) -> bool:
    """Whether the log shows the job stayed on one node, where the NIC carries no collective traffic and a
    GPUDirect check costs nothing: nccl-tests ranks all on one host, or channels connected only through
    P2P/SHM."""
    devices = [d.host for log in logs if log.tests for d in log.tests.devices]
    if devices and len(set(devices)) == 1:
        return True
    return any(True for _ in grep(logs, _CHANNEL)) and not multi_node(logs)


def gpudirect_disabled(logs: list[Log]) -> list[Cause]:
    if _one_node(logs):
        return []
    return _no_support(logs) + _too_far(logs)


def _no_support(logs: list[Log]) -> list[Cause]:
    # A socket transport has no GPUDirect to lose.
    hits = [(line, m) for line, m in grep(logs, _SUPPORT) if (m["net"] or "").strip().lower() != "socket"]
    if not hits:
        return []
    devices = unique([m["dev"] for _, m in hits])
    lines = [line for line, _ in hits]
    version = _version(logs)
    detail = (f"NCCL turned GPUDirect RDMA off for {', '.join(devices)}: data between the GPUs and "
              "these NICs is copied through host memory, so inter-node bandwidth drops (often by several "
              "times) without any error.")
    fix = ("Load the peer-memory module on every node (`lsmod | grep nvidia_peermem`, else `modprobe "
           "nvidia_peermem`; with MLNX_OFED older than 5.1 the nv_peer_mem service), or use dma-buf (open GPU "
           "kernel modules, a kernel with dma-buf support); in a container, check the host has it loaded. "
           "Then confirm `via NET/IB/N/GDRDMA` in the channel lines.")
    if version is not None and version <= _PEERMEM_BLIND:
        detail += (f" NCCL {'.'.join(map(str, version))} only looks for the older nv_peer_mem module, so it "
                   "turns GPUDirect off even where nvidia_peermem is loaded.")
        fix = "Upgrade NCCL to 2.23 or later (it recognises nvidia_peermem), or: " + fix
    return [Cause(id="gpudirect-rdma-disabled", title="GPUDirect RDMA is off: NIC traffic is staged in host memory",
                  detail=detail, fix=fix, score=45, hosts=hosts(lines), evidence=evidence(lines))]


def _too_far(logs: list[Log]) -> list[Cause]:
    hits = grep(logs, _DISTANCE)
    if not hits:
        return []
    pairs = unique([f"GPU {m['gpu']} / NIC {m['hca']} (distance {m['distance']}, limit {m['level']})"
                    for _, m in hits])
    lines = [line for line, _ in hits]
    return [Cause(
        id="gpudirect-rdma-distance", title="GPUDirect RDMA is off: GPUs and NICs are too far apart",
        detail=f"{'; '.join(pairs[:4])}: NCCL does not use GPUDirect across that many PCIe hops (a CPU "
               "socket or host bridge between GPU and NIC), so those transfers go through host memory.",
        fix="Place each rank's GPU next to a NIC on the same PCIe switch (`nvidia-smi topo -m`: PIX/PXB), "
            "or, if the platform handles peer traffic across the host bridge well, raise NCCL_NET_GDR_LEVEL "
            "(e.g. PHB) and measure.",
        score=40, hosts=hosts(lines), settings=["NCCL_NET_GDR_LEVEL"], evidence=evidence(lines),
    )]
