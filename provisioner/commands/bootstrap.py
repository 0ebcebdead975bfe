"""`fabnet bootstrap`: new hosts join the fleet: host keys pinned, converged, audited, proven with the fleet."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from provisioner.commands.options import (
    _terminal,
    become_option,
    become_password,
    connect_timeout_option,
    playbook_option,
    ssh_config_option,
)
from provisioner.errors import ConfigError
from provisioner.lazy import lazy_module

if TYPE_CHECKING:
    from provisioner.apply.bootstrap import BootstrapOutcome, Hooks
    from provisioner.output import apply_report, report
    from provisioner.run.hostkeys import KeyCheck
else:
    apply_report = lazy_module("provisioner.output.apply_report")
    report = lazy_module("provisioner.output.report")

SCHEMA = "fabnet/bootstrap/v1"
EXIT_USAGE = 64


def _fingerprints(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> frozenset[str]:
    from provisioner.run.hostkeys import valid_fingerprint

    for text in value:
        if not valid_fingerprint(text):
            raise click.BadParameter(f"{text!r} is not a SHA256 fingerprint as ssh-keygen -l prints it "
                                     "(SHA256: and 43 base64 characters)")
    return frozenset(value)


@click.command("bootstrap")
@click.argument("inventory", type=click.Path(path_type=Path))
@click.option("-l", "--limit", required=True,
              help="The new hosts (an Ansible host pattern, e.g. 'new' or 'gpu07,gpu08'); the others of the "
                   "same plays are the fleet they are proven with.")
@playbook_option
@click.option("--accept-new", is_flag=True,
              help="Trust each new host's key on first use and pin it, unverified (as ssh's "
                   "StrictHostKeyChecking=accept-new). Only where the network path is trusted.")
@click.option("--fingerprint", "fingerprints", multiple=True, callback=_fingerprints, metavar="SHA256:...",
              help="Expected host key fingerprint (ssh-keygen -l format), verified out of band; repeat for "
                   "several hosts. A new host presenting another key is refused and left unchanged.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask before changing the new hosts.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (schema fabnet/bootstrap/v1).")
@connect_timeout_option
@ssh_config_option
@become_option
def bootstrap_command(inventory: Path, limit: str, playbook: Path | None, accept_new: bool,
                      fingerprints: frozenset[str], yes: bool, as_json: bool, connect_timeout: float,
                      ssh_config: Path | None, ask_become_pass: bool) -> None:
    """Take new hosts into the fleet: pin their host keys, converge them to the playbook, audit them and
    prove them with an all-reduce together with healthy hosts of the fleet.

    \b
    1. Host keys: each new host's key is read (a key exchange, no login) and its SHA256 fingerprint shown.
       It is pinned into the inventory's fabnet_known_hosts file (else ~/.ssh/known_hosts) only when the
       operator confirms it on a terminal, when it matches --fingerprint, or with --accept-new (trust on
       first use, said as such). A host already known with the same key passes; a changed key is refused.
       Without a terminal and without either option nothing is pinned or changed (exit 2).
    2. Every setting the playbook pins is applied as `fabnet apply` does (plan, journal, backups, lock).
    3. The new hosts are audited again together with up to 3 fleet hosts of the same plays that audit
       in sync, so fleet-wide checks (one MTU) include them.
    4. An all-reduce runs on those fleet hosts alone, then on new and fleet hosts together: each new
       host's verdict is shown with the bandwidth beside the fleet's.
    Run again, it changes nothing.

    \b
    Examples:
      fabnet bootstrap hosts.yml --limit new --fingerprint SHA256:Xy...   (ssh-keygen -lf on the console)
      fabnet bootstrap hosts.yml --limit gpu07 --accept-new --yes --json

    \b
    Exit codes:
      0  every new host pinned, converged, in sync and through the all-reduce
      2  a key refused or not confirmed, a host failed or not converged, or the all-reduce failed
      3  invalid inventory, playbook or --limit (nothing was contacted)
      4  a host unreachable (wins over 2)
    """
    from provisioner.apply import bootstrap
    from provisioner.apply.journal import Journal, default_path
    from provisioner.evaluate import engine
    from provisioner.load.loading import find_playbook, load_plans

    if accept_new and fingerprints:
        raise click.UsageError("--accept-new and --fingerprint exclude each other: verify, or trust on first use")
    playbook = find_playbook(inventory, playbook)
    new, warnings = load_plans(inventory, playbook, limit, ssh_config=ssh_config)
    if not new:
        raise ConfigError("--limit selects no host the playbook's plays target", file=str(playbook))
    fleet, _ = load_plans(inventory, playbook, None, ssh_config=ssh_config)
    for warning in warnings:
        report.warn(warning)
    options = engine.Options(connect_timeout=connect_timeout, ssh_config=ssh_config,
                             become_password=become_password(ask_become_pass))
    terminal = sys.stdin.isatty() and _terminal()
    hooks, needs_yes = _hooks(as_json, yes, terminal)
    outcome = bootstrap.bootstrap(new, fleet, options, hooks, fingerprints=fingerprints, accept_new=accept_new,
                                  journal=Journal(default_path()))
    code = EXIT_USAGE if needs_yes else outcome.exit_code
    if as_json:
        report.print_json(to_json(outcome, inventory=str(inventory), playbook=str(playbook), limit=limit,
                                  exit_code=code))
    else:
        show(outcome)
    raise SystemExit(code)


def _hooks(as_json: bool, yes: bool, terminal: bool) -> tuple[Hooks, list[bool]]:
    """The command's part in the flow; the list is set when changes needed --yes and there was no terminal."""
    from provisioner.apply.bootstrap import Hooks

    needs_yes: list[bool] = []

    def ask_key(check: KeyCheck) -> bool:
        return click.confirm(f"{check.name} ({check.address}) presents the {check.key_type} host key "
                             f"{check.fingerprint}.\nIs that the key you verified? Pin it into {check.pin_file}",
                             default=False, err=True)

    def confirm(planned: list[Any]) -> bool:
        if not as_json:
            apply_report.plan_text(planned)
        if yes:
            return True
        if not terminal:
            report.error("changes pending and no terminal to confirm them: pass --yes")
            needs_yes.append(True)
            return False
        return click.confirm("Apply these changes to the new hosts?", default=False, err=True)

    def log(message: str) -> None:
        report.err_console.print(f"[dim]{report.escape(message)}[/]", highlight=False)

    hooks = Hooks(ask_key=ask_key if terminal else None, confirm=confirm,
                  on_keys=(lambda checks: None) if as_json else show_keys,
                  on_host=None if as_json else apply_report.host_line, log=log)
    return hooks, needs_yes


def show_keys(checks: list[KeyCheck]) -> None:
    from provisioner.run.hostkeys import TRUST_WORDS

    report.info("Host keys:")
    for check in checks:
        head = f"  {check.name} ({check.address})"
        if check.state == "unreachable":
            report.info(f"{head}: UNREACHABLE: {check.error}")
            continue
        key = f"{check.key_type} {check.fingerprint}"
        if check.trusted:
            where = f"pinned in {check.pin_file}" if check.pinned else "known"
            report.info(f"{head}: {key}: {where}: {TRUST_WORDS[check.trust or '']}")
        else:
            report.info(f"{head}: {key}: REFUSED: {check.refused}")


def _busbw(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def show(outcome: BootstrapOutcome) -> None:
    """Per new host: key, changes, audit, smoke with the bandwidth beside the fleet's; then a recap."""
    from rich.table import Table

    from provisioner.output.core import cell

    if outcome.applied is not None:
        apply_report.results(outcome.applied)
    if outcome.peers:
        report.info(f"\nProven with fleet hosts that audit in sync: {', '.join(outcome.peers)}")
    for run, title in ((outcome.fleet_smoke, "fleet hosts alone"), (outcome.smoke, "new and fleet hosts")):
        if run is not None:
            report.info(f"all-reduce, {title} ({', '.join(run.hosts)}): {run.verdict}: {run.reason}")
    fleet_bw = outcome.fleet_smoke.avg_busbw if outcome.fleet_smoke else None
    table = Table(title="bootstrap", title_justify="left")
    for column in ("host", "host key", "changes", "audit", "all-reduce", "busbw GB/s (fleet alone)"):
        table.add_column(column, overflow="fold")
    for host in outcome.hosts:
        key = (f"{host.key.fingerprint} ({host.key.trust}{', pinned' if host.key.pinned else ''})"
               if host.key.trusted else "refused (see above)")
        # Changed resources are listed above (apply's results); the table names only those that failed.
        changed = sum(1 for _, status in host.changes if status == "changed")
        failed = [f"{target} {status}" for target, status in host.changes if status != "changed"]
        applied = host.applied.status if host.applied else "-"
        audit = host.audit.status if host.audit else "-"
        bw = f"{_busbw(outcome.smoke.avg_busbw if outcome.smoke and host.smoke else None)} ({_busbw(fleet_bw)})"
        cells = (host.name, key, f"{applied}: {changed} resources changed" + "".join(f"; {f}" for f in failed), audit,
                 f"{host.smoke or '-'}" + (f": {host.smoke_reason}" if host.smoke not in (None, "pass") else ""), bw)
        table.add_row(*(cell(text) for text in cells))
    report.table(table)
    for line in (outcome.declined, outcome.note):
        if line:
            report.info(line)
    joined = sum(1 for h in outcome.hosts if h.ok)
    report.info(f"recap: {joined} of {len(outcome.hosts)} new hosts joined the fleet")


def _smoke_json(run: Any) -> dict[str, Any] | None:
    if run is None:
        return None
    return {"hosts": run.hosts, "verdict": run.verdict, "reason": run.reason, "avg_busbw": run.avg_busbw,
            "backend": run.backend, "seconds": round(run.seconds, 3)}


def to_json(outcome: BootstrapOutcome, *, inventory: str, playbook: str, limit: str,
            exit_code: int) -> dict[str, Any]:
    from provisioner.run.hostkeys import TRUST_WORDS

    hosts = []
    for host in outcome.hosts:
        key = host.key
        hosts.append({
            "name": host.name,
            "address": key.address,
            "key": {"state": key.state, "type": key.key_type or None, "fingerprint": key.fingerprint or None,
                    "trust": key.trust if key.trusted else None,
                    "trust_means": TRUST_WORDS[key.trust] if key.trusted and key.trust else None,
                    "pinned": key.pinned, "known_hosts": str(key.pin_file) if key.pin_file else None,
                    "refused": key.refused},
            "apply": None if host.applied is None else {
                "status": host.applied.status, "error": host.applied.error,
                "changes": [{"resource": target, "status": status} for target, status in host.changes]},
            "audit": None if host.audit is None else {"status": host.audit.status, "error": host.audit.error},
            "smoke": None if host.smoke is None else {"verdict": host.smoke, "reason": host.smoke_reason},
            "ok": host.ok,
        })
    return {
        "schema": SCHEMA, "inventory": inventory, "playbook": playbook, "limit": limit, "exit_code": exit_code,
        "peers": outcome.peers, "hosts": hosts, "smoke": _smoke_json(outcome.smoke),
        "fleet_smoke": _smoke_json(outcome.fleet_smoke), "declined": outcome.declined, "note": outcome.note or None,
    }


def bootstrap_for_demo(inventory: Path, playbook: Path, limit: str) -> int:
    """The demo's last act: the new node joins its own lab, so its key is trusted on first use."""
    from provisioner.apply import bootstrap
    from provisioner.apply.journal import Journal, default_path
    from provisioner.evaluate import engine
    from provisioner.load.loading import load_plans
    from provisioner.smoke.settings import parse_sizes

    new, _ = load_plans(inventory, playbook, limit)
    fleet, _ = load_plans(inventory, playbook, None)
    hooks, _ = _hooks(as_json=False, yes=True, terminal=False)
    outcome = bootstrap.bootstrap(new, fleet, engine.Options(), hooks, accept_new=True,
                                  journal=Journal(default_path()),
                                  smoke_settings={"sizes": parse_sizes("1M:8M"), "timeout": 90.0})
    show(outcome)
    return outcome.exit_code
