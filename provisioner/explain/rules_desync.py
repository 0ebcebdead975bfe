"""Ranks out of step: not every rank called the same collective, so the ones that did wait until a timeout.
The network is not the first suspect: the ranks behind are (stuck before the collective, or running another
sequence of collectives), and the logs often name them.

Wording read: torch's progress lines (torch_status: a rank whose last enqueued collective is older than the one
its group timed out in never called it); ProcessGroupWrapper (TORCH_DISTRIBUTED_DEBUG=DETAIL) `Detected mismatch
between collectives on ranks. Rank N is running inconsistent collective: CollectiveFingerPrint(OpType=X, ...)`
(1.10 to 1.12), `Rank A is running collective: CollectiveFingerPrint(SequenceNumber=S, OpType=X, ...), but Rank B
is running collective: CollectiveFingerPrint(...)` with `Collectives differ in the following aspects: ...` (1.13
on); the desync report (TORCH_NCCL_DESYNC_DEBUG, TraceUtils.h): `[R] Timeout at collective: X, #S`, `ranks [..]
are the lagging ranks that caused this timeout. They never joined any collectives`, `[..] joined but didn't
finish collective #S (count from 1)`, `[..] finished collective #S, but didn't join collective #S+1`; NCCL's
`Mismatched collective detected, please check your collective calls at and around rank N` (2.4, 2.5) and its
RAS report `Communicator ranks have different collective operation counts` (2.24) / `different X operation
counts` (2.26 on), `N ranks have launched up to operation K`, `N ranks have not launched any operations`, `Rank
R -- GPU G managed by process P on node H` and `Rank R has launched up to operation K -- GPU ...`; the same report
as JSON (`ncclras -f json`, 2.28.7 on, read by ras_json) gives every rank's count of each operation.
"""

from __future__ import annotations

import re

from provisioner.explain import ras_json
from provisioner.explain.evidence import counted, evidence, for_count, grep, hosts, listed
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.explain.torch_status import behind, statuses
from provisioner.parsers._text import unique

_FINGERPRINT = r"CollectiveFingerPrint\((?:SequenceNumber=(?P<{s}>[0-9]+),?\s*)?(?:OpType=)?(?P<{o}>\w+)"
_WRAPPER = re.compile(r"Detected mismatch between collectives on ranks\.\s*Rank (?P<a>[0-9]+) is running "
                      r"(?:inconsistent )?collective:\s*" + _FINGERPRINT.format(s="sa", o="oa")
                      + r"(?:.*?but Rank (?P<b>[0-9]+) is running collective:\s*(?:"
                      + _FINGERPRINT.format(s="sb", o="ob") + r"|(?P<ob2>\w+)))?"
                      r"(?:.*?Collectives differ in the following aspects:\s*(?P<diff>.+))?")
_NCCL_AROUND = re.compile(r"Mismatched collective detected, please check your collective calls at and around "
                          r"rank (?P<rank>[0-9]+)")
_REPORT = re.compile(
    r"ranks \[(?P<missing>[0-9, ]+)\] are the lagging ranks that caused this timeout"
    r"|\[(?P<joined>[0-9, ]+)\] joined but didn't finish collective #(?P<seq>[0-9]+)"
    r"|\[(?P<finished>[0-9, ]+)\] finished collective #(?P<seq2>[0-9]+), but didn't join collective #(?P<next>[0-9]+)"
    r"|\[(?P<me>[0-9]+)\] Timeout at collective: (?P<col>\w+), #(?P<seq3>[0-9]+)")
_RAS_HEAD = re.compile(r"Communicator ranks have different (?:(?P<op>\w+) )?operation counts")
_RAS_COUNT = re.compile(r"^(?P<n>[0-9]+) ranks have (?:launched up to operation (?P<k>[0-9]+)|not launched any)")
_RAS_RANK = re.compile(r"^Rank (?P<rank>[0-9]+) (?:has launched up to operation (?P<k>[0-9]+) |(?P<none>has not "
                       r"launched any operations) )?-- (?:GPU (?P<gpu>\S+) managed by process (?P<pid>[0-9]+) on node "
                       r"(?P<node>\S+)|\[process information not found\])")


def _wrapper(logs: list[Log]) -> tuple[list[str], list[LogLine]]:
    found, lines = [], []
    for line, m in grep(logs, _WRAPPER):
        lines.append(line)
        a = f"rank {m['a']} is at {m['oa']}" + (f" (sequence number {m['sa']})" if m["sa"] else "")
        if m["b"]:
            b = f"rank {m['b']} is at {m['ob'] or m['ob2']}" + (f" (sequence number {m['sb']})" if m["sb"] else "")
            a += f" while {b}"
        if m["diff"]:
            a += f"; they differ in: {m['diff'].strip().rstrip('.')}"
        found.append(a)
    return found, lines


def _ranks(text: str) -> str:
    """The ranks of a list the desync report prints (`0, 3`), worded for how many there are."""
    return listed("rank", [r.strip() for r in text.split(",") if r.strip()])


def _behind(count: int) -> str:
    """What the ranks of a count that have not launched the top operation are."""
    return for_count(count, "so it is the one behind", "so they are the ones behind")


def _report(logs: list[Log]) -> tuple[list[str], list[LogLine]]:
    found, lines = [], []
    for line, m in grep(logs, _REPORT):
        lines.append(line)
        if m["missing"]:
            found.append(f"{_ranks(m['missing'])} never joined any collective (torch's desync report)")
        elif m["joined"]:
            found.append(f"{_ranks(m['joined'])} joined collective #{m['seq']} but did not finish it")
        elif m["finished"]:
            found.append(f"{_ranks(m['finished'])} finished collective #{m['seq2']} but never joined #{m['next']}")
    return found, lines


def _ras(log: Log) -> tuple[list[str], list[LogLine], list[str]]:
    """NCCL RAS's mismatch block: groups of ranks by how many operations they launched; the ranks it lists by
    name are the minority (the outliers). Only the nodes of ranks behind are returned: the ranks ahead wait for
    the others, and are not where to look."""
    out, lines, nodes = [], [], []
    for head, found in log.grep(_RAS_HEAD):
        counts: dict[int, list[str]] = {}
        placed: list[tuple[int, str]] = []  # (operation, node) of each rank named with its node
        majority: list[tuple[int, int]] = []  # (ranks, operation) of groups given only as a count
        current: int | None = None
        lines.append(head)
        number = head.number + 1
        while (line := log.line(number)) is not None and (
                c := _RAS_COUNT.match(line.text) or _RAS_RANK.match(line.text)):
            lines.append(line)
            if c.re is _RAS_COUNT:
                current = int(c["k"] or 0)
                majority.append((int(c["n"]), current))
            else:
                k = int(c["k"]) if c["k"] else 0 if c["none"] else current
                if k is not None:
                    where = f" on {c['node']}" if c["node"] else ""
                    counts.setdefault(k, []).append(f"{c['rank']}{where}")
                    if c["node"]:
                        placed.append((k, c["node"]))
            number += 1
        if not counts and not majority:
            continue
        top = max([k for k in counts] + [k for _, k in majority])
        parts = [f"{counted(n, 'rank')} up to operation {k}" for n, k in majority]
        parts += [f"{listed('rank', r)} up to operation {k}"
                  for k, r in sorted(counts.items()) if not any(k == kk for _, kk in majority)]
        named_behind = [r for k, rs in counts.items() if k < top for r in rs]
        nodes += [node for k, node in placed if k < top]
        op = f"{found['op']} " if found["op"] else ""
        text = f"NCCL's RAS found ranks at different {op}operation counts ({'; '.join(parts)})"
        if named_behind:
            text += f": behind {for_count(len(named_behind), 'is', 'are')} {listed('rank', named_behind)}"
        elif (ahead := counts.get(top)) and any(k < top for _, k in majority):
            lagging = sum(n for n, k in majority if k < top)
            text += (f": {listed('rank', ahead)} {for_count(len(ahead), 'is', 'are')} ahead; the other "
                     f"{counted(lagging, 'rank')} {for_count(lagging, 'has', 'have')} not launched operation "
                     f"{top}, {_behind(lagging)}")
        out.append(text)
    return out, lines, nodes


def _ras_json(log: Log) -> tuple[list[str], list[LogLine], list[str]]:
    """The same, from a JSON report (`ncclras -f json`): every rank's count of each operation."""
    out, lines, nodes = [], [], []
    for found in ras_json.op_counts(log):
        top = max(found.ranks)
        common = max(found.ranks, key=lambda k: len(found.ranks[k]))
        odd = [(k, r) for k, group in sorted(found.ranks.items()) if k != common for r in group]
        behind = [r for k, r in odd if k < top]
        parts = [f"{counted(len(found.ranks[common]), 'rank')} up to operation {common}"] + [
            f"rank {r.rank}{f' on {r.node}' if r.node else ''} up to operation {k}" for k, r in odd[:6]]
        text = f"NCCL's RAS found ranks at different {found.op} operation counts ({'; '.join(parts)})"
        if behind:
            text += f": behind {for_count(len(behind), 'is', 'are')} {listed('rank', [r.rank for r in behind[:8]])}"
        elif common < top:
            lagging = len(found.ranks[common])
            text += (f": {listed('rank', [r.rank for _, r in odd[:8]])} {for_count(len(odd), 'is', 'are')} ahead; "
                     f"the other {counted(lagging, 'rank')} {for_count(lagging, 'has', 'have')} not launched "
                     f"operation {top}, {_behind(lagging)}")
        out.append(text)
        lines += found.lines
        nodes += [r.node for r in behind if r.node]
    return out, lines, nodes


def desync(logs: list[Log]) -> list[Cause]:
    findings: list[str] = []
    lines: list[LogLine] = []
    for item, seq in behind(statuses(logs)):
        findings.append(f"{item.who} had last enqueued collective #{item.enqueued} of process group "
                        f"{item.pg or '?'}, older than #{seq} that its group timed out in: it never called it")
        lines.append(item.line)
    for part in (_wrapper(logs), _report(logs)):
        findings += part[0]
        lines += part[1]
    for line, m in grep(logs, _NCCL_AROUND):
        findings.append(f"NCCL saw mismatched collectives at or around rank {m['rank']}")
        lines.append(line)
    nodes: list[str] = []
    for log in logs:
        for ras, ras_lines, ras_nodes in (_ras(log), _ras_json(log)):
            findings += ras
            lines += ras_lines
            nodes += ras_nodes
    if not findings:
        return []
    return [Cause(
        id="collective-desync", title="ranks are at different collectives (desync)",
        detail=f"{'; '.join(unique(findings)[:4])}. The ranks did not all call the same collective in the same "
               "order, so the ones that did wait until the timeout: the ranks behind are stuck before the "
               "collective (their own code, data loading, a crash or a hang) or run another sequence of "
               "collectives. The network is not the first suspect.",
        fix="Look at the ranks named first: their last log lines and stacks (`py-spy dump --native --pid PID` on "
            "their hosts) say where they stopped. Check every rank calls the same collectives in the same order "
            "with the same shapes (TORCH_DISTRIBUTED_DEBUG=DETAIL checks it on the next run); the flight recorder "
            "(TORCH_NCCL_TRACE_BUFFER_SIZE, dumps read with torch's fr_trace) shows each rank's last collectives.",
        score=72, hosts=unique(hosts(lines) + nodes), settings=["TORCH_DISTRIBUTED_DEBUG=DETAIL",
                                                                 "TORCH_NCCL_TRACE_BUFFER_SIZE"],
        evidence=evidence(lines),
    )]
