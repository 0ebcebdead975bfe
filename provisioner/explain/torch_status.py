"""What torch's ProcessGroupNCCL reports about a process group's progress when a collective times out: per
rank, the collective it timed out in, the last one it enqueued and the last one it completed, and which rank
first saw the timeout (it signals the others through the store so they dump their flight recorder).

Wording read (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp across releases): `Timeout at NCCL work: N,
last enqueued NCCL work: M, last completed NCCL work: K.` (2.2 to 2.5), `Exception (either an error or
timeout) detected by watchdog at work: N, last enqueued NCCL work: M, last completed NCCL work: K.` (2.4,
2.5), ` failure detected by watchdog at work sequence id: N PG status: last enqueued work: M, last completed
work: K` (2.6 on); `Received a global timeout from another rank and will start to dump the debug info.`
and `Received a timeout signal from this local rank ...` (2.3), `Received a dump signal due to a collective
timeout from  rank R and we will try our best to dump the debug info. Last enqueued NCCL work: M, last
completed NCCL work: K.` / `... from this local rank ...` (2.4 on). A completed count of -1 is none yet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from provisioner.explain.evidence import grep, listed
from provisioner.explain.logs import Log, LogLine
from provisioner.parsers._text import unique

# `[Rank 3]`, `[PG 0 Rank 3]`, `[PG 0 (default_pg) Rank 3]`, `[PG ID 1 PG GUID 1(tp) Rank 3]`: the rank in its group.
PG_RANK = r"\[(?:PG (?:ID )?(?P<pg>[0-9]+)[^\]]*?)?Rank (?P<rank>[0-9]+)\]"
_WHO = re.compile(PG_RANK)
_GLOBAL_PREFIX = re.compile(r"\[rank(?P<rank>[0-9]+)\]")
_NUM = r"(-?[0-9]+)"
_AT = re.compile(r"(?:Timeout at NCCL work|detected\s*by watchdog at work|failure detected by watchdog at work "
                 rf"sequence id):\s*(?P<seq>{_NUM})[,.]?\s*(?:PG status:\s*)?last enqueued (?:NCCL )?work:\s*"
                 rf"(?P<enq>{_NUM}),\s*last completed (?:NCCL )?work:\s*(?P<done>{_NUM})")
_SIGNAL = re.compile(r"Received a (?:dump signal due to a collective timeout|timeout signal|global timeout) from\s+"
                     r"(?:(?P<local>this local rank)|rank\s+(?P<src>[0-9]+)|another rank)"
                     rf"(?:.*?Last enqueued NCCL work:\s*(?P<enq>{_NUM}),\s*"
                     rf"last completed NCCL work:\s*(?P<done>{_NUM}))?",
                     re.I)


@dataclass(frozen=True)
class Status:
    line: LogLine
    glob: int | None  # the global rank (the launcher's `[rankN]:` prefix), when the log says
    pg: str | None  # the process group's id
    rank: int | None  # the rank inside that group
    seq: int | None  # the collective this rank timed out in
    enqueued: int | None
    completed: int | None
    source: int | None = None  # the rank that signalled the timeout to this one
    local: bool = False  # this rank saw the timeout itself

    @property
    def who(self) -> str:
        if self.glob is not None:
            return f"rank {self.glob}"
        return f"rank {self.rank} of process group {self.pg or '?'}" if self.rank is not None else "a rank"

    @property
    def key(self) -> tuple[str | None, int | None]:
        return (self.pg, self.glob if self.glob is not None else self.rank)


def _identity(line: LogLine) -> tuple[int | None, str | None, int | None]:
    who, prefix = _WHO.search(line.text), _GLOBAL_PREFIX.search(line.text)
    glob = line.rank if line.rank is not None else int(prefix["rank"]) if prefix else None
    return glob, (who["pg"] if who else None), (int(who["rank"]) if who else None)


def _int(value: str | None) -> int | None:
    return int(value) if value is not None else None


def statuses(logs: list[Log]) -> list[Status]:
    """Each rank's report, one per rank and group (the first; a log often repeats them)."""
    found: dict[tuple[str | None, int | None], Status] = {}
    for line, m in grep(logs, _AT):
        glob, pg, rank = _identity(line)
        item = Status(line, glob, pg, rank, int(m["seq"]), int(m["enq"]), int(m["done"]))
        found.setdefault(item.key, item)
    for line, m in grep(logs, _SIGNAL):
        glob, pg, rank = _identity(line)
        item = Status(line, glob, pg, rank, None, _int(m["enq"]), _int(m["done"]), _int(m["src"]), bool(m["local"]))
        old = found.get(item.key)
        if old is None:
            found[item.key] = item
        elif old.source is None and not old.local:  # keep the progress figures, add who signalled
            found[item.key] = Status(old.line, old.glob, old.pg, old.rank, old.seq, old.enqueued, old.completed,
                                     item.source, item.local)
    return list(found.values())


def stuck_at(items: list[Status]) -> dict[str | None, int]:
    """Per process group, the earliest collective a rank timed out in."""
    out: dict[str | None, int] = {}
    for s in items:
        if s.seq is not None:
            out[s.pg] = min(out.get(s.pg, s.seq), s.seq)
    return out


def behind(items: list[Status]) -> list[tuple[Status, int]]:
    """Ranks that had not even enqueued the collective another rank of their group timed out in: they never
    called it (each with that collective's number)."""
    at = stuck_at(items)
    return [(s, at[s.pg]) for s in items if s.pg in at and s.enqueued is not None and s.enqueued < at[s.pg]]


def named(whos: list[str]) -> str:
    """Ranks as `Status.who` and `signallers` name them, worded as one list: `rank 3`, `ranks 0, 2, 6`, with
    those named another way (`rank 1 of process group 2`) after them."""
    plain = [int(who.split()[1]) for who in whos if re.fullmatch(r"rank [0-9]+", who)]
    rest = [who for who in whos if not re.fullmatch(r"rank [0-9]+", who)]
    return ", ".join(([listed("rank", sorted(set(plain)))] if plain else []) + unique(rest))


def signallers(items: list[Status]) -> list[str]:
    """The ranks that saw the timeout first, as the others name them (global ranks, as torch counts them)."""
    named = sorted({s.source for s in items if s.source is not None})
    local = sorted({s.glob for s in items if s.local and s.glob is not None})
    return [f"rank {r}" for r in sorted(set(named) | set(local))]
