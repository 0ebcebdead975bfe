"""Host names that did not resolve, and which name each failed lookup was for. A name is called unresolved only
where the log ties it to the lookup that failed: torch's warning names the host it looked up, NCCL's names none
(it looks a name up itself only for NCCL_COMM_ID's host), and Python's `socket.gaierror` names none. A peer that a
connection was tried at (refused, reset, no route) had resolved, and so had a name whose lookup warning torch
followed with a connection to it (by that name, or to an address at the port looked up).

Wordings: torch's `The IPv6 network addresses of (H, P) cannot be retrieved (gai error: -3 - Temporary failure in
name resolution)` (c10d socket.cpp: `IPv4 `, `IPv6 ` or no family named; its first form, torch 1.10's, has no family
and no code: `The network addresses of (H, P) cannot be retrieved Name or service not known.`), torch's TCPStore
before socket.cpp (c10d Utils.cpp's tcputil::connect): `ValueError: host not found: Name or service not known`,
which names no host (an elastic launcher may have named the store's host just before: torch_store.py); NCCL's
`Net : error encountered when getting address info : Name or service not known` (misc/socket.cc) and Python's
`socket.gaierror: [Errno -2] Name or service not known` (glibc's gai_strerror texts; `[Errno 11001] getaddrinfo
failed` on Windows).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from provisioner.explain.evidence import Hit, env, evidence, for_count, hosts
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.explain.torch_store import announced_store
from provisioner.parsers._text import unique

UNRESOLVED = re.compile(r"network addresses of \((?P<host>[^,\s]+), (?P<port>[0-9]+)\) cannot be retrieved "
                        r"(?:\(gai error: -?[0-9]+ - (?P<why>[^)]+)\)|(?P<why0>[A-Za-z][^.()]*))"
                        r"|error encountered when getting address info : (?P<why2>.+)"
                        r"|gaierror: \[Errno -?[0-9]+\] (?P<why3>.+)|\bhost not found: (?P<why4>[A-Za-z][^.()]*)")
# torch's socket code trying one address it looked up (`[H]:P` for IPv6 and, from 1.11, for every name; 1.10 wrote
# `A:P` for IPv4): attempting, connected, refused while the server is not yet listening, failed, or timed out. Its
# summary (`timed out after Ns while trying to connect to (H, P)`, `any network address of (H, P)`) is no attempt.
_ATTEMPT = re.compile(r"(?:is attempting to connect to|has connected to|The server socket on|has failed to connect to"
                      r"|has timed out while trying to connect to|cannot be initialized to connect to) "
                      r"(?:\[(?P<v6>[^\]\s]+)\]|(?P<name>[^\s:\[\]()]+)):(?P<port>[0-9]+)")
_REACHED = re.compile(r"refused|unreachable|No route|reset", re.I)  # an address was found and tried
# `getent ahosts` asks the resolver as torch and NCCL do (every family), where `getent hosts` may stop at one.
RESOLVE_FIX = ("On the node that failed, `getent ahosts NAME` must print the address the other nodes reach it on: "
               "correct the name (MASTER_ADDR, --rdzv_endpoint, NCCL_COMM_ID), or add it to that node's DNS or "
               "/etc/hosts (a container's own, too), or give the address instead of the name.")


@dataclass(frozen=True)
class Lookups:
    """Failed lookups beside failed connections: `peers` the failed peers whose own lookup failed, `others` the
    names looked up that no failed connection was to, `unnamed` the reasons of lookups whose name the log does not
    give, `tried` the peers named by host name that a connection was tried at (so they resolved)."""

    peers: list[str]
    others: list[str]
    why: str
    unnamed: str
    tried: list[str]
    lines: list[LogLine]

    def said(self) -> str:
        """What the connection failures' detail adds: a clause for the failed peers (to follow the failures),
        then a sentence for each other lookup."""
        text = (f"; {', '.join(self.peers)} did not resolve to any address ({self.why}): the name is wrong, or the "
                "node that tried has no DNS or /etc/hosts entry for it." if self.peers else "")
        if self.others:
            text += f" The lookup of {', '.join(self.others)} failed too ({self.why})."
        if self.unnamed:
            text += f" A host name lookup failed too ({self.unnamed}), and the log does not name the host looked up"
            if self.tried:
                text += (f" (not {', '.join(self.tried)}: a connection to {for_count(len(self.tried), 'it', 'them')} "
                         f"was tried, so {for_count(len(self.tried), 'it', 'they')} resolved)")
            text += "."
        return text


def failed_lookups(logs: list[Log], peers: list[str], failures: list[str]) -> Lookups | None:
    """The lookups that failed in logs whose connections to `peers` failed; `failures`: what those said."""
    comm_host = _comm_id_host(logs)
    named: dict[str, list[Hit]] = {}
    unnamed: list[Hit] = []
    said: list[LogLine] = []  # the lines that named the store a `host not found` was for
    for log, line, m in _failed(logs):
        host = m["host"] or (comm_host if m["why2"] else None)
        if host is None and (store := _store_named(log, line, m)):
            host, _ = store
            said.append(store[1])
        if host is None:
            unnamed.append((line, m))
        elif not is_address(host):  # an address torch failed to look up (an IPv4 one asked as IPv6) is no name
            named.setdefault(host, []).append((line, m))
    reached = any(_REACHED.search(f) for f in failures)
    # torch looks a name up for IPv6 first: a name with IPv4 addresses only warns so, then resolves and is tried.
    named = {h: found for h, found in named.items()
             if not (reached and all("IPv6 network" in line.text for line, _ in found))}
    if not named and not unnamed:
        return None
    tried = [p for p in peers if not is_address(p) and p not in named] if reached else []
    lines = [line for found in named.values() for line, _ in found[:1]] + said[:1] + [line for line, _ in unnamed[:1]]
    return Lookups(peers=[h for h in named if h in peers], others=[h for h in named if h not in peers],
                   why=_why([m for found in named.values() for _, m in found]), unnamed=_why([m for _, m in unnamed]),
                   tried=tried, lines=lines[:3])


def _failed(logs: list[Log]) -> list[tuple[Log, LogLine, re.Match[str]]]:
    """Each failed lookup, less torch's warnings that a connection to the name they were for followed (at its port,
    from the same host): torch may look a name up for IPv6 first and then IPv4 (the warning of its first socket code
    names no family), so a name with IPv4 addresses only warns, then resolves and is connected to."""
    failed = []
    for log in logs:
        hits = [(at, line, m) for at, line in enumerate(log.lines) if (m := UNRESOLVED.search(line.text))]
        last = _last_attempts(log) if any(m["host"] for _, _, m in hits) else {}
        for at, line, m in hits:
            if m["host"] is None or not any(
                    last.get((line.host, m["port"], to), (-1, 0)) >= (at, m.end()) for to in ("", m["host"].lower())):
                failed.append((log, line, m))
    return failed


def _last_attempts(log: Log) -> dict[tuple[str | None, str, str], tuple[int, int]]:
    """Where torch last tried to connect, by (the line's host, port, the name tried or "" for an address): the line's
    index and the attempt's offset in it."""
    last: dict[tuple[str | None, str, str], tuple[int, int]] = {}
    for at, line in enumerate(log.lines):
        for a in _ATTEMPT.finditer(line.text):
            to = a["v6"] or a["name"]
            last[(line.host, a["port"], "" if is_address(to) else to.lower())] = (at, a.start())
    return last


def unresolved_alone(logs: list[Log]) -> list[Cause]:
    """A lookup that failed before any connection was tried. torch retries its lookup of the store's name until
    its connect timeout (one warning each time, and nothing else), so a log that stops there has not reached the
    store yet: named unless a communicator finished its init, which needs the store. NCCL looks a name up itself
    only for NCCL_COMM_ID, and its init fails at once (`Invalid NCCL_COMM_ID, please use format: ...`, though the
    format was right). Python's `socket.gaierror` names no host: the name is not guessed."""
    if any(c.init_complete for log in logs for c in (log.nccl.communicators if log.nccl else [])):
        return []
    found = [(line, m) for _, line, m in _failed(logs)]
    torch = [(line, m) for line, m in found if m["host"] and not is_address(m["host"])]
    nccl = [(line, m) for line, m in found if m["why2"]]
    comm_id = env(logs, "NCCL_COMM_ID")
    if not torch and not nccl:
        return _store_alone(logs) or _python_alone([(line, m) for line, m in found if m["why3"]])
    if torch:
        names, what, hits = unique([m["host"] for _, m in torch]), "the rendezvous store's name", torch
    else:
        names = [comm_host] if (comm_host := _comm_id_host(logs)) else []
        what, hits = "NCCL_COMM_ID's host name", nccl
    # socket.cpp's first form (torch 1.10's, no `gai error`) gave up at the first failed lookup.
    then = ("torch retries the lookup until its connect timeout, then fails" if any(m["why"] for _, m in torch) else
            "torch's older socket code (no `gai error` in its warning) does not retry the lookup, so the rendezvous "
            "failed at once" if torch else
            "NCCL's init failed at once (its `Invalid NCCL_COMM_ID` means the name, not the format)")
    lines = [line for line, _ in hits][:3]
    return [Cause(
        id="peer-unreachable",
        title=f"a host cannot resolve {what} {', '.join(names) or '(its host name)'}",
        detail=f"{', '.join(names) or 'the host name in NCCL_COMM_ID'} did not resolve to any address "
               f"({_why([m for _, m in hits])}), so no connection was tried"
               + f": {then}. The name is wrong, or the node that tried has no DNS or /etc/hosts entry for it.",
        fix=RESOLVE_FIX, score=85, hosts=hosts(lines), addresses=names,
        settings=[f"NCCL_COMM_ID={comm_id}"] if comm_id and not torch else [], evidence=evidence(lines),
    )]


def _store_named(log: Log, line: LogLine, match: re.Match[str]) -> tuple[str, LogLine] | None:
    """The store's name a `host not found` was for, and the line that named it, where an elastic launcher named
    the store just before (an address is never the name that failed)."""
    if not match["why4"] or not (store := announced_store(log, line)) or is_address(store[0]):
        return None
    return store


def _store_alone(logs: list[Log]) -> list[Cause]:
    """torch's TCPStore client before socket.cpp failed its lookup: the name was the store's (MASTER_ADDR, or the
    host of --rdzv_endpoint or init_method), but `host not found` does not say it: it is named only where the
    elastic launcher named the store's host just before, never guessed."""
    hits = [(log, line, m) for log in logs for line, m in log.grep(UNRESOLVED) if m["why4"]]
    if not hits:
        return []
    stores = [store for log, line, m in hits if (store := _store_named(log, line, m))]
    lines = [line for _, line, _ in hits][:3]
    why = _why([m for _, _, m in hits])
    if stores:
        names = unique([name for name, _ in stores])
        return [Cause(
            id="peer-unreachable", title=f"a host cannot resolve the rendezvous store's name {', '.join(names)}",
            detail=f"{', '.join(names)} did not resolve to any address ({why}), so no connection was tried: the "
                   "elastic launcher named it as the store's host just before, and torch's TCPStore client could not "
                   "look it up. The name is wrong, or the node that tried has no DNS or /etc/hosts entry for it.",
            fix=RESOLVE_FIX, score=85, hosts=hosts(lines), addresses=names, evidence=evidence([*lines, stores[0][1]]),
        )]
    return [Cause(
        id="name-unresolved", title="a host cannot resolve the rendezvous store's name (the log does not name it)",
        detail=f"torch's TCPStore client could not look up the store's host name ({why}), "
               "so no connection was tried; `host not found` does not say which name it looked up: MASTER_ADDR, or "
               "the host of --rdzv_endpoint or init_method. The name is wrong, or the node that tried has no DNS "
               "or /etc/hosts entry for it.",
        fix=RESOLVE_FIX, score=85, hosts=hosts(lines), settings=["MASTER_ADDR"], evidence=evidence(lines),
    )]


def _python_alone(hits: list[Hit]) -> list[Cause]:
    """Python's lookup failed and the log has no connection failure. The exception names no host, and the
    traceback's calls may be the rendezvous's, the host's own name's or a download's: scored below a failure
    the log ties to the job's network."""
    if not hits:
        return []
    lines = [line for line, _ in hits][:3]
    return [Cause(
        id="name-unresolved", title="a host name did not resolve (the log does not name the host)",
        detail=f"Python's lookup of a host name failed ({_why([m for _, m in hits])}), and `socket.gaierror` does "
               "not say which name it looked up: the calls in the traceback above it show where (the rendezvous "
               "address, the host's own name, or a server the job reaches). The name is wrong, or the node that "
               "tried has no DNS or /etc/hosts entry for it.",
        fix=RESOLVE_FIX, score=70, hosts=hosts(lines), evidence=evidence(lines),
    )]


def _why(matches: list[re.Match[str]]) -> str:
    """The resolver's reasons, once each, the first two."""
    reasons = [next(r for r in (m["why"], m["why0"], m["why2"], m["why3"], m["why4"]) if r) for m in matches]
    return "; ".join(unique([r.strip().rstrip(".") for r in reasons])[:2])


def _comm_id_host(logs: list[Log]) -> str | None:
    """The host of NCCL_COMM_ID (`host:port`, `[v6]:port`): the only name NCCL looks up itself."""
    comm_id = env(logs, "NCCL_COMM_ID")
    return comm_id.rsplit(":", 1)[0].strip("[]") if comm_id else None


def is_address(host: str) -> bool:
    """Whether `host` is an address, not a name (`[::1]`, `fe80::1%ib0` too)."""
    try:
        ipaddress.ip_address(host.strip("[]").split("%")[0])
    except ValueError:
        return False
    return True
