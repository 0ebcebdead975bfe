"""What NCCL's RAS (2.24 on) says is wrong, in an operator's words: processes it declared dead or that stopped
answering (and the communicators left incomplete by them), ranks that reported an NCCL error, and ranks whose
communicator state differs from the others'; a process declared dead that connects again (alive all along: the
network between two nodes dropped for longer than the keep-alive), and nodes the job summary finds running another
number of processes than the rest. Read from the `ncclras` report, text (ras.py) or JSON (ras_json.py), and from
the RAS thread's log lines (ras.py). A straggler, ranks behind on collectives, is read with the other desyncs
(rules_desync).

RAS only sees processes: the host to look at first is the node it names (as NCCL's socket address shows it;
an inventory's aliases turn an address into the host's name).
"""

from __future__ import annotations

from dataclasses import replace

from provisioner.explain import ras_json
from provisioner.explain.evidence import counted, evidence, for_count, listed
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause, Evidence
from provisioner.explain.ras import RasEntry, RasLine, RasRank, outliers, peer_lines, report, table
from provisioner.parsers._text import unique

# A dead or silent process stops every collective it is in: above a watchdog's timeout or a lost connection
# (its symptoms), below a cause that says why a process died (a device fault, a crash a launcher saw).
DEAD_SCORE = 76
SILENT_SCORE = 74
ERROR_SCORE = 78
# A live process cut off for longer than RAS's keep-alive: the network between two nodes is the cause, above the
# dead process it is otherwise read as.
SPLIT_SCORE = 77
# A node running fewer (or more) processes than the others: a rank missing from the start, below what broke mid-job.
OUTLIER_SCORE = 62
STATUS_SCORE = 66
# RAS timeouts with no process named: a hint, not an answer.
TIMEOUT_SCORE = 45

_DEAD_FIX = ("Look at the host named first: did the process exit (its own log's last lines, the launcher's or "
             "scheduler's exit code), did the kernel kill it (`dmesg` on that host: the OOM killer, a GPU Xid), is "
             "the node up and reachable (ping, ssh)? A process alive but unreachable points at its network: the "
             "interface NCCL's bootstrap uses (NCCL_SOCKET_IFNAME), its link and the path between the nodes.")
_SILENT_FIX = ("On the host named, check the process: alive but frozen (`py-spy dump --native --pid PID`, a stop "
               "signal, a stuck driver call, memory pressure), or gone (its log, `dmesg`). If it stays silent RAS "
               "declares it dead after a minute; if it answers again the path between the nodes dropped "
               "packets for a while (link flaps, the interface's error counters).")
_ERROR_FIX = ("Read the NCCL WARN lines of the ranks named (NCCL_DEBUG=WARN or INFO on the next run): they say "
              "which call failed. A rank reporting a remote process error only saw its peer fail: look at the "
              "ranks with other errors first.")
_STATUS_FIX = ("A rank still in INIT is stuck creating the communicator (its bootstrap, its network setup: its "
               "own NCCL INFO lines say where); a rank in FINALIZE or ABORT left the communicator while others "
               "still use it (it ended early or aborted on an error: its own log says why).")


def _who(item: RasRank) -> str:
    parts = [f"rank {item.rank}" if item.rank is not None else f"process {item.pid}" if item.pid else "a process"]
    if item.rank is not None and item.pid:
        parts.append(f"process {item.pid}")
    if item.gpu:
        # `3,4` or `0 (NVML 2)`: the devices are the comma-separated part before any NVML index.
        devices = len(item.gpu.split("(")[0].split(","))
        parts.append(f"{for_count(devices, 'GPU', 'GPUs')} {item.gpu}")
    return " ".join(parts[:1]) + (f" ({', '.join(parts[1:])})" if parts[1:] else "") + (
        f" on {item.node}" if item.node else "")


def _nodes(items: list[RasRank]) -> list[str]:
    return unique([item.node for item in items if item.node])


def _lines(entries: list[RasEntry]) -> list[LogLine]:
    return [line for entry in entries for line in entry.lines]


def _named(processes: list[RasRank], comms: list[RasEntry], others: bool = True) -> list[str]:
    """Each process once, by its rank where an incomplete communicator names it with the same process id; with
    `others`, then the communicators' missing ranks no process line accounts for."""
    ranks = [item for e in comms for item in e.who if item.rank is not None]
    by_pid = {item.pid: item for item in ranks if item.pid}
    out = [_who(by_pid[p.pid]) if p.pid in by_pid else _who(p) for p in processes]
    if others:
        out += [_who(item) for item in ranks if not item.pid or item.pid not in {p.pid for p in processes}]
    return unique(out)


def _incomplete(comms: list[RasEntry]) -> str:
    parts = []
    for entry in comms[:3]:
        ranks = [str(item.rank) for item in entry.who if item.rank is not None]
        n = entry.count or len(ranks)
        which = listed("rank", ranks[:8]) if ranks else counted(n, "rank")
        parts.append(f"communicator {entry.comm} is missing {which}")
    return "; ".join(parts)


def _back(lines: list[RasLine]) -> set[str]:
    """Peers (address and host) that connected again after RAS declared them dead."""
    return {name for r in lines if r.returned and r.peer for name in (r.peer, r.host or r.peer,
                                                                        r.peer.rsplit("<", 1)[0])}


def _split(entries: list[RasEntry], lines: list[RasLine]) -> list[Cause]:
    returned = [r for r in lines if r.returned]
    if not returned:
        return []
    back = _back(lines)
    # (the node that refused, the node cut off) of each line; a refused line is written on the node cut off.
    sides = [((r.host or r.peer) or None, r.line.host) if r.refused else (r.line.host, (r.host or r.peer) or None)
             for r in returned]
    peers = unique([cut_off for _, cut_off in sides if cut_off])
    seen_by = unique([refuser for refuser, _ in sides if refuser])
    before = [r for r in lines if not r.returned and r.peer in back]
    cut = [item for e in entries if e.kind == "DEAD" for item in e.who if item.node in back]
    pairs = unique([f"{refuser or 'a node'} refused {cut_off or 'a process it had declared dead'}"
                    for refuser, cut_off in sides])
    detail = (f"{'; '.join(pairs[:4])}: a process NCCL's RAS had declared dead connected to it again. Only a "
              "process alive all along can (it comes back on the same listening address), so it did not die: the "
              "path between these nodes carried nothing for longer than RAS's keep-alive allows (it warns after "
              "5s, gives up on the connection after 20s and declares the peer dead after 60s without one; "
              "NCCL_RAS_TIMEOUT_FACTOR multiplies each). RAS does not take a dead peer back, and the collectives "
              "between these processes broke while both ran."
              + (f" The report still lists {'; '.join(_who(item) for item in cut[:4])} as dead: it is the "
                 "process cut off, not a dead one." if cut else ""))
    where = unique(peers + seen_by)
    return [Cause(id="ras-network-split",
                  title="the network between " + (f"{', '.join(seen_by[:3])} and " if seen_by else "")
                        + (", ".join(peers[:3]) if peers else "a peer") + " dropped long enough for NCCL's RAS "
                        "to declare a live process dead",
                  detail=detail,
                  fix="Look at the path between the hosts named for the time of the split: link flaps and carrier "
                      "changes on both ends (`ip -s link`, `ethtool -S`, `dmesg`, the switch ports' logs), a bond "
                      "failing over, routes or neighbour entries that changed, a firewall or connection-tracking "
                      "table dropping the connection. RAS uses the interface of NCCL's bootstrap "
                      "(NCCL_SOCKET_IFNAME). Restart the job once the path holds: the process cut off cannot "
                      "rejoin.",
                  score=SPLIT_SCORE, hosts=where, addresses=unique([r.peer for r in returned if r.peer]),
                  settings=["NCCL_RAS_TIMEOUT_FACTOR", "NCCL_SOCKET_IFNAME"],
                  evidence=evidence([r.line for r in returned] + [r.line for r in before]
                                    + [item.line for item in cut]))]


def _lost(entries: list[RasEntry], lines: list[RasLine]) -> list[Cause]:
    back = _back(lines)
    cut = {id(item) for e in entries if e.kind == "DEAD" for item in e.who if item.node in back}
    dead = [replace(e, who=[item for item in e.who if id(item) not in cut],
                    count=(e.count - sum(1 for item in e.who if id(item) in cut)) if e.count else None)
            for e in entries if e.kind == "DEAD"]
    dead = [e for e in dead if e.who or e.count or e.unknown]
    job_missing = [e for e in entries if e.kind == "INCOMPLETE" and e.comm is None]
    comm_missing = [e for e in entries if e.kind == "INCOMPLETE" and e.comm]
    timeouts = [e for e in entries if e.kind == "TIMEOUT"]
    recovered = {r.peer for r in lines if r.recovered}
    dead_lines = [r for r in lines if r.dead and r.peer not in back]
    silent_lines = [r for r in lines if not r.dead and not r.recovered and not r.returned and r.peer not in recovered
                    and r.peer not in back]

    def peers(items: list[RasLine]) -> list[str]:
        return unique([r.host or r.peer for r in items])

    if dead or dead_lines:
        who = [item for e in dead for item in e.who]
        named = unique(_named(who, comm_missing, others=False) + [
            f"process {r.pid} on {r.peer}" if r.pid else r.peer for r in dead_lines])
        unknown = sum(e.unknown for e in dead)
        count = sum(e.count or len(e.who) for e in dead) or len(named)
        where = _nodes(who) + peers(dead_lines)
        detail = (f"NCCL's RAS lost {counted(count, 'job process')} for good: "
                  f"{'; '.join(named[:6]) or 'not named in the report'}"
                  + (f" (and {unknown} it has no details on)" if unknown else "") + ". "
                  + (f"{_incomplete(comm_missing)}. " if comm_missing else "")
                  + "RAS declares a process dead when it cannot reach it for a minute: it exited, was killed or "
                    "frozen, or its node or network went away. Every collective that process is in hangs or "
                    "fails on the other ranks; their timeouts and lost connections are the echo.")
        evidence_lines = _lines(dead) + _lines(comm_missing) + [r.line for r in dead_lines]
        return [Cause(id="ras-process-dead", title=f"NCCL's RAS declared {counted(count, 'process')} "
                      f"dead" + (f" on {', '.join(where[:4])}" if where else ""),
                      detail=detail, fix=_DEAD_FIX, score=DEAD_SCORE, hosts=unique(where),
                      addresses=unique([r.peer for r in dead_lines]), evidence=evidence(evidence_lines))]
    if job_missing or comm_missing or silent_lines:
        who = [item for e in job_missing + comm_missing for item in e.who]
        named = _named([item for e in job_missing for item in e.who], comm_missing)
        named += unique([f"{r.peer} ({r.what})" for r in silent_lines])
        where = _nodes(who) + peers(silent_lines)
        detail = (f"these did not answer NCCL's RAS: {'; '.join(named[:6])}. "
                  + (f"{_incomplete(comm_missing)}. " if comm_missing else "")
                  + "RAS has not declared them dead (it does after a minute without a connection): the process "
                    "is frozen or overloaded, it just exited, or the path to its node drops packets. The "
                    "collectives it is in stall on the other ranks.")
        evidence_lines = _lines(job_missing + comm_missing) + [r.line for r in silent_lines]
        return [Cause(id="ras-process-unresponsive",
                      title="processes stopped answering NCCL's RAS" + (f" on {', '.join(where[:4])}" if where else ""),
                      detail=detail, fix=_SILENT_FIX, score=SILENT_SCORE, hosts=unique(where),
                      addresses=unique([r.peer for r in silent_lines]), evidence=evidence(evidence_lines))]
    if timeouts:
        count = sum(e.count or 0 for e in timeouts)
        return [Cause(id="ras-process-unresponsive", title="NCCL's RAS timed out gathering the communicators' state",
                      detail=f"RAS met {counted(count, 'communication timeout')} while it asked the "
                             "job's processes for their state: some process was slow to answer or did not; the "
                             "report may miss it.",
                      fix="Query again with a longer timeout (`ncclras -t 30 -v`); " + _SILENT_FIX,
                      score=TIMEOUT_SCORE, evidence=evidence(_lines(timeouts)))]
    return []


def _errors(entries: list[RasEntry]) -> list[Cause]:
    found = [e for e in entries if e.kind == "ERROR"]
    if not found:
        return []
    parts, who = [], []
    for entry in found:
        ranks = [item for item in entry.who if item.rank is not None]
        who += ranks
        count = entry.count or len(ranks)
        kind = (f"{(entry.error_kind or 'NCCL').lower()} {for_count(count, 'error', 'errors')} on "
                f"{counted(count, 'rank')}")
        errors = unique([f"{item.error} on {_who(item)}" for item in ranks if item.error])
        groups = [f"{counted(n, 'rank')} reported {g.error}" for n, g in entry.groups if g.error]
        parts.append(f"communicator {entry.comm}: {kind}" + (f" ({'; '.join((errors + groups)[:6])})"
                                                             if errors or groups else ""))
    remote = [item for item in who if item.error and "remote" in item.error.lower()]
    first = [item for item in who if item not in remote] or who
    where = _nodes(first)
    return [Cause(id="ras-rank-error", title="NCCL reported errors on ranks" + (f" on {', '.join(where[:4])}" if where
                                                                                 else ""),
                  detail=f"NCCL's RAS found {'; '.join(parts[:4])}. An initialization error stopped a rank creating "
                         "the communicator; an asynchronous error broke it mid-job.",
                  fix=_ERROR_FIX, score=ERROR_SCORE, hosts=where, evidence=evidence(_lines(found)))]


def _status(entries: list[RasEntry]) -> list[Cause]:
    found = [e for e in entries if e.kind == "MISMATCH" and (
        any(g.status for _, g in e.groups) or any(item.status for item in e.who))]
    if not found:
        return []
    parts, odd = [], []
    for entry in found:
        statuses = [g.status for _, g in entry.groups if g.status] + [i.status for i in entry.who if i.status]
        common = max(((n, g.status) for n, g in entry.groups if g.status), default=(0, None))[1]
        named = [item for item in entry.who if item.status and item.status != common] or [
            item for item in entry.who if item.status]
        odd += named
        state = ", ".join(f"{_who(item)} is {item.status}" for item in named[:6])
        parts.append(f"communicator {entry.comm}: ranks in {', '.join(unique([s for s in statuses if s]))}"
                     + (f" ({state})" if state else ""))
    where = _nodes(odd)
    return [Cause(id="ras-status-mismatch", title="ranks of one communicator are in different states" + (
        f" on {', '.join(where[:4])}" if where else ""),
                  detail=f"NCCL's RAS found {'; '.join(parts[:4])}: the ranks that are not RUNNING hold the others "
                         "up.", fix=_STATUS_FIX, score=STATUS_SCORE, hosts=where,
                  evidence=evidence(_lines(found)))]


def _outliers(logs: list[Log]) -> list[Cause]:
    found = [item for log in logs for item in outliers(log)]
    if not found:
        return []
    parts = [f"node {o.node} runs {counted(o.count, 'NCCL process')}"
             + (f" where the other nodes run {o.usual}" if o.usual is not None else "") if o.node else
             f"{counted(o.processes, 'process')} {for_count(o.processes, 'manages', 'each manage')} "
             f"{counted(o.count, 'GPU')} where most manage {o.usual}" for o in found]
    fewer = [o for o in found if o.usual is None or o.count < o.usual]
    more = [o for o in found if o.usual is not None and o.count > o.usual]
    nodes = unique([o.node for o in found if o.node])
    title = ("fewer" if fewer else "more") + (f" NCCL processes on {', '.join(nodes[:4])} than on the other nodes"
                                              if nodes else " GPUs on some NCCL processes than on the others")
    detail = (f"NCCL's RAS job summary: {'; '.join(parts[:6])}. "
              + ("Fewer than the others: a rank there never started or exited before NCCL set up (the launcher's "
                 "log and that rank's own say why), or the node has fewer GPUs to give (one fallen off the bus or "
                 "hidden: CUDA_VISIBLE_DEVICES, the scheduler's GPU count). " if fewer else "")
              + ("More than the others: a rank launched twice there, or another job's NCCL processes joined this "
                 "one's RAS. " if more else "")
              + "Where every node should run the same, collectives that need the ranks not there wait for them.")
    return [Cause(id="ras-node-outlier", title=title, detail=detail,
                  fix="On the node named, count the job's processes and GPUs (`nvidia-smi`: every GPU listed, and "
                      "one process on each; `dmesg` for an Xid or a GPU fallen off the bus) and compare the "
                      "launcher's request per node (Slurm --ntasks-per-node and --gpus-per-node, torchrun "
                      "--nproc-per-node) with the other nodes.",
                  score=OUTLIER_SCORE, hosts=nodes, settings=["CUDA_VISIBLE_DEVICES"],
                  evidence=evidence([o.line for o in found]))]


def _entries(log: Log) -> list[RasEntry]:
    return report(log) + ras_json.entries(log)


def ras(logs: list[Log]) -> list[Cause]:
    entries = [entry for log in logs for entry in _entries(log)]
    lines = [line for log in logs for line in peer_lines(log)]
    found = _outliers(logs)
    if not entries and not lines:
        return found
    return _split(entries, lines) + _lost(entries, lines) + _errors(entries) + _status(entries) + found


# Causes a healthy report speaks to: the job hung or timed out, yet RAS saw every process.
_HUNG = {"collective-timeout", "watchdog-hung"}


def fold(causes: list[Cause], logs: list[Log]) -> list[Cause]:
    """A report that saw every rank running with no error and no mismatch beside a timeout: no process died
    and none stopped launching, which a timeout's reader needs to know; said on that cause, not as one."""
    rows = [row for log in logs for row in table(log)]
    # A JSON report has no table: its communicators' ranks, every one answering, stand for it.
    docs = [doc for log in logs for doc in ras_json.documents(log)]
    if (not rows and not docs) or any(status != "RUNNING" or errors != "OK" for _, _, status, errors in rows):
        return causes
    if any(_entries(log) or ras_json.op_counts(log) for log in logs) or any(c.id.startswith("ras-") for c in causes):
        return causes
    ranks = sum(n for _, n, _, _ in rows) or max(
        (len(comm.get("ranks") or []) for doc in docs for comm in doc.data["communicators"]), default=0)
    note = (f" NCCL's RAS report saw all {ranks} ranks running and reachable, with no errors and the same "
            "operation counts: no process had died and none had stopped launching collectives when it was "
            "taken, so a hang then was inside the collective (a transfer between the nodes or a GPU), not a "
            "missing rank.")
    line = rows[0][0] if rows else docs[0].line("communicators")
    item = Evidence(file=line.file, line=line.number, text=line.text)
    return [c.model_copy(update={"detail": c.detail + note, "evidence": [*c.evidence, item]})
            if c.id in _HUNG else c for c in causes]
