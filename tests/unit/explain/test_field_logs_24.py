"""`explain` on field logs of Slurm's MPI wire-up failing between the nodes of a step (its PMIx plugin's fence
timing out, a direct connection refused, a node it cannot look up), and on mpirun's kubectl agent under the MPI
operator failing where ssh would (tests/samples/logs/, sources in tests/samples/INDEX.md)."""

from __future__ import annotations

from provisioner.explain import explain
from tests.unit.explain._field import causes_of, table

# file -> (the top cause's id, text its first evidence line holds, text its title/detail/fix hold)
CASES: dict[str, tuple[str, str, str]] = {
    # deepops#1179: the ring fence on adas-ml waited for adas-ml-2 until PMIx's timeout. Before: no cause named.
    "slurmstepd-pmix-v3-fence-ring-collective-timeout-1.txt": (
        "pmix-wireup-failed", "collective timeout seq=0", "timed out waiting for adas-ml-2"),
    # openpmix#3098: a stepd's TCP connection to another stepd failed. Before: no cause named.
    "slurmstepd-pmix-v2-direct-connection-failed-1.txt": (
        "pmix-wireup-failed", "Cannot establish the connection", "SrunPortRange"),
    # openpmix#2786: node4's stepd could not find node5 in its slurm.conf. Before: no cause named.
    "slurmstepd-pmix-v5-no-address-for-host-1.txt": (
        "pmix-wireup-failed", "Can't find address for host node5", "could not look up node5 in slurm.conf"),
    # openpmix#3559: ccexe0094's stepd could not connect to another node's slurmd (rc=1001), then srun reported
    # ccexe0091 failed. Before: the node failure first, the PMIx error under it.
    "slurmstepd-pmix-v5-send-retry-limit-node-failure-1.txt": (
        "pmix-wireup-failed", "send failed, rc=1001", "could not connect to that node's slurmd"),
}
HOSTS: dict[str, list[str]] = {
    "slurmstepd-pmix-v3-fence-ring-collective-timeout-1.txt": ["adas-ml-2", "adas-ml"],
    "slurmstepd-pmix-v2-direct-connection-failed-1.txt": ["lxbk1177"],
    "slurmstepd-pmix-v5-no-address-for-host-1.txt": ["node5", "node4"],
    "slurmstepd-pmix-v5-send-retry-limit-node-failure-1.txt": ["ccexe0091", "ccexe0094"],
}

test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, test_the_hosts_each_names = table(
    CASES, HOSTS)


def _top(text: str) -> tuple[str, str, list[str]]:
    causes = explain([("job.log", text)]).causes
    assert causes, text
    top = causes[0]
    return top.id, " ".join([top.title, top.detail, top.fix]), top.hosts


def test_the_fence_timeout_names_the_nodes_the_dump_still_waited_for() -> None:
    """Slurm 25.11's pmixp_coll_tree.c: `collective timeout seq=%d`, then the dump's `\\t wait contrib: %s` (a
    ranged host list)."""
    pre = "slurmstepd: error:  mpi/pmix_v5: "
    cause = _top("\n".join((
        pre + "pmixp_coll_tree_reset_if_to: gpu-a01 [0]: pmixp_coll_tree.c:1317: 0x1540: collective timeout seq=3",
        pre + "pmixp_coll_tree_log: gpu-a01 [0]: pmixp_coll_tree.c:1385: \t done contrib: gpu-a02",
        pre + "pmixp_coll_tree_log: gpu-a01 [0]: pmixp_coll_tree.c:1387: \t wait contrib: gpu-a[03-04]")))
    assert cause[0] == "pmix-wireup-failed", cause
    assert cause[2][:2] == ["gpu-a03", "gpu-a04"], cause[2]
    assert "SLURM_PMIX_TIMEOUT" in cause[1]


def test_the_wording_before_slurm_20_11_4() -> None:
    """Slurm 20.02's PMIXP_ERROR: `HOST [ID] FILE:LINE [FUNC] mpi/pmix: ERROR: ...` (as slurmd's log prints it)."""
    pre = "[2021-01-18T13:47:25.004] [142913.0] error: b1275 [0] "
    cause = _top("\n".join((
        pre + "pmixp_coll_ring.c:736 [pmixp_coll_ring_reset_if_to] mpi/pmix: ERROR: 0x2abf: collective timeout seq=0",
        pre + "pmixp_coll_ring.c:758 [pmixp_coll_ring_log] mpi/pmix: ERROR: neighbor id: next 1:b1276, prev 1:b1276")))
    assert cause[0] == "pmix-wireup-failed" and "b1276" in cause[2], cause


def test_pmi2_fence_send_failures() -> None:
    """Slurm's mpi/pmi2 tree.c and pmi2.c (20.11 to 25.11): the node or srun the fence could not reach."""
    for line, host in (("slurmstepd: error: mpi/pmi2: failed to send temp kvs to gpu-b07", "gpu-b07"),
                       ("slurmstepd: error: mpi/pmi2: 303 failed to send temp kvs to srun", None),
                       ("srun: error: mpi/pmi2: failed to send temp kvs to compute nodes", None)):
        cause = _top(line)
        assert cause[0] == "pmix-wireup-failed" and "PMI2" in cause[1], (line, cause)
        assert host is None or host in cause[2], cause


def test_a_pmix_line_of_no_wire_up_failure_names_nothing() -> None:
    assert not explain([("job.log", "slurmstepd: error:  mpi/pmix_v4: pmixp_coll_log: gpu-a01 [0]: "
                                    "pmixp_coll.c:281: Dumping collective state")]).causes


# The launcher's trace of mpi-operator's kubexec.sh (`set -x`: `+ POD_NAME=...`, `+ /opt/kube/kubectl exec ...`),
# then what Open MPI 4 prints when the daemon it asked for never called back.
_TRACE = ("+ POD_NAME=bench-worker-1", "+ shift",
          "+ /opt/kube/kubectl exec bench-worker-1 -- /bin/sh -c     /usr/local/bin/orted -mca ess \"env\" "
          "-mca plm_rsh_agent \"/etc/mpi/kubexec.sh\"")
_ORTE = ("--------------------------------------------------------------------------",
         "ORTE was unable to reliably start one or more daemons.", "This usually is caused by:")


def test_kubectl_agent_failures_are_the_daemon_launch_in_kubernetes_terms() -> None:
    for failed, says in (
            ("/etc/mpi/kubexec.sh: line 5: /opt/kube/kubectl: not found", "kubectl is not in the launcher's image"),
            ('Error from server (Forbidden): pods "bench-worker-1" is forbidden: User '
             '"system:serviceaccount:default:bench-launcher" cannot create resource "pods/exec" in API group "" '
             'in the namespace "default"', "RBAC"),
            ("error: You must be logged in to the server (Unauthorized)", "rejected the launcher's credentials"),
            ('error: unable to upgrade connection: container not found ("mpi")', "not there or not running"),
            ("error: unable to upgrade connection: Forbidden", "exec stream"),
            ("command terminated with exit code 127", "orted not on its PATH")):
        cause = _top("\n".join((*_TRACE, failed, *_ORTE)))
        assert cause[0] == "launcher-daemon-failed", (failed, cause)
        assert says in cause[1] and "pods/exec" in cause[1], (failed, cause[1])
        assert cause[2] == ["bench-worker-1"], (failed, cause[2])


def test_a_lost_daemon_after_kubectl_failed_is_no_node_failure() -> None:
    """PRRTE's lost daemon after the agent failed: the daemon never started, as after ssh failing."""
    text = "\n".join((*_TRACE, "error: unable to upgrade connection: pod does not exist",
                      "PRTE has lost communication with a remote daemon.",
                      "  Remote daemon: [prterun-bench-launcher-34@0,1] on node bench-worker-1"))
    ids = [c.id for c in explain([("launcher.log", text)]).causes]
    assert ids and ids[0] == "launcher-daemon-failed" and "node-failure" not in ids, ids


def test_a_bare_exit_status_without_the_agent_is_not_read_as_it() -> None:
    """`command terminated with exit code 1` is any kubectl exec's remote status: alone it names no agent."""
    text = "\n".join(("command terminated with exit code 1", *_ORTE))
    causes = explain([("launcher.log", text)]).causes
    assert causes and "kubectl" not in causes[0].title, causes[0].title


def test_the_ssh_reading_is_unchanged() -> None:
    causes = causes_of("nccl-tests-prte-ssh-refused-lost-daemon-1.txt")
    assert causes[0].id == "launcher-daemon-failed" and "ssh" in causes[0].detail
