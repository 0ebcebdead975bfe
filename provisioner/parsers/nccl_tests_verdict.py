"""The verdict of nccl-tests text output, judged run by run: one log may hold several runs (outputs
concatenated, several ops in one job), and each run's footer, failures and exit trace speak for it alone.

A run's part starts at its version, parameter or `# Collective test starting` line or its column header,
and goes on past its footer until the next run starts: what a run prints after its footer (the exit trace
of `NCCL_TESTS_MIN_BW`, other ranks' traces) is its own. The overall verdict is the worst of the parts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from provisioner.parsers._text import after_mpi_tag

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


@dataclass
class RunPart:
    """What one run printed that bears on its verdict."""

    failures: list[str] = field(default_factory=list)
    rows: int = 0
    wrong: bool = False  # a #wrong (or error) cell above 0
    bitwise_mismatches: int = 0
    out_of_bounds: list[tuple[int, bool | None]] = field(default_factory=list)  # (count, OK/FAILED)
    avg_busbw_ok: list[bool | None] = field(default_factory=list)  # one per `# Avg bus bandwidth` footer
    unreadable: bool = False
    open: bool = False  # a header or rows came after its last footer

    @property
    def footer(self) -> bool:
        return bool(self.avg_busbw_ok)

    @property
    def below(self) -> bool:
        return any(ok is False for ok in self.avg_busbw_ok)

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
    if part.open or not part.footer:
        return "truncated: no footer"
    if part.unreadable:
        return "unreadable row"
    if part.below:
        return "below minimum bandwidth"
    return "ok"


def worst(verdicts: list[Verdict]) -> Verdict:
    """The worst verdict of several runs; `truncated: no footer` for none (nothing was judged)."""
    if not verdicts:
        return "truncated: no footer"
    return min(verdicts, key=_SEVERITY.index)
