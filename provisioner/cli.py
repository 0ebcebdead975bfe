"""The `fabnet` command line: parse arguments, call the library, hand results to the reporter.

Exit codes (stable, for CI jobs):
  0  success; for `audit`, every host is in sync
  2  `audit`: drift found on at least one host; `apply`: some host failed or did not converge
  3  invalid input: inventory, playbook, profile or tool output that fabnet cannot use
  4  `audit`: some hosts unreachable or failed (takes precedence over 2)
  1  any other failure (the lab could not be built, an internal error)
  64 command-line usage error
  0/141 standard output's reader went away (`fabnet audit | head -1`): nothing on stderr; 0 for a command
     that only reads, 141 (as SIGPIPE would) for one that changes hosts and so stopped short
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import click

from provisioner import __version__, startup
from provisioner.commands.options import (
    CONTEXT,
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
from provisioner.errors import ConfigError, ConfigErrors, FabnetError, LabError, ParseError, ReaderGone
from provisioner.lazy import lazy_module

if TYPE_CHECKING:
    from provisioner.output import report, stdout
else:
    report = lazy_module("provisioner.output.report")
    stdout = lazy_module("provisioner.output.stdout")

if TYPE_CHECKING:
    from provisioner.evaluate.engine import AuditOutcome
    from provisioner.load.hostplans import HostPlan
    from provisioner.scheduler.select import SchedulerArgs

EXIT_OK, EXIT_ERROR, EXIT_DRIFT, EXIT_INVALID, EXIT_UNREACHABLE, EXIT_USAGE = 0, 1, 2, 3, 4, 64
# The reader left (`| head -1`): a command that only reads has done its work, and exits 0 as `head`'s
# users expect; one that changes hosts was cut short before its changes, and says so as SIGPIPE would
# (128 + 13), so that a CI job with pipefail never takes it for a converged fleet.
EXIT_READER_GONE = 141
CHANGING_COMMANDS = frozenset({"apply", "bootstrap", "rollback", "demo", "lab"})

EXIT_CODES_HELP = (
    "\b\nExit codes:\n"
    "  0   ok; audit: every host in sync\n"
    "  2   audit: drift found; apply: some host failed or did not converge\n"
    "  3   invalid input (inventory, playbook, profile, tool output)\n"
    "  4   audit: hosts unreachable or failed; apply: hosts unreachable (wins over 2)\n"
    "  1   other failure\n"
    "  64  usage error\n"
    "  141 apply, bootstrap, rollback, demo, lab up/add/down: standard output's reader went away (| head);\n"
    "      read-only commands exit 0"
)


class _LazyCommands(click.Group):
    """A group whose bigger commands live in their own modules, imported only when one is run or listed:
    `fabnet parse` need not load apply, smoke or explain (about 10 ms)."""

    LAZY: ClassVar[dict[str, tuple[str, str]]] = {
        "apply": ("provisioner.commands.apply", "apply_command"),
        "demo": ("provisioner.commands.demo", "demo"),
        "bootstrap": ("provisioner.commands.bootstrap", "bootstrap_command"),
        "explain": ("provisioner.commands.explain", "explain_command"),
        "inventory": ("provisioner.commands.inventory", "inventory"),
        "lab": ("provisioner.commands.lab", "lab_group"),
        "plan": ("provisioner.commands.plan", "plan_command"),
        "rollback": ("provisioner.commands.rollback", "rollback_command"),
        "smoke": ("provisioner.commands.smoke", "smoke"),
        "watch": ("provisioner.commands.watch", "watch_command"),
        "history": ("provisioner.commands.history", "history_command"),
        "runs": ("provisioner.commands.history", "runs_command"),
        "report": ("provisioner.commands.history", "report_command"),
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.LAZY and cmd_name not in self.commands:
            from importlib import import_module

            module, attribute = self.LAZY[cmd_name]
            self.add_command(getattr(import_module(module), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(
    cls=_LazyCommands,
    context_settings=CONTEXT,
    help=(
        "Keep GPU training clusters' networking in the state fast distributed training needs.\n\n"
        "fabnet reads each node's live state over SSH (one round trip per host), compares it with a "
        "declarative playbook (MTU, RDMA services and modules, OFED/NCCL versions, RoCE QoS, NCCL env "
        "files, sysctls) and reports the drift.\n\n"
        "\b\nStart here:\n"
        "  fabnet demo                       a local lab of virtual GPU nodes (root; no hardware)\n"
        "  fabnet audit INVENTORY            which nodes drifted from playbooks/site.yml, and how\n"
        "  fabnet apply INVENTORY --check    what apply would change; without --check it converges\n"
        "  fabnet validate INVENTORY -p PB   check an inventory and playbook offline\n"
        "  fabnet lab status --name demo     where the nodes are and how to reach them\n"
        "  fabnet parse mlnx_qos out.txt     what fabnet understands of a tool's output\n\n"
        + EXIT_CODES_HELP
    ),
)
@click.version_option(__version__, prog_name="fabnet")
def app() -> None:
    pass


@app.command("parse")
@click.argument("kind")
@click.argument("file", default="-")
def parse(kind: str, file: str) -> None:
    """Show as JSON what fabnet understands of one tool's output (FILE, or - for standard input).

    \b
    KIND is one of: ofed_info, mlnx_qos, dcb (dcb [-N] app|pfc|ets show, several in a row),
    rdma_qos_script, traffic_class, ibv_devinfo, ibstat, ibstatus, ibdev2netdev, show_gids,
    rdma_link, nvidia_smi_topo, nccl_tests (its text or its -J JSON report), nccl_debug,
    perfquery (perfquery [-x]), port_counters (grep -r -H . of
    class/infiniband/*/ports/*/counters), ethtool_stats (ethtool -S).

    \b
    Example:  ssh gpu01 mlnx_qos -i eth1 | fabnet parse mlnx_qos -
              ssh gpu01 'dcb pfc show dev eth1; dcb ets show dev eth1' | fabnet parse dcb -

    Terminal escapes and the prefixes launchers and loggers put on every line (srun --label,
    mpirun rank tags, timestamps, pdsh host labels) are taken off first, as are `# notes` at the
    end of a line. Output cut short gives what was printed plus "complete": false and "missing";
    lines that fit nowhere are listed in "unplaced" with their numbers. Text with nothing of the
    tool's output in it is an error naming the line (exit 3).
    """
    from provisioner import parsers
    from provisioner.output import stdout

    try:
        # Bytes decoded by hand: line endings reach the parser exactly as the tool printed them.
        raw = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=file) from exc
    stdout.print_json(parsers.parse(kind, raw.decode("utf-8", errors="replace")))


def _load_plans(inventory: Path, playbook: Path, limit: str | None, *, warn: bool = True,
                ssh_config: Path | None = None) -> list[HostPlan]:
    from provisioner.load.loading import load_plans

    plans, warnings = load_plans(inventory, playbook, limit, ssh_config=ssh_config)
    for warning in warnings if warn else ():
        report.warn(warning)
    return plans


@app.command("validate")
@click.argument("inventory", type=click.Path(path_type=Path))
@playbook_option
@limit_option
@click.option("--json", "as_json", is_flag=True,
              help="Print the result as JSON (schema fabnet/validate/v1): each problem with its file, line and key.")
def validate(inventory: Path, playbook: Path | None, limit: str | None, as_json: bool) -> None:
    """Check an inventory and a playbook offline; nothing is contacted.

    Every problem is reported on one line with file:line: key and what is allowed; templates are
    rendered for every host, so an undefined variable on one host is found too. Exit 3 if any.

    \b
    Examples:
      fabnet validate inventories/prod.yml
      fabnet validate inventories/prod.yml -p playbooks/site.yml --limit gpu-a01
      fabnet validate inventories/prod.yml --json | jq -r '.errors[].text'
    """
    from provisioner.load.hostplans import validate as validate_files
    from provisioner.load.loading import find_playbook

    warnings: list[str] = []
    errors: list[ConfigError] = []
    plans: list[HostPlan] = []
    try:
        found = find_playbook(inventory, playbook)
    except ConfigError as exc:
        if not as_json:
            raise
        found, errors = None, [exc]
    if found is not None:
        errors = validate_files(inventory, found, limit, warnings)
    if not errors and found is not None:
        try:
            plans = _load_plans(inventory, found, limit, warn=False)  # validate_files' warnings are above
        except ConfigError as exc:  # a key file that cannot be used: found before any connection
            if not as_json:
                raise
            errors = list(exc.errors) if isinstance(exc, ConfigErrors) else [exc]
    resources = sum(len(plan.resources) for plan in plans)
    if as_json:
        report.print_json(report.validate_json(inventory=str(inventory), playbook=str(found) if found else None,
                                               errors=errors, warnings=warnings, hosts=len(plans),
                                               resources=resources))
        raise SystemExit(EXIT_INVALID if errors else 0)
    for warning in warnings:
        report.warn(warning)
    if errors:
        report.config_errors(errors)
        raise SystemExit(EXIT_INVALID)
    from provisioner.output.core import count

    report.info(f"ok: {inventory} and {found} are valid ({count(len(plans), 'host')}, "
                f"{count(resources, 'resource')} in all)")


@app.command("audit")
@click.argument("inventory", type=click.Path(path_type=Path))
@playbook_option
@limit_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (schema fabnet/audit/v1).")
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write a JUnit XML report here (one test case per checked attribute).")
@forks_option("Hosts audited in parallel.")
@connect_timeout_option
@timeout_option(120.0, 3600, "Seconds for a host's fact gathering once logged in.")
@ssh_config_option
@click.option("-v", "--verbose", is_flag=True, help="Show every check, not only those that need attention.")
@click.option("--prom", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write per-host drift counts as a Prometheus textfile (node_exporter collector).")
@become_option
@scheduler_options
def audit(inventory: Path, playbook: Path | None, limit: str | None, as_json: bool, junit: Path | None, forks: int,
          connect_timeout: float, command_timeout: float, ssh_config: Path | None, verbose: bool,
          prom: Path | None, ask_become_pass: bool, scheduler: SchedulerArgs) -> None:
    """Report how each host drifted from the playbook. Read-only: nothing on any host is changed.

    Each host's live state is read in ONE SSH exec (every resource's read command batched), hosts in
    parallel (--forks). Host keys are checked against known_hosts (and the inventory's
    fabnet_known_hosts); an unknown or changed key refuses that host.

    \b
    Examples:
      fabnet audit inventories/prod.yml                       drift per host; exit 2 if any
      fabnet audit inventories/prod.yml -p playbooks/site.yml --limit 'gpu:!gpu-a05' --verbose
      fabnet audit inventories/prod.yml --json | jq '.hosts[] | select(.status == "drifted") | .name'
      fabnet audit inventories/prod.yml --junit audit.xml --prom /var/lib/node_exporter/textfile/fabnet.prom

    \b
    Exit codes:
      0  every host in sync
      2  drift found on at least one host
      3  invalid inventory or playbook (nothing was contacted)
      4  at least one host unreachable, or a resource could not be read (wins over 2)
      1  --drain-failed / --resume-fixed / --drain-cmd: the scheduler could not be told (wins over the others)
    """
    from provisioner.evaluate import engine

    plans, playbook = load_targets(inventory, playbook, limit, ssh_config)
    from provisioner.output import prom as textfile
    from provisioner.output.core import check_report, write_reports
    from provisioner.output.files import OutputError

    try:  # a path that cannot be written is refused before any host is contacted
        check_report(junit)
        check_report(prom)
    except OutputError as exc:
        report.error(str(exc))
        raise SystemExit(EXIT_USAGE) from None
    options = engine.Options(forks=forks, connect_timeout=connect_timeout, command_timeout=command_timeout,
                             ssh_config=ssh_config, become_password=become_password(ask_become_pass))
    from provisioner.commands import scheduling

    plans = scheduling.narrow(plans, scheduler, inventory, playbook.parent, options)
    with report.host_progress(len(plans), "auditing", [p.host.name for p in plans]) as progress:
        outcome = engine.audit(plans, options, progress)
    code = scheduling.settle(scheduler, "audit", outcome, inventory, playbook, options, audit_exit_code(outcome))
    # Reports files are written before anything is printed: a reader that leaves early (`| head`) must
    # not cost the CI job its JUnit file.
    write_error = write_reports([(junit, lambda: report.audit_junit(outcome)),
                                 (prom, lambda: textfile.audit_text(outcome))])
    from provisioner.history.record import record_safely
    report.audit_warnings(outcome)
    if note := record_safely("audit", report.audit_json(outcome, inventory=str(inventory), playbook=str(playbook),
                                                        limit=limit, exit_code=code)):
        report.warn(note)
    if as_json:
        report.print_json(report.audit_json(outcome, inventory=str(inventory), playbook=str(playbook), limit=limit,
                                            exit_code=code))
    else:
        report.audit_tables(outcome, verbose=verbose)
    if write_error:
        raise write_error
    raise SystemExit(code)


def audit_exit_code(outcome: AuditOutcome) -> int:
    if outcome.count("unreachable") or outcome.count("failed"):
        return EXIT_UNREACHABLE
    if outcome.count("drifted"):
        return EXIT_DRIFT
    return EXIT_OK


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turning typed errors into one clear message and an exit code."""
    if argv is None:  # the program itself, not a caller in its own process (startup.py)
        startup.hold()
    try:
        code = app.main(args=argv, prog_name="fabnet", standalone_mode=False)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except SystemExit as exc:
        code = exc.code
    except click.UsageError as exc:
        exc.show()
        code = EXIT_USAGE
    except click.ClickException as exc:
        exc.show()
        code = EXIT_INVALID
    except click.Abort:
        report.error("aborted")
        code = 130
    except (ReaderGone, BrokenPipeError):  # the reader left (`| head -1`): nothing to say, nowhere to say it
        stdout.quiet()
        code = _reader_gone(argv)
    except ConfigErrors as exc:
        report.config_errors(exc.errors)
        code = EXIT_INVALID
    except (ConfigError, ParseError) as exc:
        report.error(str(exc))
        code = EXIT_INVALID
    except LabError as exc:
        report.error(f"lab: {exc}")
        code = EXIT_ERROR
    except FabnetError as exc:
        report.error(str(exc))
        code = EXIT_ERROR
    except Exception as exc:  # the last line of defence: a bug must read as one line, never a traceback
        if os.environ.get("FABNET_DEBUG"):
            raise
        report.error(internal_error(exc))
        code = EXIT_ERROR
    try:  # what is still buffered goes now, while a reader that left can still be answered quietly
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        stdout.quiet()
        code = _reader_gone(argv)
    except (OSError, ValueError):
        pass  # a closed or unwritable stdout was reported where it was written to
    sys.exit(code if isinstance(code, int) else EXIT_OK)


def _reader_gone(argv: list[str] | None) -> int:
    """The exit code once standard output's reader left: see EXIT_READER_GONE."""
    words = [w for w in (sys.argv[1:] if argv is None else argv) if not w.startswith("-")]
    if words[:2] == ["lab", "status"]:  # the one `lab` command that only reads
        return EXIT_OK
    return EXIT_READER_GONE if words and words[0] in CHANGING_COMMANDS else EXIT_OK


def internal_error(exc: BaseException) -> str:
    """One line for an exception fabnet did not expect, with what to do about it."""
    first = (str(exc).strip().splitlines() or [""])[0]
    first = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in first)  # no terminal escapes
    text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    if len(text) > 200:
        text = text[:197] + "..."
    return (
        f"internal error ({text}); this is a bug in fabnet: please report it with the command that "
        "triggered it (FABNET_DEBUG=1 shows the traceback)"
    )
