"""The pre-flight of a smoke run, before any collective: what the facts read from each host mean (pure).

preflight_probe.py reads the facts (the probe script and its parsing); here they become findings,
each naming the hosts, the values and the fix. The probe's names are also reachable from here, so a
caller speaks of one pre-flight.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from provisioner.load.ansible_tags import HIDDEN
from provisioner.resources.mtu_uniform import fleet_mtu
from provisioner.smoke.preflight_probe import (
    IP_HEADERS,
    HostFacts,
    Iface,
    Ping,
    build_script,
    data_address,
    parse_addr,
    parse_facts,
    parse_pings,
    ping_peers,
    probes,
)
from provisioner.smoke.targets import Target

__all__ = ["Finding", "HostFacts", "Iface", "Ping", "build_script", "check_env", "check_runtime", "data_address",
           "evaluate", "parse_addr", "parse_facts", "parse_pings", "ping_peers", "probes", "resolve_backend"]


@dataclass(frozen=True)
class Finding:
    check: str  # probe, interface, address, mtu, data_path, path_mtu, env, python, gpus, tools
    hosts: tuple[str, ...]
    message: str
    fix: str

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "hosts": list(self.hosts), "message": self.message, "fix": self.fix}


def _names(hosts: Sequence[str], shown: int = 6) -> str:
    hosts = list(hosts)
    return ", ".join(hosts[:shown]) + (f" and {len(hosts) - shown} more" if len(hosts) > shown else "")


def _matches(entries: str, names: Sequence[str]) -> list[str]:
    """Entries of an NCCL-style list (prefix match; leading = exact; leading ^ excludes) that name
    nothing in `names`."""
    if not entries or entries.startswith("^"):
        return []
    exact = entries.startswith("=")
    missing = []
    for entry in entries.removeprefix("=").split(","):
        device = entry.split(":", 1)[0].strip()
        if not device:
            continue
        hit = device in names if exact else any(n.startswith(device) for n in names)
        if not hit:
            missing.append(entry.strip())
    return missing


def check_interfaces(targets: Sequence[Target], facts: Mapping[str, HostFacts]) -> list[Finding]:
    findings: list[Finding] = []
    for target in targets:
        host = facts[target.name]
        if not target.data_ifaces:
            findings.append(Finding("interface", (target.name,), f"{target.name}: no data interface is known",
                                    "set data_iface (or fabnet_data_ifaces) in the inventory"))
            continue
        for iface in target.data_ifaces:
            live = host.ifaces.get(iface)
            if live is None:
                findings.append(Finding("interface", (target.name,),
                                        f"{target.name}: data interface {iface} does not exist "
                                        f"(it has: {', '.join(sorted(host.ifaces)) or 'none'})",
                                        "fix data_iface in the inventory or the NIC's name on the host"))
            elif live.bond:
                findings.append(Finding("interface", (target.name,),
                                        f"{target.name}: data interface {iface} is a member of bond {live.bond}: "
                                        f"its addresses and traffic are {live.bond}'s",
                                        f"use {live.bond} as the data interface (data_iface, NCCL_SOCKET_IFNAME)"))
            elif not live.up:
                findings.append(_down(target.name, iface, live))
    return findings


def _down(host: str, iface: str, live: Iface) -> Finding:
    if not live.admin_up:
        return Finding("interface", (host,), f"{host}: data interface {iface} is down",
                       f"bring it up (ip link set {iface} up) and check the cable/switch port")
    # Administratively up already: `ip link set up` changes nothing; the carrier (or the device below) is missing.
    state = f"operstate {live.operstate}" if live.operstate else "no carrier"
    if live.operstate == "LOWERLAYERDOWN" and live.lower:
        return Finding("interface", (host,), f"{host}: data interface {iface} is up but {live.lower}, "
                                             f"the device it rides on, is down ({state})",
                       f"bring up {live.lower} and check its cable/switch port")
    return Finding("interface", (host,), f"{host}: data interface {iface} is up but has no link ({state})",
                   "check the cable, the transceiver and the switch port (or the InfiniBand subnet manager)")


def check_mtu(targets: Sequence[Target], facts: Mapping[str, HostFacts]) -> list[Finding]:
    known = {t.name: mtu for t in targets if (mtu := _mtu_of(t, facts)) is not None}
    by_mtu: dict[int, list[str]] = {}
    for name, mtu in known.items():
        by_mtu.setdefault(mtu, []).append(name)
    if len(by_mtu) < 2:
        return []
    # The fleet's MTU as audit's mtu_uniform finds it; the others are the odd ones out.
    fleet = fleet_mtu(known)
    odd = {m: hosts for m, hosts in by_mtu.items() if m != fleet}
    odd_hosts = tuple(h for hosts in odd.values() for h in hosts)
    detail = "; ".join(f"{_names(hosts)} at {mtu}" for mtu, hosts in sorted(odd.items()))
    return [Finding("mtu", odd_hosts,
                    f"data-interface MTU differs across hosts: {detail}, "
                    f"{'the other host' if len(by_mtu[fleet]) == 1 else f'the other {len(by_mtu[fleet])} hosts'} "
                    f"at {fleet}",
                    f"set MTU {fleet} on {_names(odd_hosts)} (playbook: interface mtu + mtu_uniform, then "
                    "fabnet apply)")]


def _mtu_of(target: Target, facts: Mapping[str, HostFacts]) -> int | None:
    live = facts[target.name].ifaces.get(target.data_iface or "")
    return live.mtu if live else None


def check_path_mtu(targets: Sequence[Target], facts: Mapping[str, HostFacts]) -> list[Finding]:
    findings: list[Finding] = []
    blocked: list[tuple[str, str, int, int]] = []
    unreachable: list[tuple[str, str]] = []
    tested: dict[str, int] = {}
    mtus = {t.name: _mtu_of(t, facts) for t in targets}
    for target in targets:
        for ping in facts[target.name].pings:
            if ping.peer not in mtus:
                continue
            # Hosts with different MTUs fail full-size pings by construction; check_mtu names them.
            if ping.small_ok and not ping.large_ok and mtus[target.name] != mtus[ping.peer]:
                continue
            for name in (target.name, ping.peer):
                tested[name] = tested.get(name, 0) + 1
            if not ping.small_ok:
                unreachable.append((target.name, ping.peer))
            elif not ping.large_ok:
                blocked.append((target.name, ping.peer, ping.size, ping.path_mtu))
    for kind, pairs in (("blocked", blocked), ("unreachable", unreachable)):
        if not pairs:
            continue
        counts: dict[str, int] = {}
        for a, b, *_ in pairs:
            counts[a] = counts.get(a, 0) + 1
            counts[b] = counts.get(b, 0) + 1
        # A host whose every tested pair fails is where the problem is; if none is, name them all.
        suspects = tuple(h for h in tested if counts.get(h) == tested[h]) or tuple(counts)
        links = ", ".join(f"{a}<->{b}" for a, b, *_ in pairs[:8]) + (" ..." if len(pairs) > 8 else "")
        if kind == "blocked":
            size = max(p[2] for p in blocked)
            mtu = size + IP_HEADERS
            paths = sorted({p[3] for p in blocked if p[3]})
            path = f"; the path carries {'/'.join(map(str, paths))}-byte frames" if paths else ""
            host_mtus = ", ".join(f"{h} MTU {mtus[h]}" for h in suspects)
            findings.append(Finding(
                "path_mtu", suspects,
                f"full-size frames (ping -M do -s {size}, MTU {mtu}) do not pass between {links} while small "
                f"packets do ({host_mtus}{path}): a hop on the path of {_names(suspects)} (switch port) has a "
                "smaller MTU than the hosts, and an all-reduce would hang after the rendezvous",
                f"raise the MTU of the switch ports of {_names(suspects)} to at least {mtu}, or set the hosts' MTU "
                f"to the path's{' (' + str(min(paths)) + ')' if paths else ''}"))
        else:
            findings.append(Finding(
                "data_path", suspects,
                f"no packet passes over the data network between {links}",
                f"check {_names(suspects)}: data interface, address, cabling, firewall (ICMP and the rendezvous "
                "port)"))
    return findings


def _shown(target: Target, key: str, entry: str) -> str:
    # A value from a sensitive env file is hidden here as in every report (plan.shown_env): the finding
    # still names the variable, the hosts and the fix.
    return HIDDEN if key in target.secret_env else repr(entry)


def check_env(targets: Sequence[Target], facts: Mapping[str, HostFacts]) -> list[Finding]:
    findings: list[Finding] = []
    problems: dict[tuple[str, str, str], list[str]] = {}
    for target in targets:
        host = facts[target.name]
        missing = [("NCCL_SOCKET_IFNAME", e, "interface")
                   for e in _matches(target.env.get("NCCL_SOCKET_IFNAME", ""), sorted(host.ifaces))]
        gloo = target.env.get("GLOO_SOCKET_IFNAME", "")
        missing += [("GLOO_SOCKET_IFNAME", e, "interface")
                    for e in (e.strip() for e in gloo.split(",") if e.strip()) if e not in host.ifaces]
        missing += [("NCCL_IB_HCA", e, "RDMA device")
                    for e in _matches(target.env.get("NCCL_IB_HCA", ""), host.ib_devices)]
        for key, entry, what in missing:
            problems.setdefault((key, _shown(target, key, entry), what), []).append(target.name)
    for (key, shown, what), hosts in problems.items():
        findings.append(Finding("env", tuple(hosts), f"{key} names {what} {shown}, which does not exist on "
                                                    f"{_names(hosts)}",
                                f"fix {key} in the playbook's NCCL environment (templates/nccl*.j2 variables)"))
    return findings


def check_runtime(targets: Sequence[Target], facts: Mapping[str, HostFacts], runner: str,
                  backend: str) -> list[Finding]:
    findings: list[Finding] = []
    if runner == "torch":
        no_python = [t.name for t in targets if facts[t.name].python is None]
        no_torch = [t.name for t in targets if facts[t.name].python is not None and not facts[t.name].torch]
        if no_python:
            findings.append(Finding("python", tuple(no_python), f"no working Python on {_names(no_python)}",
                                    "install python3 or set fabnet_python to the node's interpreter"))
        if no_torch:
            findings.append(Finding("python", tuple(no_torch), f"torch is not importable on {_names(no_torch)}",
                                    "install torch for the node's Python, or point fabnet_python at a venv with it"))
    gpus = {t.name: facts[t.name].gpus for t in targets}
    if backend == "nccl" and (without := [h for h, n in gpus.items() if n == 0]):
        findings.append(Finding("gpus", tuple(without), f"backend nccl, but no GPU device on {_names(without)}",
                                "use --backend gloo for CPU-only nodes, or check the NVIDIA driver"))
    if backend == "auto" and any(gpus.values()) and not all(gpus.values()):
        without = [h for h, n in gpus.items() if n == 0]
        findings.append(Finding("gpus", tuple(without), f"some hosts have GPUs, {_names(without)} have none",
                                "check the NVIDIA driver there, or choose --backend gloo"))
    return findings


def check_tools(targets: Sequence[Target], facts: Mapping[str, HostFacts],
                required: Mapping[str, Sequence[str]]) -> list[Finding]:
    """A program the run needs that PATH does not find on a host is named with that host, before any
    rank starts (not left for the launcher to report as a shell error or an unreadable output)."""
    missing: dict[str, list[str]] = {}
    for target in targets:
        for tool in required.get(target.name, ()):
            if facts[target.name].tools.get(tool, "") is None:
                missing.setdefault(tool, []).append(target.name)
    return [Finding("tools", tuple(hosts), f"{_names(hosts)}: {tool} not found on PATH",
                    f"install {tool} on {_names(hosts)} or put it on the login PATH (an absolute path works too)")
            for tool, hosts in missing.items()]


def check_addresses(targets: Sequence[Target], facts: Mapping[str, HostFacts]) -> list[Finding]:
    missing = [t.name for t in targets if not data_address(t, facts[t.name])]
    if not missing:
        return []
    return [Finding("address", tuple(missing), f"no IPv4 address on the data interface of {_names(missing)}",
                    "give the data interface an address, or set fabnet_data_ip in the inventory")]


def check_probes(targets: Sequence[Target], facts: Mapping[str, HostFacts]) -> list[Finding]:
    """A probe that could not be read makes the other verdicts on that host guesses: say so first."""
    return [Finding("probe", (t.name,), f"{t.name}: {'; '.join(facts[t.name].errors)}",
                    "check that the host has iproute2 with JSON output (ip -j) and a POSIX shell")
            for t in targets if facts[t.name].errors]


def evaluate(targets: Sequence[Target], facts: Mapping[str, HostFacts], *, runner: str,
             backend: str, tools: Mapping[str, Sequence[str]] | None = None) -> list[Finding]:
    """Every pre-flight problem, most basic first (a host whose interface is down also fails the pings)."""
    return [
        *check_probes(targets, facts),
        *check_interfaces(targets, facts),
        *check_addresses(targets, facts),
        *check_mtu(targets, facts),
        *check_path_mtu(targets, facts),
        *check_env(targets, facts),
        *check_runtime(targets, facts, runner, backend),
        *check_tools(targets, facts, tools or {}),
    ]


def resolve_backend(backend: str, facts: Mapping[str, HostFacts]) -> tuple[str, int]:
    """The backend to use and ranks per host: NCCL with one rank per GPU where every host has GPUs,
    else gloo with one rank per host."""
    counts = [f.gpus for f in facts.values()]
    if backend == "nccl" or (backend == "auto" and counts and all(counts)):
        return "nccl", max(1, min(counts) if counts else 1)
    return "gloo", 1
