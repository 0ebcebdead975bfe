"""`explain` on field logs of launches that failed before NCCL ran: a daemon ssh could not start, and MPI's own
start-up failing (tests/samples/logs/, sources in tests/samples/INDEX.md)."""

from __future__ import annotations

from provisioner.explain import explain
from tests.unit.explain._field import causes_of, line_causes, table

# file -> (the top cause's id, text its first evidence line holds, text its title/detail/fix hold)
CASES: dict[str, tuple[str, str, str]] = {
    # nccl-tests#299: PRRTE reports a lost daemon that ssh never started. Before: "a node failed under the job",
    # with advice to drain a node that was never reached.
    "nccl-tests-prte-ssh-refused-lost-daemon-1.txt": (
        "launcher-daemon-failed", "ssh: connect to host (worker_ip) port 22: Connection refused", "Connection refused"),
    # nccl-tests#92: MPICH's MPI_Init failed in its PMI exchange. Before: no cause named.
    "nccl-tests-mpich-pmi-kvs-get-init-1.txt": (
        "mpi-init-failed", "Fatal error in PMPI_Init", "PMI_KVS_Get returned -1"),
}
HOSTS: dict[str, list[str]] = {
    "nccl-tests-prte-ssh-refused-lost-daemon-1.txt": ["(worker_ip)"],
    "nccl-tests-mpich-pmi-kvs-get-init-1.txt": [],
}

test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, test_the_hosts_each_names = table(
    CASES, HOSTS)


def test_the_daemon_ssh_never_started_is_no_node_failure() -> None:
    ids = [c.id for c in causes_of("nccl-tests-prte-ssh-refused-lost-daemon-1.txt")]
    assert "node-failure" not in ids, ids


def test_a_daemon_lost_without_an_ssh_failure_is_still_a_node_failure() -> None:
    """PRRTE's wording alone, mid-run: the node went away under the job."""
    causes = line_causes("PRTE has lost communication with a remote daemon.",
                         "  Remote daemon: [prterun-gpu-a-34@0,1] on node gpu-b")
    assert causes and causes[0][0] == "node-failure", causes


def test_other_ssh_failures_name_the_daemon_launch() -> None:
    for ssh in ("ssh: Could not resolve hostname gpu-b: Name or service not known",
                "ssh: connect to host gpu-b port 22: No route to host",
                "user@gpu-b: Permission denied (publickey,password).",
                "Host key verification failed."):
        text = "\n".join((ssh, "PRTE has lost communication with a remote daemon.",
                           "  Remote daemon: [prterun-gpu-a-34@0,1] on node gpu-b"))
        causes = explain([("mpirun.log", text)]).causes
        assert causes and causes[0].id == "launcher-daemon-failed", (ssh, causes)
        assert "gpu-b" in causes[0].hosts, causes[0].hosts


def test_open_mpi_wordings_of_mpi_init_failing() -> None:
    """Open MPI's errhandler, its help texts across 1.x to 5.x, and its direct launch by srun without PMI."""
    for lines in (("*** An error occurred in MPI_Init_thread", "*** on a NULL communicator"),
                  ("It looks like MPI_INIT failed for some reason; your parallel process is",),
                  ("It looks like MPI runtime init failed for some reason; your parallel process is",),
                  ("It looks like orte_init failed for some reason; your parallel process is",),
                  ('The application appears to have been direct launched using "srun",',
                   "but OMPI was not built with SLURM's PMI support and therefore cannot"),
                  ("PMI2_Init failed to intialize.  Return code: 1",)):
        causes = line_causes(*lines)
        assert causes and causes[0][0] == "mpi-init-failed", (lines, causes)
    srun = line_causes('The application appears to have been direct launched using "srun",')
    assert "srun --mpi=pmix" in srun[0][1], srun
