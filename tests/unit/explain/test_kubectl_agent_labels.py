"""`explain`'s advice for mpi-operator's kubectl agent names the worker pods' labels of the MPIJob version that wrote
kubexec.sh. The traces follow the scripts in kubeflow/mpi-operator v0.3.0 (pkg/controllers/v1, v1alpha1, v1alpha2:
`set -x`, so the shell prints each command), the failure kubectl's `error: unable to upgrade connection` and the end
Open MPI 4's `ORTE was unable to reliably start one or more daemons`."""

from __future__ import annotations

from provisioner.explain import explain

_FAILED = ("error: unable to upgrade connection: container not found (\"mpi\")",
           "ORTE was unable to reliably start one or more daemons.")
_V1ALPHA1 = ("+ POD_NAME=bench-worker-1", "+ shift",
             "+ /opt/kube/kubectl exec bench-worker-1 -- /bin/sh -c /usr/local/bin/orted -mca ess \"env\"")
_V1 = ("+ POD_NAME=bench-worker-1", "+ shift",
       "+ /opt/kube/kubectl exec bench-worker-1 --container mpi -- /bin/sh -c /usr/local/bin/orted -mca ess \"env\"")
_V1ALPHA2 = ("+ POD_NAME=bench-worker-1", "+ shift",
             "+ /opt/kube/kubectl cp /opt/kube/hosts bench-worker-1:/etc/hosts_of_nodes", *_V1ALPHA1[2:])


def _fix(trace: tuple[str, ...]) -> str:
    top = explain([("launcher.log", "\n".join((*trace, *_FAILED)))]).causes[0]
    assert top.id == "launcher-daemon-failed", top.id
    return top.fix


def test_no_v2beta1_label_goes_with_the_kubectl_agent() -> None:
    # v2beta1 starts its daemons over ssh: its training.kubeflow.org labels never go with kubexec.sh.
    for trace in (_V1ALPHA1, _V1, _V1ALPHA2):
        assert "training.kubeflow.org" not in _fix(trace)


def test_a_trace_that_cannot_tell_the_version_names_both_selectors() -> None:
    fix = _fix(_V1ALPHA1)
    assert "mpi-job-name=JOB,mpi-job-role=worker" in fix and "mpi_job_name=JOB,mpi_role_type=worker" in fix, fix


def test_the_version_the_trace_shows_names_its_selector_alone() -> None:
    v1, alpha2 = _fix(_V1), _fix(_V1ALPHA2)
    assert "mpi-job-name=JOB,mpi-job-role=worker` (MPIJob v1)" in v1 and "mpi_job_name" not in v1, v1
    assert "mpi_job_name=JOB,mpi_role_type=worker` (MPIJob v1alpha2)" in alpha2 and "mpi-job-name" not in alpha2
