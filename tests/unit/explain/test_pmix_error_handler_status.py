"""`explain` on Slurm's mpi/pmix plugin reporting the PMIx library's error event, `Error handler invoked: status =
N`, after which the plugin kills the step: a status saying a peer or node could not be reached is the exchange
between the nodes failing, named with its meaning; a status saying a local rank went away is named only beside it.

Real log: tests/samples/logs/slurmstepd-pmix-v2-error-handler-unreach-1.txt (openpmix#2031; source in
tests/samples/INDEX.md). Lines built by hand take their wording from Slurm's pmixp_client_v2.c `_errhandler`
(`Error handler invoked: status = %d, source = [%s:%d]`, 20.11.1 to 25.11) and pmixp_coll_ring.c (`collective
timeout seq=%d`, `neighbor id: next %d:%s, prev %d:%s`); the statuses' names from openpmix include/pmix_common.h.
"""

from __future__ import annotations

from provisioner.explain import explain
from provisioner.explain.model import Cause
from tests.unit.explain._field import LOGS

PRE = "slurmstepd: error:  mpi/pmix_v4: "


def _causes(*texts: str) -> list[Cause]:
    return explain([("job.log", "\n".join(texts))]).causes


def test_the_unreachable_status_before_the_fence_dump_is_the_wire_up_failing() -> None:
    causes = _causes((LOGS / "slurmstepd-pmix-v2-error-handler-unreach-1.txt").read_text())
    top = causes[0]
    assert top.id == "pmix-wireup-failed" and top.hosts == ["b1275"], causes
    assert "PMIx status -25 (PMIX_ERR_UNREACH, a peer could not be reached)" in top.detail, top.detail
    assert "killed the step" in top.detail and "timed out" not in top.detail, top.detail
    # The state dump after it is shown beside the failure, not read as a fence that timed out.
    assert [e.line for e in top.evidence] == [1, 2, 3, 4]


def test_the_state_dump_alone_is_no_wire_up_failure() -> None:
    dump = (LOGS / "slurmstepd-pmix-v2-error-handler-unreach-1.txt").read_text().splitlines()[1:]
    assert "pmix-wireup-failed" not in [c.id for c in _causes(*dump)]


def test_the_status_and_its_source_rank_are_named_beside_a_fence_timeout() -> None:
    causes = _causes(
        PRE + "_errhandler: gpu-a01 [0]: pmixp_client_v2.c:225: Error handler invoked: status = -25, source = "
        "[slurm.pmix.656.0:3]",
        PRE + "pmixp_coll_ring_reset_if_to: gpu-a01 [0]: pmixp_coll_ring.c:742: 0x14ce0c02cb20: collective timeout "
        "seq=0",
        PRE + "pmixp_coll_ring_log: gpu-a01 [0]: pmixp_coll_ring.c:760: neighbor id: next 1:gpu-a02, prev 1:gpu-a02")
    top = causes[0]
    assert top.id == "pmix-wireup-failed", causes
    assert "timed out waiting for gpu-a02" in top.detail, top.detail
    assert "PMIx reported PMIx status -25 (PMIX_ERR_UNREACH, a peer could not be reached) from rank 3" in top.detail
    assert set(top.hosts) == {"gpu-a01", "gpu-a02"}


def test_a_local_rank_lost_is_no_wire_up_failure_on_its_own() -> None:
    # -61, PMIX_ERR_LOST_CONNECTION (PMIx v4 on): a rank's connection to its stepd closed, as when it exits.
    causes = _causes(
        PRE + "_errhandler: c67 [0]: pmixp_client_v2.c:211: Error handler invoked: status = -61, source = "
        "[slurm.pmix.20221954.1:21]",
        "srun: error: c67: task 14: Exited with exit code 1")
    assert "pmix-wireup-failed" not in [c.id for c in causes], causes


def test_a_local_status_is_named_when_the_exchange_failed_too() -> None:
    causes = _causes(
        PRE + "_errhandler: c67 [0]: pmixp_client_v2.c:211: Error handler invoked: status = -61, source = "
        "[slurm.pmix.1.0:2]",
        PRE + "pmixp_p2p_send: c67 [0]: pmixp_utils.c:469: send failed, rc=1001, exceeded the retry limit")
    top = causes[0]
    assert top.id == "pmix-wireup-failed", causes
    assert "PMIx status -61 (PMIX_ERR_LOST_CONNECTION, a rank's connection to its stepd was lost) from rank 2" \
        in top.detail, top.detail
