"""`fabnet plan`: gather every host and save what apply would do, to apply later exactly (--plan)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from provisioner.commands.options import (
    become_option,
    become_password,
    connect_timeout_option,
    forks_option,
    limit_option,
    load_targets,
    playbook_option,
    ssh_config_option,
    timeout_option,
)
from provisioner.lazy import lazy_module

if TYPE_CHECKING:
    from provisioner.output import apply_report, report
else:
    apply_report = lazy_module("provisioner.output.apply_report")
    report = lazy_module("provisioner.output.report")


@click.command("plan")
@click.argument("inventory", type=click.Path(path_type=Path))
@playbook_option
@limit_option
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Where to write the plan (JSON, schema fabnet/plan/v1, mode 0600: it holds file contents).")
@click.option("-D", "--diff", is_flag=True,
              help="Show a unified diff of each file a step would write (secret-bearing ones: hashes only).")
@forks_option("Hosts gathered in parallel.")
@connect_timeout_option
@timeout_option(120.0, 3600, "Seconds for a host's fact gathering once logged in.")
@ssh_config_option
@click.option("--detailed-exitcode", is_flag=True,
              help="Exit 2 when the plan has changes (0: none), as terraform's plan does.")
@become_option
def plan_command(inventory: Path, playbook: Path | None, limit: str | None, out: Path, diff: bool, forks: int,
                 connect_timeout: float, command_timeout: float, ssh_config: Path | None, detailed_exitcode: bool,
                 ask_become_pass: bool) -> None:
    """Gather every host (one exec each), show what apply would change and save it to apply later with
    `fabnet apply INVENTORY --plan FILE`, which refuses any host whose facts changed in between.

    \b
    Example:
      fabnet plan inventories/prod.yml -o plan.json && fabnet apply inventories/prod.yml --plan plan.json --yes

    \b
    Exit codes (as terraform's plan):
      0  a plan was made and written (with or without changes)
      1  no plan could be made
      2  with --detailed-exitcode: a plan with changes was made
      3  invalid inventory or playbook
      4  some host unreachable (its part of the plan is missing)
    """
    from provisioner.apply import converge
    from provisioner.evaluate import engine
    from provisioner.output.core import check_report
    from provisioner.output.files import OutputError
    from provisioner.plan import saved as saved_plan
    from provisioner.run.session import Sessions

    try:  # a path that cannot be written is refused before any host is contacted
        check_report(out)
    except OutputError as exc:
        report.error(str(exc))
        raise SystemExit(64) from None
    plans, playbook = load_targets(inventory, playbook, limit, ssh_config)
    password = become_password(ask_become_pass)
    options = engine.Options(forks=forks, connect_timeout=connect_timeout, command_timeout=command_timeout,
                             ssh_config=ssh_config, become_password=password)
    with Sessions(options) as sessions, \
            report.host_progress(len(plans), "gathering", [p.host.name for p in plans]) as progress:
        planned = converge.make_plan(plans, sessions, progress)
    apply_report.plan_text(planned, diff=diff)
    saved_plan.write(out, saved_plan.to_dict(planned, inventory=str(inventory), playbook=str(playbook), limit=limit))
    report.info(f"plan written to {out}")
    if any(h.audit.status == "unreachable" for h in planned):
        raise SystemExit(4)
    raise SystemExit(2 if detailed_exitcode and any(h.steps for h in planned) else 0)
