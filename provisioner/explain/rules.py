"""The causes `explain` knows, each a function from the logs to zero or more Causes with evidence.

Scores order the answer: a cause that stops a job by itself (no interface, duplicate GPU, completion
errors, unreachable peer) ranks above its symptoms (a watchdog timeout, a run without its footer), and
how the job ran (IB not used) ranks last unless nothing failed.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable

from provisioner.explain import ibverbs
from provisioner.explain.logs import Log, LogLine, read_log
from provisioner.explain.model import Cause, Evidence, Explanation, NetworkUse
from provisioner.parsers._text import unique
from provisioner.parsers.nccl_debug import CompletionError

_NO_SOCKET_IF = re.compile(r"no socket interface found|Unable to find address for:?\s*(?P<name>\S+)?", re.I)
_DUPLICATE_GPU = re.compile(r"Duplicate GPU detected\s*:\s*rank (?P<a>[0-9]+) and rank (?P<b>[0-9]+) both on "
                            r"CUDA device (?P<device>\S+)")
_COMPLETION = re.compile(r"Got completion from peer\s+(?P<peer>[^\s<,]+)")
_CONNECT_FAIL = re.compile(
    r"(?:Connect to (?P<peer>[0-9a-fA-F.:]+)(?:<(?P<port>[0-9]+)>)? failed\s*:?\s*(?P<why>.+)"
    r"|(?:timed out (?:after \S+ )?while trying|failed) to connect to (?:any network address of )?"
    r"\((?P<peer2>[^,\s]+), (?P<port2>[0-9]+)\)"
    r"|(?:connect|Connection) (?:to )?\[?(?P<peer3>[0-9]{1,3}(?:\.[0-9]{1,3}){3})\]?:(?P<port3>[0-9]+)"
    r".*?(?P<why3>Connection refused|No route to host|Network is unreachable|timed out|Connection reset by peer))",
    re.I,
)
_STORE_WAIT = re.compile(r"Timed out after (?P<s>[0-9.]+) seconds waiting for clients\.\s*(?P<have>[0-9]+)/"
                         r"(?P<want>[0-9]+) clients joined", re.I)
_WATCHDOG = re.compile(r"\[Rank (?P<rank>[0-9]+)\] Watchdog caught collective operation timeout: "
                       r"WorkNCCL\(SeqNum=(?P<seq>[0-9]+), OpType=(?P<op>\w+).*?ran for (?P<ms>[0-9]+) milliseconds")
_GLOO_MESH = re.compile(r"Gloo connectFullMesh failed|gloo/transport/tcp/pair\.cc.*(?:Connection|Timed out)", re.I)
_CLOSED = re.compile(r"Connection closed by (?:remote )?peer|socketProgress.*Connection reset", re.I)
_IB_STATE_LINES = re.compile(r"Using network|NET/IB\s*:|NET/Socket\s*:|Bootstrap\s*:|NET/Plugin|libibverbs", re.I)


def _evidence(lines: Iterable[LogLine], limit: int = 8) -> list[Evidence]:
    seen: list[Evidence] = []
    for line in lines:
        item = Evidence(file=line.file, line=line.number, text=line.text)
        if item not in seen:
            seen.append(item)
    return seen[:limit]


def _hosts(lines: Iterable[LogLine]) -> list[str]:
    return unique([line.host for line in lines if line.host])


def _warning_lines(log: Log, first: int) -> list[LogLine]:
    """The line a WARN starts on and the lines a terminal wrapped it onto."""
    start = log.line(first)
    if start is None:
        return []
    lines = [start]
    whole = next((w for w in (log.nccl.warnings if log.nccl else []) if w and w.split()[0] in start.text), "")
    number = first + 1
    while (after := log.line(number)) is not None and after.text in whole and "NCCL" not in after.text:
        lines.append(after)
        number += 1
    return lines


def _env(logs: list[Log], name: str) -> str | None:
    for log in logs:
        if log.nccl and name in log.nccl.env:
            return log.nccl.env[name]
    return None


# ------------------------------------------------------------------------------------------------ rules


def no_socket_interface(logs: list[Log]) -> list[Cause]:
    hits = [(line, m) for log in logs for line, m in log.grep(_NO_SOCKET_IF)]
    if not hits:
        return []
    gloo = [m.group("name") for _, m in hits if m.group("name")]
    settings = []
    if gloo:
        settings += [f"GLOO_SOCKET_IFNAME={name.rstrip('.')}" for name in unique(gloo)]
    if any("socket interface" in m.group(0).lower() for _, m in hits):
        value = _env(logs, "NCCL_SOCKET_IFNAME")
        settings.append(f"NCCL_SOCKET_IFNAME={value}" if value else "NCCL_SOCKET_IFNAME")
    lines = [line for line, _ in hits]
    return [Cause(
        id="no-socket-interface",
        title="no network interface matches the socket interface setting",
        detail=f"{', '.join(settings)} names no interface that exists (and is up, with an address) on "
               f"{', '.join(_hosts(lines)) or 'the host'}: the library could not even start its bootstrap.",
        fix="Set it to the data interface the nodes share (e.g. the playbook's interface, such as eth1), or a "
            "prefix of it; check with `ip -br addr` on the host. NCCL accepts a list and ^exclusions.",
        score=95, hosts=_hosts(lines), settings=settings, evidence=_evidence(lines),
    )]


def duplicate_gpu(logs: list[Log]) -> list[Cause]:
    hits = [(line, m) for log in logs for line, m in log.grep(_DUPLICATE_GPU)]
    if not hits:
        return []
    ranks = sorted({int(m.group(k)) for _, m in hits for k in ("a", "b")})
    devices = unique([m.group("device") for _, m in hits])
    lines = [line for line, _ in hits]
    return [Cause(
        id="duplicate-gpu",
        title="two ranks on the same GPU",
        detail=f"ranks {', '.join(map(str, ranks))} share CUDA device {', '.join(devices)}: NCCL allows one rank "
               "per GPU, so the communicator was refused (invalid usage).",
        fix="Give each rank its own GPU: set the device from LOCAL_RANK (torch.cuda.set_device) and launch at "
            "most as many ranks per node as it has GPUs (CUDA_VISIBLE_DEVICES, --gpus-per-task).",
        score=95, hosts=_hosts(lines), evidence=_evidence(lines),
    )]


def completion_errors(logs: list[Log]) -> list[Cause]:
    groups: dict[tuple[str | None, str | None, int], list[tuple[Log, CompletionError]]] = defaultdict(list)
    for log in logs:
        for error in (log.nccl.completion_errors if log.nccl else []):
            groups[(error.host, error.device, error.status)].append((log, error))
    causes = []
    for (host, device, status), items in groups.items():
        peers = unique([e.peer for _, e in items])
        vendor = unique([f"0x{e.vendor_error:x}" for _, e in items if e.vendor_error is not None])
        symbol, meaning = ibverbs.describe(status)
        lines = [line for log, e in items for line in _warning_lines(log, e.line)]
        where = f"{host or 'a host'}" + (f" ({device})" if device else "")
        causes.append(Cause(
            id="ib-completion-error",
            title=f"RDMA completion error {status} ({symbol}) on {where}",
            detail=f"{len(items)} completion error(s) towards {', '.join(peers)}: {meaning}."
                   + (f" Vendor syndrome {', '.join(vendor)}." if vendor else ""),
            fix="Audit the path between these hosts: PFC/ECN and trust on both ends (roce_qos), the port error "
                "counters (port_counters: symbol_error, link_downed, out_of_buffer), link state and MTU.",
            score=90 if status in (12, 13) else 80 if status != 5 else 55,
            hosts=[h for h in [host] if h], addresses=peers, evidence=_evidence(lines),
        ))
    return causes


def unreachable_peers(logs: list[Log]) -> list[Cause]:
    hits = [(line, m) for log in logs for line, m in log.grep(_CONNECT_FAIL)]
    if not hits:
        return []
    # torch also reports the unspecified address it tried to bind from (0.0.0.0, ::): not a peer.
    peers = unique([p for _, m in hits if (p := m.group("peer") or m.group("peer2") or m.group("peer3"))
                    and p not in ("0.0.0.0", "::")])
    reasons = unique([why.strip() for _, m in hits if (why := m.group("why") or m.group("why3"))]) or ["timed out"]
    if not peers:
        return []
    lines = [line for line, _ in hits]
    suspects = [(log, s) for log in logs for s in (log.nccl.suspect_interfaces if log.nccl else [])]
    chosen = [f"{s.interface}" + (f" ({s.address}, {s.reason})" if s.address else f" ({s.reason})")
              for _, s in suspects]
    lines += [line for log, s in suspects if (line := log.line(s.line)) is not None]
    detail = f"connections to {', '.join(peers)} failed ({'; '.join(reasons)})"
    if chosen:
        detail += f"; the interface chosen looks wrong: {', '.join(unique(chosen))}"
    value = _env(logs, "NCCL_SOCKET_IFNAME")
    return [Cause(
        id="peer-unreachable",
        title="a host cannot reach its peers on the address it was given",
        detail=detail + ". Either the interface chosen is not on the network the peers share, or the path "
                        "is down or filtered.",
        fix="Pin the data interface (NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME) to the network the nodes "
            "share, and check that interface's link state and addresses on the hosts named.",
        score=85, hosts=_hosts(lines), addresses=peers,
        settings=[f"NCCL_SOCKET_IFNAME={value}"] if value else [], evidence=_evidence(lines),
    )]


def suspect_interfaces(logs: list[Log]) -> list[Cause]:
    if any(_CONNECT_FAIL.search(line.text) for log in logs for line in log.lines):
        return []  # reported with the connection failures they explain
    items = [(log, s) for log in logs for s in (log.nccl.suspect_interfaces if log.nccl else [])]
    if not items:
        return []
    lines = [line for log, s in items if (line := log.line(s.line)) is not None]
    names = unique([f"{s.interface} ({s.reason})" for _, s in items])
    return [Cause(
        id="suspect-interface",
        title="NCCL chose an interface that rarely connects GPU nodes",
        detail=f"{', '.join(names)}: traffic between nodes on it may not route, or may take a slow path.",
        fix="Set NCCL_SOCKET_IFNAME to the data interface (e.g. eth1, or ^docker,lo,veth to exclude).",
        score=45, hosts=unique([s.host for _, s in items if s.host]), evidence=_evidence(lines),
    )]


def version_mismatch(logs: list[Log]) -> list[Cause]:
    by_host: dict[str, str] = {}
    for log in logs:
        if log.nccl:
            by_host.update(log.nccl.nccl_versions_by_host)
            hosts = log.nccl.hosts
            if log.nccl.nccl_version and len(hosts) == 1 and hosts[0] not in by_host:
                by_host[hosts[0]] = log.nccl.nccl_version
    if len(set(by_host.values())) < 2:
        return []
    pattern = re.compile(r"NCCL version [0-9]")
    lines = [line for log in logs for line, _ in log.grep(pattern)]
    listing = ", ".join(f"{host} {version}" for host, version in sorted(by_host.items()))
    return [Cause(
        id="nccl-version-mismatch",
        title="hosts run different NCCL versions",
        detail=f"{listing}: ranks of one job must run the same NCCL; protocols differ between versions.",
        fix="Install one NCCL version on every node (playbook: nccl: {version: '==X.Y.Z'}) and rebuild the "
            "job's environment so it loads that libnccl.",
        score=75, hosts=sorted(by_host), evidence=_evidence(lines),
    )]


def watchdog(logs: list[Log]) -> list[Cause]:
    hits = [(line, m) for log in logs for line, m in log.grep(_WATCHDOG)]
    if not hits:
        return []
    ranks = sorted({int(m.group("rank")) for _, m in hits})
    ops = unique([f"{m.group('op')} (SeqNum {m.group('seq')})" for _, m in hits])
    seconds = max(int(m.group("ms")) for _, m in hits) / 1000
    seen = sorted({r for log in logs for line in log.lines if (r := line.rank) is not None} | set(ranks))
    absent = [r for r in seen if r not in ranks]
    detail = (f"ranks {', '.join(map(str, ranks))} waited {seconds:g} s in {', '.join(ops)} and gave up.")
    if absent:
        detail += f" Ranks {', '.join(map(str, absent))} never reported it: they did not reach the collective."
    else:
        detail += (" Every rank in the log reached it and waited: data stopped flowing between them "
                   "(network path, a stalled peer, or a rank missing from this log).")
    lines = [line for line, _ in hits]
    return [Cause(
        id="collective-timeout",
        title="a collective timed out (watchdog)",
        detail=detail,
        fix="Look for the first error before the timeout on every rank; audit the hosts' data path "
            "(link, MTU, PFC/ECN, port counters). Set TORCH_NCCL_TRACE_BUFFER_SIZE to record the stuck "
            "collective next time.",
        score=60, hosts=_hosts(lines), evidence=_evidence(lines),
    )]


def rendezvous_wait(logs: list[Log]) -> list[Cause]:
    hits = [(line, m) for log in logs for line, m in log.grep(_STORE_WAIT)]
    if not hits:
        return []
    _, m = hits[0]
    lines = [line for line, _ in hits]
    return [Cause(
        id="rendezvous-incomplete",
        title="not every rank joined the rendezvous",
        detail=f"only {m.group('have')} of {m.group('want')} ranks reached the store within {m.group('s')} s: "
               "the missing ones could not connect (see the connection errors) or never started.",
        fix="Check the hosts whose ranks are missing: that the job started there and that they reach the "
            "master address on the data network.",
        score=55, hosts=_hosts(lines), evidence=_evidence(lines),
    )]


def nccl_tests_results(logs: list[Log]) -> list[Cause]:
    causes = []
    for log in logs:
        tests = log.tests
        if tests is None or tests.verdict == "ok":
            continue
        marker = {"wrong results": re.compile(r"^\s*[0-9]"), "out of bounds": re.compile(r"Out of bounds"),
                  "failed": re.compile(r"failure", re.I)}.get(tests.verdict, re.compile(r"^#\s*size|^\s*[0-9]"))
        lines = [line for line, _ in log.grep(marker)]
        if tests.verdict == "wrong results":
            bad = {f"{r.size}" for r in tests.rows if (r.oop_wrong or 0) > 0 or (r.ip_wrong or 0) > 0}
            lines = [line for line in lines if line.text.split()[:1] and line.text.split()[0] in bad]
        causes.append(Cause(
            id=f"nccl-tests-{tests.verdict.split(':')[0].replace(' ', '-')}",
            title=f"nccl-tests: {tests.verdict}",
            detail={"wrong results": "elements arrived with wrong values: data corruption on some path (GPU, "
                                     "NVLink, PCIe or the network)",
                    "out of bounds": "results outside the expected range",
                    "failed": "the test reported a failure",
                    }.get(tests.verdict, "the output stops before the run's footer: the test crashed, hung or "
                                         "was killed"),
            fix="Rerun with NCCL_DEBUG=INFO on the same hosts; bisect by host pairs to find the bad path.",
            score=80 if tests.verdict != "truncated: no footer" else 40,
            evidence=_evidence(lines[-4:] if tests.verdict.startswith("truncated") else lines),
        ))
    return causes


def connection_closed(logs: list[Log]) -> list[Cause]:
    hits = [line for log in logs for line, _ in log.grep(_CLOSED)]
    hits += [line for log in logs for line, _ in log.grep(_GLOO_MESH)]
    if not hits:
        return []
    return [Cause(
        id="connection-lost",
        title="a peer connection was closed or never completed",
        detail="the other end went away (its process died) or the path dropped the connection.",
        fix="Find the first failing rank (its own log usually has the real error); check the path with the "
            "hosts' link state and port counters.",
        score=50, hosts=_hosts(hits), evidence=_evidence(hits),
    )]


def ib_not_used(logs: list[Log], failed: bool) -> list[Cause]:
    causes = []
    for log in logs:
        nccl = log.nccl
        if nccl is None or nccl.network != "Socket":
            continue
        env = nccl.env
        reasons = []
        if env.get("NCCL_IB_DISABLE") == "1":
            reasons.append("NCCL_IB_DISABLE=1")
        if nccl.ib_unavailable:
            hca = env.get("NCCL_IB_HCA")
            reasons.append(f"NCCL_IB_HCA={hca} matched no device" if hca else "no IB/RoCE device found")
        if any("libibverbs" in w or "ibv" in w.lower() for w in nccl.warnings):
            reasons.append("libibverbs could not be loaded")
        if nccl.ib_devices:
            reasons.append(f"IB devices were found ({', '.join(nccl.ib_devices[:4])}) but NCCL says Socket")
        if any("Plugin load returned" in p or "Failed to" in p for p in nccl.plugins):
            reasons.append("the network plugin failed to load (NCCL fell back to its internal transports)")
        lines = [line for line, _ in log.grep(_IB_STATE_LINES)]
        causes.append(Cause(
            id="ib-not-used",
            title=f"NCCL used TCP sockets, not IB/RoCE ({log.name})",
            detail=("; ".join(reasons) or "no NET/IB device was reported") + ": collectives between nodes run "
                   "over TCP at a fraction of the fabric's bandwidth.",
            fix="On RDMA nodes: check `ibv_devinfo` (device present, port ACTIVE), that NCCL_IB_HCA names real "
                "devices, that libibverbs/rdma-core is installed in the job's environment, and NCCL_IB_DISABLE.",
            score=70 if failed is False and reasons and "NCCL_IB_DISABLE=1" not in reasons else 30,
            hosts=nccl.hosts, settings=[r for r in reasons if "=" in r], evidence=_evidence(lines),
        ))
    return causes


RULES: list[Callable[[list[Log]], list[Cause]]] = [
    no_socket_interface, duplicate_gpu, completion_errors, unreachable_peers, suspect_interfaces,
    version_mismatch, watchdog, rendezvous_wait, nccl_tests_results, connection_closed,
]


def network_use(log: Log) -> NetworkUse | None:
    nccl = log.nccl
    if nccl is None:
        return None
    lines = [line for line, _ in log.grep(re.compile(r"Using network|NET/\w+\s*:\s*Using|NET/IB\s*: No device"))]
    return NetworkUse(
        file=log.name, framework="nccl", network=nccl.network, devices=nccl.ib_devices,
        interfaces=unique(nccl.socket_interfaces + nccl.bootstrap), nccl_version=nccl.nccl_version,
        hosts=nccl.hosts, evidence=_evidence(lines, limit=4),
    )


def explain(logs: list[tuple[str, str]]) -> Explanation:
    """Causes, most likely first, for the (name, text) logs of one job."""
    read = [read_log(name, text) for name, text in logs]
    causes: list[Cause] = []
    for rule in RULES:
        causes += rule(read)
    causes += ib_not_used(read, failed=not any(c.score >= 50 for c in causes))
    causes.sort(key=lambda c: -c.score)
    networks = [use for log in read if (use := network_use(log)) is not None]
    return Explanation(files=[name for name, _ in logs], networks=networks, causes=causes)
