"""What `audit`, `apply` and `smoke` share for the scheduler options: narrow the hosts first, then drain
(in Slurm, or by --drain-cmd) and resume, show what was done (on stderr: --json output stays one
document), and the exit code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from provisioner.run.session import Options
from provisioner.scheduler import drain
from provisioner.scheduler.select import SchedulerArgs, narrow

__all__ = ["EXIT_SCHEDULER", "narrow", "settle"]

# The scheduler could not be told (unreachable controller, a refused drain or resume): "other failure".
EXIT_SCHEDULER = 1


def settle(args: SchedulerArgs, source: drain.Source, outcome: Any, inventory: Path, playbook: Path | None,
           options: Options, code: int) -> int:
    """Drain / resume after a command's check as `args` ask; returns the command's exit code."""
    if not (args.drains or args.resume_fixed):
        return code
    fields: dict[str, dict[str, str]] = {}
    if source == "audit":
        causes = drain.audit_causes(outcome)
        checked = [h.name for h in outcome.hosts]
        passing = {h.name for h in outcome.hosts if h.status == "in_sync"}
    elif source == "apply":
        causes = drain.apply_causes(outcome)
        checked = [h.name for h in outcome.hosts]
        passing = {h.name for h in outcome.hosts if h.status in ("ok", "changed")}
    else:
        causes = drain.smoke_causes(outcome)
        checked = list(outcome.hosts)
        passing = set(checked) if outcome.verdict == "pass" else set()
        fields = {host: {"busbw": f"{busbw:.3f}"} for host in causes if (busbw := outcome.busbw_of(host)) is not None}
    settled = drain.settle(args, source, checked, causes, passing, inventory,
                           playbook.parent if playbook else None, options, fields)
    if source == "smoke":  # smoke's JSON, history and report list what was drained
        outcome.drained = settled.drains
    from provisioner.output import scheduler_report  # reasons, a drain command's output, Slurm's errors: foreign

    scheduler_report.settled(settled.actions, settled.error, settled.scheduler)
    return EXIT_SCHEDULER if settled.failed else code
