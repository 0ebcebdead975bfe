"""Causes NCCL's bootstrap names itself, and the one it never names (an init that started and never finished,
`init_unfinished`, a fallback). The root (the process that made the unique id, listening on its
address and port) collects one message from every rank before any collective, and refuses what does not fit.
Two processes claiming one rank, ranks started with different sizes, an out-of-band device setting that
matches no device, and the root's socket accepting connections that fail or are not this job's ranks.

Wording read (learned from NCCL's release history): the root's `Bootstrap Root : rank R of N ranks has
already checked in` (2.3 on), `Bootstrap Root : mismatch in rank count from procs A : B` (2.3 to 2.22),
`Bootstrap Root : mismatch in info from procs, nranks A vs B, nroots C vs D, iroot E vs F` (2.23 on; `, offset
G vs H` from 2.29), `Bootstrap Root : localId L is out of range` (2.29 on); with NCCL_OOB_NET_ENABLE=1 the
device NCCL_OOB_NET_IFNAME names: `no device found matching NCCL_OOB_NET_IFNAME=X, ignoring` (2.23, the first
device is used instead), `no device found matching [exactly ]X, verify NCCL_OOB_NET_IFNAME` and `no device
found after excluding [exactly ]X, verify ...` (2.24 on, init fails); the accepting side `socketTryAccept:
Accept failed: why` (2.18 on), `socketTryAccept: exceeded error retry count (N), why` (2.26; `... after N
attempts, why` from 2.27), `socketFinalizeAccept: wrong magic A != B` (2.18 to 2.26) and `socketFinalizeAccept
[from X]: wrong type A != B` (2.18 on). Messages the root reads with fewer bytes than it expects (an older
rank's) are not filled in, so a field the older release lacks reads as a number that means nothing.
"""

from __future__ import annotations

import re

from provisioner.explain.evidence import abridged, env, evidence, grep, hosts
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.parsers._text import unique

_ROOT = r"Bootstrap\s+Root\s*:\s*"
_CHECKED_IN = re.compile(_ROOT + r"rank (?P<rank>-?[0-9]+) of (?P<n>-?[0-9]+) ranks? (?:has|have) already checked in")
_COUNT = re.compile(_ROOT + r"mismatch in rank count from procs (?P<a>-?[0-9]+)\s*:\s*(?P<b>-?[0-9]+)")
_INFO = re.compile(_ROOT + r"mismatch in info from procs\b(?P<fields>.*)")
_FIELD = re.compile(r"(?P<name>[A-Za-z]+) (?P<a>-?[0-9]+) vs (?P<b>-?[0-9]+)")
_OUT_OF_RANGE = re.compile(_ROOT + r"localId (?P<id>-?[0-9]+) is out of range")
_OOB = re.compile(r"no device found (?P<how>matching|after excluding) (?P<exact>exactly )?(?:NCCL_OOB_NET_IFNAME=)?"
                  r"(?P<value>\S.*?),\s*(?P<then>verify NCCL_OOB_NET_IFNAME|ignoring)")
_ACCEPT = re.compile(r"socketTryAccept:\s*(?:Accept failed:\s*(?P<why>.+)"
                     r"|exceeded error retry count\s*(?:\([0-9]+\)|after [0-9]+ attempts)?,?\s*(?P<why2>.*))")
_FOREIGN = re.compile(r"socketFinalizeAccept(?: from (?P<peer>[^\s<]+?)(?:<[0-9]+>)?)?:\s*"
                      r"wrong (?P<what>magic|type)\b")
_BOOTSTRAP_ADDRESS = re.compile(r"Bootstrap\s*:\s*Using\s+\S")  # the interface and address the ranks publish
# An init that returned an error: NCCL traces the failing return through init.cc (`init.cc:1577 -> 5`, every
# release), and the framework reports NCCL's error (`NCCL error in: ... internal error`). That init finished,
# badly; it did not hang.
_INIT_RETURNED = re.compile(r"^(?:(?P<host>[^\s:]+):(?P<pid>[0-9]+):[0-9]+ \[[0-9]+\] NCCL INFO )?\S*\binit\.cc:"
                            r"[0-9]+ -> [1-9]|NCCL[ _]?(?:error|failure)\b|ncclSystemError|ncclInternalError"
                            r"|ncclInvalidUsage", re.I)
# A value the sender never set: an uninitialised integer, far from any rank count, root count or offset.
_IMPLAUSIBLE = 1 << 20
_LAUNCH_FIX = ("Start every rank of the job from one launch with one world size: the same --nnodes / "
               "--nproc_per_node (WORLD_SIZE, or the scheduler's task count) on every node, and no process left "
               "over from an earlier launch (`ps`/`pkill` on the nodes, or a fresh MASTER_PORT / NCCL_COMM_ID).")


def _on(lines: list[LogLine]) -> str:
    return f" on {abridged(found)}" if (found := hosts(lines)) else ""


def _settings(logs: list[Log], *names: str) -> list[str]:
    return [f"{name}={value}" if (value := env(logs, name)) else name for name in names]


def _claimed_twice(logs: list[Log]) -> list[Cause]:
    hits = grep(logs, _CHECKED_IN)
    if not hits:
        return []
    lines = [line for line, _ in hits]
    ranks = unique([f"rank {m['rank']} of {m['n']}" for _, m in hits])
    return [Cause(
        id="bootstrap-rank-claimed-twice", title="two processes joined NCCL's bootstrap as the same rank",
        detail=f"the bootstrap root{_on(lines)} was reached twice for {', '.join(ranks[:4])}: two jobs share "
               "one unique id (the same NCCL_COMM_ID, or the same MASTER_ADDR:MASTER_PORT, so one job's ranks "
               "reach the other's root), a rank was restarted and joined again while the root still held it, or "
               "the launcher gave two processes the same RANK. The root stops, so every rank fails or hangs in init.",
        fix="Give each job its own rendezvous port (MASTER_PORT / --rdzv_endpoint, or its own NCCL_COMM_ID) and "
            "check that no process of an earlier run still lives on the nodes (`ss -tnp` for the port, `ps` for "
            "the job); check that the launcher numbers ranks once (RANK / LOCAL_RANK per process); after a rank "
            "restarts, restart the whole communicator rather than that rank alone.",
        score=88, hosts=hosts(lines), settings=_settings(logs, "NCCL_COMM_ID", "MASTER_PORT"),
        evidence=evidence(lines),
    )]


def _mismatch(logs: list[Log]) -> list[Cause]:
    """The root's first message fixed the job's shape; a later rank's message disagrees with it."""
    sizes: list[str] = []
    others: list[str] = []
    lines = []
    for line, m in grep(logs, _COUNT):
        lines.append(line)
        if m["a"] != m["b"]:
            sizes.append(f"{m['a']} and {m['b']}")
    for line, m in grep(logs, _INFO):
        lines.append(line)
        for f in _FIELD.finditer(m["fields"]):
            if f["a"] != f["b"] and f["name"].lower() == "nranks":
                sizes.append(f"{f['a']} and {f['b']}")
            elif f["a"] != f["b"]:
                others.append(f"{f['name']} {f['a']} vs {f['b']}")
    for line, m in grep(logs, _OUT_OF_RANGE):
        lines.append(line)
        others.append(f"a rank's position {m['id']} outside the root's share")
    if not lines:
        return []
    where = _on(lines)
    if sizes:
        return [Cause(
            id="bootstrap-world-size-mismatch", title="ranks of one job were started with different world sizes",
            detail=f"the bootstrap root{where} received rank counts {'; '.join(unique(sizes)[:3])}: the ranks "
                   "that share this unique id do not agree on how many ranks the job has (a node launched with "
                   "another --nnodes / --nproc_per_node or WORLD_SIZE, or a rank of another launch reaching this "
                   "root). The root stops, so every rank fails or hangs in init.",
            fix=_LAUNCH_FIX, score=88, hosts=hosts(lines), settings=_settings(logs, "WORLD_SIZE"),
            evidence=evidence(lines),
        )]
    garbage = [o for o in others if any(abs(int(n)) >= _IMPLAUSIBLE for n in re.findall(r"-?[0-9]+", o))]
    detail = f"the bootstrap root{where} received {'; '.join(unique(others)[:3]) or 'a message that disagrees'}"
    detail += " from a rank with the same rank count: " if grep(logs, _INFO) else ": "
    detail += ("a value no rank would send (the message was shorter or laid out otherwise than the root reads "
               "it), so the ranks run different NCCL releases, or a process of another program reached the "
               "root's port." if garbage else
               "the ranks disagree on how the job is split between bootstrap roots (NCCL releases or "
               "NCCL_* settings that differ between the nodes), or a rank of another launch reached this root.")
    return [Cause(
        id="bootstrap-rank-info-mismatch", title="ranks sent NCCL's bootstrap root messages that disagree",
        detail=detail + " The root stops, so every rank fails or hangs in init.",
        fix="Make every node load the same libnccl (compare `NCCL version` per host; check LD_LIBRARY_PATH, the "
            "container image and any pip-installed nvidia-nccl that the framework loads) with the same NCCL_* "
            "environment. " + _LAUNCH_FIX,
        score=86, hosts=hosts(lines), evidence=evidence(lines),
    )]


def bootstrap_root(logs: list[Log]) -> list[Cause]:
    return _claimed_twice(logs) + _mismatch(logs)


def oob_device(logs: list[Log]) -> list[Cause]:
    """NCCL_OOB_NET_ENABLE=1 runs the bootstrap ring over the network plugin's device (an HCA such as
    mlx5_0:1, not an IP interface) that NCCL_OOB_NET_IFNAME names."""
    hits = grep(logs, _OOB)
    if not hits:
        return []
    lines = [line for line, _ in hits]
    values = unique([("^" if m["how"] == "after excluding" else "") + ("=" if m["exact"] else "") + m["value"]
                     for _, m in hits])
    fatal = any(m["then"].startswith("verify") for _, m in hits)
    setting = f"NCCL_OOB_NET_IFNAME={values[0]}"
    devices = unique([d for log in logs for d in (log.nccl.ib_devices if log.nccl else [])])
    return [Cause(
        id="oob-device-not-found", title=f"{setting} matches no network device NCCL found",
        detail=f"{', '.join(f'NCCL_OOB_NET_IFNAME={v}' for v in values)} selects no device of the network "
               f"plugin on {', '.join(hosts(lines)) or 'the host'}"
               + (f" (it found {', '.join(devices[:6])})" if devices else "")
               + (": NCCL refused to start the out-of-band bootstrap, so the job fails in init." if fatal else
                  ": NCCL ignored the setting and ran the out-of-band bootstrap over its first device instead."),
        fix="NCCL_OOB_NET_IFNAME takes NCCL's network device names (the `NET/IB : Using [0]mlx5_0:1/IB ...` list, "
            "e.g. mlx5_0 or =mlx5_0:1), not IP interfaces: set it to a device every node has, up "
            "(`ibv_devinfo` port ACTIVE), or unset NCCL_OOB_NET_ENABLE to bootstrap over TCP (NCCL_SOCKET_IFNAME).",
        score=90 if fatal else 40, hosts=hosts(lines),
        settings=[*(f"NCCL_OOB_NET_IFNAME={v}" for v in values), "NCCL_OOB_NET_ENABLE"], evidence=evidence(lines),
    )]


def bootstrap_accept(logs: list[Log]) -> list[Cause]:
    """The listening side: accept() failing, or a connection that is not one of this communicator's ranks
    (its first bytes are not the job's magic number)."""
    causes = []
    if failed := grep(logs, _ACCEPT):
        lines = [line for line, _ in failed]
        reasons = unique([why.strip() for _, m in failed if (why := m["why"] or m["why2"])])
        text = " ".join(reasons).lower()
        hint = ("the process ran out of file descriptors: the root holds one socket per rank, so a large job "
                "needs a high open-file limit" if "too many open files" in text else
                "accept() was interrupted by a signal, which NCCL before 2.27 treats as fatal" if "interrupted" in text
                else "the listening socket failed")
        causes.append(Cause(
            id="bootstrap-accept-failed", title="NCCL could not accept its ranks' bootstrap connections",
            detail=f"accepting connections on {', '.join(hosts(lines)) or 'the host'} failed "
                   f"({'; '.join(reasons) or 'no reason given'}): {hint}. The ranks cannot finish init.",
            fix="Raise the open-file limit of the job's processes (`ulimit -n`, the launcher's or container's "
                "LimitNOFILE / --ulimit nofile) to well above the rank count; for interrupted accepts run NCCL "
                "2.27 or later on every node.",
            score=80, hosts=hosts(lines), evidence=evidence(lines),
        ))
    if foreign := grep(logs, _FOREIGN):
        lines = [line for line, _ in foreign]
        peers = unique([m["peer"] for _, m in foreign if m["peer"]])
        causes.append(Cause(
            id="bootstrap-foreign-connection", title="a process that is not one of this job's ranks reached its port",
            detail=f"a connection to a listening NCCL socket on {', '.join(hosts(lines)) or 'the host'}"
                   + (f" from {', '.join(peers)}" if peers else "")
                   + " did not carry this communicator's handshake: a rank of another job sharing the address "
                     "and port (the same NCCL_COMM_ID or MASTER_PORT), a process left from an earlier run, a "
                     "different NCCL release, or a port scanner or health check. NCCL drops it; if the job then "
                     "hangs in init, its own rank never arrived.",
            fix="Give each job its own rendezvous port (MASTER_PORT / NCCL_COMM_ID), stop leftover processes on "
                "the nodes, run one NCCL release everywhere, and keep scanners off the nodes' data network.",
            score=60, hosts=hosts(lines), addresses=peers, settings=_settings(logs, "NCCL_COMM_ID"),
            evidence=evidence(lines),
        ))
    return causes


def init_unfinished(logs: list[Log]) -> list[Cause]:
    """A communicator of several ranks whose `Init START` NCCL printed (2.18.3 on) and whose `Init COMPLETE` never
    came: read only when no other rule names a cause, and never for an init that returned an error (that one
    finished, with the error the log names) or printed its `Init timings`. NCCL's bootstrap
    waits for every rank of the communicator without a timeout of its own (seen on NCCL 2.28: one rank of two
    started, the other never, and the first waited until it was killed)."""
    stuck, lines = [], []
    for log in logs:
        started = [c for c in (log.nccl.communicators if log.nccl else [])
                   if c.init_started and not c.init_complete and c.init_seconds is None and c.nranks > 1]
        if not started:
            continue
        # The log read once, not once per communicator: a cut log of a large job holds thousands of them.
        returns, numbered = _returns(log), {line.number: line for line in log.lines}
        for c in started:  # `Init timings` follows only a finished init
            if not _returned(returns, c.line, c.host, c.pid):
                stuck.append(c)
                lines += [numbered[c.line]] if c.line in numbered else []
    if not stuck:
        return []
    lines += [line for line, _ in grep(logs, _BOOTSTRAP_ADDRESS)][:2]
    which = unique([f"rank {c.rank} of {c.nranks}" for c in stuck])
    if any(c.rings or c.connected for c in stuck):
        stage = ("The ranks had found each other (their rings were set up) and then stopped while connecting "
                 "their transports: a path between the nodes that drops what it carries (an MTU mismatch, a "
                 "firewall on NCCL's data ports) or a peer that hangs or died.")
        fix = ("Run `fabnet smoke` on the same hosts (it checks the path's MTU and each pair); read the other "
               "ranks' output for their first error.")
    else:
        stage = ("NCCL's bootstrap waits, without a timeout of its own, until every rank of the communicator has "
                 "reached the root (the rank that made the unique id): a rank did not start, failed before its "
                 "init, or cannot reach the root's bootstrap address.")
        fix = ("Check that every rank of the job started (the launcher's and the scheduler's view) and read the "
               "output of those that never printed `Init START`; check that each node reaches the address on rank "
               "0's `Bootstrap` line (NCCL_SOCKET_IFNAME, a firewall on that port). Give the job a "
               "timeout of its own so a hang ends with an error.")
    return [Cause(
        id="init-unfinished", title=f"NCCL's communicator init started and never finished ({', '.join(which[:3])})",
        # A job of thousands of ranks: the first few are named, the rest counted.
        detail=f"{abridged(which)} printed `Init START` and no `Init COMPLETE`{_on(lines)}. {stage} If the log "
               "was cut short, this is only what it shows.",
        fix=fix, score=45, hosts=hosts(lines), evidence=evidence(lines),
    )]


def _returns(log: Log) -> tuple[int, dict[tuple[str | None, int], int]]:
    """Where `log` shows an init returning an error: the last line of an error that names no process, and the
    last line of each process's (host, pid) own trace; 0 where none."""
    anonymous, traced = 0, dict[tuple[str | None, int], int]()
    for line, m in log.grep(_INIT_RETURNED):
        if m["pid"] is None:
            anonymous = max(anonymous, line.number)
        else:
            key = (m["host"], int(m["pid"]))
            traced[key] = max(traced.get(key, 0), line.number)
    return anonymous, traced


def _returned(returns: tuple[int, dict[tuple[str | None, int], int]], start: int, host: str | None,
              pid: int | None) -> bool:
    """Whether the process that printed `Init START` on line `start` saw its init return an error after it: a
    trace of its own (same host and pid), or an error line that names no process."""
    anonymous, traced = returns
    return anonymous > start or (pid is not None and traced.get((host, pid), 0) > start)
