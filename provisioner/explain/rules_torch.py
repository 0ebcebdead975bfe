"""Causes torch.distributed reports itself: a collective timeout caught by ProcessGroupNCCL's watchdog
(global ranks kept apart from process-group ranks), a watchdog thread that hung (the heartbeat monitor ended
the process: not a collective timing out), and a rendezvous that not every rank joined.

Wording read (torch's ProcessGroupNCCL.cpp and c10d store across releases): `[Rank 3] Watchdog caught
collective operation timeout: WorkNCCL(OpType=X, TensorShape=[..], Timeout(ms)=N) ran for N milliseconds`
(1.8, no SeqNum), `WorkNCCL(SeqNum=N, OpType=X, NumelIn=..)` (1.10 on), `[PG 0 Rank 3]` (2.3, 2.4) and
`[PG ID 1 PG GUID 1(name) Rank 3]` (2.5 on); pasted logs wrap the WorkNCCL part onto the next line and
shorten `milliseconds` to `ms`. The heartbeat monitor: `Heartbeat monitor timed out! Process will be
terminated after dumping debug info. workMetaList_.size()=N` (2.2 to 2.5), `ProcessGroupNCCL's watchdog got
stuck for N seconds without making progress in monitoring enqueued collectives` (2.2 on), `First PG on this
rank that detected no heartbeat of its watchdog.` (2.4, 2.5), `Terminating the process after attempting to dump
debug info, due to ProcessGroupNCCL watchdog hang.` (2.6 on) and `ProcessGroupNCCL monitor thread is disabled,
but would have terminated the process ...` (monitoring off). Timeout progress lines (`Timeout at NCCL work:
...`) are read in torch_status. The store: `Timed out after N seconds waiting for clients. A/B clients
joined.` (2.0 on) and `Timed out initializing process group in store based barrier on rank: R, for key: K
(world_size=B, worker_count=A, timeout=T)` (1.x).
"""

from __future__ import annotations

import re

from provisioner.explain.evidence import counted, evidence, for_count, grep, hosts, listed, multi_node
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.explain.torch_status import PG_RANK as _PG_RANK
from provisioner.explain.torch_status import Status, behind, named, signallers, statuses, stuck_at
from provisioner.parsers._text import unique

WATCHDOG = re.compile(r"Watchdog caught collective operation timeout")
# torch quotes why it aborted a communicator (1.10 on), naming the rank the communicator was on: for the
# default process group, the global rank.
ABORTED = re.compile(r"NCCL communicator was aborted on rank (?P<rank>[0-9]+)\.\s*Original reason for failure "
                     r"was:(?P<why>.*)")
_WHO = re.compile(_PG_RANK)
# torch's own c10 prefix names the global rank: `[rank3]:` (parsed as the line's task) or `[rank3] ` in pastes.
_GLOBAL_PREFIX = re.compile(r"\[rank(?P<rank>[0-9]+)\]")
_WORK = re.compile(r"WorkNCCL\((?:SeqNum=(?P<seq>[0-9]+),\s*)?OpType=(?P<op>\w+).*?"
                   r"(?:Timeout\(ms\)=(?P<limit>[0-9]+))?\)\s*ran for\s*(?P<ms>[0-9]+)\s*(?:milliseconds|ms)\b")
# What a rank whose watchdog caught the timeout (or got stuck on it) prints besides the `Watchdog caught` line:
# it reached the collective too, even where its own `Watchdog caught` line is not in the log (1.x to 2.x).
_ALSO_TIMED_OUT = re.compile(r"Some NCCL operations have failed or timed out|To avoid data inconsistency, we are "
                             r"taking the entire process down|Exception \(either an error or timeout\) detected by "
                             r"watchdog|Timeout at NCCL work|watchdog got stuck for|Heartbeat monitor timed out")
_HUNG = re.compile(r"watchdog got stuck for (?P<s>[0-9]+) seconds|Heartbeat monitor timed out|detected no heartbeat "
                   r"of its watchdog|due to ProcessGroupNCCL watchdog hang|monitor thread is disabled, but would have",
                   re.I)
_GLOBAL_RANK = re.compile(_PG_RANK + r".*?\bglobal rank:?\s*(?P<global>[0-9]+)")
_STORE_WAIT = re.compile(r"Timed out after (?P<s>[0-9.]+) seconds waiting for clients\.\s*(?P<have>[0-9]+)/"
                         r"(?P<want>[0-9]+) clients joined"
                         r"|store based barrier.*?world_size=(?P<want2>[0-9]+), worker_count=(?P<have2>[0-9]+), "
                         r"timeout=(?P<s2>[^)]+)", re.I)


def _global_ranks(logs: list[Log]) -> dict[tuple[str | None, int], int]:
    """(process group, rank in it) -> global rank, from torch's `... global rank: G` init lines."""
    return {(m.group("pg"), int(m.group("rank"))): int(m.group("global")) for _, m in grep(logs, _GLOBAL_RANK)}


def _with_wrap(log: Log, line: LogLine) -> tuple[str, list[LogLine]]:
    """The watchdog line and the (up to two) lines a terminal or a paste wrapped its WorkNCCL part onto."""
    lines = [line]
    for number in (line.number + 1, line.number + 2):
        if _WORK.search(" ".join(ln.text for ln in lines)) or (after := log.line(number)) is None:
            break
        if WATCHDOG.search(after.text) or not re.match(r"WorkNCCL|before timing|\S*\s*ran for", after.text):
            break
        lines.append(after)
    return " ".join(ln.text for ln in lines), lines


def watchdog(logs: list[Log]) -> list[Cause]:
    found = [(log, line) for log in logs for line, _ in log.grep(WATCHDOG)]
    progress = statuses(logs)
    if not found:
        return _from_progress(logs, progress)
    mapping = _global_ranks(logs)
    pairs = []  # (global rank or None, process group, rank in the group or None)
    from_abort = []  # whether each pair's global rank is only the rank an aborted communicator names
    ops: list[tuple[str, int | None, int]] = []  # (operation, SeqNum, milliseconds it ran)
    times, lines = [], []
    for log, line in found:
        text, wrapped = _with_wrap(log, line)
        lines += wrapped
        who, prefix = _WHO.search(text), _GLOBAL_PREFIX.search(text)
        pg, rank = (who.group("pg"), int(who.group("rank"))) if who else (None, None)
        glob = line.rank if line.rank is not None else int(prefix.group("rank")) if prefix else None
        if glob is None and rank is not None:
            glob = mapping.get((pg, rank))
        aborted = ABORTED.search(text)
        from_abort.append(glob is None and aborted is not None and pg in (None, "0"))
        if from_abort[-1] and aborted:
            glob = int(aborted["rank"])
        pairs.append((glob, pg, rank))
        if work := _WORK.search(text):
            ops.append((work.group("op"), int(work.group("seq")) if work.group("seq") else None, int(work.group("ms"))))
            times.append(int(work.group("ms")) / 1000)
    if any(g is None for g, _, _ in pairs):
        # An aborted communicator's rank is a global rank only as far as the others are: where some line names
        # a process-group rank alone, every rank is worded as one.
        pairs = [(None if abort else g, pg, r) for (g, pg, r), abort in zip(pairs, from_abort, strict=True)]
    known = sorted({g for g, _, _ in pairs if g is not None})
    # A rank whose own lines hold an NCCL error and no word of a timeout failed on that error (often a peer's
    # abort after the timeout): its watchdog's generic lines (`Some NCCL operations have failed or timed out`)
    # do not make it one that timed out.
    timed = {line.rank for line, _ in grep(logs, _TIMEOUT_SAID) if line.rank is not None}
    failed_lines = [line for line, _ in grep(logs, _NCCL_FAILED)
                    if line.rank is not None and line.rank not in known and line.rank not in timed]
    failed = sorted({line.rank for line in failed_lines if line.rank is not None})
    # Ranks that printed the watchdog's other lines reached the collective and timed out as well.
    also_lines = [line for line, _ in grep(logs, _ALSO_TIMED_OUT)
                  if line.rank is not None and line.rank not in known and line.rank not in failed]
    also = sorted({line.rank for line in also_lines if line.rank is not None})
    lines += [next(line for line in also_lines if line.rank == rank) for rank in also]
    lines += [next(line for line in failed_lines if line.rank == rank) for rank in failed]
    if known:
        who_text = listed("global rank", known)
        differ = unique([f"global {g} is rank {r} of process group {pg or '?'}" for g, pg, r in pairs
                         if g is not None and r is not None and (g != r or pg not in (None, "0"))])
        if differ:
            who_text += f" ({'; '.join(differ)})"
        seen = sorted({line.rank for log in logs for line in log.lines if line.rank is not None} | set(known))
    else:
        groups = unique([pg for _, pg, _ in pairs if pg])
        ranks = sorted({r for _, _, r in pairs if r is not None})
        who_text = (listed("process-group rank", ranks) if ranks else "a rank") + (
            f" (process group {', '.join(groups)}; global ranks not in the log)" if groups else "")
        seen = []
    waited = f" waited {max(times):g} s" if times else " waited past the timeout"
    detail = f"{who_text}{waited} in {_operations(ops) or 'a collective'} and gave up."
    if also:
        detail += (f" {listed('Global rank', also)} timed out too "
                   f"({for_count(len(also), 'its watchdog', 'their watchdogs')} reported it).")
    if failed:
        detail += (f" {listed('Global rank', failed)} failed on an NCCL error instead, not a timeout (a peer's "
                   "abort after the timeout ends the others' collectives so).")
    # A rank whose progress line shows it enqueued the collective reached it, whatever else it printed.
    at = stuck_at(progress)
    reached = {s.glob for s in progress if s.pg in at and s.enqueued is not None and s.enqueued >= at[s.pg]}
    absent = [r for r in seen if r not in known and r not in also and r not in failed and r not in reached]
    p2p = not absent and _p2p_only(logs)
    alone = len(set(seen) | set(also) | set(failed)) == 1 or (not known and len({(pg, r) for _, pg, r in pairs}) == 1)
    if absent:
        detail += (f" {listed('Global rank', absent)} never reported it: {for_count(len(absent), 'it', 'they')} did "
                   "not reach the collective.")
    elif alone and not p2p:
        detail += (" No other rank's output is in the log, so it cannot say whether the others reached the "
                   "collective: data stopped flowing to this rank (network path, a stalled peer) or a peer never "
                   "called it; the other ranks' logs tell which.")
    elif p2p:
        detail += (" Every rank in the log reached it and waited, and they are on one node, connected GPU to GPU "
                   "(via P2P): no network carries this collective." + _P2P_NOTE)
    else:
        detail += (" Every rank in the log reached it and waited: data stopped flowing between them "
                   "(network path, a stalled peer, or a rank missing from this log).")
    detail += _when(logs, lines, p2p) + _progress_note(progress)
    return [_timeout_cause(detail, lines, p2p=p2p)]


def _operations(works: list[tuple[str, int | None, int]]) -> str:
    """The operations that timed out, each once: `ALLREDUCE (SeqNum 7)`, or for one a rank reported under several
    sequence numbers (one per process group, or one per call the watchdog found overdue at once), their count and
    range with the one that had run longest: it was the first past the timeout."""
    out = []
    for op in unique([name for name, _, _ in works]):
        mine = [(seq, ms) for name, seq, ms in works if name == op and seq is not None]
        seqs = sorted({seq for seq, _ in mine})
        if len(seqs) <= 1:
            out.append(op + (f" (SeqNum {seqs[0]})" if seqs else ""))
            continue
        first = max(mine, key=lambda work: work[1])[0]  # max keeps the first reported of equal runs
        out.append(f"{counted(len(seqs), op + ' operation')} (SeqNum {seqs[0]} to {seqs[-1]}; "
                   f"SeqNum {first} timed out first)")
    return ", ".join(out)


def _progress_note(items: list[Status]) -> str:
    """Who saw the timeout first, and whether the ranks that reported their progress had all called the
    collective (then it stalled inside NCCL or the network) or not (that is the desync rule's)."""
    note = ""
    if first := signallers(items):
        note += f" The timeout was first detected on {named(first)}, which signalled the others to dump."
    at = stuck_at(items)
    inside = [s for s in items if s.pg in at and s.enqueued is not None and s.completed is not None
              and s.enqueued >= at[s.pg] > s.completed]
    if inside and not behind(items):
        groups = ", ".join(f"#{seq} of process group {pg or '?'}" for pg, seq in sorted(at.items(), key=str))
        note += (f" Every rank that reported its progress ({named([s.who for s in inside])}) had "
                 f"enqueued collective {groups} and none had completed it: the collective started everywhere "
                 "and stalled inside NCCL or the network, not in the application.")
    return note


# Words only a timeout prints besides `Watchdog caught`: 2.2 to 2.5's own progress line, and the dump signals.
_TIMEOUT_SAID = re.compile(r"Timeout at NCCL work|collective timeout|timeout signal|global timeout", re.I)
# An error of NCCL's that the watchdog found on a collective (torch's async exception, NCCL's result codes).
_NCCL_FAILED = re.compile(r"raised the following async exception|NCCL error\b|ncclRemoteError|ncclSystemError|"
                          r"ncclInternalError|ncclUnhandledCudaError|ncclInvalidUsage|ncclInvalidArgument")


def _from_progress(logs: list[Log], items: list[Status]) -> list[Cause]:
    """A timeout known only from the progress lines (the `Watchdog caught` line is not in the log)."""
    if not items:
        return []
    # From 2.6 torch's watchdog prints `failure detected by watchdog at work sequence id` on any exception of a
    # collective, a timeout's or an NCCL error's (2.4 and 2.5 said so: `Exception (either an error or timeout)`).
    # Beside an NCCL error and with no word of a timeout, that error is what failed: the rules that read it
    # name it (a peer that died reads `remote process exited`), and no timeout is claimed.
    if not any(_TIMEOUT_SAID.search(s.line.text) for s in items) and grep(logs, _NCCL_FAILED):
        return []
    at = stuck_at(items)
    timed = unique([s.who for s in items if s.seq is not None or s.local]) or signallers(items)
    where = ", ".join(f"collective #{seq} of process group {pg or '?'}" for pg, seq in sorted(at.items(), key=str))
    detail = (f"{named(timed) or 'a rank'} timed out" + (f" in {where}" if where else "") + ".")
    idle = unique([s.who for s in items if s.pg not in at and s.enqueued is not None and s.enqueued == s.completed])
    if idle:
        detail += (f" {named(idle)} had completed every collective {for_count(len(idle), 'it', 'they')} had "
                   f"enqueued in {for_count(len(idle), 'its process group: it was', 'their process groups: they were')}"
                   " not waiting there when the timeout was signalled.")
    lines = [s.line for s in items]
    return [_timeout_cause(detail + _progress_note(items), lines)]


def _when(logs: list[Log], lines: list[LogLine], p2p: bool = False) -> str:
    """What the sequence number and the time waited say: a job's first collective is also where NCCL
    connects the ranks (torch creates the communicator lazily), so a timeout there is a connection that
    never came up, not a stall mid-training; a wait far past the timeout means the watchdog itself was
    held up (a hung CUDA call or a blocked host) before it could report."""
    works = [m for line in lines if (m := _WORK.search(line.text))]
    works += [m for log in logs for line in log.lines if line not in lines and (m := _WORK.search(line.text))]
    note = ""
    if works and all(m.group("seq") == "1" for m in works if m.group("seq")) and any(m.group("seq") for m in works):
        note += (" It was the job's first collective (SeqNum 1): the ranks set up their P2P channels, and the "
                 "first data over them never arrived." if p2p else
                 " It was the job's first collective (SeqNum 1), where NCCL also connects the ranks: they "
                 "never got a working connection (data-network reachability, NCCL_SOCKET_IFNAME, the IB/RoCE "
                 "setup) or a rank never started.")
    late = [m for m in works if m.group("limit") and int(m.group("ms")) > 2 * int(m.group("limit"))]
    if late:
        m = max(late, key=lambda w: int(w.group("ms")))
        note += (f" The timeout was {int(m.group('limit')) / 1000:g} s but the watchdog reported after "
                 f"{int(m.group('ms')) / 1000:g} s: it was itself held up (a hung CUDA call or driver, or a "
                 "blocked host) long before it could report.")
    return note


_P2P_NOTE = (" A peer-to-peer path that does not deliver (PCIe ACS or the IOMMU redirecting peer traffic, GPUs or "
             "a driver without working P2P) hangs it without an error.")
_TRACE = "Set TORCH_NCCL_TRACE_BUFFER_SIZE to record the stuck collective next time."
_P2P_FIX = ("Rerun with NCCL_P2P_DISABLE=1: if the hang goes, P2P between the GPUs is broken on this node. Check "
            "`nvidia-smi topo -p2p r` and `lspci -vvv | grep ACSCtl` (ACS on the PCIe bridges redirects peer "
            "traffic: disable it, or boot with iommu=pt / VT-d off), and the driver's P2P support for these GPUs; "
            "NCCL_P2P_LEVEL limits P2P to the paths that work meanwhile.")
# NCCL's connection lines (`Channel 00/0 : 0[0] -> 1[1] via P2P/IPC`, `P2P/CUMEM`, `P2P/direct pointer`; `Ring 00 :
# 0[0] -> 1[1] via P2P/IPC` before 2.7) and one through the network (`via NET/...`).
_VIA_P2P = re.compile(r"\bvia P2P/")
_VIA_NET = re.compile(r"\bvia NET/")


def _p2p_only(logs: list[Log]) -> bool:
    """Whether the ranks were connected on one node through GPU peer-to-peer paths only."""
    return bool(grep(logs, _VIA_P2P)) and not grep(logs, _VIA_NET) and not multi_node(logs)


def _timeout_cause(detail: str, lines: list[LogLine], p2p: bool = False) -> Cause:
    return Cause(
        id="collective-timeout", title="a collective timed out (watchdog)", detail=detail,
        fix=_P2P_FIX if p2p else (
            "Look for the first error before the timeout on every rank; audit the hosts' data path "
            "(link, MTU, PFC/ECN, port counters). " + _TRACE),
        score=60, hosts=hosts(lines), settings=["NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"] if p2p else [],
        evidence=evidence(lines),
    )


def deferred(timeout: Cause, reason: Cause) -> Cause:
    """The timeout once another cause (pcie-p2p-hang) names why it hung: its advice points there, not repeats it."""
    named = f"the cause \"{reason.title}\" ({reason.id})"
    return timeout.model_copy(update={
        "detail": timeout.detail.replace(_P2P_NOTE, f" Why such a path hangs: {named}."),
        "fix": f"See {named}: what to check on the node and how to confirm it first. {_TRACE}",
        "settings": [],
    })


def _unwrapped(logs: list[Log], line: LogLine) -> LogLine:
    if line.rank is not None or _WHO.search(line.text):
        return line
    log = next(log for log in logs if log.name == line.file)
    before = log.line(line.number - 1)
    return before if before is not None and before.rank is not None else line


def watchdog_hung(logs: list[Log]) -> list[Cause]:
    """The heartbeat monitor ended the process because the watchdog thread stopped making progress: the thread
    that checks collectives was itself blocked (in a CUDA or NCCL call, or waiting for the GIL), which a
    collective timeout does not do."""
    hits = grep(logs, _HUNG)
    if not hits:
        return []
    lines = [line for line, _ in hits]
    seconds = unique([m["s"] for _, m in hits if m["s"]])
    # A terminal that wrapped the message leaves its rank on the line before.
    lines = [_unwrapped(logs, line) for line in lines]
    ranks = unique([f"rank {line.rank}" for line in lines if line.rank is not None]
                   or [f"rank {m['rank']} of process group {m['pg'] or '?'}" for line in lines
                       if (m := _WHO.search(line.text))])
    ended = for_count(len(ranks), "its heartbeat monitor ended the process",
                      "their heartbeat monitors ended the processes")
    detail = (f"ProcessGroupNCCL's watchdog {for_count(len(ranks), 'thread', 'threads')} on "
              f"{named(ranks) or 'a rank'} stopped making progress"
              + (f" for {', '.join(seconds)} s" if seconds else "")
              + f" and {ended}. " +
              "This is not a collective running past its timeout (that the watchdog would report): the watchdog "
              "itself was blocked, typically in a CUDA or NCCL call on a GPU that stopped responding (a hung "
              "kernel, an Xid error, a driver fault), or by another thread holding the GIL inside a CUDA call.")
    if grep(logs, WATCHDOG):
        detail += " A collective timeout is reported too: that came first, and the watchdog hung while handling it."
    return [Cause(
        id="watchdog-hung", title="the NCCL watchdog thread hung (heartbeat monitor)", detail=detail,
        fix="On the hosts named, check the GPUs first: `dmesg` / journal for Xid errors, `nvidia-smi` answering, "
            "processes stuck in D state; take the stuck process's stacks before it is killed (`py-spy dump "
            "--native --pid PID`). Keep the flight recorder on (TORCH_NCCL_TRACE_BUFFER_SIZE) so the dump says "
            "which collective was in flight; raise TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC only if the stacks show "
            "the thread was making progress.",
        score=58, hosts=hosts(lines), settings=["TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "TORCH_NCCL_TRACE_BUFFER_SIZE"],
        evidence=evidence(lines),
    )]

# A rank waiting in the store for the NCCL id rank 0 (or a group's root) posts when it creates the
# communicator (torch 2.2 on): `[5] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via
# c10d key-value store by key '0', but store->get('0') got error: Socket Timeout`.
_UNIQUE_ID = re.compile(r"\[(?P<rank>[0-9]+)\] is setting up NCCL communicator and retrieving ncclUniqueId from "
                        r"\[(?P<root>[0-9]+)\] via c10d key-value store.*?got error:\s*(?P<why>[^*]+)")


def _unique_id_wait(logs: list[Log]) -> list[Cause]:
    hits = grep(logs, _UNIQUE_ID)
    if not hits:
        return []
    ranks = unique([m["rank"] for _, m in hits])
    roots = unique([m["root"] for _, m in hits])
    lines = [line for line, _ in hits]
    return [Cause(
        id="rendezvous-incomplete",
        title=f"{listed('rank', roots)} never posted {for_count(len(roots), 'its', 'their')} NCCL id to the store",
        detail=f"{listed('rank', ranks)} waited in torch's store for the NCCL id of {listed('rank', roots)} and "
               f"gave up ({hits[0][1]['why'].strip()}): {for_count(len(roots), 'that rank', 'those ranks')} never "
               f"reached the same collective or group creation ({for_count(len(roots), 'it', 'they')} failed or "
               "hung earlier, or took another code path), or lost "
               f"{for_count(len(roots), 'its', 'their')} store connection.",
        fix=f"Read the output of {listed('rank', roots)} for {for_count(len(roots), 'its', 'their')} first error; "
            "check that every rank creates the "
            "same process groups in the same order, and that all reach the master address (MASTER_ADDR) "
            "without drops.",
        score=55, hosts=hosts(lines), evidence=evidence(lines),
    )]


def rendezvous_wait(logs: list[Log]) -> list[Cause]:
    hits = grep(logs, _STORE_WAIT)
    if not hits:
        return _unique_id_wait(logs)
    _, m = hits[0]
    have, want = m.group("have") or m.group("have2"), m.group("want") or m.group("want2")
    wait = f"{m.group('s')} s" if m.group("s") else (m.group("s2") or "").strip()
    lines = [line for line, _ in hits]
    return [Cause(
        id="rendezvous-incomplete", title="not every rank joined the rendezvous",
        detail=f"only {have} of {want} ranks reached the store within {wait}: "
               "the missing ones could not connect (see the connection errors) or never started.",
        fix="Check the hosts whose ranks are missing: that the job started there and that they reach the "
            "master address on the data network.",
        score=55, hosts=hosts(lines), evidence=evidence(lines),
    )]
