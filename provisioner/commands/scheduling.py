"""What `audit`, `apply` and `smoke` share for the scheduler options: narrow the hosts first, then drain
and resume, show what was done (on stderr: --json output stays one document), and the exit code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from provisioner.run.session import Options
from provisioner.scheduler import drain
from provisioner.scheduler.select import SchedulerArgs, narrow

__all__ = ["EXIT_SCHEDULER", "narrow", "settle"]

# The scheduler could not be told (unreachable controller, a refused drain or resume): "other failure".
EXIT_SCHEDULER = 1


def settle(args: SchedulerArgs, source: drain.Source, outcome: Any, inventory: Path, playbook: Path | None,
           options: Options, code: int) -> int:
    """Drain / resume after a command's check as `args` ask; returns the command's exit code."""
    if not (args.drain_failed or args.resume_fixed):
        return code
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
    settled = drain.settle(args, source, checked, causes, passing, inventory,
                           playbook.parent if playbook else None, options)
    for action in settled.actions:
        click.echo(f"slurm: {action.action} {action.host}: {action.detail}", err=True)
    if settled.error:
        click.echo(f"error: slurm: {settled.error}", err=True)
    return EXIT_SCHEDULER if settled.failed else code
