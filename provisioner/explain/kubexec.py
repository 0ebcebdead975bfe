"""mpirun's remote-start agent under Kubernetes: kubeflow/mpi-operator sets Open MPI's `plm_rsh_agent` to
/etc/mpi/kubexec.sh, which runs `kubectl exec POD -- /bin/sh -c "orted ..."` where ssh would run the daemon.
mpi-operator's v1 configmap wrote it as

    #!/bin/sh
    set -x
    POD_NAME=$1
    shift
    /opt/kube/kubectl exec ${POD_NAME} -- /bin/sh -c "$*"

so the launcher's log traces `+ POD_NAME=WORKER` before each exec. When kubectl cannot exec, no daemon starts on
that worker and mpirun then reports ORTE/PRRTE unable to start its daemons (or lost one): the same failure as ssh
refusing, read the same way (rules_launch's `launcher-daemon-failed`), with Kubernetes' reasons.

kubectl's own wordings: the binary missing (`kubexec.sh: line 5: /opt/kube/kubectl: not found`, dash's
`kubexec.sh: 5: ...`, `No such file or directory`); the API server refusing the launcher's service account
(`error: You must be logged in to the server (Unauthorized)`, `Error from server (Forbidden): pods "W" is
forbidden: User "system:serviceaccount:..." cannot create resource "pods/exec"`); the exec stream to the kubelet
(`error: unable to upgrade connection: ...`, a pod or container not found or not running); and the remote
command's own status (`command terminated with exit code N`), which counts only where the agent is seen.

The worker pods' labels are those of the controller that wrote the script (read in kubeflow/mpi-operator v0.3.0 and
kubeflow/training-operator): v1, and training-operator's MPIJob, label them `mpi-job-name=JOB,mpi-job-role=worker`;
v1alpha1 and v1alpha2 `mpi_job_name=JOB,mpi_role_type=worker`. v2beta1 starts its daemons over ssh and writes no
kubexec.sh, so its `training.kubeflow.org/job-name` label never goes with this agent. Only v1alpha2's script copies a
hosts file into the worker first (`+ /opt/kube/kubectl cp /opt/kube/hosts POD:/etc/hosts_of_nodes` in the trace),
and v1's passes `--container` (where the job sets mainContainer): where neither shows, both selectors are named.
"""

from __future__ import annotations

import re

from provisioner.explain.logs import Log, LogLine
from provisioner.parsers._text import unique

AGENT_FAILED = re.compile(
    r"kubexec\.sh:(?: line)? \d+: \S*kubectl: (?:not found|No such file or directory|Permission denied)|"
    r"error: unable to upgrade connection\b|You must be logged in to the server \(Unauthorized\)|"
    r"Error from server \((?:Forbidden|NotFound|BadRequest|Unauthorized)\):|"
    r"error: cannot exec into a container in a (?:completed|not running) pod")
_EXIT = re.compile(r"^\s*command terminated with exit code (?P<code>[0-9]+)")
_SEEN = re.compile(r"kubexec\.sh|^\+ POD_NAME=|kubectl exec ")
_POD_TRACE = re.compile(r"^\+ POD_NAME=(?P<pod>\S+)")
_POD_SAID = re.compile(r"pods? \"(?P<pod>[^\"]+)\"")
_ALPHA2 = re.compile(r"kubectl cp \S+ \S+:/etc/hosts_of_nodes")
_V1 = re.compile(r"kubectl exec \S+ --container ")
_V1_SELECTOR = "`kubectl get pods -l mpi-job-name=JOB,mpi-job-role=worker`"
_ALPHA_SELECTOR = "`kubectl get pods -l mpi_job_name=JOB,mpi_role_type=worker`"
# What each wording means, in the launcher's terms: (pattern, reason).
_REASONS = (
    (re.compile(r"kubectl: (?:not found|No such file)"), "kubectl is not in the launcher's image (at /opt/kube, "
     "where mpi-operator's kubectl-delivery init container copies it)"),
    (re.compile(r"Unauthorized"), "the API server rejected the launcher's credentials (its service account token)"),
    (re.compile(r"pods/exec|pods? \"[^\"]+\" is forbidden"), "the launcher's service account may not exec "
     "into the worker pods (RBAC: `create` on `pods/exec`, `get` on `pods`)"),
    (re.compile(r"NotFound|not found|completed|not running|waiting to start"), "the worker pod or its container "
     "was not there or not running when mpirun started"),
    (re.compile(r"unable to upgrade connection"), "the API server could not open the exec stream to the worker's "
     "kubelet (the pod's container gone, or the API server's own credentials to the kubelet refused)"),
    (_EXIT, "the daemon's command failed inside the worker pod (orted not on its PATH, or it exited)"),
)


def failures(log: Log) -> list[LogLine]:
    """The lines where kubectl failed to start mpirun's daemon, where the log shows the agent (or any other
    kubectl wording than the remote command's bare exit status)."""
    seen = any(_SEEN.search(line.text) for line in log.lines)
    return [line for line in log.lines
            if AGENT_FAILED.search(line.text) or (seen and _EXIT.search(line.text))]


def pods(log: Log, lines: list[LogLine]) -> list[str]:
    """The worker pods the failures name: the pod in kubectl's message, or the one the agent's trace set last
    before the failure."""
    names: list[str] = []
    for line in lines:
        if m := _POD_SAID.search(line.text):
            names.append(m["pod"])
            continue
        before = [t for ln in log.lines[:log.lines.index(line)] if (t := _POD_TRACE.match(ln.text))]
        if before:
            names.append(before[-1]["pod"])
    return unique(names)


def reasons(lines: list[LogLine]) -> list[str]:
    """What each failure means, the most specific wording first, once each."""
    return unique([why for line in lines
                   if (why := next((w for pattern, w in _REASONS if pattern.search(line.text)), ""))])


def worker_pods(logs: list[Log]) -> str:
    """How to list the job's worker pods, for the MPIJob version the agent's trace shows (both when it shows none)."""
    lines = [line.text for log in logs for line in log.lines]
    if any(_ALPHA2.search(text) for text in lines):
        return f"{_ALPHA_SELECTOR} (MPIJob v1alpha2)"
    if any(_V1.search(text) for text in lines):
        return f"{_V1_SELECTOR} (MPIJob v1)"
    return f"{_V1_SELECTOR} for an MPIJob v1, {_ALPHA_SELECTOR} for v1alpha1 and v1alpha2"
