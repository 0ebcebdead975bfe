"""Causes on the socket side: no interface matches the setting, peers unreachable, a suspect interface
chosen, IB/RoCE devices not found or not selected, and TCP sockets used between nodes.

Wording read (learned from NCCL's release history): `Bootstrap : no socket interface found`,
`NET/Socket : no interface found`, `NET/Socket : No usable listening interface found` and
`NET/IB : No IP interface found.` (2.3 on), `Net : No interface found in the same subnet as remote
address X`; connection failures `Call to connect failed : why` (2.0 to 2.2) and `Call to connect timeout :
why` (2.3; include/socket.h, no peer
named), `Connect to X<port> failed : why` (2.4 to 2.11), `Net : Connect to ...`
(2.12), `socketStartConnect: Connect to ...` / `exceeded retries` (2.19), `ncclSocketConnect: connect to
... failed : why` (newest). An address a host cannot use: `Net : Socket creation failed : Address family not
supported by protocol` (2.3 on, `ncclSocketInit: Socket creation failed : ...` from 2.19), `Net : connecting to
address X with family N is neither AF_INET(2) nor AF_INET6(10)` (2.11, 2.12; `ncclSocketInit: ...` from 2.19)
and `Net : Unsupported address family type` (2.3 to 2.19).
"""

from __future__ import annotations

import re

from provisioner.explain.evidence import Hit, env, evidence, for_count, grep, hosts, multi_node, nranks, signal
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.lookups import RESOLVE_FIX, UNRESOLVED, failed_lookups, unresolved_alone
from provisioner.explain.model import Cause
from provisioner.explain.rules_plugins import plugin_failed
from provisioner.parsers._text import unique
from provisioner.parsers.nccl_debug import SuspectInterface

_NO_INTERFACE = re.compile(
    r"no socket interface found|NET/Socket\s*:\s*no (?:usable listening )?interface found"
    r"|NET/IB\s*:\s*No IP interface found|No interface found in the same subnet as remote address\s*(?P<remote>\S+)?"
    r"|Unable to find address for:?\s*(?P<name>\S+)?",
    re.I,
)
_ADDR = r"[0-9a-fA-F.:]+(?:%[\w.-]+)?"  # IPv4 or IPv6, with the zone of a link-local one (`fe80::1%ib1`)
_CONNECT_FAIL = re.compile(
    rf"(?:Connect to (?P<peer>{_ADDR})(?:<(?P<port>[0-9]+)>)? (?:failed|returned)\s*:?\s*(?P<why>.+)"
    # torch's summary says `any network address of (H, P)`; its first socket code (1.10) said `... on (H, P)`.
    r"|(?:timed out (?:after \S+ )?while trying|failed) to connect to (?:any network address (?:of|on) )?"
    r"(?:\((?P<peer2>[^,\s]+), (?P<port2>[0-9]+)\)|\[?(?P<peer5>[0-9a-fA-F.:]+|[A-Za-z][\w.-]*)\]?:(?P<port5>[0-9]+)\b)"
    # torch's c10d names why each address it tried failed: `... to [H]:P (errno: 111 - Connection refused).`
    r"(?: \(errno: [0-9]+ - (?P<why8>[^)]+)\))?"
    r"|(?:connect|Connection) (?:to )?\[?(?P<peer3>[0-9]{1,3}(?:\.[0-9]{1,3}){3})\]?:(?P<port3>[0-9]+)"
    r".*?(?P<why3>Connection refused|No route to host|Network is unreachable|timed out|Connection reset by peer)"
    r"|Connect\w*: exceeded (?:retries|timeouts|error retry count)\s*\(?(?P<why4>[0-9]+)?"
    r"|Call to connect (?:failed|timeout)\s*:\s*(?P<why5>.+)"
    # The reply to a connection still being set up (`Net : Call to recv from X<port> failed : Connection
    # refused`, 2.12 to 2.18): nothing listened at the peer's address.
    rf"|Call to recv from (?P<peer6>{_ADDR})<[0-9]+> failed\s*:\s*(?P<why6>Connection refused|No route to host"
    r"|Network is unreachable)"
    # torch's TCPStore client before 1.13 names no address: `connect() timed out. Original timeout was N ms.`
    r"|(?P<why7>connect\(\) timed out)\. Original timeout)",
    re.I,
)
# The connection that failed was torch's rendezvous store (MASTER_ADDR:MASTER_PORT or --rdzv_endpoint), not
# one of NCCL's: what to check is that address and port.
_STORE = re.compile(r"\[c10d\]|TCPStore|connect\(\) timed out|RendezvousConnectionError|DistNetworkError", re.I)
_LOOPBACK = re.compile(r"^(?:127\.|::1$|localhost$)")
_IB_STATE_LINES = re.compile(r"Using (?:internal )?network|NET/IB\s*:|NET/Socket\s*:|Bootstrap\s*:|NET/Plugin|"
                             r"libibverbs|NCCL_IB_|via NET/", re.I)
# NCCL 2.16 to 2.23 retried connect() on the socket whose earlier attempt the peer refused or let time out;
# Linux answers that with ECONNABORTED, so the reason printed is not the one that happened (2.24 resets the socket).
_ABORTED = re.compile(r"Software caused connection abort", re.I)
_ABORTED_NOTE = ("; `Software caused connection abort` is how NCCL 2.16 to 2.23 report a connection whose earlier "
                 "attempt was refused or timed out (they retried on the failed socket): nothing listened at that "
                 "address and port (the peer's process had exited or not started, or published an address it does "
                 "not hold), or a firewall dropped or refused the port")
_STORE_FIX = ("Check that MASTER_ADDR (or --rdzv_endpoint) is the master node's address on the network every "
              "node shares, that its launcher is up and listening on that port (`ss -ltnp` there), and that no "
              "firewall or security group drops the port between the nodes.")
_PEER_FIX = ("Pin the data interface (NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME) to the network the nodes "
             "share, and check that interface's link state, addresses and firewall on the hosts named.")


def no_interface(logs: list[Log]) -> list[Cause]:
    hits = grep(logs, _NO_INTERFACE)
    if not hits:
        return []
    settings = [f"GLOO_SOCKET_IFNAME={name.rstrip('.')}" for name in unique([m.group("name") for _, m in hits
                                                                              if m.group("name")])]
    text = " ".join(m.group(0).lower() for _, m in hits)
    if "socket" in text or "subnet" in text or "ip interface" in text:
        value = env(logs, "NCCL_SOCKET_IFNAME")
        settings.append(f"NCCL_SOCKET_IFNAME={value}" if value else "NCCL_SOCKET_IFNAME")
    lines = [line for line, _ in hits]
    return [Cause(
        id="no-socket-interface",
        title="no network interface matches the socket interface setting",
        detail=f"{', '.join(settings) or 'the interface setting'} names no interface that exists (and is up, "
               f"with an address, in the peers' subnet) on {', '.join(hosts(lines)) or 'the host'}: the library "
               "could not start its bootstrap or out-of-band connection.",
        fix="Set NCCL_SOCKET_IFNAME (GLOO_SOCKET_IFNAME for gloo) to the data interface the nodes share "
            "(e.g. the playbook's interface, such as eth1), or a prefix of it; "
            "check with `ip -br addr` on the host. NCCL accepts a list and ^exclusions.",
        score=95, hosts=hosts(lines), settings=settings, evidence=evidence(lines),
    )]


def _tried(match: re.Match[str], asked: bool) -> str | None:
    """A `host:port` peer, unless it is only one of the addresses a named host resolved to."""
    if asked and not match.group(0).lower().startswith("timed out"):
        return None
    return match.group("peer5")


def _lookups_only(line: LogLine, match: re.Match[str]) -> bool:
    """torch 1.10's summary followed by the errors it gathered, each a failed lookup: no connection was tried."""
    rest = line.text[match.end():]
    return "any network address" in match.group(0) and bool(UNRESOLVED.search(rest)) and "connect to" not in rest


def _connect_failures(logs: list[Log]) -> list[Hit]:
    return [(line, m) for line, m in grep(logs, _CONNECT_FAIL) if not _lookups_only(line, m)]


def _involved_suspects(logs: list[Log], hits: list[Hit], peers: list[str]
                       ) -> list[tuple[str | None, SuspectInterface, LogLine | None]]:
    """The suspect interfaces (with their host and line) of the hosts in the failure: a host whose connection
    failed, or the peer it could not reach (by name, or as the host whose interface holds the address). Another
    host's `lo` explains nothing. A log without host names is one host's output: its own failure counts."""
    names = {log.aliases.get(p, p) for log in logs for p in peers}
    owns = [(line, m) for line, m in grep(logs, re.compile(
        r"[\w.-]+:(?:" + "|".join(re.escape(p) for p in peers) + r")<"))] if peers else []
    places = {(line.file, line.host) for line, _ in hits + owns}
    involved = names | {host for _, host in places if host}
    return [(host, s, line) for log, host, s, line in _suspects(logs)
            if (log.name, host) in places or host in involved or s.address in peers]


def _suspects(logs: list[Log]) -> list[tuple[Log, str | None, SuspectInterface, LogLine | None]]:
    """Every suspect interface with its log, its host (the line's, else the one NCCL's prefix named) and line."""
    found = []
    for log in logs:
        for s in log.nccl.suspect_interfaces if log.nccl else []:
            line = log.line(s.line)
            found.append((log, (line.host if line else None) or s.host, s, line))
    return found


_NAMED = 6  # interfaces named in a note; a job of many nodes may list `lo` on each


def _named(suspects: list[tuple[str | None, SuspectInterface]]) -> str:
    """`lo on gpu01 (127.0.0.1, loopback interface), docker0 on gpu02 (...)`: each interface with its host."""
    names = unique([f"{s.interface}" + (f" on {host}" if host else "")
                    + (f" ({s.address}, {s.reason})" if s.address else f" ({s.reason})") for host, s in suspects])
    more = f" and {len(names) - _NAMED} more" if len(names) > _NAMED else ""
    return ", ".join(names[:_NAMED]) + more


def unreachable_peers(logs: list[Log]) -> list[Cause]:
    hits = _connect_failures(logs)
    if not hits:
        return unresolved_alone(logs)
    # torch also reports the unspecified address it tried to bind from (0.0.0.0, ::): not a peer. It prints
    # each address it resolved and tried too (`failed to connect to [X]:port (errno ...)`), and a release
    # may render those wrongly (seen on the lab: `[56a0:0:ff3::]:5327` for an IPv4 store): where a line
    # also names the host as it was asked for (`any network address of (host, port)`), that is the peer.
    asked = any(m.group("peer2") for _, m in hits)
    peers = unique([p for _, m in hits if (p := m.group("peer") or m.group("peer2") or m.group("peer3")
                                           or m.group("peer6") or _tried(m, asked)) and p not in ("0.0.0.0", "::")])
    # torch 1.10 throws its summary followed by each address's error: those say why.
    matches = [m for _, m in hits] + [each for line, m in hits if "any network address" in m.group(0)
                                      for each in _CONNECT_FAIL.finditer(line.text, m.end())]
    reasons = unique([why.strip() for m in matches
                      if (why := m.group("why") or m.group("why3") or m.group("why5") or m.group("why6")
                          or m.group("why7") or m.group("why8"))])
    if any(m.group("why4") is not None or "exceeded" in m.group(0) for m in matches):
        reasons.append("connection retries exceeded")
    lines = [line for line, _ in hits]
    suspects = _involved_suspects(logs, hits, peers)
    chosen = _named([(host, s) for host, s, _ in suspects])
    lines += [line for _, _, line in suspects if line is not None]
    detail = (f"{for_count(max(len(hits), len(peers)), 'the connection', 'connections')} to "
              f"{', '.join(peers) or 'a peer'} failed ({'; '.join(reasons or ['timed out'])})")
    if chosen:
        detail += f"; the interface chosen looks wrong: {chosen}"
    if any(_ABORTED.search(r) for r in reasons):
        detail += _ABORTED_NOTE
    store = all(_STORE.search(line.text) for line, _ in hits)
    if (loopback := [p for p in peers if _LOOPBACK.match(p)]) and store:
        # The store's address is the launcher's setting, and right for a job on one host.
        detail += (f"; {', '.join(loopback)} is a loopback address: only ranks on the master's own host reach "
                   "the store there (across nodes, MASTER_ADDR must be its address on the shared network)")
    elif loopback:
        # A peer's address is what that peer published: a loopback one means it picked `lo`.
        detail += (f"; {', '.join(loopback)} is a loopback address: the rank that published it chose the `lo` "
                   "interface, which no other node can reach")
    value = env(logs, "NCCL_SOCKET_IFNAME")
    lookups = failed_lookups(logs, peers, reasons + [line.text for line, _ in hits])
    unresolved = lookups.peers if lookups else []
    if lookups:
        lines += lookups.lines
    return [Cause(
        id="peer-unreachable",
        title=(f"a host cannot resolve the {'rendezvous store' if store else 'peer'}'s name {', '.join(unresolved)}"
               if unresolved else
               "a host cannot reach the rendezvous store (MASTER_ADDR / --rdzv_endpoint)" if store
               else "a host cannot reach its peers on the address it was given"),
        detail=detail + ("" if unresolved else
                         ". Either nothing listens at that address and port yet (the master's launcher has not "
                         "started or bound elsewhere), or the path to it is down or filtered." if store else
                         ". Either the interface chosen is not on the network the peers share, or the path "
                         "is down or filtered.") + (lookups.said() if lookups else ""),
        # A lookup that failed beside the connection failures is for another name: check it as well.
        fix=RESOLVE_FIX if unresolved else (_STORE_FIX if store else _PEER_FIX) + (f" {RESOLVE_FIX}" if lookups
                                                                                 else ""),
        score=85, hosts=hosts(lines), addresses=peers,
        settings=[f"NCCL_SOCKET_IFNAME={value}"] if value else [], evidence=evidence(lines), signal=signal(lines),
    )]


def suspect_interfaces(logs: list[Log]) -> list[Cause]:
    if _connect_failures(logs) or not multi_node(logs):
        return []  # reported with the failures they explain; on one node no traffic leaves the host
    items = _suspects(logs)
    if not items:
        return []
    lines = [line for _, _, _, line in items if line is not None]
    return [Cause(
        id="suspect-interface",
        title="NCCL chose an interface that rarely connects GPU nodes",
        detail=f"{_named([(host, s) for _, host, s, _ in items])}: traffic between nodes on it may not route, "
               "or may take a slow path.",
        fix="Set NCCL_SOCKET_IFNAME to the data interface (e.g. eth1, or ^docker,lo,veth to exclude).",
        score=45, hosts=unique([host for _, host, _, _ in items if host]), evidence=evidence(lines),
    )]


def socket_fallback(logs: list[Log]) -> list[Cause]:
    """TCP sockets between nodes (a slow path), or IB devices asked for and not found. On one node, or
    with one rank, NCCL uses no network at all: `NET/IB : No device found` is then no problem."""
    one = nranks(logs) == 1 or not multi_node(logs)
    causes = []
    for log in logs:
        nccl = log.nccl
        if nccl is None:
            continue
        hca = nccl.env.get("NCCL_IB_HCA")
        if hca and nccl.ib_unavailable and nccl.env.get("NCCL_IB_DISABLE") != "1":
            lines = [line for line, _ in log.grep(re.compile(r"NCCL_IB_HCA|NET/IB\s*:\s*No device"))]
            causes.append(Cause(
                id="ib-hca-not-found",
                title=f"NCCL_IB_HCA={hca} matched no usable RDMA device",
                detail=f"NCCL_IB_HCA={hca} was set, so IB/RoCE was expected, but NCCL found no device matching "
                       "it (wrong name or port, device down, or rdma-core missing in the job's environment).",
                fix="List the devices with `ibv_devinfo -l` / `ibdev2netdev` on the host and set NCCL_IB_HCA to "
                    "their names (a prefix such as mlx5 matches all; =mlx5_0:1 pins exact device and port).",
                score=80, hosts=nccl.hosts, settings=[f"NCCL_IB_HCA={hca}"], evidence=evidence(lines),
            ))
            continue
        if one or (nccl.network != "Socket" and "Socket" not in nccl.net_paths):
            continue
        reasons = []
        if nccl.env.get("NCCL_IB_DISABLE") == "1":
            reasons.append("NCCL_IB_DISABLE=1")
        if nccl.ib_unavailable:
            reasons.append("no IB/RoCE device found")
        if nccl.ib_devices:
            reasons.append(f"IB devices were found ({', '.join(nccl.ib_devices[:4])}) but NCCL says Socket")
        if plugin_failed([log]):
            reasons.append("the network plugin failed to load (NCCL fell back to its internal transports)")
        lines = [line for line, _ in log.grep(_IB_STATE_LINES)]
        causes.append(Cause(
            id="ib-not-used",
            title=f"NCCL used TCP sockets between nodes, not IB/RoCE ({log.name})",
            detail=("; ".join(reasons) or "no NET/IB device was reported") + ": collectives between nodes run "
                   "over TCP at a fraction of the fabric's bandwidth.",
            fix="On RDMA nodes: check `ibv_devinfo` (device present, port ACTIVE), that NCCL_IB_HCA names real "
                "devices, that libibverbs/rdma-core is installed in the job's environment, and NCCL_IB_DISABLE.",
            score=45, hosts=nccl.hosts, settings=[r for r in reasons if "=" in r], evidence=evidence(lines),
        ))
    return causes


# A rank received more bytes than it posted for: `Message truncated : received N bytes instead of M`
# (bootstrap.cc, 2.4 on; `received A,B bytes instead of C,D` in 2.30), `NET/Socket : message truncated :
# receiving N bytes instead of M` (2.4 to 2.11) and `NET/Socket : peer X message truncated : ...` (2.12 on).
_TRUNCATED = re.compile(
    r"(?:NET/Socket\s*:\s*(?:peer (?P<peer>\S+?)(?:<[0-9]+>)? )?)?[Mm]essage truncated\s*:\s*receiv(?:ed|ing)\s+"
    r"(?P<got>[0-9,]+) bytes instead of (?P<want>[0-9,]+)")


def message_truncated(logs: list[Log]) -> list[Cause]:
    """Two ranks disagree about how much one sends the other: not a network fault but a mismatch between
    the ranks (their NCCL, their settings, or the sizes the application passed)."""
    hits = grep(logs, _TRUNCATED)
    if not hits:
        return []
    lines = [line for line, _ in hits]
    sizes = unique([f"{m['got']} bytes for {m['want']}" for _, m in hits])
    peers = unique([m["peer"] for _, m in hits if m["peer"]])
    boot = any(m["peer"] is None and "NET/Socket" not in m.group(0) for _, m in hits)
    detail = (f"a rank received {'; '.join(sizes[:3])} expected"
              + (f" from {', '.join(peers)}" if peers else "") + ": the ranks disagree on what is exchanged. "
              "Different NCCL versions (or builds) on the hosts, NCCL_PROTO / NCCL_ALGO / NCCL_BUFFSIZE set "
              "differently on some ranks, or a collective called with different counts or types per rank.")
    if boot:
        detail += " During bootstrap it can also be a process of another job reaching this job's port."
    return [Cause(
        id="message-size-mismatch", title="ranks disagree on a message's size (message truncated)",
        detail=detail,
        fix="Make every rank run the same NCCL (check `NCCL version` per host in the log) with the same NCCL_* "
            "environment (compare `env | grep NCCL_` across nodes, launcher exports), and check the "
            "application passes the same count and dtype to the collective on every rank.",
        score=80, hosts=hosts(lines), addresses=peers, settings=["NCCL_PROTO", "NCCL_ALGO"], evidence=evidence(lines),
    )]


_FAMILY = re.compile(
    r"connecting to address\s*(?P<addr>\S*?)\s*with family (?P<family>[0-9]+) is neither AF_INET"
    r"|Socket creation failed\s*:\s*(?P<why>Address family not supported by protocol)"
    r"|(?P<unsupported>Unsupported address family type)")


def address_family(logs: list[Log]) -> list[Cause]:
    """A socket address this host cannot use. An empty one (`family 0`, or a number that is no family) was
    never filled in: the host that published it found no interface (from 2.27 NCCL does not warn when
    NCCL_SOCKET_IFNAME matches nothing) or the hosts run NCCL builds or net plugins whose handles differ.
    A family the kernel refuses is IPv6 on a host with IPv6 off, published by a host that has it."""
    hits = grep(logs, _FAMILY)
    if not hits:
        return []
    lines = [line for line, _ in hits]
    value = env(logs, "NCCL_SOCKET_IFNAME")
    setting = f"NCCL_SOCKET_IFNAME={value}" if value else "NCCL_SOCKET_IFNAME"
    if empty := [m for _, m in hits if m["family"] is not None]:
        families = ", ".join(unique([m["family"] for m in empty]))
        # The setting's echo shows what the host was told to use.
        lines = [line for line, _ in grep(logs, re.compile(r"NCCL_SOCKET_IFNAME set by environment"))][:1] + lines
        title = (f"{setting} gave NCCL no usable address (family {families})" if value
                 else f"NCCL was handed an empty socket address (family {families})")
        detail = (f"a rank tried to connect to an address with family {families}, neither IPv4 nor IPv6: the "
                  "address was never filled in. The host that published it found no interface to use ("
                  + (f"{setting} names none there; " if value else "")
                  + "recent NCCL does not warn when the setting matches nothing), or the hosts run different NCCL "
                    "builds or network plugins, so the handles they exchange do not read alike.")
    else:
        title = "a host cannot open a socket of its peer's address family (IPv4 / IPv6)"
        detail = ("the kernel refused the address family of the address NCCL was to use: one host published an "
                  "IPv6 address while IPv6 is off on another (or no interface with an address was found).")
    return [Cause(
        id="socket-address-family", title=title,
        detail=detail + " The bootstrap cannot complete, so the job stops before any collective.",
        fix=("Set NCCL_SOCKET_IFNAME" + (f" (now {value})" if value else "") + " on every node to an interface "
             "that exists and is up with an address in the network the nodes share (`ip -br addr` on each), "
             "with the same address family everywhere (NCCL_SOCKET_FAMILY=AF_INET pins IPv4); check that every "
             "node loads the same libnccl and net plugin (`NCCL version` and `NET/Plugin` lines per host)."),
        score=90, hosts=hosts(lines), settings=[setting, "NCCL_SOCKET_FAMILY"], evidence=evidence(lines),
    )]
