"""`explain` on a Slurm step whose other tasks were killed because one task exited non-zero: srun (--kill-on-bad-exit,
KillOnBadExit) or Slurm's PMIx plugin, whose error handler the PMIx library calls when that task's client goes away
(`status = -61`, PMIX_ERR_LOST_CONNECTION), kills the rest with SIGKILL. The exit leads and the kill is named as its
consequence; a kill before any exit, the OOM killer's or a cancel's, leads as before.

Lines built by hand take their wording from srun (src/srun: `srun: error: HOST: task N: Exited with exit code N`,
`srun: error: HOST: tasks N-M: Killed`, the signal's strsignal), slurmstepd's `*** STEP ... CANCELLED AT ... ***`
and `Detected 1 oom_kill event in StepId=...` (src/slurmd/slurmstepd, src/plugins/task/cgroup) and Slurm's
pmixp_client_v2.c `_errhandler` (`Error handler invoked: status = %d, source = [%s:%d]`, 20.11.1 to 25.11), as in
the -61 lines of github issue NVIDIA/cuda-quantum#2944.
"""

from __future__ import annotations

from provisioner.explain import explain
from provisioner.explain.model import Cause

GONE = ("slurmstepd: error:  mpi/pmix_v4: _errhandler: c67 [0]: pmixp_client_v2.c:211: Error handler invoked: "
        "status = -61, source = [slurm.pmix.656.0:14]")
EXIT = "srun: error: c67: task 14: Exited with exit code 1"
KILLED = ("srun: error: c67: tasks 0-13,15: Killed", "srun: error: c68: tasks 16-31: Killed")


def _causes(*lines: str) -> list[Cause]:
    return explain([("job.log", "\n".join(lines))]).causes


def _ids(causes: list[Cause]) -> list[str]:
    return [c.id for c in causes]


def test_the_exit_before_the_kill_leads_and_the_kill_is_its_consequence() -> None:
    causes = _causes(EXIT, *KILLED)
    ids = _ids(causes)
    assert ids.index("rank-exited") < ids.index("rank-killed"), causes
    exited = causes[ids.index("rank-exited")]
    killed = causes[ids.index("rank-killed")]
    assert exited.title == "task 14 on c67 exited with exit code 1"
    assert "those kills are this exit's consequence" in exited.detail, exited.detail
    assert "after task 14 on c67 exited with exit code 1" in killed.title, killed.title
    assert "--kill-on-bad-exit" in killed.detail and "OOM killer (check dmesg" not in killed.detail, killed.detail
    assert killed.score < exited.score


def test_the_plugin_s_lost_connection_line_is_named_and_shown() -> None:
    causes = _causes(GONE, EXIT, *KILLED)
    exited = next(c for c in causes if c.id == "rank-exited")
    assert causes.index(exited) < _ids(causes).index("rank-killed"), causes
    assert "PMIx status -61 (PMIX_ERR_LOST_CONNECTION, a rank's connection to its stepd was lost) from rank 14" \
        in exited.detail, exited.detail
    assert [e.line for e in exited.evidence] == [1, 2]
    assert "pmix-wireup-failed" not in _ids(causes)


def test_the_plugin_s_line_before_the_kill_orders_an_exit_srun_printed_after_it() -> None:
    causes = _causes(GONE, *KILLED, EXIT)
    ids = _ids(causes)
    assert ids.index("rank-exited") < ids.index("rank-killed"), causes


def test_a_kill_before_any_exit_still_leads() -> None:
    causes = _causes(*KILLED, EXIT)
    assert causes[0].id == "rank-killed" and causes[0].score == 88, causes
    assert "OOM killer" in causes[0].detail


def test_an_oom_kill_still_leads() -> None:
    causes = _causes(EXIT, "slurmstepd: error: Detected 1 oom_kill event in StepId=656.0. Some of the step tasks "
                     "have been OOM Killed.", *KILLED)
    assert causes[0].id == "rank-oom", causes
    assert "rank-killed" not in _ids(causes)


def test_a_cancel_still_leads_over_the_exit() -> None:
    causes = _causes(EXIT, "slurmstepd: error: *** STEP 656.0 ON c67 CANCELLED AT 2024-02-26T11:17:29 ***",
                     *KILLED)
    ids = _ids(causes)
    assert ids[0] == "rank-killed" and causes[0].score == 88, causes
    assert ids.index("job-cancelled") < ids.index("rank-exited")


def test_a_crash_signal_is_no_kill_that_follows_an_exit() -> None:
    causes = _causes(EXIT, "srun: error: c68: task 16: Segmentation fault (core dumped)")
    assert causes[0].id == "rank-killed" and causes[0].score == 88, causes
