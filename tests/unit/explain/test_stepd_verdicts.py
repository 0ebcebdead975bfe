"""`explain` on what Slurm's step daemon prints of a job's end that is no rank's death: a node's uncorrectable memory
error (a hardware cause on that node), a job Slurm ended as FAILED or requeued (consequences, ranked below any other
cause the log holds), and the `*** REASON: ... ***` line that explains the verdict before it.

Real log: tests/samples/logs/sbatch-scontrol-requeue-1.txt (source in tests/samples/INDEX.md). No public log of the
FAILED, UNCORRECTABLE MEMORY ERROR or REASON lines was found: those inputs are built by hand from the format strings
of slurmstepd's _handle_signal_container (src/slurmd/slurmstepd/req.c): `*** %s ON %s FAILED (non-zero exit code or
other failure mode) ***` (14.11.10 on), `*** %s FAILED (...) on %s ***` (14.03.8 to 14.11.9), `*** %s FAILED (...)
***` (before), `*** %s ON %s UNCORRECTABLE MEMORY ERROR AT %s ***` (17.02 to 25.05), `*** %s ON %s CANCELLED AT %s
DUE TO JOB REQUEUE ***` (15.08 on; no `ON %s` in 14.11), `*** REASON: %s ***` (22.05 on); the REASON texts are
slurmctld's state descriptions (job_mgr.c `RaisedSignal:%d(%s)`, acct_policy.c `Job is at or exceeds QOS %s's max
TRES(%s) minutes of %PRIu64 with %PRIu64`).
"""

from __future__ import annotations

from provisioner.explain import explain
from provisioner.explain.model import Cause
from tests.unit.explain._field import causes_of

FAILED = "slurmstepd: error: *** STEP 656.0 ON c67 FAILED (non-zero exit code or other failure mode) ***"
REQUEUE = "slurmstepd: error: *** JOB 656 ON c67 CANCELLED AT 2024-02-26T11:17:29 DUE TO JOB REQUEUE ***"
UME = "slurmstepd: error: *** STEP 656.0 ON c68 UNCORRECTABLE MEMORY ERROR AT 2024-02-26T11:10:02 ***"
EXIT = "srun: error: c68: task 14: Exited with exit code 1"


def _causes(*lines: str) -> list[Cause]:
    return explain([("job.log", "\n".join(lines))]).causes


def _ids(causes: list[Cause]) -> list[str]:
    return [c.id for c in causes]


def test_the_real_requeue_is_named_a_requeue_not_a_cancel() -> None:
    causes = causes_of("sbatch-scontrol-requeue-1.txt")
    assert _ids(causes) == ["job-requeued"], causes
    assert causes[0].hosts == [] and "logged by the step daemon on sh-06-34" in causes[0].title
    assert [e.line for e in causes[0].evidence] == [7]
    assert "job 31182239" in causes[0].title and "scontrol requeue" in causes[0].detail


def test_each_wording_of_the_requeue_line() -> None:
    for line, where in ((REQUEUE, ["c67"]),
                        ("slurmstepd: error: *** JOB 656 CANCELLED AT 2015-02-26T11:17:29 DUE TO JOB REQUEUE ***", []),
                        ("[2025-06-26T11:17:29.101] error: *** JOB 656 ON c67 CANCELLED AT 2025-06-26T11:17:29 DUE TO "
                         "JOB REQUEUE ***", ["c67"])):
        causes = _causes(line)
        # The node is where the step's first daemon logged it: said, and named as no host.
        assert _ids(causes) == ["job-requeued"] and causes[0].hosts == [], (line, causes)
        assert all(f"logged by the step daemon on {w}" in causes[0].title for w in where), causes[0].title


def test_a_requeue_ranks_under_the_cause_it_follows() -> None:
    causes = _causes("srun: error: Node failure on c68", REQUEUE)
    assert _ids(causes) == ["node-failure", "job-requeued"], causes
    assert "follows the cause named first" in causes[1].detail and "(node-failure)" in causes[1].detail
    assert causes[1].score < causes[0].score


def test_each_wording_of_the_failed_line_says_where_it_was_logged() -> None:
    for line, where in ((FAILED, ["c67"]),
                        ("slurmstepd: error: *** JOB 656 FAILED (non-zero exit code or other failure mode) on c67 ***",
                         ["c67"]),
                        ("slurmstepd: error: *** JOB 656 FAILED (non-zero exit code or other failure mode) ***", [])):
        causes = _causes(line)
        assert _ids(causes) == ["job-failed"] and causes[0].hosts == [], (line, causes)
        assert all(f"logged by the step daemon on {w}" in causes[0].title for w in where), causes[0].title


def test_a_failed_step_ranks_under_the_task_that_failed() -> None:
    causes = _causes(EXIT, FAILED)
    assert _ids(causes) == ["rank-exited", "job-failed"], causes
    assert causes[1].score < causes[0].score and "(rank-exited)" in causes[1].detail


def test_a_failed_step_leaves_nccl_s_error_named() -> None:
    # A consequence alone does not stop the summaries named when nothing else explains the log.
    nccl = ("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled "
            "system error, NCCL version 2.14.3")
    causes = _causes(nccl, FAILED)
    assert _ids(causes) == ["nccl-error", "job-failed"], causes


def test_slurm_s_reason_is_shown_with_the_verdict_it_follows() -> None:
    causes = _causes(FAILED, "slurmstepd: error: *** REASON: RaisedSignal:9(Killed) ***")
    assert _ids(causes) == ["job-failed"], causes
    assert "Slurm's reason: RaisedSignal:9(Killed)." in causes[0].detail
    assert [e.line for e in causes[0].evidence] == [1, 2]
    limit = ("slurmstepd: error: *** JOB 656 ON c67 CANCELLED AT 2024-02-26T11:17:29 DUE TO TIME LIMIT ***",
             "slurmstepd: error: *** REASON: Job is at or exceeds QOS normal's max TRES(cpu) minutes of 6000 with "
             "6001 ***")
    causes = _causes(*limit)
    assert causes[0].id == "step-time-limit", causes
    assert "Slurm's reason: Job is at or exceeds QOS normal's max TRES(cpu) minutes" in causes[0].detail


def test_a_reason_printed_before_and_after_a_cancel_is_shown_once() -> None:
    # slurmd's SIGCONT carries the reason with no verdict of its own; the SIGTERM after it prints the cancel.
    reason = "slurmstepd: error: *** REASON: Reservation maint, which this job was running under, has ended ***"
    cancel = "slurmstepd: error: *** JOB 656 ON c67 CANCELLED AT 2025-06-26T11:17:29 DUE to SIGNAL Terminated ***"
    causes = _causes(reason, cancel, reason)
    assert causes[0].id == "job-cancelled", causes
    assert causes[0].detail.count("Slurm's reason: Reservation maint") == 1, causes[0].detail


def test_a_reason_far_from_any_verdict_names_nothing() -> None:
    assert _causes("slurmstepd: error: *** REASON: RaisedSignal:9(Killed) ***") == []
    causes = _causes(FAILED, *["step output"] * 8, "slurmstepd: error: *** REASON: RaisedSignal:9(Killed) ***")
    assert "Slurm's reason" not in causes[0].detail, causes


def test_a_node_s_uncorrectable_memory_error_is_a_hardware_cause_there() -> None:
    causes = _causes(UME)
    assert _ids(causes) == ["node-memory-error"], causes
    assert causes[0].hosts == ["c68"] and causes[0].title == "an uncorrectable memory error on c68"
    assert "drain" in causes[0].fix.lower() and "ras-mc-ctl" in causes[0].fix and "edac" in causes[0].fix.lower()
    job = "[2019-02-26T11:10:02.001] error: *** JOB 656 ON c68 UNCORRECTABLE MEMORY ERROR AT 2019-02-26T11:10:02 ***"
    assert _causes(job)[0].hosts == ["c68"]


def test_the_memory_error_leads_the_failure_and_the_failed_step_after_it() -> None:
    causes = _causes(UME, EXIT, "srun: error: Node failure on c68", FAILED)
    ids = _ids(causes)
    assert ids[0] == "node-memory-error" and ids[-1] == "job-failed", causes
    assert "(node-memory-error)" in causes[-1].detail
