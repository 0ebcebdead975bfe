"""`explain` on a step srun ended itself because a task failed: srun says `Terminating StepId=J.S` and slurmstepd
then logs the step `CANCELLED`, which reads like an operator's scancel. After a task's bad end that cancel is its
consequence and the task's end leads; a cancel with no such Terminating line before it, one with a reason
(`DUE TO TIME LIMIT`, ...), or one sacct says an operator made (`CANCELLED by 1000`) leads as before.

Real log: tests/samples/logs/srun-segfault-terminating-task-failure-cancel-1.txt (source in tests/samples/INDEX.md).
Lines built by hand take their wording from Slurm's source: srun's _step_signal (src/srun/launch.c; before 23.02
src/plugins/launch/slurm/launch_slurm.c) `Terminating %ps` (`StepId=J.S`, 20.11 on) and `Terminating job step
%u.%u` (before); slurmstepd's _handle_signal_container (src/slurmd/slurmstepd/req.c) `*** %s ON %s CANCELLED AT
%s ***` (15.08 to 24.11, srun's SIG_TERM_KILL and a cancel alike), `... DUE TO TASK FAILURE ***` and `... DUE to
SIGNAL %s ***` (25.05 on), `*** %s CANCELLED AT %s *** on %s` (before 15.08), `DUE TO NODE FAILURE, SEE SLURMCTLD
LOG FOR DETAILS ***`; sacct's `%s by %u` state (src/sacct/print.c).
"""

from __future__ import annotations

from provisioner.explain import explain
from provisioner.explain.model import Cause
from tests.unit.explain._field import LOGS

EXIT = "srun: error: c67: task 14: Exited with exit code 1"
TERMINATING = "srun: Terminating StepId=656.0"
CANCELLED = "slurmstepd: error: *** STEP 656.0 ON c67 CANCELLED AT 2024-02-26T11:17:29 ***"
KILLED = ("srun: error: c67: tasks 0-13,15: Killed", "srun: error: c68: tasks 16-31: Killed")


def _causes(*lines: str) -> list[Cause]:
    return explain([("job.log", "\n".join(lines))]).causes


def _ids(causes: list[Cause]) -> list[str]:
    return [c.id for c in causes]


def test_the_exit_leads_a_cancel_srun_made_after_it() -> None:
    causes = _causes(EXIT, TERMINATING, CANCELLED)
    assert causes[0].id == "rank-exited" and "job-cancelled" not in _ids(causes), causes
    assert causes[0].title == "task 14 on c67 exited with exit code 1"
    assert "Slurm then ended step 656.0 itself" in causes[0].detail, causes[0].detail
    assert [e.line for e in causes[0].evidence] == [1, 2, 3]


def test_each_wording_of_srun_s_terminating_line() -> None:
    for terminating in ("srun: Terminating job step 656.0", "srun.slurm: Terminating job step 656.0",
                        "srun: launch/slurm: _step_signal: Terminating StepId=656.0"):
        causes = _causes(EXIT, terminating, CANCELLED)
        assert causes[0].id == "rank-exited" and "job-cancelled" not in _ids(causes), (terminating, causes)


def test_with_srun_s_kills_the_exit_leads_and_the_kill_follows() -> None:
    causes = _causes(EXIT, TERMINATING, CANCELLED, *KILLED)
    ids = _ids(causes)
    assert ids[0] == "rank-exited" and ids.index("rank-killed") == 1 and "job-cancelled" not in ids, causes
    assert "after task 14 on c67 exited with exit code 1" in causes[1].title


def test_slurm_25_s_task_failure_wording_is_no_cancel() -> None:
    line = "slurmstepd: error: *** STEP 656.0 ON c67 CANCELLED AT 2025-06-26T11:17:29 DUE TO TASK FAILURE ***"
    causes = _causes(EXIT, TERMINATING, line)
    assert causes[0].id == "rank-exited" and "job-cancelled" not in _ids(causes), causes
    # Slurm's verdict alone still names a task that failed, not an operator.
    alone = _causes(line)
    assert [c.id for c in alone] == ["rank-exited"], alone
    assert alone[0].title == "a task failed and Slurm ended the step (656.0)"


def test_the_real_crash_leads_and_its_cancel_is_named_its_consequence() -> None:
    causes = explain([("job.log", (LOGS / "srun-segfault-terminating-task-failure-cancel-1.txt").read_text())]).causes
    assert causes[0].id == "rank-killed" and "job-cancelled" not in _ids(causes), causes
    assert causes[0].title == "task 0 on nid006549 was killed by signal 11 (SIGSEGV)"
    assert "Slurm then ended step 2243671.21 itself" in causes[0].detail, causes[0].detail
    assert [e.line for e in causes[0].evidence][:3] == [2, 3, 4]


def test_a_cancel_with_no_terminating_line_before_it_leads() -> None:
    causes = _causes(EXIT, CANCELLED, *KILLED)
    ids = _ids(causes)
    assert ids.index("job-cancelled") < ids.index("rank-exited"), causes


def test_a_cancel_before_srun_s_terminating_line_leads() -> None:
    # An allocation revoked at its limit: the cancel first, srun's Terminating line after it.
    causes = _causes(CANCELLED, "srun: error: c67: task 0: Killed", TERMINATING)
    assert "job-cancelled" in _ids(causes), causes


def test_a_cancel_with_a_reason_leads_after_a_terminating_line() -> None:
    for why, id_ in (("DUE TO TIME LIMIT", "step-time-limit"), ("DUE TO PREEMPTION", "job-cancelled"),
                     ("DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS", "node-failure")):
        causes = _causes(EXIT, TERMINATING, CANCELLED.replace(" ***", f" {why} ***"))
        assert causes[0].id == id_, (why, causes)


def test_an_operator_sacct_names_keeps_the_cancel() -> None:
    causes = _causes(EXIT, TERMINATING, CANCELLED, "656.0        python   CANCELLED by 1000      0:15")
    assert "job-cancelled" in _ids(causes), causes


def test_an_exit_a_sigterm_made_is_no_task_failure() -> None:
    causes = _causes("srun: error: c67: task 3: Exited with exit code 143", TERMINATING, CANCELLED)
    assert causes[0].id == "job-cancelled", causes


def test_another_step_s_terminating_line_is_not_this_one_s() -> None:
    causes = _causes(EXIT, "srun: Terminating StepId=656.1", CANCELLED)
    assert "job-cancelled" in _ids(causes), causes


def test_the_older_wordings_of_the_cancel_line_are_read() -> None:
    for line, id_ in (("slurmstepd: error: *** STEP 656.0 CANCELLED AT 2014-02-26T11:17:29 *** on c67",
                       "job-cancelled"),
                      ("slurmstepd: error: *** JOB 656 CANCELLED AT 2014-02-26T11:17:29 DUE TO TIME LIMIT on c67 ***",
                       "step-time-limit"),
                      ("slurmstepd: error: *** JOB 656 CANCELLED AT 2014-02-26T11:17:29 DUE TO NODE c67 FAILURE ***",
                       "node-failure")):
        causes = _causes(line)
        # Only the older node failure names the node that failed (`NODE c67 FAILURE`); the others name the step's
        # first node, where the verdict was logged.
        assert causes[0].id == id_, (line, causes)
        assert causes[0].hosts == (["c67"] if id_ == "node-failure" else []), (line, causes)
        assert id_ == "node-failure" or "logged by the step daemon on c67" in causes[0].detail
    assert _causes("slurmstepd: error: *** STEP 656.0 CANCELLED AT 2014-02-26T11:17:29 *** on c67", EXIT,
                   "srun: Terminating job step 656.0")[0].id == "job-cancelled"
