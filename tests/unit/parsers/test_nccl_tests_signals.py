"""A rank killed by a signal fails the nccl-tests run, however the launcher reports the death."""

from __future__ import annotations

import pytest

from provisioner.parsers.nccl_tests import parse_nccl_tests

from ._samples import read

# The shell's line as recorded in nccl-debug-13-timestamped-2.27.txt (line 6), verbatim.
_SEGV = read("nccl-debug-13-timestamped-2.27.txt").splitlines()[5]
assert _SEGV == "Segmentation fault (core dumped)"


def _rows_only(name: str) -> str:
    """The sample up to its last data row: the run died before its footer."""
    lines = read(name).splitlines(keepends=True)
    last_row = max(i for i, line in enumerate(lines) if line.strip() and line.strip()[0].isdigit())
    return "".join(lines[: last_row + 1])


@pytest.mark.parametrize("death", [
    _SEGV,
    "Bus error (core dumped)",
    # a non-interactive bash's report of a child's death: `FILE: line N: PID SIGNAME  (core dumped) COMMAND`
    "./run.sh: line 3: 4711 Bus error               (core dumped) ./build/all_reduce_perf -b 8 -e 8G -f 2 -g 8",
    # Open MPI's help-orterun.txt, orterun:proc-aborted-signal: `... exited on signal %d (%s).`
    "mpirun noticed that process rank 3 with PID 0 on node gpu07 exited on signal 7 (Bus error).",
    # Slurm's srun: `srun: error: NODE: task N: SIGNAME (core dumped)`
    "srun: error: gpu07: task 3: Segmentation fault (core dumped)",
])
def test_a_rank_killed_by_a_signal_fails_the_run(death: str) -> None:
    facts = parse_nccl_tests(_rows_only("all_reduce_perf-4.txt") + death + "\n")
    assert facts.verdict == "failed"
    assert facts.failures == [death.strip()]


def test_words_inside_other_lines_are_not_a_death() -> None:
    facts = parse_nccl_tests(read("all_reduce_perf-4.txt"))
    assert facts.failures == [] and facts.verdict == "ok"
