"""`explain` on a step whose Slurm MPI wire-up failed and what the launcher and scheduler said after it: the
wire-up ranks first, the ranks killed or the node failure after it are kept under it as its consequence, and a
generic crash is dropped.

Real logs: tests/samples/logs/slurmstepd-pmix-*.txt (sources in tests/samples/INDEX.md). Lines built by hand take
their wording from Slurm's source: srun's `srun: error: H: task N: Killed` and `Node failure on H` (src/srun),
slurmstepd's `Detected N oom-kill event(s) in StepId=...` (src/slurmd/slurmstepd), and the mpi/pmix plugin's
pmixp_utils.c `send failed, rc=%d, exceeded the retry limit` (20.11 to 25.11).
"""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from provisioner.explain.model import Cause
from tests.unit.explain._field import LOGS

# The real samples of a failed wire-up, and a node each names.
SAMPLES = {"slurmstepd-pmix-v3-fence-ring-collective-timeout-1.txt": "adas-ml-2",
           "slurmstepd-pmix-v2-direct-connection-failed-1.txt": "lxbk1177",
           "slurmstepd-pmix-v5-no-address-for-host-1.txt": "node5"}
PRE = "slurmstepd: error:  mpi/pmix_v5: "


def _causes(*texts: str) -> list[Cause]:
    return explain([("job.log", "\n".join(texts))]).causes


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_killed_rank_after_the_wire_up_failed_ranks_under_it(name: str) -> None:
    host = SAMPLES[name]
    causes = _causes((LOGS / name).read_text(), f"srun: error: {host}: task 1: Killed", "Segmentation fault")
    ids = [c.id for c in causes]
    assert ids[:2] == ["pmix-wireup-failed", "rank-killed"], ids
    assert "process-crashed" not in ids, ids
    assert "pmix-wireup-failed" in causes[1].detail and causes[1].score < causes[0].score


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_generic_crash_after_the_wire_up_failed_is_dropped(name: str) -> None:
    ids = [c.id for c in _causes((LOGS / name).read_text(), "Segmentation fault (core dumped)")]
    assert ids == ["pmix-wireup-failed"], ids


def test_the_node_failure_after_a_send_failure_is_kept_under_it_as_a_possible_consequence() -> None:
    causes = explain([(n, (LOGS / n).read_text()) for n in ["slurmstepd-pmix-v5-send-retry-limit-node-failure-1.txt"]
                      ]).causes
    assert [c.id for c in causes] == ["pmix-wireup-failed", "node-failure"], causes
    assert "node failure on ccexe0091" in causes[0].detail
    assert "set down because the other nodes could not reach it" in causes[1].detail


@pytest.mark.parametrize("verdict", ["srun: error: Node failure on gpu-a02", "srun: error: gpu-a02: task 1: Killed"])
def test_a_demoted_verdict_says_once_what_it_is_a_consequence_of(verdict: str) -> None:
    """Its own sentence calling the errors after it its consequence would contradict the note that it is one."""
    causes = _causes(PRE + "pmixp_p2p_send: gpu-a01 [0]: pmixp_utils.c:469: send failed, rc=1001, exceeded the "
                     "retry limit", verdict)
    demoted = causes[1]
    assert demoted.id in ("node-failure", "rank-killed") and demoted.score < causes[0].score, causes
    assert demoted.detail.count("consequence") == 1, demoted.detail
    assert "are its consequence" not in demoted.detail, demoted.detail
    assert "most likely a consequence of Slurm's PMIx/PMI2 exchange" in demoted.detail, demoted.detail


def test_a_verdict_in_another_log_is_taken_to_follow_the_wire_up() -> None:
    name = "slurmstepd-pmix-v5-no-address-for-host-1.txt"
    causes = explain([(name, (LOGS / name).read_text()), ("srun.out", "srun: error: node5: task 1: Killed")]).causes
    assert [c.id for c in causes][:2] == ["pmix-wireup-failed", "rank-killed"], causes


def test_a_node_failure_before_the_wire_up_failed_keeps_its_rank() -> None:
    """The node went first: the stepds then could not reach it, and the PMIx errors are its consequence."""
    causes = _causes("srun: error: Node failure on gpu-a02",
                     PRE + "pmixp_p2p_send: gpu-a01 [0]: pmixp_utils.c:469: send failed, rc=1001, exceeded the "
                     "retry limit")
    assert [c.id for c in causes] == ["node-failure", "pmix-wireup-failed"], causes
    assert "pmix-wireup-failed" not in causes[0].detail


def test_an_oom_kill_is_no_consequence_of_the_wire_up() -> None:
    name = "slurmstepd-pmix-v3-fence-ring-collective-timeout-1.txt"
    ids = [c.id for c in _causes((LOGS / name).read_text(), "slurmstepd: error: Detected 1 oom-kill event(s) in "
                                 "StepId=656.0. Some of the step tasks have been OOM Killed.")]
    assert ids[0] == "rank-oom", ids
