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
