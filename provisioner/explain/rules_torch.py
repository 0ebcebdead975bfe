"""Causes torch.distributed reports itself: a collective timeout caught by ProcessGroupNCCL's watchdog
(global ranks kept apart from process-group ranks), a watchdog that got stuck, and a rendezvous that
not every rank joined.

Wording read (torch's ProcessGroupNCCL.cpp and c10d store across releases): `[Rank 3] Watchdog caught
collective operation timeout: WorkNCCL(OpType=X, TensorShape=[..], Timeout(ms)=N) ran for N milliseconds`
(1.8, no SeqNum), `WorkNCCL(SeqNum=N, OpType=X, NumelIn=..)` (1.10 on), `[PG 0 Rank 3]` (2.3, 2.4) and
`[PG ID 1 PG GUID 1(name) Rank 3]` (2.5 on); pasted logs wrap the WorkNCCL part onto the next line and
shorten `milliseconds` to `ms`. `ProcessGroupNCCL's watchdog got stuck for N seconds` and `Heartbeat
monitor timed out!` (2.2 on). The store: `Timed out after N seconds waiting for clients. A/B clients
joined.` (2.0 on) and `Timed out initializing process group in store based barrier on rank: R, for key:
K (world_size=B, worker_count=A, timeout=T)` (1.x).
"""

from __future__ import annotations

import re

from provisioner.explain.evidence import evidence, grep, hosts
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.parsers._text import unique

# `[Rank 3]`, `[PG 0 Rank 3]`, `[PG ID 1 PG GUID 1(tp) Rank 3]`: the rank inside the process group.
_PG_RANK = r"\[(?:PG (?:ID )?(?P<pg>[0-9]+)[^\]]*?)?Rank (?P<rank>[0-9]+)\]"
WATCHDOG = re.compile(r"Watchdog caught collective operation timeout")
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
_STUCK = re.compile(r"watchdog got stuck for (?P<s>[0-9]+) seconds|Heartbeat monitor timed out", re.I)
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
    if not found:
        return _stuck(logs)
    mapping = _global_ranks(logs)
    pairs = []  # (global rank or None, process group, rank in the group or None)
    ops, times, lines = [], [], []
    for log, line in found:
        text, wrapped = _with_wrap(log, line)
        lines += wrapped
        who, prefix = _WHO.search(text), _GLOBAL_PREFIX.search(text)
        pg, rank = (who.group("pg"), int(who.group("rank"))) if who else (None, None)
        glob = line.rank if line.rank is not None else int(prefix.group("rank")) if prefix else None
        if glob is None and rank is not None:
            glob = mapping.get((pg, rank))
        pairs.append((glob, pg, rank))
        if work := _WORK.search(text):
            ops.append(work.group("op") + (f" (SeqNum {work.group('seq')})" if work.group("seq") else ""))
            times.append(int(work.group("ms")) / 1000)
    known = sorted({g for g, _, _ in pairs if g is not None})
    # Ranks that printed the watchdog's other lines reached the collective and timed out as well.
    also_lines = [line for line, _ in grep(logs, _ALSO_TIMED_OUT) if line.rank is not None and line.rank not in known]
    also = sorted({line.rank for line in also_lines if line.rank is not None})
    lines += [next(line for line in also_lines if line.rank == rank) for rank in also]
    if known:
        who_text = f"global ranks {', '.join(map(str, known))}"
        differ = unique([f"global {g} is rank {r} of process group {pg or '?'}" for g, pg, r in pairs
                         if g is not None and r is not None and (g != r or pg not in (None, "0"))])
        if differ:
            who_text += f" ({'; '.join(differ)})"
        seen = sorted({line.rank for log in logs for line in log.lines if line.rank is not None} | set(known))
    else:
        groups = unique([pg for _, pg, _ in pairs if pg])
        ranks = sorted({r for _, _, r in pairs if r is not None})
        who_text = (f"process-group ranks {', '.join(map(str, ranks))}" if ranks else "a rank") + (
            f" (process group {', '.join(groups)}; global ranks not in the log)" if groups else "")
        seen = []
    waited = f" waited {max(times):g} s" if times else " waited past the timeout"
    detail = f"{who_text}{waited} in {', '.join(unique(ops)) or 'a collective'} and gave up."
    if also:
        detail += f" Global ranks {', '.join(map(str, also))} timed out too (their watchdog reported it)."
    absent = [r for r in seen if r not in known and r not in also]
    if absent:
        detail += f" Global ranks {', '.join(map(str, absent))} never reported it: they did not reach the collective."
    else:
        detail += (" Every rank in the log reached it and waited: data stopped flowing between them "
                   "(network path, a stalled peer, or a rank missing from this log).")
    detail += _when(logs, lines)
    return [_timeout_cause(detail, lines)]


def _when(logs: list[Log], lines: list[LogLine]) -> str:
    """What the sequence number and the time waited say: a job's first collective is also where NCCL
    connects the ranks (torch creates the communicator lazily), so a timeout there is a connection that
    never came up, not a stall mid-training; a wait far past the timeout means the watchdog itself was
    held up (a hung CUDA call or a blocked host) before it could report."""
    works = [m for line in lines if (m := _WORK.search(line.text))]
    works += [m for log in logs for line in log.lines if line not in lines and (m := _WORK.search(line.text))]
    note = ""
    if works and all(m.group("seq") == "1" for m in works if m.group("seq")) and any(m.group("seq") for m in works):
        note += (" It was the job's first collective (SeqNum 1), where NCCL also connects the ranks: they "
                 "never got a working connection (data-network reachability, NCCL_SOCKET_IFNAME, the IB/RoCE "
                 "setup) or a rank never started.")
    late = [m for m in works if m.group("limit") and int(m.group("ms")) > 2 * int(m.group("limit"))]
    if late:
        m = max(late, key=lambda w: int(w.group("ms")))
        note += (f" The timeout was {int(m.group('limit')) / 1000:g} s but the watchdog reported after "
                 f"{int(m.group('ms')) / 1000:g} s: it was itself held up (a hung CUDA call or driver, or a "
                 "blocked host) long before it could report.")
    return note


def _timeout_cause(detail: str, lines: list[LogLine]) -> Cause:
    return Cause(
        id="collective-timeout", title="a collective timed out (watchdog)", detail=detail,
        fix="Look for the first error before the timeout on every rank; audit the hosts' data path "
            "(link, MTU, PFC/ECN, port counters). Set TORCH_NCCL_TRACE_BUFFER_SIZE to record the stuck "
            "collective next time.",
        score=60, hosts=hosts(lines), evidence=evidence(lines),
    )


def _stuck(logs: list[Log]) -> list[Cause]:
    hits = grep(logs, _STUCK)
    if not hits:
        return []
    seconds = unique([m.group("s") for _, m in hits if m.group("s")])
    return [_timeout_cause(
        "ProcessGroupNCCL's watchdog itself stopped making progress"
        + (f" for {', '.join(seconds)} s" if seconds else "") + ": a collective (or the CUDA call behind it) hung "
        "so long that the heartbeat monitor ended the process.", [line for line, _ in hits])]


def rendezvous_wait(logs: list[Log]) -> list[Cause]:
    hits = grep(logs, _STORE_WAIT)
    if not hits:
        return []
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
