"""What Slurm's step daemon prints of a job's end that is no rank's death (launch_lines reads the verdicts; each
wording from src/slurmd/slurmstepd/req.c, _handle_signal_container):

- `*** STEP 1234.0 ON gpu04 UNCORRECTABLE MEMORY ERROR AT <time> ***` (JOB too; 17.02 to 25.05): the
  node_features/knl_generic plugin saw the node's count of uncorrectable memory errors in the kernel's EDAC counters
  (its McPath, `/sys/devices/system/edac/mc/mc*/csrow*/ue_count`) go up, and told every step on that node. The
  node's memory failed: a hardware cause on that node, ranked like a GPU's hardware fault.
- `*** STEP 1234.0 ON gpu04 FAILED (non-zero exit code or other failure mode) ***`: slurmctld had already marked the
  job FAILED (its batch script ended with a non-zero code or on a signal, a SPANK plugin failed the launch) and
  ends the steps still running. The consequence of that failure, never its cause.
- `*** JOB 1234 ON gpu04 CANCELLED AT <time> DUE TO JOB REQUEUE ***`: the job was queued again (`scontrol requeue`
  by an operator or by the job's own script, preemption with PreemptMode=REQUEUE, a node failure under a job that
  may be requeued, a prolog or launch that failed), so its run ended to start again from the beginning under the
  same id. A consequence too; it took the ranks away, so a run that stopped there is no lossy path's fault
  (rules.NARROWED).

Those two name no host: the node their line names is the step's first, whose stepd printed it (req.c prints only
on node 0 of the step). They are ranked
below every other cause the logs hold (follow), as the cancel slurmstepd logs after srun ended a step is named the
consequence of the task's failure (rules_launch). The `*** REASON: ... ***` line slurmctld adds (22.05 on) is shown
in the detail of the verdict it follows (reasons).
"""

from __future__ import annotations

import re

from provisioner.explain.evidence import evidence, grep
from provisioner.explain.launch_lines import REASON, End, read_ends
from provisioner.explain.logs import Log
from provisioner.explain.model import Cause
from provisioner.parsers._text import unique

MEMORY = "node-memory-error"
FAILED = "job-failed"
REQUEUED = "job-requeued"
CONSEQUENCES = {FAILED, REQUEUED}
# The causes read from slurmstepd's verdicts, whose evidence holds the REASON line that follows one.
_VERDICT_CAUSES = CONSEQUENCES | {"step-time-limit", "node-failure", "job-cancelled", "rank-exited", "rank-killed"}

_UME = re.compile(r"\*\*\* (?:JOB|STEP) (?P<id>\S+) ON (?P<host>\S+) UNCORRECTABLE MEMORY ERROR AT (?P<at>\S+)")


def memory_error(logs: list[Log]) -> list[Cause]:
    hits = grep(logs, _UME)
    if not hits:
        return []
    where = unique([m["host"] for _, m in hits])
    steps = unique([m["id"] for _, m in hits])
    nodes = ", ".join(where)
    return [Cause(
        id=MEMORY, title=f"an uncorrectable memory error on {nodes}",
        detail=f"Slurm told the job's steps ({', '.join(steps)}) on {nodes} that the node's memory had an "
               "uncorrectable error: the kernel's EDAC count of uncorrected errors there went up (Slurm's "
               "knl_generic plugin watches it). Data in that node's RAM was lost, so its processes crash or compute "
               "on bad data, and the errors the other ranks report after that follow from it. It is that node's "
               "hardware, not the job or the network.",
        fix="Drain the node (`scontrol update NodeName=NODE State=DRAIN Reason=\"uncorrectable memory error\"`), "
            "then find the DIMM on it: `ras-mc-ctl --errors` and `ras-mc-ctl --summary` (rasdaemon), `edac-util -v`, "
            "the `ue_count` files under `/sys/devices/system/edac/mc/`, and the kernel log (`journalctl -k | grep -i "
            "-e edac -e mce -e 'hardware error'`). Replace or reseat the DIMM the memory controller names and test the "
            "memory before the node takes jobs again.",
        score=94, hosts=where, evidence=evidence([line for line, _ in hits]))]


def _named(ends: list[End]) -> tuple[str, str]:
    """`step 1234.0, job 1235`, and ` (logged by the step daemon on NODES)` for the nodes the lines name (their
    steps' first nodes, where the stepd printed them: no host at fault), or '' where they name none."""
    what = unique([("step " if "." in e.extra.get("step", "") else "job ") + e.extra.get("step", "") for e in ends])
    where = unique([e.host for e in ends if e.host])
    return ", ".join(what), f" (logged by the step daemon on {', '.join(where)})" if where else ""


def consequences(logs: list[Log]) -> list[Cause]:
    ends = [e for log in logs for e in read_ends(log) if e.kind in ("job-failed", "requeue")]
    causes = []
    if failed := [e for e in ends if e.kind == "job-failed"]:
        what, on = _named(failed)
        causes.append(Cause(
            id=FAILED, title=f"Slurm ended {what}{on} as FAILED",
            detail=f"slurmstepd reports {what}{on} FAILED (non-zero exit code or other failure mode): slurmctld had "
                   "already marked the job FAILED (its batch script ended with a non-zero code or on a signal, or a "
                   "launch failed) and ended the steps still running. That end is the consequence of the failure, "
                   "not its cause; the node named is the step's first, whose stepd printed it, not necessarily the "
                   "one that failed, so it is named as no host.",
            fix="Find what failed first: `sacct -j JOB -o JobID,State,ExitCode,DerivedExitCode,Reason` names the "
                "step or batch script that failed and how; read its output, and the batch script's last commands, "
                "before this line.",
            score=44, hosts=[], evidence=evidence([ln for e in failed for ln in e.lines])))
    if requeued := [e for e in ends if e.kind == "requeue"]:
        what, on = _named(requeued)
        causes.append(Cause(
            id=REQUEUED, title=f"Slurm requeued the job ({what}{on})",
            detail=f"slurmstepd ended {what}{on} to queue the job again (`DUE TO JOB REQUEUE`): an operator's or the "
                   "job's own `scontrol requeue`, preemption by another job (PreemptMode=REQUEUE), a node failure "
                   "under a job that may be requeued, or a prolog or launch that failed. The run stopped there and "
                   "starts again from the beginning under the same job id: the requeue is the consequence of that "
                   "decision or failure, not a fault of the run.",
            fix="Ask Slurm why: `sacct -j JOB --duplicates -o JobID,Start,End,State,Reason,NodeList` (each run of the "
                "job) and `scontrol show job JOB` (Restarts, Reason); for preemption ask for another QOS or "
                "partition; a job that must not start again needs --no-requeue.",
            score=43, hosts=[], evidence=evidence([ln for e in requeued for ln in e.lines])))
    return causes


def follow(causes: list[Cause]) -> list[Cause]:
    """A failed or requeued job's verdict ranked below every other cause named, which it most likely follows."""
    others = [c for c in causes if c.id not in CONSEQUENCES]
    if not others or len(others) == len(causes):
        return causes
    lead = max(others, key=lambda c: c.score)
    floor = max(1, min(c.score for c in others) - 1)
    note = f" Here it most likely follows the cause named first: {lead.title} ({lead.id})."
    return [c.model_copy(update={"score": min(c.score, floor), "detail": c.detail + note})
            if c.id in CONSEQUENCES else c for c in causes]


def reasons(causes: list[Cause]) -> list[Cause]:
    """The reason slurmctld gave (`*** REASON: ... ***`) in the detail of the verdict it followed."""
    out = []
    for c in causes:
        said = unique([m["why"] for e in c.evidence if (m := REASON.search(e.text))])
        if said and c.id in _VERDICT_CAUSES:
            c = c.model_copy(update={"detail": c.detail + f" Slurm's reason: {'; '.join(said)}."})
        out.append(c)
    return out
