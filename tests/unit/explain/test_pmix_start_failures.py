"""`explain` on Slurm's mpi/pmix plugin failing to start, the PMIx library it could not load, Open MPI's own side of
a failed PMIx exchange, and the order of a verdict in another log read from the lines' times.

Real sample: tests/samples/slurm/srun-3-mpi-list-then-pmix-v5-cannot-load.txt (pyiron/executorlib#761). Lines built
by hand take their wording from: Slurm's src/plugins/mpi/pmix (17.11 to 25.11) mpi_pmix.c `pmixp_stepd_init()
failed` and `incorrect PMIx library version loaded %d was loaded, required %d version`, pmixp_server.c
`pmixp_libpmix_init() failed` and `pmixp_libpmix_job_set() failed`, pmixp_client.c `PMIx_server_init failed with
error %d`, in the sequence pmix/pmix-standard#419 shows (a slurmd log, with its `[YYYY-MM-DDTHH:MM:SS.mmm]`
stamps and the `(null)` node of the prefork hook) and openpmix/openpmix#3872 names; Open MPI's
ompi/runtime/ompi_mpi_init.c and ompi/instance/instance.c (`PMIx_Fence_nb() failed`, `PMIx_Fence() failed`, as
listed in open-mpi/ompi#11166) under its `It looks like MPI_INIT failed` help text; srun's `Node failure on H`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.explain import explain
from provisioner.explain.model import Cause

SAMPLES = Path(__file__).parents[2] / "samples" / "slurm"
STEPD = "[2022-06-27T20:13:10.465] [11041.0] error: mpi/pmix_v3: "


def _causes(*logs: tuple[str, str]) -> list[Cause]:
    return explain(list(logs)).causes


@pytest.mark.parametrize("line", [
    STEPD + "pmixp_lib_init: gpu-a01 [9945]: pmixp_client_v2.c:246: PMIx_server_init failed with error -31",
    STEPD + "pmixp_stepd_init: gpu-a01 [9945]: pmixp_server.c:430: pmixp_libpmix_init() failed",
    STEPD + "pmixp_stepd_init: gpu-a01 [9945]: pmixp_server.c:428: pmixp_libpmix_job_set() failed",
])
def test_the_plugin_that_did_not_start_on_a_node(line: str) -> None:
    text = "\n".join([line, STEPD + "p_mpi_hook_slurmstepd_prefork: (null) [9945]: mpi_pmix.c:166: "
                      "pmixp_stepd_init() failed", "[2022-06-27T20:13:10.549] [11041.0] error: Failed "
                      "mpi_hook_slurmstepd_prefork"])
    top = _causes(("slurmd.log", text))[0]
    assert top.id == "pmix-wireup-failed" and top.hosts == ["gpu-a01"], top
    assert top.title == "Slurm's PMIx plugin could not start on gpu-a01", top.title
    assert "(null)" not in top.title + top.detail and "PMIxDebug=1" in top.fix, top


def test_the_server_init_code_is_named() -> None:
    top = _causes(("slurmd.log", STEPD + "pmixp_lib_init: gpu-a01 [9945]: pmixp_client_v2.c:246: PMIx_server_init "
                   "failed with error -31"))[0]
    assert "PMIx_server_init returned -31" in top.detail, top.detail


def test_a_plugin_that_cannot_load_its_library() -> None:
    name = "srun-3-mpi-list-then-pmix-v5-cannot-load.txt"
    causes = _causes((name, (SAMPLES / name).read_text()))
    assert [c.id for c in causes] == ["pmix-library-not-loaded"], causes
    assert "found none there" in causes[0].detail, causes[0].detail


def test_the_library_of_another_pmix_release() -> None:
    line = ("srun: error:  mpi/pmix_v3: _libpmix_open: (null) [0]: mpi_pmix.c:124: pmi/pmix: incorrect PMIx library "
            "version loaded 2 was loaded, required 3 version")
    top = _causes(("job.log", line))[0]
    assert top.id == "pmix-library-not-loaded" and "PMIx v2 loaded, v3 built against" in top.detail, top


@pytest.mark.parametrize("why", ["PMIx_Fence_nb() failed", "PMIx_Fence() failed"])
def test_open_mpis_side_of_a_failed_exchange(why: str) -> None:
    text = "\n".join(["It looks like MPI_INIT failed for some reason; your parallel process is",
                      "likely to abort.  There are many reasons that a parallel process can", "",
                      f"  {why}", '  --> Returned "Error" (-1) instead of "Success" (0)'])
    causes = _causes(("job.log", text))
    assert [c.id for c in causes] == ["pmix-wireup-failed"], causes  # no second, vaguer MPI_Init cause
    assert "PMIx_Fence" in causes[0].title and "under srun" in causes[0].detail, causes[0]


FENCE = ("[2024-02-26T11:17:29.100] [656.0] error:  mpi/pmix_v5: pmixp_p2p_send: gpu-a01 [0]: pmixp_utils.c:469: "
         "send failed, rc=1001, exceeded the retry limit")


def test_a_verdict_in_another_log_after_the_wire_up_by_its_time_ranks_under_it() -> None:
    causes = _causes(("slurmd.log", FENCE), ("srun.log", "[2024-02-26T11:18:02.000] srun: error: Node failure on "
                                                          "gpu-a02"))
    assert [c.id for c in causes] == ["pmix-wireup-failed", "node-failure"], causes


def test_a_verdict_in_another_log_before_the_wire_up_by_its_time_keeps_its_rank() -> None:
    causes = _causes(("slurmd.log", FENCE), ("srun.log", "[2024-02-26T11:15:00.000] srun: error: Node failure on "
                                                          "gpu-a02"))
    assert [c.id for c in causes] == ["node-failure", "pmix-wireup-failed"], causes
    assert "pmix-wireup-failed" not in causes[0].detail, causes[0].detail
