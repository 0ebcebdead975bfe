"""Pre-flight of a smoke run, before any collective (pure: the probe script, its parsing, the verdict).

One exec per host reads its interfaces (`ip -j addr`), RDMA devices, GPU device nodes, the node's
Python and torch, and, when the peers' data addresses are known, pings every peer (all pairs for
small fleets, a ring for large ones) over the data interface twice: a small packet, then a full-size
frame with fragmentation forbidden (`ping -M do -s MTU-28`), all in parallel. A frame that does not
pass while a small one does is a hop on the path with a smaller MTU: the fault that makes NCCL and
gloo hang after a successful rendezvous.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from provisioner.facts import batch
from provisioner.resources.base import Probe, ProbeResult, sh
from provisioner.resources.mtu_uniform import fleet_mtu
from provisioner.smoke.programs import parse_tools, tools_probe
from provisioner.smoke.targets import Target

ALL_PAIRS_MAX = 8  # up to this many hosts every host pings every other; above, each pings its ring successor
IP_HEADERS = 28  # IPv4 (20) + ICMP (8): `ping -s MTU-28` fills exactly one MTU-sized frame


@dataclass(frozen=True)
class Iface:
    name: str
    mtu: int
    up: bool
    ipv4: tuple[str, ...] = ()


@dataclass(frozen=True)
class Ping:
    peer: str
    small_ok: bool
    large_ok: bool
    size: int  # the payload of the full-size ping
    path_mtu: int = 0  # the largest common MTU that did pass, when full-size frames did not (0: unknown)


@dataclass
class HostFacts:
    name: str
    ifaces: dict[str, Iface] = field(default_factory=dict)
    ib_devices: tuple[str, ...] = ()
    gpus: int = 0
    python: str | None = None  # version, None when the interpreter is missing
    torch: bool = False
    pings: list[Ping] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    tools: dict[str, str | None] = field(default_factory=dict)  # program -> where PATH finds it, None: nowhere
    mpi_plugins: tuple[str, ...] = ()  # `srun --mpi=list`, where srun was looked for and found


@dataclass(frozen=True)
class Finding:
    check: str  # probe, interface, address, mtu, data_path, path_mtu, env, python, gpus, tools
    hosts: tuple[str, ...]
    message: str
    fix: str

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "hosts": list(self.hosts), "message": self.message, "fix": self.fix}


# ----------------------------------------------------------------------------------------- the probe


def ping_peers(names: Sequence[str]) -> dict[str, list[str]]:
    """Who pings whom: all pairs (each from one side) for small fleets, else a ring."""
    n = len(names)
    if n < 2:
        return {name: [] for name in names}
    if n <= ALL_PAIRS_MAX:
        return {a: [b for b in names[i + 1:]] for i, a in enumerate(names)}
    return {names[i]: [names[(i + 1) % n]] for i in range(n)}


COMMON_MTUS = (9000, 4200, 1500, 1280)  # tried downwards when full-size frames fail, to report the path's MTU


def _ping_command(iface: str, peers: Sequence[tuple[str, str]]) -> str:
    """Pings to every peer at once; one line per peer: `peer small_rc large_rc size path_mtu`
    (path_mtu 0 when not probed or not found)."""
    mtu = "$(cat " + sh(f"/sys/class/net/{iface}/mtu") + " 2>/dev/null || echo 1500)"
    lines = [f"s=$(( {mtu} - {IP_HEADERS} ))"]
    for name, ip in peers:
        small = sh("ping", "-n", "-q", "-c", "2", "-i", "0.2", "-W", "1", "-I", iface, ip)
        large = "ping -n -q -M do -s \"$s\" -c 2 -i 0.2 -W 1 -I " + sh(iface, ip)
        lower = ("ping -n -q -M do -s $((m - " + str(IP_HEADERS) + ")) -c 1 -W 1 -I " + sh(iface, ip)
                 + " >/dev/null 2>&1 && { p=$m; break; }")
        search = (f"if [ $a = 0 ] && [ $b != 0 ]; then for m in {' '.join(map(str, COMMON_MTUS))}; do "
                  f"if [ $((m - {IP_HEADERS})) -lt \"$s\" ]; then {lower}; fi; done; fi")
        lines.append(f"( p=0; {small} >/dev/null 2>&1; a=$?; {large} >/dev/null 2>&1; b=$?; {search}; "
                     f"printf '%s %s %s %s %s\\n' {sh(name)} \"$a\" \"$b\" \"$s\" \"$p\" ) &")
    lines.append("wait")
    return "\n".join(lines)


def probes(target: Target, peers: Sequence[tuple[str, str]] | None, *, facts: bool = True,
           tools: Sequence[str] = ()) -> dict[str, Probe]:
    found: dict[str, Probe] = {}
    if facts and tools:
        found["tools"] = tools_probe(tools)
    if facts:
        gpus = "for d in /dev/nvidia[0-9]*; do [ -e \"$d\" ] && echo \"$d\"; done; true"
        code = ("import importlib.util, sys; print(sys.version.split()[0]); "
                "print(int(importlib.util.find_spec('torch') is not None))")
        found["addr"] = Probe("ip -j addr show")
        found["ib"] = Probe("ls -1 " + sh(f"{target.sysfs_root.rstrip('/')}/class/infiniband") + " 2>/dev/null; true")
        found["gpus"] = Probe(gpus)
        found["python"] = Probe(sh(target.python, "-c", code), timeout=30)
    if peers and target.data_iface:
        found["ping"] = Probe(_ping_command(target.data_iface, peers), timeout=20)
    return found


def build_script(found: Mapping[str, Probe], nonce: str) -> str:
    return batch.build_script(list(found.values()), nonce)


# --------------------------------------------------------------------------------------- parsing


def parse_addr(text: str) -> dict[str, Iface]:
    ifaces = {}
    for entry in json.loads(text or "[]"):
        flags = set(entry.get("flags", []))
        up = "UP" in flags and ("LOWER_UP" in flags or entry.get("operstate") == "UP")
        ipv4 = tuple(a["local"] for a in entry.get("addr_info", []) if a.get("family") == "inet" and "local" in a)
        ifaces[entry["ifname"]] = Iface(entry["ifname"], int(entry.get("mtu", 0)), up, ipv4)
    return ifaces


def parse_pings(text: str) -> list[Ping]:
    pings = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) in (4, 5) and all(p.lstrip("-").isdigit() for p in parts[1:]):
            path = int(parts[4]) if len(parts) == 5 else 0
            pings.append(Ping(parts[0], parts[1] == "0", parts[2] == "0", int(parts[3]), path))
    return pings


def parse_facts(name: str, found: Mapping[str, Probe], results: Mapping[str, ProbeResult]) -> HostFacts:
    facts = HostFacts(name)

    def get(key: str) -> ProbeResult | None:
        probe = found.get(key)
        result = results.get(probe.key) if probe else None
        if probe is not None and result is None:
            facts.errors.append(f"the {key} probe produced no result")
        return result

    if (addr := get("addr")) is not None:
        try:
            if addr.exit_code != 0:
                raise ValueError(f"exit code {addr.exit_code}")
            facts.ifaces = parse_addr(addr.stdout)
        except (ValueError, KeyError, TypeError) as exc:
            facts.errors.append(f"cannot read `ip -j addr`: {addr.stderr.strip() or exc}")
    if (ib := get("ib")) is not None:
        facts.ib_devices = tuple(line.strip() for line in ib.stdout.splitlines() if line.strip())
    if (gpus := get("gpus")) is not None:
        facts.gpus = sum(1 for line in gpus.stdout.splitlines() if re.match(r"^/dev/nvidia[0-9]+$", line.strip()))
    if (python := get("python")) is not None and python.exit_code == 0:
        lines = python.stdout.split()
        facts.python = lines[0] if lines else None
        facts.torch = len(lines) > 1 and lines[1] == "1"
    if "ping" in found and (ping := get("ping")) is not None:
        facts.pings = parse_pings(ping.stdout)
    if "tools" in found and (tools := get("tools")) is not None:
        facts.tools, facts.mpi_plugins = parse_tools(tools.stdout)
    return facts


# ------------------------------------------------------------------------------------------ verdict


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
            elif not live.up:
                findings.append(Finding("interface", (target.name,), f"{target.name}: data interface {iface} is down",
                                        f"bring it up (ip link set {iface} up) and check the cable/switch port"))
    return findings


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
                    f"data-interface MTU differs across hosts: {detail}, the other {len(by_mtu[fleet])} "
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


def check_env(targets: Sequence[Target], facts: Mapping[str, HostFacts]) -> list[Finding]:
    findings: list[Finding] = []
    problems: dict[tuple[str, str, str], list[str]] = {}
    for target in targets:
        host = facts[target.name]
        ifaces = sorted(host.ifaces)
        for key in ("NCCL_SOCKET_IFNAME",):
            for entry in _matches(target.env.get(key, ""), ifaces):
                problems.setdefault((key, entry, "interface"), []).append(target.name)
        gloo = target.env.get("GLOO_SOCKET_IFNAME", "")
        for entry in (e.strip() for e in gloo.split(",") if e.strip()):
            if entry not in host.ifaces:
                problems.setdefault(("GLOO_SOCKET_IFNAME", entry, "interface"), []).append(target.name)
        for entry in _matches(target.env.get("NCCL_IB_HCA", ""), host.ib_devices):
            problems.setdefault(("NCCL_IB_HCA", entry, "RDMA device"), []).append(target.name)
    for (key, entry, what), hosts in problems.items():
        findings.append(Finding("env", tuple(hosts), f"{key} names {what} {entry!r}, which does not exist on "
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


def data_address(target: Target, facts: HostFacts | None) -> str | None:
    if target.data_ip:
        return target.data_ip
    live = facts.ifaces.get(target.data_iface or "") if facts else None
    return live.ipv4[0] if live and live.ipv4 else None


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
