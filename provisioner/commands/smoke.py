"""`fabnet smoke`: an all-reduce across the fleet that proves the fabric, or names the host that fails it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from provisioner.commands.options import (
    become_option,
    become_password,
    checked_template,
    connect_timeout_option,
    limit_option,
    scheduler_options,
    ssh_config_option,
)
from provisioner.errors import ConfigError
from provisioner.lazy import lazy_module

if TYPE_CHECKING:
    from provisioner.output import report
    from provisioner.scheduler.select import SchedulerArgs
else:
    report = lazy_module("provisioner.output.report")


EXIT_HELP = (
    "\b\nExit codes:\n"
    "  0  the all-reduce passed: right results, no host below --slow-fraction x the fleet median, the\n"
    "     fleet not below --link-fraction x its link rate, and --min-busbw reached when one is set\n"
    "  1  the test could not run (torch missing on every host, a single host selected)\n"
    "  2  slow (a host below the fleet, the fleet below its links or below --min-busbw), wrong results,\n"
    "     a failed, killed or hung rank, or a failed pre-flight\n"
    "  3  invalid inventory, playbook or option (nothing was contacted)\n"
    "  4  a host unreachable over SSH (nothing was started)"
)


def _sizes(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, ...] | None:
    from provisioner.smoke.settings import parse_sizes

    if value is None:
        return None
    try:
        return parse_sizes(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc


@click.command("smoke", epilog=EXIT_HELP)
@click.argument("inventory", type=click.Path(path_type=Path))
@click.option("-p", "--playbook", type=click.Path(path_type=Path), default=None,
              help="Playbook: which hosts (its plays), their NCCL environment and verify: all_reduce settings "
                   "[default: playbooks/site.yml where audit finds it, else every inventory host].")
@limit_option
@click.option("--min-busbw", type=click.FloatRange(0), default=None,
              help="Absolute floor: average bus bandwidth in GB/s (nccl-tests' definition). Without it, hosts are "
                   "still compared with the fleet and the fleet with its link rate.")
@click.option("--slow-fraction", type=click.FloatRange(0, 1, max_open=True), default=None,
              help="A host whose bandwidth with its best partner (pairs measured after the sweep, in parallel) "
                   "is below this x the fleet median is slow; 0 turns it off [default: 0.5].")
@click.option("--link-fraction", type=click.FloatRange(0, 1), default=None,
              help="The fleet is slow when its best busbw is below this x the link rate its data interfaces "
                   "report (sysfs speed; skipped, and said, where unknown); 0 turns it off [default: 0.25 with "
                   "NCCL; with gloo, which the CPU bounds, only when given].")
@click.option("--sizes", callback=_sizes, default=None, help="Message sizes: MIN:MAX (doubling), MIN:MAX:FACTOR or "
                                                              "a list 1M,8M,64M [default: 1M:64M].")
@click.option("--iters", type=click.IntRange(1, 10000), default=None, help="Timed iterations per size [default: 5].")
@click.option("--backend", type=click.Choice(["auto", "nccl", "gloo"]), default=None,
              help="auto: NCCL where every host has GPUs, else gloo [default: auto].")
@click.option("--runner", type=click.Choice(["torch", "nccl-tests"]), default=None,
              help="torch: fabnet's own torch.distributed ranks; nccl-tests: all_reduce_perf, started by "
                   "--launcher.")
@click.option("--launcher", type=click.Choice(["auto", "srun", "mpirun"]), default=None,
              help="How nccl-tests starts all_reduce_perf. srun runs on the inventory's Slurm controller "
                   "(fabnet_slurm_controller), mpirun on the first host. auto: srun when the inventory names a "
                   "Slurm controller or srun is on the first host's PATH, else mpirun [default: auto].")
@click.option("--timeout", type=click.FloatRange(5, 86400), default=None,
              help="Deadline in seconds for the rendezvous and the whole sweep [default: 120].")
@click.option("--launch", default=None, callback=checked_template("provisioner.smoke.settings:check_launch"),
              help="A launch template of one's own instead of --launcher's; fields {np} {ppn} {nodes} {hosts} "
                   "(addresses:ppn) {hostlist} (host names) {binary} {min_bytes} {max_bytes} {iters}, and {forward} "
                   "(a word of its own: mpirun's -x NAME for each NCCL variable the playbook sets).")
@click.option("--port", type=click.IntRange(1024, 65533), default=None, help="Rendezvous port [default: 29500].")
@click.option("--no-localise", is_flag=True, help="Below threshold, do not run pairs to find the slow host.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (schema fabnet/smoke/v1).")
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write a JUnit XML report here.")
@click.option("--prom", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write a Prometheus textfile here (node_exporter's textfile collector).")
@connect_timeout_option
@ssh_config_option
@become_option
@scheduler_options
def smoke(inventory: Path, playbook: Path | None, limit: str | None, min_busbw: float | None,
          slow_fraction: float | None, link_fraction: float | None, sizes: tuple[int, ...] | None,
          iters: int | None, backend: str | None, runner: str | None,
          launcher: str | None, timeout: float | None, launch: str | None, port: int | None, no_localise: bool,
          as_json: bool, junit: Path | None, prom: Path | None, connect_timeout: float, ssh_config: Path | None,
          ask_become_pass: bool, scheduler: SchedulerArgs) -> None:
    """Run an all-reduce across the hosts and check it reaches the expected bus bandwidth.

    First a pre-flight, one SSH exec per host and no collective: the data interfaces exist and are up,
    one MTU everywhere, full-size frames pass between the hosts (ping -M do -s MTU-28 over the data
    network), and NCCL_SOCKET_IFNAME / NCCL_IB_HCA / GLOO_SOCKET_IFNAME name things that exist. Then
    one process per GPU on every host (gloo, one per host, on CPU-only nodes), all hosts started at once,
    with the NCCL environment the playbook renders; per size: time, algbw, busbw. Then, in the same
    processes, pairs of hosts side by side (each host with both ring neighbours): a host whose best pair
    is below --slow-fraction x the fleet median is named, with no threshold needed. A run that hangs is
    killed on every host at --timeout and the report says which host held it up and why (a rank stopped
    or stuck in a driver call is named by its process state); a rank killed by a signal (kill -9, OOM, a
    crash) is named with the signal and its last output.

    \b
    Inventory variables: fabnet_python (the node's interpreter, default python3), data_iface or
    fabnet_data_ifaces, data_ip or fabnet_data_ip (rendezvous and ping targets; else read from the host).

    \b
    Examples:
      fabnet smoke hosts.yml --min-busbw 20 --sizes 1M:1G
      fabnet smoke hosts.yml -l 'rack_a' --json --junit smoke.xml --prom /var/lib/node_exporter/smoke.prom
      fabnet smoke hosts.yml --min-busbw 20 --drain-cmd 'scontrol update nodename={node} state=drain reason="{reason}"'
      fabnet smoke hosts.yml --runner nccl-tests --launcher srun --sizes 1M:64M --json
      fabnet smoke hosts.yml --runner nccl-tests --launcher mpirun
      fabnet smoke hosts.yml --runner nccl-tests \\
        --launch 'srun -N {nodes} --ntasks-per-node {ppn} -w {hostlist} {binary} -b {min_bytes} -e {max_bytes} -g 1'

    \b
    On the lab (`fabnet lab up --slurm`; all_reduce_perf there is fabnet's emulation, gloo over TCP;
    the lab starts drifted, and its pre-flight passes once converged):
      fabnet apply /var/lib/fabnet/labs/lab/inventory.yml --yes
      fabnet smoke /var/lib/fabnet/labs/lab/inventory.yml --runner nccl-tests --launcher srun --sizes 1M:8M
    """
    from provisioner.output.core import check_report, write_reports
    from provisioner.output.files import OutputError
    from provisioner.smoke import output
    from provisioner.smoke.run import Options
    from provisioner.smoke.run import smoke as run_smoke
    from provisioner.smoke.settings import Settings
    from provisioner.smoke.targets import targets_from_plans, verify_spec

    plans = load_plans(inventory, playbook, limit, ssh_config=ssh_config)
    if not plans:
        raise ConfigError("no host selected (check the playbook's hosts: and --limit)", file=str(inventory))
    try:  # a path that cannot be written is refused before any host is contacted
        check_report(junit)
        check_report(prom)
    except OutputError as exc:
        report.error(str(exc))
        raise SystemExit(64) from None
    explicit = {"min_busbw": min_busbw, "slow_fraction": slow_fraction, "link_fraction": link_fraction,
                "sizes": sizes, "iters": iters, "backend": backend, "runner": runner,
                "launcher": launcher, "timeout": timeout, "launch": launch, "port": port}
    if no_localise:
        explicit["localise"] = False
    settings = Settings().merged(verify_spec(plans), explicit)
    options = Options(connect_timeout=connect_timeout, ssh_config=ssh_config,
                      become_password=become_password(ask_become_pass),
                      slurm_controller=slurm_controller(inventory, playbook) if settings.runner == "nccl-tests"
                      else None)
    from provisioner.commands import scheduling
    from provisioner.run.session import Options as SessionOptions

    on_controller = SessionOptions(connect_timeout=connect_timeout, ssh_config=ssh_config,
                                   become_password=options.become_password)
    path = playbook or loading_playbook(inventory, playbook)
    plans = scheduling.narrow(plans, scheduler, inventory, path.parent if path else None, on_controller)
    with report.progress_log() as log:
        outcome = run_smoke(targets_from_plans(plans), settings, options, log)
    code = scheduling.settle(scheduler, "smoke", outcome, inventory, path, on_controller, outcome.exit_code)
    from provisioner.output import prom as textfile

    write_error = write_reports([(junit, lambda: output.to_junit(outcome)),  # before a reader can leave
                                 (prom, lambda: textfile.smoke_text(outcome))])
    from provisioner.history.record import record_safely

    if note := record_safely("smoke", output.to_json(outcome, inventory=str(inventory),
                                                     playbook=str(path) if path else None, limit=limit)):
        report.warn(note)
    if as_json:
        report.print_json(output.to_json(outcome, inventory=str(inventory),
                                         playbook=str(path) if path else None, limit=limit))
    else:
        show(outcome)
    if write_error:
        raise write_error
    raise SystemExit(code)


def slurm_controller(inventory: Path, playbook: Path | None) -> Any:
    """The inventory's Slurm controller (a Host), where nccl-tests' srun runs; None when it names none."""
    from provisioner.scheduler import select

    path = loading_playbook(inventory, playbook)
    loaded = select.load(inventory, path.parent if path else None)
    try:
        return loaded.hosts[select.controller_name(loaded)]
    except ConfigError:
        return None


def loading_playbook(inventory: Path, playbook: Path | None) -> Path | None:
    from provisioner.load import loading

    return playbook or loading.default_playbook(inventory)


def load_plans(inventory: Path, playbook: Path | None, limit: str | None, ssh_config: Path | None = None) -> list[Any]:
    """The hosts the playbook's plays target (after --limit); without a playbook, every inventory host."""
    from provisioner.load import loading

    path = playbook or loading.default_playbook(inventory)
    plans, warnings = (loading.load_plans(inventory, path, limit, ssh_config=ssh_config) if path
                       else loading.load_hosts(inventory, limit, ssh_config=ssh_config))
    for warning in warnings:
        report.warn(warning)
    return plans


def show(outcome) -> None:  # type: ignore[no-untyped-def]
    """The human report: findings or per-size figures, the verdict (what was drained is on stderr, with
    audit's and apply's: commands/scheduling.py).

    Every cell with text from hosts is a `cell` (cleaned Text), never markup: gloo's error text such as
    `[/src/gloo/transport/tcp/pair.cc:553] Connection closed by peer` is shown as written.
    """
    from rich.table import Table  # here, not at import: `fabnet --help` loads no rich

    from provisioner.output.core import cell
    from provisioner.smoke import diagnose

    console = report.console
    for findings, title in ((outcome.findings, "pre-flight failed: no collective was started"),
                            (outcome.findings_after, "the pre-flight checks, run again after the failure")):
        if not findings:
            continue
        table = Table(title=title, title_justify="left")
        for column in ("check", "hosts", "problem", "fix"):
            table.add_column(column, overflow="fold")
        for f in findings:
            table.add_row(cell(f.check), cell(", ".join(f.hosts)), cell(f.message), cell(f.fix))
        report.table(table)
    if outcome.rows:
        ranks = len(outcome.hosts) * outcome.ranks_per_host
        table = Table(title=f"all_reduce, {ranks} ranks on {len(outcome.hosts)} hosts ({outcome.backend or '-'})",
                      title_justify="left")
        for column in ("size (B)", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "wrong"):
            table.add_column(column, justify="right")
        for r in outcome.rows:
            table.add_row(str(r.size), f"{r.time_us:.1f}", f"{r.algbw:.3f}", f"{r.busbw:.3f}", str(r.wrong))
        report.table(table)
        if outcome.avg_busbw is not None:
            report.info(f"Avg bus bandwidth: {outcome.avg_busbw:.3f} GB/s")
    if outcome.judgement is not None:
        table = Table(title="verdicts", title_justify="left")
        for column in ("check", "status", "what was compared"):
            table.add_column(column, overflow="fold")
        for check in outcome.judgement.checks:
            table.add_row(cell(check.name), cell(check.status), cell(check.message))
        report.table(table)
    if outcome.job is not None and not outcome.job.ok:
        table = Table(title="how far each rank got", title_justify="left")
        for column in ("rank", "host", "reached", "sizes done", "error", "exit"):
            table.add_column(column, overflow="fold")
        for p in outcome.job.progress:
            table.add_row(cell(p.rank), cell(p.host), cell(p.stage), cell(p.sizes_done), cell(p.error),
                          cell(diagnose.exit_words(p.status) or diagnose.held_words(p)))
        report.table(table)
        left = outcome.job.left_running
        report.info("processes left on the hosts: " + (", ".join(f"{h}: {v}" for h, v in left.items()) or "none"))
    if outcome.localisation is not None:
        table = Table(title="localisation (pairs)", title_justify="left")
        for column in ("round", "hosts", "busbw (GB/s)"):
            table.add_column(column)
        for pair in outcome.pairs:
            value = "failed" if pair["busbw"] is None else f"{pair['busbw']:.3f}"
            table.add_row(cell(pair["round"]), cell(" + ".join(pair["hosts"])), cell(value))
        report.table(table)
    if outcome.launch:
        report.info(f"started by {outcome.launch['launcher']} on {outcome.launch['host']}: {outcome.launch['command']}")
    for note in outcome.notes:
        report.warn(note)
    colour = "green" if outcome.verdict == "pass" else "red"
    console.print(f"[bold {colour}]{outcome.verdict.upper().replace('_', ' ')}[/]: ", end="", highlight=False)
    report.info(outcome.reason)


def demo_smoke(inventory: Path, playbook: Path) -> int:
    """The demo's last step: an all-reduce across the lab. Hosts the pre-flight rejects (a drifted MTU
    on a lab that was not converged) are shown, then left out of a second run on the rest."""
    from provisioner.smoke.run import Options
    from provisioner.smoke.run import smoke as run_smoke
    from provisioner.smoke.settings import Settings, parse_sizes
    from provisioner.smoke.targets import targets_from_plans

    targets = targets_from_plans(load_plans(inventory, playbook, None))
    settings = Settings(sizes=parse_sizes("1M:8M"), iters=5, timeout=90)
    report.info(f"\nAll-reduce smoke test across {len(targets)} nodes (gloo over the data network):\n")
    with report.progress_log() as log:
        outcome = run_smoke(targets, settings, Options(), log)
    show(outcome)
    rejected = set(outcome.failed_hosts) if outcome.verdict == "preflight_failed" else set()
    healthy = [t for t in targets if t.name not in rejected]
    if rejected and len(healthy) >= 2:
        report.info(f"\nThe same on the {len(healthy)} nodes the pre-flight passed "
                    f"(left out until fixed: {', '.join(sorted(rejected))}):\n")
        with report.progress_log() as log:
            outcome = run_smoke(healthy, settings, Options(), log)
        show(outcome)
    return outcome.exit_code
