"""The verdict of nccl-tests text output, judged run by run: one log may hold several runs (outputs
concatenated, several ops in one job), and each run's footer, failures and exit trace speak for it alone.

A run's part starts at its version, parameter or `# Collective test starting` line or its column header,
and goes on past its footer until the next run starts: what a run prints after its footer (the exit trace
of `NCCL_TESTS_MIN_BW`, other ranks' traces) is its own. The overall verdict is the worst of the parts. The
lines a run prints before its parameter line (`# Writing JSON output to X` from 2.17.3 on, which comes even
before the version line, the version and `# Collective test starting`) are its `Lead`: where the next run is
found to start only at a later one of them (the run before it was cut off), the lead moves with it.

Copies of one binary started together (a build without MPI under mpirun or srun) print the same preamble, so
their lines, interleaved, stay one part: only a footer, a failure, or a preamble line that differs from the
part's own (another collective, other parameters, another build or column header) after it printed rows
starts the next run; the same preamble after rows does where a `#  Rank` listing follows it, as a run started
after one that was cut off prints (nccl_tests_parts). Each copy and each run prints one `# nThread` line and,
when it finishes, one footer: a part with fewer footers than `# nThread` lines holds a run (or copy) that was
cut off, wherever it stopped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from provisioner.parsers._text import Fact, after_mpi_tag

Verdict = Literal["ok", "wrong results", "out of bounds", "failed", "truncated: no footer", "unreadable row",
                  "below minimum bandwidth"]

# Worst first: the order in which one run's findings decide its verdict, and runs the overall one.
_SEVERITY: tuple[Verdict, ...] = ("failed", "wrong results", "out of bounds", "truncated: no footer",
                                  "unreadable row", "below minimum bandwidth", "ok")

# nccl-tests' TESTCHECK trace (` .. HOST pid N: Test failure FILE:LINE`, src/common.h since 2.10.0; before it
# ` .. HOST: Test failure ...` and run()'s result was returned without a trace). Under NCCL_TESTS_MIN_BW a
# run whose average falls short returns testNumResults, and main's TESTCHECK on it prints this line in every
# process (printf, not rank 0's PRINT); 2017-2018 builds exit(EXIT_FAILURE) with no trace at all.
_EXIT_TRACE = re.compile(r"^\.\.\s+\S+ pid [0-9]+: Test failure \S+:[0-9]+$")


class NcclTestsRun(Fact):
    """One run of a log that may hold several: its verdict, footer and where it lies. Where copies of the binary
    interleaved in one run each printed a footer, the run's figures are the worst of them (the lowest average, the
    most values out of bounds)."""

    verdict: Verdict
    collective: str | None = None  # `# Collective test starting: X` (nccl-tests 2.16.7 on)
    parameters: dict[str, str] = Field(default_factory=dict)  # its `# nThread ...` line
    first_row: int = 0  # its rows are rows[first_row:first_row + rows] of the whole result
    rows: int = 0
    avg_busbw: float | None = None
    avg_busbw_ok: bool | None = None
    out_of_bounds: int | None = None
    out_of_bounds_ok: bool | None = None
    bitwise_mismatches: int | None = None
    first_line: int | None = None  # the log lines it spans, from its first to its last
    last_line: int | None = None
    footer_lines: list[int] = Field(default_factory=list)  # its `Out of bounds values` and `Avg bus bandwidth`
    failure_lines: list[int] = Field(default_factory=list)
    # What its own preamble and NCCL's lines in it said (None where it printed no such line).
    nccl_tests_version: str | None = None
    nccl_headers_version: str | None = None
    nccl_library_version: str | None = None
    rccl_tests_version: str | None = None
    nccl_version: str | None = None
    cuda_version: str | None = None
    nccl_last_error: str | None = None


@dataclass
class Lead:
    """Lines in a row that a run prints before its parameters, and what they said, not yet given to a part."""

    first: int  # the line it starts at
    before: int | None  # the last line of the part before it
    fields: dict[str, str] = field(default_factory=dict)
    collective: str | None = None


@dataclass
class RunPart:
    """What one run printed that bears on its verdict, and where."""

    failures: list[str] = field(default_factory=list)
    first_row: int = 0
    rows: int = 0
    wrong: bool = False  # a #wrong (or error) cell above 0
    bitwise_mismatches: int = 0
    out_of_bounds: list[tuple[int, bool | None]] = field(default_factory=list)  # (count, OK/FAILED)
    avg_busbw_ok: list[bool | None] = field(default_factory=list)  # one per `# Avg bus bandwidth` footer
    avg_busbw: list[float] = field(default_factory=list)
    bitwise: bool = False  # a `# Bitwise mismatches` line was printed
    unreadable: bool = False
    open: bool = False  # a header or rows came after its last footer
    starts: int = 0  # `# nThread` lines: one per run or copy of the binary that started
    preamble: dict[str, str] = field(default_factory=dict)  # the first line of each kind that began it
    collective: str | None = None
    parameters: dict[str, str] = field(default_factory=dict)
    first_line: int | None = None
    last_line: int | None = None
    footer_lines: list[int] = field(default_factory=list)
    failure_lines: list[int] = field(default_factory=list)
    fields: dict[str, str] = field(default_factory=dict)  # its versions and NCCL's last error, as printed

    @property
    def footer(self) -> bool:
        return bool(self.avg_busbw_ok)

    @property
    def below(self) -> bool:
        return any(ok is False for ok in self.avg_busbw_ok)

    def seen(self, number: int) -> None:
        """A line of the log was read while this part was the current one."""
        self.first_line = number if self.first_line is None else self.first_line
        self.last_line = number

    def another(self, kind: str, text: str) -> bool:
        """Whether a preamble line of `kind` begins another run: this part printed rows under a different one."""
        return bool(self.rows) and self.preamble.setdefault(kind, text) != text

    def absorb(self, other: RunPart) -> None:
        """Take back the part after this one, which printed only preamble lines: they turned out to be this run's
        (or a copy's of it)."""
        self.starts += other.starts
        self.open |= other.open
        for kind, text in other.preamble.items():
            self.preamble.setdefault(kind, text)
        self.parameters = other.parameters or self.parameters
        self.collective = other.collective or self.collective
        self.fields.update(other.fields)
        self.last_line = other.last_line or self.last_line

    def summary(self) -> NcclTestsRun:
        bounds = [count for count, _ in self.out_of_bounds]
        bounds_ok = [ok for _, ok in self.out_of_bounds if ok is not None]
        averages_ok = [ok for ok in self.avg_busbw_ok if ok is not None]
        return NcclTestsRun(
            verdict=judge(self), collective=self.collective, parameters=self.parameters, first_row=self.first_row,
            rows=self.rows, avg_busbw=min(self.avg_busbw) if self.avg_busbw else None,
            avg_busbw_ok=all(averages_ok) if averages_ok else None, out_of_bounds=max(bounds) if bounds else None,
            out_of_bounds_ok=all(bounds_ok) if bounds_ok else None,
            bitwise_mismatches=self.bitwise_mismatches if self.bitwise else None, first_line=self.first_line,
            last_line=self.last_line, footer_lines=self.footer_lines,
            failure_lines=self.failure_lines).model_copy(update=self.fields)

    def empty(self) -> bool:
        return not (self.failures or self.rows or self.footer or self.out_of_bounds or self.open
                    or self.unreadable)


def is_exit_trace(failure: str) -> bool:
    """A failure line that is only nccl-tests' exit trace, a launcher's output tag before it or not."""
    return bool(_EXIT_TRACE.match(after_mpi_tag(failure)))


def judge(part: RunPart) -> Verdict:
    # Under NCCL_TESTS_MIN_BW a run whose average falls short exits through its error path, which prints
    # only the exit trace: that run is below the minimum, not failed.
    explained = part.below and all(is_exit_trace(f) for f in part.failures)
    if part.failures and not explained:
        return "failed"
    if part.wrong or part.bitwise_mismatches > 0:
        return "wrong results"
    if any(count > 0 or ok is False for count, ok in part.out_of_bounds):
        return "out of bounds"
    if part.open or not part.footer or part.starts > len(part.avg_busbw_ok):
        return "truncated: no footer"
    if part.unreadable:
        return "unreadable row"
    if part.below:
        return "below minimum bandwidth"
    return "ok"


def severity(verdict: Verdict) -> int:
    """Where a verdict stands, worst (0) first."""
    return _SEVERITY.index(verdict)


def worst(verdicts: list[Verdict]) -> Verdict:
    """The worst verdict of several runs; `truncated: no footer` for none (nothing was judged)."""
    if not verdicts:
        return "truncated: no footer"
    return min(verdicts, key=_SEVERITY.index)


def deciding(runs: list[NcclTestsRun]) -> NcclTestsRun | None:
    """The run the overall verdict comes from: the worst, the last of equally bad ones (so a log of passing runs
    gives its last, as one run's log gives that run)."""
    if not runs:
        return None
    rank = min(_SEVERITY.index(run.verdict) for run in runs)
    return [run for run in runs if _SEVERITY.index(run.verdict) == rank][-1]


_FOOTER = {"avg_busbw", "avg_busbw_ok", "out_of_bounds", "out_of_bounds_ok", "bitwise_mismatches", "collective",
           "nccl_last_error"}
_PRINTED = {"parameters", "nccl_tests_version", "nccl_headers_version", "nccl_library_version", "rccl_tests_version",
            "nccl_version", "cuda_version"}


def own_fields(run: NcclTestsRun) -> dict[str, object]:
    """The fields a whole log's result takes from the run it is decided by: its footer and last error, and the
    parameters and versions it printed (where it printed none, a fragment whose preamble was cut away, the log's
    last stand)."""
    printed = {key: value for key, value in run.model_dump(include=_PRINTED).items() if value}
    if "nccl_version" not in printed and "nccl_library_version" in printed:  # the NCCL its version line names
        printed["nccl_version"] = printed["nccl_library_version"]
    return run.model_dump(include=_FOOTER) | printed
