"""`fabnet rollback`: restore the files and settings a run changed, from its undo steps and backups."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from provisioner.commands.options import (
    become_option,
    become_password,
    connect_timeout_option,
    forks_option,
    ssh_config_option,
    timeout_option,
)
from provisioner.errors import ConfigError
from provisioner.lazy import lazy_module

if TYPE_CHECKING:
    from provisioner.output import report
else:
    report = lazy_module("provisioner.output.report")


@click.command("rollback")
@click.argument("inventory", type=click.Path(path_type=Path))
@click.option("-p", "--playbook", type=click.Path(path_type=Path), default=None,
              help="Playbook whose hosts are meant (with --limit); found as audit finds it when not given.")
@click.option("-l", "--limit", required=True, help="The hosts to roll back: Ansible host patterns (required).")
@click.option("--run", "run_id", default=None, help="The run to undo (default: each host's latest run).")
@click.option("-y", "--yes", is_flag=True, help="Do not ask first.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (schema fabnet/rollback/v1).")
@forks_option("Hosts rolled back in parallel.")
@connect_timeout_option
@timeout_option(900.0, 7200, "Seconds for one host's undo exec once logged in.")
@ssh_config_option
@click.option("--break-lock", is_flag=True,
              help="Remove another run's lock on the limited hosts first (journaled there). Only for a lock whose "
                   "run is known to be dead: a lock whose holder is gone is taken over without it.")
@click.option("--revert-after", type=click.IntRange(10, 3600), default=60, show_default=True,
              help="Seconds after which a host re-does, by itself, the link changes an undo of its management "
                   "path took back, unless a fresh connection confirmed the rollback.")
@become_option
def rollback_command(inventory: Path, playbook: Path | None, limit: str, run_id: str | None, yes: bool, as_json: bool,
                     forks: int, connect_timeout: float, command_timeout: float, ssh_config: Path | None,
                     break_lock: bool, revert_after: int, ask_become_pass: bool) -> None:
    """Undo what a fabnet apply run changed on some hosts: files back from their backups (or removed
    where they did not exist), settings back to their old values, newest change first. ONE exec per host.
    A step a kill cut off is undone too (its undo was recorded before it ran); each undo is reported
    with the step it undoes and whether that step had finished. An undo that failed (a file changed by
    hand since the run) is kept: a later rollback of the run retries those, and only those. An undo of
    the interface the SSH session arrives on first arms a revert on the host (as apply does); a fresh
    connection confirms and disarms it, else the host re-does those link changes after --revert-after.

    \b
    Example:
      fabnet rollback inventories/prod.yml --limit gpu-a03 --run 20261123T114934Z-554de5

    Exit codes: 0 rolled back, 2 some undo failed or nothing to undo, 4 unreachable.
    """
    import sys

    from provisioner.apply import rollback as undo
    from provisioner.evaluate import engine
    from provisioner.load.loading import find_playbook, load_plans

    playbook = find_playbook(inventory, playbook)
    plans, warnings = load_plans(inventory, playbook, limit, ssh_config=ssh_config)
    for warning in warnings:
        report.warn(warning)
    if not plans:
        raise ConfigError("--limit matches no host of the playbook's plays", file=str(playbook))
    if run_id is not None and not undo.RUN_ID.match(run_id):
        raise click.BadParameter(f"{run_id!r} is not a run id like 20261123T114934Z-554de5", param_hint="--run")
    if not yes:
        if not sys.stdin.isatty():
            report.error("rolling back changes hosts: pass --yes")
            raise SystemExit(64)
        names = ", ".join(p.host.name for p in plans)
        if not click.confirm(f"Roll back run {run_id or '(latest)'} on {names}?", default=False, err=True):
            raise SystemExit(2)
    options = engine.Options(forks=forks, connect_timeout=connect_timeout, command_timeout=command_timeout,
                             ssh_config=ssh_config, become_password=become_password(ask_become_pass))
    results = undo.rollback(plans, options, run_id, break_lock=break_lock, revert_seconds=revert_after)
    if as_json:
        report.print_json(undo.to_json(results))
    else:
        for result in results:
            report.info(f"{result.name}: {result.status}" + (f" (run {result.run_id})" if result.run_id else "")
                        + (f" — {result.error}" if result.error else ""))
            for warning in result.warnings:
                report.warn(f"{result.name}: {warning}")
            if result.armed:
                report.info(f"    management path: revert armed, {result.confirmation}")
            for step in result.undone:
                report.info(f"    undo {step.step} ({step.state}) {step.what}: "
                            f"{'ok' if step.exit_code == 0 else f'failed ({step.exit_code})'}")
                if step.exit_code != 0 and step.output.strip():
                    # Why it failed: a file changed by hand since the run is left, and this says so.
                    report.info(f"        {step.output.strip().splitlines()[-1]}")
    statuses = {r.status for r in results}
    raise SystemExit(4 if "unreachable" in statuses else 2 if statuses - {"rolled_back"} else 0)
