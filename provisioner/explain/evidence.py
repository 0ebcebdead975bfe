"""What every rule needs: evidence lines, the hosts they came from, a WARN with its wrapped lines,
the NCCL environment a log reports, and whether the job spanned more than one node."""

from __future__ import annotations

import re
from collections.abc import Iterable

from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Evidence
from provisioner.parsers._text import unique

Hit = tuple[LogLine, re.Match[str]]


def for_count(count: int, one: str, many: str) -> str:
    """The word that agrees with a count: `one` for exactly one, `many` for none or several (`is`/`are`,
    `it`/`they`, `its`/`their`)."""
    return one if count == 1 else many


def _plural(noun: str) -> str:
    return noun + ("es" if noun.endswith(("s", "sh", "ch", "x")) else "s")


def listed(noun: str, items: Iterable[object]) -> str:
    """`rank 3`, `ranks 3, 5` or `no ranks`: a noun worded for how many items follow it (`noun` in the
    singular)."""
    names = [str(item) for item in items]
    if not names:
        return f"no {_plural(noun)}"
    return f"{for_count(len(names), noun, _plural(noun))} {', '.join(names)}"


def abridged(items: Iterable[object], shown: int = 6) -> str:
    """`a, b, c`, or past `shown` items the first `shown` and `and N more`: a list that grows with the job
    (ranks, hosts) named in a sentence."""
    names = [str(item) for item in items]
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def counted(count: int, noun: str) -> str:
    """`1 rank`, `3 ranks` or `no ranks`: a count and its noun (in the singular) worded for it."""
    if count == 0:
        return f"no {_plural(noun)}"
    return f"{count} {for_count(count, noun, _plural(noun))}"


def evidence(lines: Iterable[LogLine], limit: int = 8) -> list[Evidence]:
    seen: list[Evidence] = []
    for line in lines:
        item = Evidence(file=line.file, line=line.number, text=line.text)
        if item not in seen:
            seen.append(item)
    return seen[:limit]


def signal(lines: Iterable[LogLine]) -> list[tuple[str, int]]:
    """Where each of `lines` is, (file, line) in log order, all of them: a cause's signal beyond its evidence."""
    return sorted({(line.file, line.number) for line in lines})


def hosts(lines: Iterable[LogLine]) -> list[str]:
    return unique([line.host for line in lines if line.host])


def grep(logs: list[Log], pattern: re.Pattern[str]) -> list[Hit]:
    return [(line, m) for log in logs for line, m in log.grep(pattern)]


def warning_lines(log: Log, first: int) -> list[LogLine]:
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


def env(logs: list[Log], name: str) -> str | None:
    for log in logs:
        if log.nccl and name in log.nccl.env:
            return log.nccl.env[name]
    return None


def multi_node(logs: list[Log]) -> bool:
    """Whether the job spanned several nodes, as far as the logs show: ranks connected through the
    network (`via NET/...`), NCCL lines or rank lines from more than one host, or a communicator
    with more ranks than one host's log lines account for."""
    names: set[str] = set()
    for log in logs:
        nccl = log.nccl
        if nccl and nccl.net_paths:
            return True
        if nccl:
            names |= set(nccl.hosts) | {r.host for r in nccl.ranks}
        if log.tests:
            names |= {d.host for d in log.tests.devices}
        names |= {line.host for line in log.lines if line.host}
    return len(names) > 1


def nranks(logs: list[Log]) -> int | None:
    """The largest communicator size the logs report, if any."""
    sizes = [c.nranks for log in logs for c in (log.nccl.communicators if log.nccl else [])]
    return max(sizes) if sizes else None
