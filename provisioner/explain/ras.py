"""NCCL's RAS (2.24 on): the report its client `ncclras` prints, and the lines its thread logs at NCCL_DEBUG=INFO.

The report reads by structure, not by release: its Errors and Warnings sections hold entries that start on a
line of their own, a job-level `DEAD`, `INCOMPLETE` or `TIMEOUT` or a communicator's `#G-C (hash) KIND`, followed
by indented lines that say who: `Process P on node N managing GPU(s) G`, `Rank R -- GPU G managed by process P
on node N` (or `-- [process information not found]`), `Rank R has status S`, `Rank R has launched up to
operation K`, `Rank R reported E`, and count lines (`N ranks have status S`, `N ranks reported E`). Releases
moved words around these (2.24 lists missing ranks as `The missing ranks: 3,7` and a status group as `Rank 3,7
has status S`; 2.26 names the operation in `different AllReduce operation counts`; verbose output lists every
rank); an entry ends at the first line that is not one of them, so text pasted after the report stays apart.
The mismatch of operation counts is read where desyncs are (rules_desync); this module reads the rest.

Log lines (INFO, `NCCL_DEBUG_SUBSYS` including RAS, 2.24 on) that say a peer process is gone or silent:
`RAS declaring peer A<port> as DEAD`, `RAS dead peer N: socket A<port>, pid P, GPU G`, `RAS handling deadPeer
(addr A<port>)`; a peer declared dead that connects again, `RAS connection from peer A<port> that is considered
dead!` (RAS refuses it: the process was alive, only cut off from this one for longer than the keep-alive), and on
the side refused `RAS handling connInitAck from A<port> (nack 1)` (then it declares A dead in turn); the
timeouts `RAS keep-alive timeout warning|error (Ns) on socket connection with A<port>`, `RAS connect timeout
warning`, `RAS connect retry timeout`, `RAS init timeout error`, `RAS send stuck timeout error`, `RAS peer connect
timeout warning (Ns) on socket connection from A<port>`; the monitor stream (`ncclras -m`, 2.29 on) prints events
as `[date time] EVENT: who details` with PEER_DEAD, PEER_TIMEOUT_DEAD, PEER_UNRESPONSIVE, PEER_KEEPALIVE_TIMEOUT,
PEER_SEND_STUCK, PEER_INIT_TIMEOUT, PEER_DISCONNECTED and PEER_RECOVERED. The report's job summary names the nodes
running another number of processes than the rest (outliers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from provisioner.explain.logs import Log, LogLine

_ENTRY = re.compile(r"^(?:(?P<job>DEAD|INCOMPLETE|TIMEOUT)|#(?P<group>[0-9]+)-(?P<comm>[0-9]+) "
                    r"\((?P<hash>[0-9a-fA-F]+)\) (?P<kind>INCOMPLETE|ERROR|MISMATCH))$")
# The first line of a job-level entry, which tells the entry from a word alone on a line elsewhere.
_JOB_FIRST = re.compile(r"^[0-9]+ job process(?:es)? (?:is|are) considered dead|^Missing communicator data from"
                        r"|^Encountered [0-9]+ communication timeout")
_COUNT = re.compile(r"^(?:(?P<dead>[0-9]+) job process(?:es)? (?:is|are) considered dead"
                    r"|Missing communicator data from (?P<missing>[0-9]+) (?:job )?(?:process(?:es)?|ranks?)"
                    r"|Encountered (?P<timeouts>[0-9]+) communication timeouts?"
                    r"|(?P<errkind>Initialization|Asynchronous) errors? on (?P<errors>[0-9]+) ranks?)\b")
_PROCESS = re.compile(r"^Process (?P<pid>[0-9]+) on node (?P<node>\S+) managing GPUs? (?P<gpu>.+?)\s*$")
_UNKNOWN = re.compile(r"^\[could not find information on (?P<n>[0-9]+) process(?:es)?\]")
_RANK_LIST = re.compile(r"^The (?:missing|unknown) ranks?: (?P<ranks>[0-9][0-9,\s]*)$")
_WHERE = (r"(?: -- (?:GPU (?P<gpu>.+?) managed by process (?P<pid>[0-9]+) on node (?P<node>\S+)"
          r"|\[process information not found\]))?")
_RANK = re.compile(r"^Rank (?P<ranks>[0-9][0-9,]*)(?: (?:has status (?P<status>\w+)|has launched up to operation "
                   r"(?P<op>[0-9]+)|(?P<none>has not launched any operations)|reported (?P<error>.+?)))?"
                   + _WHERE + r"\s*$")
_GROUP = re.compile(r"^(?P<n>[0-9]+) ranks (?:have status (?P<status>\w+)|have launched up to operation (?P<op>[0-9]+)"
                    r"|(?P<none>have not launched any operations)|reported (?P<error>.+?))\s*$")
_OTHER = re.compile(r"^Communicator ranks have different (?:status|(?:\w+ )?operation counts)"
                    r"|^The missing process(?:es)?:")


@dataclass(frozen=True)
class RasRank:
    """A rank or process an entry names, with what it says of it (status, operation count, error)."""

    line: LogLine
    rank: int | None = None
    node: str | None = None
    pid: str | None = None
    gpu: str | None = None
    status: str | None = None
    op: int | None = None
    error: str | None = None


@dataclass
class RasEntry:
    """One entry of the report's Errors or Warnings: `kind` DEAD, INCOMPLETE, TIMEOUT, ERROR or MISMATCH; `comm`
    the communicator (`#0-0 (hash)`) or None for the job; `count` the number the entry states."""

    kind: str
    comm: str | None
    head: LogLine
    lines: list[LogLine] = field(default_factory=list)
    count: int | None = None
    error_kind: str | None = None  # Initialization or Asynchronous
    who: list[RasRank] = field(default_factory=list)
    groups: list[tuple[int, RasRank]] = field(default_factory=list)  # (ranks, what they share) of a count line
    unknown: int = 0


def _ranks(text: str) -> list[int]:
    return [int(r) for r in re.findall(r"[0-9]+", text)]


def _body(entry: RasEntry, line: LogLine, current: RasRank | None) -> tuple[bool, RasRank | None]:
    """Reads one line into the entry; False when it is not one of an entry's lines. `current` is the group a
    `Rank R -- ...` line belongs to (it shares that group's status, count or error)."""
    text = line.text.strip()
    if m := _COUNT.match(text):
        entry.count = int(next(g for g in (m["dead"], m["missing"], m["timeouts"], m["errors"]) if g))
        entry.error_kind = m["errkind"] or entry.error_kind
    elif m := _PROCESS.match(text):
        entry.who.append(RasRank(line, node=m["node"], pid=m["pid"], gpu=m["gpu"]))
    elif m := _UNKNOWN.match(text):
        entry.unknown += int(m["n"])
    elif m := _RANK_LIST.match(text):
        entry.who += [RasRank(line, rank=r) for r in _ranks(m["ranks"])]
    elif m := _GROUP.match(text):
        current = RasRank(line, status=m["status"], op=int(m["op"]) if m["op"] else 0 if m["none"] else None,
                          error=m["error"])
        entry.groups.append((int(m["n"]), current))
    elif m := _RANK.match(text):
        own = m["status"] or m["op"] or m["none"] or m["error"]
        op = int(m["op"]) if m["op"] else 0 if m["none"] else None
        for rank in _ranks(m["ranks"]):
            entry.who.append(RasRank(
                line, rank=rank, node=m["node"], pid=m["pid"], gpu=m["gpu"],
                status=m["status"] if own else current.status if current else None,
                op=op if own else current.op if current else None,
                error=m["error"] if own else current.error if current else None))
    elif not _OTHER.match(text):
        return False, current
    entry.lines.append(line)
    return True, current


def report(log: Log) -> list[RasEntry]:
    """The entries of every RAS report in the log (a log may hold several, one per query)."""
    entries: list[RasEntry] = []
    lines = log.lines
    index = 0
    while index < len(lines):
        line = lines[index]
        m = _ENTRY.match(line.text.strip())
        following = lines[index + 1].text.strip() if index + 1 < len(lines) else ""
        if m is None or (m["job"] and not _JOB_FIRST.match(following)):
            index += 1
            continue
        comm = f"#{m['group']}-{m['comm']} ({m['hash']})" if m["hash"] else None
        entry = RasEntry(kind=m["job"] or m["kind"], comm=comm, head=line, lines=[line])
        current: RasRank | None = None
        index += 1
        while index < len(lines) and not _ENTRY.match(lines[index].text.strip()):
            read, current = _body(entry, lines[index], current)
            if not read:
                break
            index += 1
        entries.append(entry)
    return entries


# A row of the Communicators table: group, comms, nodes, ranks per node (`4` or `3-4`), ranks per comm, ranks in
# group, status and errors (`RUNNING`, `INIT,RUNNING`; `OK`, `INCOMPLETE,MISMATCH`).
_ROW = re.compile(r"^[0-9]+\s+[0-9]+\s+[0-9]+\s+[0-9]+(?:-[0-9]+)?\s+[0-9]+\s+(?P<ranks>[0-9]+)\s+"
                  r"(?P<status>[A-Z]+(?:,[A-Z]+)*)\s+(?P<errors>[A-Z]+(?:,[A-Z]+)*)$")


def table(log: Log) -> list[tuple[LogLine, int, str, str]]:
    """The Communicators table's rows: (line, ranks in the group, status, errors)."""
    return [(line, int(m["ranks"]), m["status"], m["errors"]) for line in log.lines
            if (m := _ROW.match(line.text.strip()))]


# The peer a RAS line names: `10.0.0.3<41235>`, `gpu03<41235>`, an IPv6 address before `<port>`.
_PEER = r"(?P<peer>[^\s<>()]+?)<[0-9]+>"
_DEAD_LINE = re.compile(r"RAS declaring peer " + _PEER + r" as DEAD|RAS dead peer [0-9]+: socket " + _PEER.replace(
    "peer>", "peer2>") + r"(?:, pid (?P<pid>[0-9]+))?(?:, GPUs? (?P<gpu>.+?))?\s*$"
                        r"|RAS handling deadPeer \(addr " + _PEER.replace("peer>", "peer4>") + r"\)")
# A peer RAS had declared dead connecting again: the same listening address, so the same process, alive all along.
# Some builds print no address (`from a peer`).
_RETURNED_LINE = re.compile(r"RAS connection from (?:a )?peer(?: " + _PEER + r")? that is considered dead")
# The other side of it: the process cut off is refused (a NACK) by the peer that holds it dead, and declares that
# peer dead in turn, though it is alive.
_NACK_LINE = re.compile(r"RAS handling connInitAck from " + _PEER + r" \(nack [1-9]")
_SILENT_LINE = re.compile(r"RAS (?P<what>keep-alive timeout (?:warning|error)|connect timeout warning|connect retry "
                          r"timeout|init timeout error|send stuck timeout error|peer connect timeout warning) "
                          r"\((?P<secs>[0-9]+)s\) on (?:incoming )?socket connection (?:with|from) " + _PEER)
_EVENT = re.compile(r"(?:^|\]\s*)(?P<event>PEER_(?:TIMEOUT_DEAD|DEAD|UNRESPONSIVE|KEEPALIVE_TIMEOUT|SEND_STUCK|"
                    r"INIT_TIMEOUT|DISCONNECTED|RECOVERED)): (?:Process (?P<pid>[0-9]+) on node (?P<node>\S+) "
                    r"managing GPUs? (?P<gpu>\S+)|(?P<peer>[^\s<>()]+?)<[0-9]+>)")
_DEAD_EVENTS = {"PEER_DEAD", "PEER_TIMEOUT_DEAD"}


@dataclass(frozen=True)
class RasLine:
    """A log line of the RAS thread or its monitor stream about one peer: `dead`, silent (timeouts), or `returned`
    (connecting again while RAS holds it dead; `peer` is empty where the release prints no address)."""

    line: LogLine
    peer: str
    dead: bool
    what: str
    pid: str | None = None
    gpu: str | None = None
    recovered: bool = False
    returned: bool = False  # a peer declared dead connected again: it was cut off, not gone
    refused: bool = False  # the other side of it: `peer` refused this process, which it holds dead
    host: str | None = None  # the peer's host, where the caller's aliases know its address


def peer_lines(log: Log) -> list[RasLine]:
    found: list[RasLine] = []
    for line in log.lines:
        if m := _DEAD_LINE.search(line.text):
            peer = m["peer"] or m["peer2"] or m["peer4"]
            found.append(RasLine(line, peer, True, "declared dead by NCCL's RAS", m["pid"], m["gpu"]))
        elif m := _RETURNED_LINE.search(line.text):
            found.append(RasLine(line, m["peer"] or "", False, "connected again after RAS declared it dead",
                                 returned=True))
        elif m := _NACK_LINE.search(line.text):
            found.append(RasLine(line, m["peer"], False, "refused this process, which it holds dead", returned=True,
                                 refused=True))
        elif m := _SILENT_LINE.search(line.text):
            found.append(RasLine(line, m["peer"], False, f"RAS {m['what']} after {m['secs']}s"))
        elif m := _EVENT.search(line.text):
            event = m["event"]
            found.append(RasLine(line, m["node"] or m["peer"], event in _DEAD_EVENTS, event, m["pid"], m["gpu"],
                                 recovered=event == "PEER_RECOVERED"))
    return [replace(r, host=log.aliases.get(r.peer, r.peer)) for r in found]


# The report's job summary (every release): a table of processes per node, the most frequent count first (`Nodes
# Processes GPUs` over `per node per process`, or `per node` alone when GPUs per process vary, then a table of
# `Processes GPUs` over `per process`); where only the process count per node varies, `The outlier node(s):` and one
# `Node A running process(es) P,P` line each. The process ids on those lines are not the node's own in every release
# (they repeat the first ones of the job), so only their number is read.
_PER_NODE = re.compile(r"^Nodes\s+Processes(?:\s+GPUs)?$")
_PER_PROCESS = re.compile(r"^Processes\s+GPUs$")
_NUMBERS = re.compile(r"^[0-9]+(?:\s+[0-9]+){1,2}$")
_OUTLIERS = re.compile(r"^The outlier nodes?:$")
_OUTLIER = re.compile(r"^Node (?P<node>\S+) running process(?:es)? (?P<pids>[0-9]+(?:\s*,\s*[0-9]+)*)$")


@dataclass(frozen=True)
class Outlier:
    """A node running another number of NCCL processes than most (`node` set, `count` its processes), or a group of
    `processes` managing another number of GPUs each (`count`) than most; `usual` is what most run or manage."""

    line: LogLine
    node: str | None
    count: int
    usual: int | None
    processes: int = 1


def _rows(lines: list[LogLine], start: int) -> list[tuple[LogLine, list[int]]]:
    rows = []
    for line in lines[start:]:
        if not _NUMBERS.match(line.text.strip()):
            break
        rows.append((line, [int(n) for n in line.text.split()]))
    return rows


def outliers(log: Log) -> list[Outlier]:
    """The job summary's nodes with another process count than the rest, and processes with another GPU count."""
    found: list[Outlier] = []
    usual: int | None = None
    lines = log.lines
    for index, line in enumerate(lines):
        text = line.text.strip()
        under = lines[index + 1].text.strip() if index + 1 < len(lines) else ""
        if _PER_NODE.match(text) and under.startswith("per node"):
            rows = _rows(lines, index + 2)
            usual = rows[0][1][1] if rows else None
        elif _PER_PROCESS.match(text) and under == "per process":
            rows = _rows(lines, index + 2)
            found += [Outlier(row, None, numbers[1], rows[0][1][1], numbers[0]) for row, numbers in rows[1:]
                      if len(numbers) == 2]
        elif _OUTLIERS.match(text):
            for item in lines[index + 1:]:
                if not (m := _OUTLIER.match(item.text.strip())):
                    break
                found.append(Outlier(item, m["node"], len(m["pids"].split(",")), usual))
    return found
