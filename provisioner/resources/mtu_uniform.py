"""`mtu_uniform`: one MTU on an interface across every host of a play (a mismatch stalls collectives).

Per host this only reads the MTU (an informational Check); `fleet_checks` compares the hosts once
all of them are gathered.
"""

from __future__ import annotations

from collections import Counter

from provisioner.errors import ParseError
from provisioner.load.specs import MtuUniformSpec
from provisioner.resources.base import Check, HostContext, Probe, ProbeFailed, ResourceType, Results, drift, error, ok
from provisioner.resources.interface import NoNetdev, ip_links, live_mtu, netdev_of, netdev_probes

KIND = "mtu_uniform"


def probes(spec: MtuUniformSpec, ctx: HostContext) -> list[Probe]:
    return netdev_probes(spec.interface, spec.rdma_device)


def evaluate(spec: MtuUniformSpec, results: Results, ctx: HostContext) -> list[Check]:
    """One `mtu` Check: ok with the MTU as `actual` (the fleet check compares), or error."""
    desired = "same on all hosts"
    try:
        netdev = netdev_of(spec.interface, spec.rdma_device, results)
        if netdev is None:
            return [error("mtu", desired, f"RDMA device {spec.rdma_device} not found")]
        link = ip_links(results).get(netdev)
        if link is None:
            return [error("mtu", desired, f"no interface {netdev}")]
        return [ok("mtu", desired, live_mtu(link))]
    except (ProbeFailed, ParseError, NoNetdev) as exc:
        return [error("mtu", desired, str(exc))]


def _hosts(names: list[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def fleet_mtu(mtus: dict[str, int]) -> int:
    """The fleet's MTU: the most common one (a tie: the larger). One rule for audit and smoke's pre-flight."""
    counts = Counter(mtus.values())
    return max(counts, key=lambda mtu: (counts[mtu], mtu))


def fleet_checks(spec: MtuUniformSpec, mtus: dict[str, int | None]) -> dict[str, Check]:
    """host -> its Check against the fleet: the most common MTU is the reference (a tie: the larger)."""
    known = {host: mtu for host, mtu in mtus.items() if mtu is not None}
    checks: dict[str, Check] = {}
    if not known:
        return {host: error("mtu", "same on all hosts", "MTU not known on any host") for host in mtus}
    if len(mtus) == 1 and known:
        # --limit (or a one-host play) left nothing to compare with: say so rather than "ok (fleet)".
        host, mtu = next(iter(mtus.items()))
        return {host: ok("mtu", "same on all hosts", mtu,
                         "compared with no other host: it is the only host of its play in this run (--limit?)")}
    reference = fleet_mtu(known)
    desired = f"{reference} (fleet)"
    same = sorted(host for host, mtu in known.items() if mtu == reference)
    odd = sorted(host for host, mtu in known.items() if mtu != reference)
    for host, mtu in mtus.items():
        if mtu is None:
            checks[host] = error("mtu", desired, "MTU not known on this host")
        elif mtu == reference:
            others = len(same) - 1
            message = f"same as {others} other host{'s' if others != 1 else ''}" if others else ""
            checks[host] = ok("mtu", desired, mtu, message)
        else:
            count = len(same)
            message = f"{host} has {mtu} where {count} other host{'s have' if count != 1 else ' has'} {reference}"
            also = [h for h in odd if h != host]
            if also:
                message += "; also differing: " + _hosts([f"{h} ({known[h]})" for h in also])
            checks[host] = drift("mtu", desired, mtu, message)
    return checks


RESOURCE = ResourceType(KIND, MtuUniformSpec, probes, evaluate, fleet_checks=fleet_checks,
                        examples=({"interface": "ens1f0np0"}, {"rdma_device": "mlx5_0"}))
