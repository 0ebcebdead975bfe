"""Which runs of an nccl-tests log a verdict is about, and their own lines: a log of several runs names the run
that failed, with its footer and traces, not every run's."""

from __future__ import annotations

import re

from provisioner.explain.evidence import abridged
from provisioner.explain.logs import Log, LogLine
from provisioner.parsers._text import unique
from provisioner.parsers.nccl_tests import NcclTests, NcclTestsRun
from provisioner.parsers.nccl_tests_verdict import is_exit_trace

_AVERAGE = re.compile(r"Avg bus bandwidth")


def runs_judged(tests: NcclTests, verdict: str) -> list[tuple[int, NcclTestsRun]]:
    """The runs (numbered from 1) whose own verdict is `verdict`."""
    return [(n, run) for n, run in enumerate(tests.run_results, start=1) if run.verdict == verdict]


def stalled(tests: NcclTests) -> list[tuple[int, NcclTestsRun]]:
    """The runs cut off before their largest size (`maxBytes` says which) after smaller sizes completed, with no
    failure of their own: a stall, not a crash."""
    found = []
    for n, run in runs_judged(tests, "truncated: no footer"):
        rows = tests.rows[run.first_row:run.first_row + run.rows]
        m = re.fullmatch(r"([0-9]+)([KMG]?)", (run.parameters or tests.parameters).get("maxBytes", ""))
        if rows and not run.failure_lines and m and rows[-1].size < int(m[1]) * 1024 ** " KMG".index(m[2] or " "):
            found.append((n, run))
    return found


def last_sizes(tests: NcclTests, runs: list[tuple[int, NcclTestsRun]]) -> list[tuple[int, int]]:
    """(run number, size of its last row) for each of these runs that printed rows."""
    return [(n, tests.rows[run.first_row + run.rows - 1].size) for n, run in runs if run.rows]


def sizes_up_to(reached: list[tuple[int, int]]) -> str:
    """`sizes up to X bytes` where the runs all reached X; else each run's, `sizes up to X bytes in run 1, Y bytes
    in run 3` (abridged past a few runs)."""
    if len({size for _, size in reached}) == 1:
        return f"sizes up to {reached[0][1]} bytes"
    return "sizes up to " + abridged([f"{size} bytes in run {n}" for n, size in reached], shown=4)


def within(lines: list[LogLine], runs: list[tuple[int, NcclTestsRun]]) -> list[LogLine]:
    """The lines that lie in these runs; all of them where the runs do not say where they lie (a JSON report)."""
    spans = [(run.first_line, run.last_line) for _, run in runs if run.first_line and run.last_line]
    if not spans or len(spans) < len(runs):
        return lines
    return [line for line in lines if any(first <= line.number <= last for first, last in spans)]


def below_minimum_lines(log: Log, runs: list[tuple[int, NcclTestsRun]]) -> list[LogLine]:
    """The runs' own `Avg bus bandwidth ... FAILED` footers and the exit traces nccl-tests printed for them."""
    numbers = sorted({n for _, run in runs for n in run.footer_lines + run.failure_lines})
    lines = [line for n in numbers if (line := log.line(n)) is not None]
    return [line for line in lines if _AVERAGE.search(line.text) or is_exit_trace(line.text)]


def _name(tests: NcclTests, run: NcclTestsRun) -> str:
    """A run by its collective (2.16.7 on), else by the operation and type of its first row."""
    if run.collective:
        return run.collective
    rows = tests.rows[run.first_row:run.first_row + run.rows]
    return " ".join(part for part in (rows[0].redop, rows[0].type) if part) if rows else ""


def which(tests: NcclTests, runs: list[tuple[int, NcclTestsRun]]) -> str:
    """` (run 2 of 3: all_gather_perf)` where the log holds several runs; nothing where it holds one."""
    total = len(tests.run_results)
    if total < 2 or not runs:
        return ""
    names = unique([name for _, run in runs if (name := _name(tests, run))])
    numbers = abridged([n for n, _ in runs])
    said = f": {', '.join(names)}" if names else ""
    return f" ({'run' if len(runs) == 1 else 'runs'} {numbers} of {total}{said})"
