"""Where a log says RDMA memory could not be locked or registered, outside NCCL's own WARN lines: the
multi-line notices of Open MPI's openib BTL, UCX and libfabric errors, libibverbs' limit warning.

Wording read: Open MPI's openib help text `The OpenFabrics (openib) BTL failed to initialize while trying
to allocate some locked memory. ...` followed by `Local host:`, `Function:`, `Device:` and `Memlock limit:`
lines (Open MPI 1.4 to 4.x; users@lists.open-mpi.org archives), openib's `Failed to create a completion
queue (CQ):` with `Hostname:` and `Error: Cannot allocate memory` (https://github.com/open-mpi/ompi/issues/4499),
UCX `[ts] [host:pid:thread] ib_iface.c:690 UCX ERROR ibv_create_cq(cqe=4096) failed: Cannot allocate
memory` (https://github.com/open-mpi/ompi/issues/6300) and, from UCX 1.14, `... Please set max locked memory
(ulimit -l) to 'unlimited' (current: 64 kbytes)` (https://github.com/openucx/ucx/issues/8684), the EFA
provider's `Libfabric error: (-12) Cannot allocate memory`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from provisioner.explain.evidence import evidence
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.parsers._text import unique

MEMLOCK = re.compile(r"RLIMIT_MEMLOCK|ulimit -l|locked memory|memlock", re.I)
# A verbs/libfabric call outside NCCL that failed for lack of memory: UCX `ibv_create_cq(cqe=4096) failed:
# Cannot allocate memory`, `mlx5_0: ibv_reg_mr(address=..) failed: ...`, libfabric's `(-12)`.
_ENOMEM_CALL = re.compile(r"\b(?:ibv|mlx5dv|fi)_\w+\s*\([^)]*\)\s*failed\s*:?\s*Cannot allocate memory"
                          r"|Libfabric error:\s*\(-12\)|Failed to create a completion queue", re.I)
# The fields of a notice block, each on its own line after the notice's first line.
_FIELD = re.compile(r"^(?P<key>Local host|Hostname|Device|Local device|Function|Memlock limit)\s*:\s*(?P<value>\S+)")
_UCX_HOST = re.compile(r"\[(?P<host>[A-Za-z][\w.-]*):[0-9]+\s*:[0-9]+\]")
_BLOCK_LINES = 14


@dataclass
class Locked:
    lines: list[LogLine] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    limits: list[str] = field(default_factory=list)  # `Memlock limit:` values the notices report


def _fields(log: Log, first: LogLine, found: Locked) -> None:
    for number in range(first.number + 1, first.number + _BLOCK_LINES):
        line = log.line(number)
        if line is None or line.text.startswith("-----"):
            if line is not None:
                break
            continue
        if m := _FIELD.match(line.text):
            key, value = m.group("key"), m.group("value")
            found.lines.append(line)
            if key in ("Local host", "Hostname"):
                found.hosts.append(value)
            elif key in ("Device", "Local device"):
                found.devices.append(value)
            elif key == "Memlock limit":
                found.limits.append(value)


def locked_memory(logs: list[Log]) -> Locked:
    """Every line outside NCCL's WARNs that says memory could not be locked or registered, with the hosts
    and devices the notices name."""
    found = Locked()
    for log in logs:
        for line, _ in log.grep(re.compile(f"{MEMLOCK.pattern}|{_ENOMEM_CALL.pattern}", re.I)):
            found.lines.append(line)
            if line.host:
                found.hosts.append(line.host)
            elif m := _UCX_HOST.search(line.text):
                found.hosts.append(m.group("host"))
            _fields(log, line, found)
    found.hosts, found.devices, found.limits = unique(found.hosts), unique(found.devices), unique(found.limits)
    found.lines = list({(ln.file, ln.number): ln for ln in found.lines}.values())
    return found


_FIX = ("Raise the locked-memory limit to unlimited where the job's processes start: `* soft memlock unlimited` "
        "and `* hard memlock unlimited` in /etc/security/limits.conf (read only by PAM logins), "
        "LimitMEMLOCK=infinity in the unit of every systemd service that starts ranks (slurmd, sshd, "
        "containerd/docker), and under Slurm PropagateResourceLimits=NONE (or -=MEMLOCK) in slurm.conf so the "
        "submitting shell's low limit is not copied to the job; check with `srun ulimit -l` (or `mpirun ... sh -c "
        "'ulimit -l'`) and start the job again. A container inherits its runtime's limit and cannot raise it "
        "itself: start it with `--ulimit memlock=-1` or `--cap-add=IPC_LOCK`, and in Kubernetes add IPC_LOCK to "
        "the pod's `securityContext.capabilities.add` (a pod has no ulimit setting) or raise LimitMEMLOCK of "
        "containerd on the nodes; check with `kubectl exec POD -- sh -c 'ulimit -l'`.")
_TABLE_FIX = ("The memlock limit is already unlimited: the HCA's own table of registerable memory ran out. On "
              "mlx4 raise log_num_mtt / log_mtts_per_seg (mlx4_core module options) so it covers twice the "
              "host's RAM; on mlx5 read dmesg for CREATE_MKEY failures; and lower the number of ranks or "
              "buffers registering memory per host.")


def memlock_cause(logs: list[Log], nccl_lines: list[LogLine], calls: list[str]) -> Cause | None:
    """The locked-memory cause from NCCL's own failed calls (`nccl_lines`, `calls`) and every other notice."""
    found = locked_memory(logs)
    if not found.lines and not nccl_lines:
        return None
    lines = sorted(nccl_lines + found.lines, key=lambda ln: (ln.file, ln.number))
    where = unique([h for h in hosts_of(nccl_lines) + found.hosts])
    if found.limits and all(limit.lower() == "unlimited" for limit in found.limits) and not calls:
        return Cause(
            id="registered-memory-limit", title="the HCA could not register more memory (memlock is unlimited)",
            detail=f"Open MPI's openib BTL could not lock memory on {', '.join(found.devices) or 'the HCA'} although "
                   "the memlock limit it reports is unlimited.",
            fix=_TABLE_FIX, score=88, hosts=where, evidence=evidence(lines))
    limit = f" (the memlock limit reported: {', '.join(found.limits)})" if found.limits else ""
    return Cause(
        id="memlock-limit",
        title="RDMA memory registration ran out of locked memory",
        detail=(f"{', '.join(calls)} failed with 'Cannot allocate memory'" if calls else
                "memory for RDMA could not be locked or registered") + limit + ": RDMA buffers and queues must "
               "be pinned, and a process may lock only as much memory as its memlock limit (RLIMIT_MEMLOCK) allows.",
        fix=_FIX, score=92, hosts=where, settings=["ulimit -l", "LimitMEMLOCK", "PropagateResourceLimits", "IPC_LOCK"],
        evidence=evidence(lines))


def hosts_of(lines: list[LogLine]) -> list[str]:
    return unique([line.host for line in lines if line.host])
