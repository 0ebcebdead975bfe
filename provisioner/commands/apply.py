"""`fabnet apply`: converge hosts to the playbook (plan, confirm, one change exec and one re-check per host)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from provisioner.commands.options import (
    become_option,
    become_password,
    connect_timeout_option,
    forks_option,
    limit_option,
    load_targets,
    playbook_option,
    scheduler_options,
    ssh_config_option,
    timeout_option,
)
from provisioner.lazy import lazy_module

if TYPE_CHECKING:
    from provisioner.output import apply_report, report
else:
    apply_report = lazy_module("provisioner.output.apply_report")
    report = lazy_module("provisioner.output.report")

if TYPE_CHECKING:
    from provisioner.evaluate.engine import Options
    from provisioner.load.hostplans import HostPlan
    from provisioner.run.session import Sessions
    from provisioner.scheduler.select import SchedulerArgs

EXIT_OK, EXIT_NOT_CONVERGED, EXIT_UNREACHABLE, EXIT_USAGE = 0, 2, 4, 64
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143  # as a shell reports SIGINT and SIGTERM


def _serial(value: str | None) -> list[str] | None:
    if value is None:
        return None
    items = [item.strip() for item in value.split(",") if item.strip()]
    for item in items:
        number = item[:-1] if item.endswith("%") else item
        if not number.isdigit() or int(number) < 1 or (item.endswith("%") and int(number) > 100):
            raise click.BadParameter(f"{item!r}: expected a number of hosts (N), a percentage (N%) or a list "
                                     "such as 1,10%,100%", param_hint="--serial")
    return items


def exit_code(outcome: object) -> int:
    from provisioner.apply.converge import ApplyOutcome

    assert isinstance(outcome, ApplyOutcome)
    if outcome.count("unreachable") or outcome.count("unknown"):
        return EXIT_UNREACHABLE
    if outcome.count("failed") or outcome.count("skipped"):
        return EXIT_NOT_CONVERGED
    return EXIT_OK


@click.command("apply")
@click.argument("inventory", type=click.Path(path_type=Path))
@playbook_option
@limit_option
@click.option("-C", "--check", is_flag=True, help="Show the plan and change nothing (exit 2 if anything would change).")
@click.option("-D", "--diff", is_flag=True,
              help="Show a unified diff of each file a step writes (secret-bearing ones: hashes only).")
@click.option("-y", "--yes", is_flag=True, help="Do not ask before changing hosts.")
@click.option("--serial", default=None, metavar="N|N%|LIST",
              help="Rolling batches: hosts per batch, a percentage, or a list such as 1,10%,100% (canary first).")
@click.option("--max-fail-percent", type=click.FloatRange(0, 100), default=None,
              help="Start no new batch once more than this percentage of the hosts so far failed.")
@forks_option("Hosts changed in parallel within a batch.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (schema fabnet/apply/v1).")
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write a JUnit XML report (one test case per resource).")
@click.option("--prom", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write per-host changed/failed counts as a Prometheus textfile (node_exporter collector).")
@click.option("--journal", "journal_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Local journal of changes (JSON lines); default $XDG_STATE_HOME/fabnet/journal.jsonl.")
@connect_timeout_option
@timeout_option(900.0, 7200, "Seconds for one host's exec (package installs included).")
@ssh_config_option
@click.option("--revert-after", type=click.IntRange(10, 3600), default=60, show_default=True,
              help="Seconds after which a host reverts a change to its management path by itself unless a "
                   "fresh SSH connection confirmed it (\"commit confirmed\").")
@click.option("--plan", "plan_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Apply exactly this saved plan (fabnet plan -o FILE); hosts whose facts changed since are refused.")
@click.option("--break-lock", is_flag=True,
              help="Remove another run's lock on the hosts this run changes (journaled there). Only for a lock "
                   "whose run is known to be dead: a lock whose holder is gone is taken over without it.")
@click.option("-v", "--verbose", is_flag=True, help="Show resources that were already in sync too.")
@become_option
@scheduler_options
def apply_command(inventory: Path, playbook: Path | None, limit: str | None, check: bool, diff: bool, yes: bool,
                  serial: str | None, max_fail_percent: float | None, forks: int, as_json: bool, junit: Path | None,
                  prom: Path | None, journal_path: Path | None, connect_timeout: float, command_timeout: float,
                  ssh_config: Path | None, revert_after: int, plan_file: Path | None, break_lock: bool,
                  verbose: bool, ask_become_pass: bool, scheduler: SchedulerArgs) -> None:
    """Converge hosts to the playbook: gather, show the plan, ask, change, re-check.

    Per host: ONE exec reads the facts (as audit does); the plan lists every step and its command;
    ONE exec runs all of the host's steps (a failing step stops only the steps that need it); ONE exec
    re-reads the host, and each resource is reported ok / changed / failed from what is there now.
    A host already in sync costs one exec. Files are replaced atomically after a backup on the host
    (/var/backups/fabnet/RUN); every step is journaled locally and on the host (/var/log/fabnet); a
    per-host lock refuses a second concurrent run and names its holder (a lock whose run died is taken
    over, with a warning). A step whose file or setting changed on the host since the plan read it is
    not run: it is reported as a conflict (exit 2). A change to the interface the
    SSH session arrives on first arms a revert on the host (systemd-run timer); a fresh connection
    confirms and disarms it, else the host reverts by itself after --revert-after seconds.

    \b
    Examples:
      fabnet apply inventories/prod.yml --check --diff      what would change, nothing changed
      fabnet apply inventories/prod.yml --yes --serial 1,100% --max-fail-percent 0   canary first
      fabnet apply inventories/prod.yml --limit gpu-a01 --yes --json
      FABNET_BECOME_PASSWORD=... fabnet apply inventories/prod.yml --yes    sudo with a password

    \b
    Exit codes:
      0  every host converged (--check: nothing to change)
      2  some host failed or did not converge, or a batch was not started (--check: changes pending)
      3  invalid inventory or playbook (nothing was contacted)
      4  some host unreachable, or the outcome of its changes unknown (its change exec ended early
         and the host could not be asked afterwards); wins over 2
      130, 143  interrupted (SIGINT, SIGTERM): what had changed and what is unknown is printed first
      1  --drain-failed / --resume-fixed / --drain-cmd: the scheduler could not be told (wins over the others)
    """
    from provisioner.evaluate import engine
    from provisioner.output.core import check_report
    from provisioner.output.files import OutputError
    from provisioner.run.session import Sessions

    serial_items = _serial(serial)
    try:  # a report path that cannot be written is refused before any host is contacted
        check_report(junit)
        check_report(prom)
    except OutputError as exc:
        report.error(str(exc))
        raise SystemExit(EXIT_USAGE) from None
    if plan_file is not None:
        from provisioner.plan import saved as saved_plan

        saved = saved_plan.read(plan_file)
        playbook, limit = Path(saved["playbook"]), saved.get("limit")
    else:
        saved = None
    plans, playbook = load_targets(inventory, playbook, limit, ssh_config)
    options = engine.Options(forks=forks, connect_timeout=connect_timeout, command_timeout=command_timeout,
                             ssh_config=ssh_config, become_password=become_password(ask_become_pass))
    from provisioner.commands import scheduling

    plans = scheduling.narrow(plans, scheduler, inventory, playbook.parent, options)
    with Sessions(options) as sessions:
        _converge(sessions, plans, saved, inventory, playbook, limit, diff, check, yes, as_json, junit, verbose,
                  journal_path, serial_items, max_fail_percent, revert_after, prom, break_lock, scheduler)


def _converge(sessions: Sessions, plans: list[HostPlan], saved: dict[str, Any] | None, inventory: Path, playbook: Path,
              limit: str | None, diff: bool, check: bool, yes: bool, as_json: bool, junit: Path | None,
              verbose: bool, journal_path: Path | None, serial_items: list[str] | None,
              max_fail_percent: float | None, revert_after: int, prom: Path | None, break_lock: bool,
              scheduler: SchedulerArgs | None = None) -> None:
    """Gather, show, confirm and apply over sessions kept open from the gathering to the re-check."""
    from provisioner.apply import converge
    from provisioner.apply.converge import HostApplied
    from provisioner.apply.journal import Journal, default_path
    from provisioner.plan import saved as saved_plan
    from provisioner.run import runner

    started = time.monotonic()
    with report.host_progress(len(plans), "gathering", [p.host.name for p in plans]) as progress:
        planned = converge.make_plan(plans, sessions, progress)
    refused: list[str] = []
    if saved is not None:
        refused = saved_plan.adopt(planned, saved)
        for host in planned:
            if host.name in refused and host.audit.status not in ("unreachable",):
                host.refusal = saved_plan.refusal(host.name, saved)
    if not as_json:
        apply_report.plan_text(planned, diff=diff)
    pending = any(host.steps for host in planned)
    if check:
        hosts = [converge.unchanged_host(h, check=True) for h in planned]
        outcome = converge.ApplyOutcome("check", hosts, time.monotonic() - started, check=True)
        code = exit_code(outcome)
        if code == EXIT_OK and pending:
            code = EXIT_NOT_CONVERGED
        _emit(outcome, code, as_json, junit, None, inventory, playbook, limit, planned, verbose, show_results=False)
        raise SystemExit(code)
    if pending and not yes:
        if not sys.stdin.isatty():
            report.error("changes pending and no terminal to confirm them: pass --yes (or --check to only look)")
            raise SystemExit(EXIT_USAGE)
        if not click.confirm("Apply these changes?", default=False, err=True):
            report.error("nothing changed")
            raise SystemExit(EXIT_NOT_CONVERGED)
    journal = Journal(journal_path or default_path())
    finished: list[HostApplied] = []

    def on_host(host: HostApplied) -> None:
        finished.append(host)
        if not as_json:
            apply_report.host_line(host)

    try:
        with runner.terminate_like_interrupt():
            outcome = converge.apply(planned, sessions, serial=serial_items, max_fail_percent=max_fail_percent,
                                     journal=journal, on_host=on_host, revert_seconds=revert_after,
                                     break_lock=break_lock)
    except KeyboardInterrupt as stop:
        # Say what was changed and what is unknown before going: the hosts went on with their scripts.
        code = EXIT_TERMINATED if isinstance(stop, runner.Terminated) else EXIT_INTERRUPTED
        apply_report.interrupted(finished, [h.name for h in planned if h.steps], code)
        raise SystemExit(code) from None
    code = exit_code(outcome)
    if scheduler is not None:
        from provisioner.commands import scheduling

        code = scheduling.settle(scheduler, "apply", outcome, inventory, playbook, sessions.options, code)
    _emit(outcome, code, as_json, junit, prom, inventory, playbook, limit, planned, verbose, show_results=True)
    raise SystemExit(code)


def _emit(outcome: object, code: int, as_json: bool, junit: Path | None, prom: Path | None, inventory: Path,
          playbook: Path, limit: str | None, planned: list[Any], verbose: bool, show_results: bool) -> None:
    """Report files first (a reader that leaves early must not cost them), then the results; a file
    that could not be written is raised only once the results are shown: the hosts have changed."""
    from provisioner.output import prom as textfile
    from provisioner.output.core import write_reports

    write_error = write_reports([(junit, lambda: apply_report.junit(outcome)),
                                 (prom, lambda: textfile.apply_text(outcome))])
    if not getattr(outcome, "check", False):  # a --check changed nothing: the next audit says the same
        from provisioner.history.record import record_safely
        if note := record_safely("apply", apply_report.to_json(outcome, inventory=str(inventory),
                                                               playbook=str(playbook), limit=limit, exit_code=code)):
            report.warn(note)
    if as_json:
        data = apply_report.to_json(outcome, inventory=str(inventory), playbook=str(playbook), limit=limit,
                                    exit_code=code)
        data["plan"] = apply_report.plan_json(planned)
        report.print_json(data)
    else:
        if show_results:
            apply_report.results(outcome, verbose=verbose)
        apply_report.recap(outcome)
    if write_error:
        raise write_error


def converge_for_demo(plans: list[HostPlan], options: Options) -> int:
    """The demo's apply step: plan shown, applied without asking (the lab is the demo's own), recap.
    Returns the exit code apply would give."""
    from provisioner.apply import converge
    from provisioner.apply.journal import Journal, default_path
    from provisioner.run.session import Sessions

    with Sessions(options) as sessions:
        with report.host_progress(len(plans), "gathering", [p.host.name for p in plans]) as progress:
            planned = converge.make_plan(plans, sessions, progress)
        apply_report.plan_text(planned)
        outcome = converge.apply(planned, sessions, journal=Journal(default_path()), on_host=apply_report.host_line)
    apply_report.results(outcome)
    apply_report.recap(outcome)
    return exit_code(outcome)
