"""NCCL's RAS report as JSON (`ncclras -f json`, 2.28.7 on), read into the same entries as the text report (ras.py),
so the same causes follow from either.

Recognised by structure, alone or pasted among other lines: an object that starts on a line of its own and holds a
`communicators` list whose items carry `ranks` or `missing_ranks`. Each rank has its `host`, `pid`, `cuda_dev` and
`nvml_dev`; a rank that answered has a `status` (`init_state` and `async_error`, NCCL result codes, and the
`finalize_called`, `destroy_flag`, `abort_flag` flags) and its `collective_counts` per operation; a missing one has
`unresponsive` and `considered_dead`. `ras.timeouts_count` counts the timeouts met while gathering. 2.28's writer
leaves out the comma after a missing rank's `nvml_dev`, so a document that does not parse as written is read again
with a comma put between a value ending one line and a key starting the next.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from provisioner.explain.logs import Log, LogLine
from provisioner.explain.ras import RasEntry, RasRank

_RANK_KEY = re.compile(r'^"rank"\s*:\s*(-?[0-9]+)\s*,?$')
_HASH_KEY = re.compile(r'^"hash"\s*:')
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_MISSING_COMMA = re.compile(r'(?<=[0-9a-z"\]}])\n(?=")')
# NCCL's result codes (ncclResult_t) as a rank's init_state or async_error; 0 is success, 7 in progress.
_RESULTS = {1: "unhandled CUDA error", 2: "system error", 3: "internal error", 4: "invalid argument",
            5: "invalid usage", 6: "remote process error", 8: "timeout"}
_FINE = {0, 7}


@dataclass
class Document:
    """One JSON report: its data, the line of each rank object (in document order) and of each communicator."""

    data: dict[str, Any]
    block: list[LogLine]
    rank_lines: list[LogLine]
    comm_lines: list[LogLine]

    def line(self, key: str) -> LogLine:
        """The first line holding `key`, else the document's first line."""
        return next((line for line in self.block if line.text.strip().startswith(f'"{key}"')), self.block[0])


def _depth(text: str) -> int:
    bare = _STRING.sub("", text)
    return bare.count("{") + bare.count("[") - bare.count("}") - bare.count("]")


def _load(text: str) -> dict[str, Any] | None:
    for attempt in (text, _MISSING_COMMA.sub(",\n", text)):
        try:
            data: object = json.loads(attempt)
        except ValueError:
            continue
        if not isinstance(data, dict):
            return None
        comms = data.get("communicators")
        if isinstance(comms, list) and all(isinstance(c, dict) and ("ranks" in c or "missing_ranks" in c)
                                           for c in comms):
            return {str(key): value for key, value in data.items()}
        return None
    return None


def documents(log: Log) -> list[Document]:
    found: list[Document] = []
    lines = log.lines
    if not any(line.text.startswith('"communicators"') for line in lines):
        return found  # most logs: no report, no block to try
    index = 0
    while index < len(lines):
        if lines[index].text.strip() != "{":
            index += 1
            continue
        depth, end = 0, index
        for end in range(index, len(lines)):
            depth += _depth(lines[end].text)
            if depth <= 0:
                break
        block = lines[index:end + 1]
        data = _load("\n".join(line.text.strip() for line in block)) if depth == 0 else None
        if data is None:
            index += 1
            continue
        found.append(Document(data, block, [line for line in block if _RANK_KEY.match(line.text.strip())],
                              [line for line in block if _HASH_KEY.match(line.text.strip())]))
        index = end + 1
    return found


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _who(item: dict[str, Any], line: LogLine, **what: Any) -> RasRank:
    host = item.get("host")
    pid, cuda, nvml = _int(item.get("pid")), _int(item.get("cuda_dev")), _int(item.get("nvml_dev"))
    gpu = None if cuda is None or cuda < 0 else f"{cuda}" + (f" (NVML {nvml})" if nvml is not None and nvml != cuda
                                                            else "")
    return RasRank(line, rank=_int(item.get("rank")), node=host if isinstance(host, str) and host and
                   host != "unknown" else None, pid=str(pid) if pid is not None and pid >= 0 else None, gpu=gpu,
                   **what)


def _state(status: dict[str, Any]) -> str:
    """The state the text report gives a rank, from its flags (as NCCL derives it)."""
    if status.get("abort_flag"):
        return "ABORT"
    if status.get("finalize_called") or status.get("destroy_flag"):
        return "FINALIZE"
    return "RUNNING" if status.get("init_state", 0) == 0 else "INIT"


def _items(comm: dict[str, Any], key: str, lines: Iterator[LogLine], head: LogLine
           ) -> list[tuple[dict[str, Any], LogLine]]:
    return [(item, next(lines, head)) for item in comm.get(key) or [] if isinstance(item, dict)]


def _name(comm: dict[str, Any], index: int) -> str:
    value = comm.get("hash")
    if isinstance(value, str) and re.fullmatch(r"(?:0x)?[0-9a-fA-F]+", value):
        return f"({value.lower().removeprefix('0x').zfill(16)})"
    return f"#{index}"


def _errors(name: str, head: LogLine, answered: list[tuple[dict[str, Any], LogLine]]) -> list[RasEntry]:
    out = []
    for kind, key in (("Initialization", "init_state"), ("Asynchronous", "async_error")):
        bad = [(item, line, code) for item, line in answered
               if (code := _int((item.get("status") or {}).get(key))) is not None and code not in _FINE]
        if bad:
            who = [_who(item, line, error=_RESULTS.get(code, f"error {code}")) for item, line, code in bad]
            out.append(RasEntry("ERROR", name, head, [head, *[line for _, line, _ in bad]], count=len(bad),
                                error_kind=kind, who=who))
    return out


def _mismatch(name: str, head: LogLine, answered: list[tuple[dict[str, Any], LogLine]]) -> list[RasEntry]:
    states = [(item, line, _state(item.get("status") or {})) for item, line in answered]
    counts = Counter(state for _, _, state in states)
    if len(counts) < 2:
        return []
    common = counts.most_common(1)[0][0]
    odd = [(item, line, state) for item, line, state in states if state != common]
    return [RasEntry("MISMATCH", name, head, [head, *[line for _, line, _ in odd]],
                     who=[_who(item, line, status=state) for item, line, state in odd],
                     groups=[(n, RasRank(head, status=state)) for state, n in counts.most_common()])]


def entries(log: Log) -> list[RasEntry]:
    """The entries the text report would hold for each JSON report in the log: missing ranks (INCOMPLETE, and a job
    DEAD entry for those RAS holds dead), ranks with errors, ranks in another state, the timeouts met."""
    out: list[RasEntry] = []
    for doc in documents(log):
        lines = iter(doc.rank_lines)
        dead: dict[tuple[str | None, str | None], RasRank] = {}
        dead_lines: list[LogLine] = []
        for index, comm in enumerate(doc.data["communicators"]):
            head = doc.comm_lines[index] if index < len(doc.comm_lines) else doc.block[0]
            name = _name(comm, index)
            answered = _items(comm, "ranks", lines, head)
            missing = _items(comm, "missing_ranks", lines, head)
            if missing:
                who = [_who(item, line) for item, line in missing]
                out.append(RasEntry("INCOMPLETE", name, head, [head, *[line for _, line in missing]],
                                    count=len(missing), who=who))
                for (item, line), rank in zip(missing, who, strict=True):
                    if (item.get("status") or {}).get("considered_dead"):
                        dead.setdefault((rank.node, rank.pid), RasRank(line, node=rank.node, pid=rank.pid,
                                                                       gpu=rank.gpu))
                        dead_lines.append(line)
            out += _errors(name, head, answered) + _mismatch(name, head, answered)
        if dead:
            out.append(RasEntry("DEAD", None, dead_lines[0], dead_lines, count=len(dead), who=list(dead.values())))
        timeouts = _int((doc.data.get("ras") or {}).get("timeouts_count"))
        if timeouts:
            line = doc.line("timeouts_count")
            out.append(RasEntry("TIMEOUT", None, line, [line], count=timeouts))
    return out


@dataclass(frozen=True)
class Counts:
    """Ranks of one communicator at different counts of one operation: {count: ranks}, and the lines naming them."""

    comm: str
    op: str
    ranks: dict[int, list[RasRank]]
    lines: list[LogLine]


def op_counts(log: Log) -> list[Counts]:
    out: list[Counts] = []
    for doc in documents(log):
        lines = iter(doc.rank_lines)
        for index, comm in enumerate(doc.data["communicators"]):
            head = doc.comm_lines[index] if index < len(doc.comm_lines) else doc.block[0]
            answered = _items(comm, "ranks", lines, head)
            _items(comm, "missing_ranks", lines, head)
            ops = _keys([item.get("collective_counts") or {} for item, _ in answered])
            for op in ops:
                ranks: dict[int, list[RasRank]] = {}
                for item, line in answered:
                    if (n := _int((item.get("collective_counts") or {}).get(op))) is not None:
                        ranks.setdefault(n, []).append(_who(item, line, op=n))
                if len(ranks) > 1:
                    out.append(Counts(_name(comm, index), op, ranks, [head, *[r.line for g in ranks.values()
                                                                               for r in g]]))
    return out


def _keys(maps: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(key for item in maps if isinstance(item, dict) for key in item))
