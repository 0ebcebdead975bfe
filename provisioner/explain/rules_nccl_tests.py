"""Causes from nccl-tests' own verdicts: a build without MPI started as separate runs, and each run that failed,
gave wrong results, fell below the minimum bandwidth or was cut off. A log of several runs gives one cause for
each kind of failure, citing the runs that failed so and their own lines."""

from __future__ import annotations

import re

from provisioner.explain.evidence import evidence, hosts
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.explain.nccl_runs import below_minimum_lines, runs_judged, stalled, which, within
from provisioner.explain.rules_job import TEST_HOST
from provisioner.parsers._text import unique
from provisioner.parsers.nccl_tests import NcclTests, NcclTestsRun
from provisioner.parsers.nccl_tests_verdict import severity

_TEST_ERROR = re.compile(r"Test (?:NCCL |CUDA )?failure\s+\S+\s+'(?P<what>[^'(]+)")
_MARKERS = {"wrong results": re.compile(r"^\s*[0-9]"), "out of bounds": re.compile(r"Out of bounds"),
            "failed": re.compile(r"failure", re.I), "below minimum bandwidth": re.compile(r"Avg bus bandwidth")}
_CUT = re.compile(r"^#\s*size|^\s*[0-9]")
_DETAILS = {"wrong results": "elements arrived with wrong values: data corruption on some path (GPU, NVLink, PCIe "
                             "or the network)",
            "out of bounds": "results outside the expected range",
            "unreadable row": "a result row does not fit the table's header: that size's figures cannot be judged "
                              "(output mixed into it, or a line cut short)"}
_CUT_DETAIL = "the output stops before the run's footer: the test crashed, hung or was killed"
# A `Test ... failure` line only quotes the error a WARN before it names: that cause comes first. A run below
# the minimum bandwidth beside runs that failed or were cut off follows from them, or is the lesser finding.
_SCORES = {"truncated: no footer": 40, "failed": 48}
_SLOW = "below minimum bandwidth"


def _failed_detail(log: Log, tests: NcclTests, runs: list[tuple[int, NcclTestsRun]]) -> str:
    own = [line.text for _, run in runs for n in run.failure_lines if (line := log.line(n)) is not None]
    errors = unique([m["what"].strip() for text in own or tests.failures if (m := _TEST_ERROR.search(text))])
    return "the test stopped on " + (f"'{', '.join(errors[:2])}'" if errors else "a failure") + (
        ": the NCCL or CUDA error before it in the log (a WARN) says which call failed")


def _averages(runs: list[tuple[int, NcclTestsRun]]) -> str:
    figures = [f"{run.avg_busbw:g}" for _, run in runs if run.avg_busbw is not None]
    return f" ({', '.join(figures)} GB/s)" if figures else ""


def _not_mpi(log: Log, tests: NcclTests) -> list[Cause]:
    copies = max(tests.single_rank_runs, tests.separate_runs)
    if copies < 2:
        return []
    lines = [line for line in log.lines if re.match(r"#\s*Rank\s+0\b", line.text)]
    if tests.single_rank_runs > 1:
        title = f"nccl-tests ran as {copies} separate one-rank runs"
        what = "each initialised a communicator of one rank"
        bandwidth = "the bandwidth is that of one GPU"
    else:  # several GPUs per copy (-g N): each copy's communicator spans only its own node's GPUs
        sizes = ", ".join(str(n) for n in tests.separate_ranks)
        title = f"nccl-tests ran as {copies} separate runs ({sizes} ranks)"
        what = "each initialised a communicator of only its own process's GPUs"
        bandwidth = "the bandwidth is that of one node's GPUs"
    return [Cause(
        id="nccl-tests-not-mpi", title=title,
        detail=f"{copies} copies {what}: the binary was built without MPI but started by mpirun/srun, "
               f"so nothing crossed the network and {bandwidth}.",
        fix="Rebuild nccl-tests with MPI (`make MPI=1 MPI_HOME=/path/to/mpi`) and start it with "
            "mpirun/srun again, or run one process per node with -g <GPUs per node>.",
        # The rank lines name each copy's node ("Pid 1530412 on node3"): where no launcher
        # label says it, those are the hosts.
        score=75, hosts=hosts(lines) or unique([d.host for d in tests.devices]), evidence=evidence(lines),
    )]


def _judged(tests: NcclTests) -> list[tuple[str, list[tuple[int, NcclTestsRun]]]]:
    """Each verdict other than `ok`, worst first, with the runs it is about (none: the whole log, where no run
    carries it); a run that stalled after some sizes is the MTU rule's."""
    cut = {n for n, _ in stalled(tests)}
    verdicts = sorted({v for v in tests.run_verdicts if v != "ok"}, key=severity)
    found: list[tuple[str, list[tuple[int, NcclTestsRun]]]] = [
        (v, runs) for v in verdicts if (runs := [(n, r) for n, r in runs_judged(tests, v) if n not in cut])]
    if tests.verdict != "ok" and tests.verdict not in tests.run_verdicts:
        found.insert(0, (tests.verdict, []))
    return found


def _cause(log: Log, tests: NcclTests, verdict: str, runs: list[tuple[int, NcclTestsRun]], score: int) -> Cause:
    # The runs that failed so, and their own lines: not the footers and rows of other runs.
    lines: list[LogLine] = within([line for line, _ in log.grep(_MARKERS.get(verdict, _CUT))], runs)
    if verdict == _SLOW:
        lines = below_minimum_lines(log, runs) or lines
    if verdict == "wrong results":
        rows = [r for _, run in runs for r in tests.rows[run.first_row:run.first_row + run.rows]] or tests.rows
        bad = {f"{r.size}" for r in rows if (r.oop_wrong or 0) > 0 or (r.ip_wrong or 0) > 0}
        lines = [line for line in lines if line.text.split()[:1] and line.text.split()[0] in bad]
    detail = {"failed": _failed_detail(log, tests, runs),
              _SLOW: f"the average bus bandwidth{_averages(runs)} is below the NCCL_TESTS_MIN_BW the run was given",
              }.get(verdict) or _DETAILS.get(verdict, _CUT_DETAIL)
    return Cause(
        id=f"nccl-tests-{verdict.split(':')[0].replace(' ', '-')}", title=f"nccl-tests: {verdict}",
        detail=detail + which(tests, runs),
        fix="Rerun with NCCL_DEBUG=INFO on the same hosts; bisect by host pairs to find the bad path.",
        score=score, hosts=unique([m["host"] for line in lines if (m := TEST_HOST.match(line.text))] + hosts(lines)),
        evidence=evidence(lines[-4:] if verdict.startswith("truncated") else lines),
    )


def nccl_tests_results(logs: list[Log]) -> list[Cause]:
    causes = []
    for log in logs:
        if (tests := log.tests) is None:
            continue
        causes += _not_mpi(log, tests)
        judged = _judged(tests)
        scores = {verdict: _SCORES.get(verdict, 80) for verdict, _ in judged if verdict != _SLOW}
        # Alone, a run below the minimum is the finding; beside worse ones it ranks under them.
        scores[_SLOW] = min(scores.values()) - 2 if scores else 80
        causes += [_cause(log, tests, verdict, runs, scores[verdict]) for verdict, runs in judged]
    return causes
