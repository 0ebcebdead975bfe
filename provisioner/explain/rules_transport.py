"""A slow path that shows only by comparing hosts: one node (or a few) on a slower transport than the rest of
the job, so every collective waits for it while nothing fails.

Read from what each host printed of its own connections (parsers/nccl_channels: `via NET/IB/0/GDRDMA`, `via
NET/Socket/1`, `via P2P/IPC/read`, `via SHM/direct/direct`) and its `Using network X` lines. A rank prints its
own side of a connection, so `[receive] via NET/IB/1` without `/GDRDMA` describes the receiving host. Only
like is compared with like: network links with network links, links within a node with links within a node
(NVLink or P2P inside a node against the network between nodes is the design, not a finding).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from provisioner.explain.evidence import abridged, evidence
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.parsers._text import unique
from provisioner.parsers.nccl_channels import Link

# The whole message, as nccl_debug reads it: `... libnccl-net.so. Using internal network plugin.` is no choice.
_USING = re.compile(r"\bINFO Using (?:internal )?[Nn]etwork (?P<name>\S(?:.*\S)?)\s*$")


@dataclass
class _Host:
    networks: dict[str, list[LogLine]] = field(default_factory=dict)  # network name -> lines that show it
    gdr: list[LogLine] = field(default_factory=list)  # RDMA links with /GDRDMA
    staged: list[LogLine] = field(default_factory=list)  # RDMA links without it
    p2p: list[LogLine] = field(default_factory=list)
    shm: list[LogLine] = field(default_factory=list)


def _links(log: Log) -> Iterator[tuple[str, Link, LogLine]]:
    nccl = log.nccl
    if nccl is None:
        return
    only = nccl.hosts[0] if len(nccl.hosts) == 1 else None
    for link in nccl.links:
        host = link.host or only
        line = log.line(link.line)
        if host and line is not None:
            yield host, link, line


def _hosts(logs: list[Log]) -> dict[str, _Host]:
    found: dict[str, _Host] = {}
    for log in logs:
        for line, m in log.grep(_USING):
            if line.host and log.nccl is not None:
                found.setdefault(line.host, _Host()).networks.setdefault(m["name"], []).append(line)
        for host, link, line in _links(log):
            parts = link.transport.split("/")
            seen = found.setdefault(host, _Host())
            if parts[0] == "NET" and len(parts) > 1:
                seen.networks.setdefault(parts[1], []).append(line)
                if parts[1] != "Socket":
                    (seen.gdr if "GDRDMA" in parts[2:] else seen.staged).append(line)
            elif parts[0] == "P2P":
                seen.p2p.append(line)
            elif parts[0] == "SHM":
                seen.shm.append(line)
    return found


def _show(lines: list[LogLine], limit: int = 2) -> list[LogLine]:
    return lines[:limit]


def _socket(found: dict[str, _Host]) -> Cause | None:
    """Hosts that talk TCP while others of the job use an RDMA network (or another network than theirs)."""
    rdma = {h: s for h, s in found.items() if s.networks and "Socket" not in s.networks}
    slow = {h: s for h, s in found.items() if "Socket" in s.networks}
    if not rdma or not slow:
        return None
    others = unique([n for s in rdma.values() for n in s.networks])
    lines = [ln for s in slow.values() for ln in _show(s.networks["Socket"])]
    # A good host's connection line (after its `Using network` lines) shows the transport the others use.
    lines += [ln for s in list(rdma.values())[:1] for n in s.networks for ln in s.networks[n][-1:]]
    names = sorted(slow)
    return Cause(
        id="host-slower-transport",
        title=f"{_who(names)} on TCP sockets while the other hosts use {', '.join(others)}",
        detail=f"{_list(names)} connected to the network through NET/Socket, the rest of the job through "
               f"{', '.join(others)}: every ring and tree through {_them(names)} runs at TCP speed (or the "
               "connections between the two kinds fail), so the whole collective slows to it.",
        fix=f"On {_list(names)}: `ibv_devinfo` (HCA present, port ACTIVE), `ibdev2netdev`, that NCCL_IB_HCA (if "
            "set) names devices that exist there, that rdma-core/libibverbs is in the job's environment there, "
            "and that NCCL_IB_DISABLE is not set for those ranks only; compare with a good host.",
        score=50, hosts=names, settings=["NCCL_IB_HCA", "NCCL_IB_DISABLE"], evidence=evidence(lines),
    )


def _networks(found: dict[str, _Host]) -> Cause | None:
    """Hosts whose RDMA network (`Using network`) differs from the others': another plugin or none."""
    named = {h: frozenset(s.networks) for h, s in found.items() if s.networks and "Socket" not in s.networks}
    count = Counter(named.values())
    if len(count) < 2:
        return None
    usual = count.most_common(1)[0][0]
    odd = sorted(h for h, k in named.items() if k != usual and count[k] < count[usual])
    # A tie has no rest of the job to compare with: every host is named, none as the odd one.
    title = f"{_list(odd)} chose another network than the rest of the job" if odd else \
        "the hosts do not agree on NCCL's network, and no network has most of them"
    odd = odd or sorted(named)
    lines = [ln for h in odd for n in found[h].networks for ln in _show(found[h].networks[n], 1)]
    lines += [ln for h, k in named.items() if k == usual for n in k for ln in found[h].networks[n][-1:]][:1]
    seen = "; ".join(f"{h}: {', '.join(sorted(named[h]))}" for h in sorted(named))
    return Cause(
        id="host-network-differs",
        title=title,
        detail=f"The hosts do not agree on NCCL's network ({seen}): a host that loads another network plugin, "
               "or none, talks through another transport than its peers, at another speed or not at all.",
        fix=f"Compare on {_list(odd)} and a good host: the `NET/Plugin` lines, NCCL_NET and NCCL_NET_PLUGIN, the "
            "libnccl-net.so found (LD_LIBRARY_PATH, the container image) and the NCCL version.",
        score=45, hosts=odd, settings=["NCCL_NET", "NCCL_NET_PLUGIN"], evidence=evidence(lines),
    )


def _odd_out(found: dict[str, _Host], good: str, bad: str) -> tuple[list[str], list[str], list[LogLine]] | None:
    """(hosts whose links of kind `good` show, hosts whose links are only of kind `bad`, the evidence: the odd
    hosts' lines and one good line), or None when no host is odd or none is good to compare with."""
    fine = sorted(h for h, seen in found.items() if getattr(seen, good))
    odd = sorted(h for h, seen in found.items() if getattr(seen, bad) and not getattr(seen, good))
    if not fine or not odd:
        return None
    lines = [ln for h in odd for ln in _show(getattr(found[h], bad))] + _show(getattr(found[fine[0]], good), 1)
    return fine, odd, lines


def _gdr(found: dict[str, _Host]) -> Cause | None:
    """Hosts whose RDMA links never use GPUDirect while other hosts' do: data staged in host memory there."""
    if (split := _odd_out(found, "gdr", "staged")) is None:
        return None
    with_gdr, odd, lines = split
    return Cause(
        id="host-without-gpudirect",
        title=f"{_who(odd)} without GPUDirect RDMA while the other hosts use it",
        detail=f"{_list(with_gdr)} connect through the NIC with GPUDirect RDMA (`/GDRDMA`); {_list(odd)} "
               f"{'does' if len(odd) == 1 else 'do'} not, so {_their(odd)} transfers are copied through host "
               "memory and the collective slows to that host's pace.",
        fix=f"On {_list(odd)}: `lsmod | grep nvidia_peermem` (else `modprobe nvidia_peermem`; nv_peer_mem with "
            "MLNX_OFED older than 5.1), or dma-buf support (open GPU kernel modules); in a container, the module "
            "on the host. Also compare NCCL_NET_GDR_LEVEL and NCCL_NET_GDR_READ with a good host.",
        score=45, hosts=odd, settings=["NCCL_NET_GDR_LEVEL"], evidence=evidence(lines),
    )


def _shm(found: dict[str, _Host]) -> Cause | None:
    """Hosts whose GPUs reach each other only through shared memory while other hosts use P2P."""
    if (split := _odd_out(found, "p2p", "shm")) is None:
        return None
    with_p2p, odd, lines = split
    return Cause(
        id="host-without-p2p",
        title=f"{_who(odd)} without GPU peer-to-peer: {_their(odd)} GPUs go through host shared memory",
        detail=f"Within {_list(with_p2p)} the GPUs connect peer to peer (P2P); within {_list(odd)} only through "
               "SHM, host memory, which is several times slower and slows every collective through that node.",
        fix=f"On {_list(odd)}: NCCL_P2P_DISABLE / NCCL_P2P_LEVEL in the ranks' environment there, PCIe ACS on "
            "(`lspci -vvv | grep ACSCtl`: SrcValid+), the IOMMU (iommu=pt), and `nvidia-smi topo -p2p r`; compare "
            "with a good host.",
        score=45, hosts=odd, settings=["NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"], evidence=evidence(lines),
    )


def _list(names: list[str]) -> str:
    return abridged(names)


def _who(names: list[str]) -> str:
    return f"host {names[0]} is" if len(names) == 1 else f"{len(names)} hosts are"


def _them(names: list[str]) -> str:
    return "it" if len(names) == 1 else "them"


def _their(names: list[str]) -> str:
    return "its" if len(names) == 1 else "their"


def slower_host(logs: list[Log]) -> list[Cause]:
    found = _hosts(logs)
    if len(found) < 2:
        return []
    return [c for c in (_socket(found), _networks(found), _gdr(found), _shm(found)) if c is not None]
