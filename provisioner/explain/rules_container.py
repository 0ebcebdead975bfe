"""A cause in how the job's containers were networked: ranks in containers on Docker's default bridge network
publish their container address (172.17.0.0/16), which exists only inside each host, so ranks on other nodes
cannot connect to it; and a rendezvous address that is the host's is held by no interface in the container.

Named from what the ranks print: the address a connection failed to (`Connect to 172.17.0.3<37551> failed :
Connection refused`, 2.4 to 2.11; `socketStartConnect: Connect to ...`, 2.19), the address a rank chose
(`Bootstrap : Using [0]eth0:172.17.0.3<0>`, `NET/Socket : Using ...`, `NET : Using interface ...`), and a
rendezvous address outside the container (`Net : No interface found in the same subnet as remote address X`,
`Call to bind failed : Cannot assign requested address`). Docker names a container after the first 12 hex
digits of its id unless told otherwise; the rule asks for that name so a LAN that happens to use 172.17.x.x is
not taken for a bridge.

Also a container that sees the RDMA devices (/sys/class/infiniband is not namespaced) but was given none of their
device files: `Call to ibv_open_device failed` (ibvwrap, 2.3 on) and `NET/IB : Unable to open device mlx5_0`
(net_ib, every release) for each, then `NET/IB : No device found.`. Where NCCL still opened one (`NET/IB : Using
[0]mlx5_8:1/RoCE`), the others are only devices not handed to this pod, the usual SR-IOV layout: no cause.
"""

from __future__ import annotations

import ipaddress
import re

from provisioner.explain.evidence import evidence, grep, hosts
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.parsers._text import unique

_BRIDGE = ipaddress.ip_network("172.17.0.0/16")  # the address range of Docker's default bridge, docker0
_CONTAINER_HOST = re.compile(r"^[0-9a-f]{12}$")
_IPV4 = r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}"
_PEER = re.compile(rf"[Cc]onnect to (?P<peer>{_IPV4})<[0-9]+>|Call to recv from (?P<peer2>{_IPV4})<[0-9]+> failed")
_OWN = re.compile(rf"(?:Bootstrap|NET/Socket|NET)\s*:\s*Using\b.*?[\w.-]+:(?P<own>{_IPV4})<")
_ELSEWHERE = re.compile(r"No interface found in the same subnet as remote address\s*(?P<remote>[^<\s]+)"
                        r"|Call to bind failed\s*:\s*Cannot assign requested address")


_UNOPENED = re.compile(r"NET/IB\s*:\s*Unable to open device\s+(?P<dev>\S+)|Call to ibv_open_device failed")


def _bridged(address: str) -> bool:
    try:
        return ipaddress.ip_address(address) in _BRIDGE
    except ValueError:
        return False


def _in_containers(lines: list[LogLine]) -> bool:
    return any(line.host and _CONTAINER_HOST.match(line.host) for line in lines)


def bridge_network(logs: list[Log]) -> list[Cause]:
    peers = [(line, p) for line, m in grep(logs, _PEER) if (p := m["peer"] or m["peer2"]) and _bridged(p)]
    own = [(line, m["own"]) for line, m in grep(logs, _OWN) if _bridged(m["own"])]
    elsewhere = grep(logs, _ELSEWHERE) if own else []
    remotes = unique([r for _, m in elsewhere if (r := m["remote"]) and not _bridged(r)])
    lines = sorted({line for line, _ in peers + own + elsewhere}, key=lambda ln: (ln.file, ln.number))
    if not (peers or elsewhere) or not _in_containers(lines):
        return []
    addresses = unique([a for _, a in peers + own])
    parts = []
    if peers:
        parts.append(f"ranks tried to connect to {', '.join(unique([p for _, p in peers]))}, an address on Docker's "
                     "default bridge network (172.17.0.0/16) that a rank in a container published as its own: it "
                     "exists only inside that container's host, and NCCL listens on ports it picks at random, which "
                     "no `-p` mapping publishes, so ranks on other nodes cannot reach it")
    if elsewhere:
        parts.append(f"the container's own address is {', '.join(unique([a for _, a in own]))} on that bridge, while "
                     f"the rendezvous address {' and '.join(remotes) or 'it was given'} is held by no interface "
                     "inside the container (the host's address, not the container's), so rank 0 cannot listen "
                     "there")
    return [Cause(
        id="container-bridge-network",
        title="ranks run in containers on Docker's default bridge network, which other nodes cannot reach",
        detail="; ".join(parts) + ". Not a fault of the fabric: the containers are not on the network the nodes "
                                  "share.",
        fix="Run the job's containers in the host's network namespace (`docker run --network=host`; in Kubernetes "
            "`hostNetwork: true`, or a secondary network such as an SR-IOV or macvlan one whose addresses route "
            "between the nodes), so every rank publishes an address the other nodes reach; then MASTER_ADDR (or "
            "NCCL_COMM_ID) is the master host's address and NCCL_SOCKET_IFNAME the host's data interface.",
        score=96, hosts=hosts(lines), addresses=addresses,
        settings=["--network=host", "NCCL_SOCKET_IFNAME", "MASTER_ADDR"], evidence=evidence(lines),
    )]


def unopened_devices(logs: list[Log]) -> list[Cause]:
    """RDMA devices listed but not one opened: the job's container lacks /dev/infiniband (or its uverbs files),
    so NCCL runs without RDMA. Each log is judged alone, since another pod may have been given devices."""
    lines: list[LogLine] = []
    devices: list[str] = []
    for log in logs:
        hits = list(log.grep(_UNOPENED))
        if not hits or (log.nccl and log.nccl.ib_devices):
            continue
        lines += [line for line, _ in hits]
        devices += [m["dev"] for _, m in hits if m["dev"]]
    if not lines:
        return []
    names = unique(devices)
    which = f" ({', '.join(names[:6])}{', ...' if len(names) > 6 else ''})" if names else ""
    return [Cause(
        id="rdma-devices-not-in-container",
        title="the RDMA devices are listed but none could be opened: the container has no /dev/infiniband access",
        detail=f"NCCL found the HCAs{which} in /sys/class/infiniband, which every container sees, but "
               "ibv_open_device failed for each: their character devices (/dev/infiniband/uverbsN) were not "
               "handed to the container, or not readable there (on a bare host: the user lacks access to them, or the "
               "rdma-core provider does not match the kernel driver). NCCL then finds no IB device and, unless told "
               "otherwise, runs between nodes over TCP sockets at a fraction of the fabric's bandwidth.",
        fix="Give the container the devices: with Docker `--device=/dev/infiniband` (plus `--cap-add=IPC_LOCK "
            "--ulimit memlock=-1`); in Kubernetes request the RDMA resource the device plugin advertises (the "
            "rdma shared device plugin's or an SR-IOV resource, under resources.limits) so the pod gets "
            "/dev/infiniband/uverbsN, and add IPC_LOCK to the container's capabilities. Check with `ls -l "
            "/dev/infiniband` and `ibv_devinfo` inside the container.",
        score=92, hosts=hosts(lines), settings=["--device=/dev/infiniband", "IPC_LOCK"], evidence=evidence(lines),
    )]
