"""What the pre-flight of a smoke run reads from each host, and how (pure: the probe script and its parsing).

One exec per host reads its interfaces (`ip -j addr`), RDMA devices, GPU device nodes, the node's
Python and torch, and, when the peers' data addresses are known, pings every peer (all pairs for
small fleets, a ring for large ones) over the data interface twice: a small packet, then a full-size
frame with fragmentation forbidden (`ping -M do -s MTU-28`), all in parallel. A frame that does not
pass while a small one does is a hop on the path with a smaller MTU: the fault that makes NCCL and
gloo hang after a successful rendezvous. What the facts mean is preflight.py's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from provisioner.facts import batch
from provisioner.resources.base import Probe, ProbeResult, sh
from provisioner.smoke.programs import parse_tools, tools_probe
from provisioner.smoke.targets import Target

ALL_PAIRS_MAX = 8  # up to this many hosts every host pings every other; above, each pings its ring successor
IP_HEADERS = 28  # IPv4 (20) + ICMP (8): `ping -s MTU-28` fills exactly one MTU-sized frame
MAX_PING = 65535 - IP_HEADERS  # the largest ICMP payload one IPv4 packet carries


@dataclass(frozen=True)
class Iface:
    name: str
    mtu: int | None  # None: `ip` printed none
    up: bool  # administratively up and with carrier
    ipv4: tuple[str, ...] = ()
    admin_up: bool | None = None  # the UP flag; None: not read (built by hand)
    operstate: str = ""
    bond: str | None = None  # the bond (or team) it is a member of: addresses and traffic are the bond's
    lower: str | None = None  # the device it rides on (a VLAN's parent), when `ip` names it


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
    # The file's text reaches shell arithmetic only once it is a plain number of at most five digits: where
    # sh is bash, $(( )) evaluates what it is given (`a[$(cmd)]` runs cmd), and a leading 0 reads as octal.
    read = "mtu=$(cat " + sh(f"/sys/class/net/{iface}/mtu") + " 2>/dev/null)"
    # An IPv4 packet holds at most 65535 bytes: an MTU above that (the loopback's 65536) is tested with the
    # largest ping there is, which `ping` would otherwise refuse, failing a path that carries anything.
    lines = [f"{read}; case $mtu in ''|0*|*[!0-9]*|??????*) mtu=1500 ;; esac; s=$((mtu - {IP_HEADERS})); "
             f"[ \"$s\" -le {MAX_PING} ] || s={MAX_PING}"]
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
    """`ip -j addr` as name -> Iface. An entry without a name is skipped, not an error: iproute2 before
    5.0 prints `{}` for every interface a filter left out (`[{},{"ifindex":2,...},{}]`)."""
    data = json.loads(text or "[]")
    if not isinstance(data, list):
        raise ValueError("expected a JSON list of interfaces")
    ifaces = {}
    for entry in data:
        if not isinstance(entry, dict) or not isinstance(entry.get("ifname"), str):
            continue
        flags = {str(f) for f in entry.get("flags") or []}
        operstate = str(entry.get("operstate") or "")
        up = "UP" in flags and ("LOWER_UP" in flags or operstate == "UP")
        addrs = entry.get("addr_info") or []
        ipv4 = tuple(str(a["local"]) for a in addrs
                     if isinstance(a, dict) and a.get("family") == "inet" and "local" in a)
        mtu = entry.get("mtu")
        master = entry.get("master")
        lower = entry.get("link")
        ifaces[entry["ifname"]] = Iface(
            entry["ifname"], mtu if isinstance(mtu, int) and not isinstance(mtu, bool) else None, up, ipv4,
            admin_up="UP" in flags, operstate=operstate,
            # SLAVE is set on bond and team members only (a bridge port or a VRF member keeps its own
            # addresses and has none).
            bond=str(master) if "SLAVE" in flags and master else None,
            lower=lower if isinstance(lower, str) else None)
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


def data_address(target: Target, facts: HostFacts | None) -> str | None:
    if target.data_ip:
        return target.data_ip
    live = facts.ifaces.get(target.data_iface or "") if facts else None
    return live.ipv4[0] if live and live.ipv4 else None

