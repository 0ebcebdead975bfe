"""`fabnet watch`: re-audit every host each interval over kept-open sessions; report changes only."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from provisioner.commands.durations import duration
from provisioner.commands.options import (
    CONTEXT,
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
    from provisioner.evaluate.engine import Options
    from provisioner.output import report, watch_report
    from provisioner.watch.drainer import Drainer
    from provisioner.watch.events import Change
else:
    report = lazy_module("provisioner.output.report")
    watch_report = lazy_module("provisioner.output.watch_report")

HISTORY_HELP = "History file (SQLite) [default: $FABNET_HISTORY, else $XDG_STATE_HOME/fabnet/history.sqlite]."


@click.command("watch", context_settings=CONTEXT)
@click.argument("inventory", type=click.Path(path_type=Path))
@playbook_option
@limit_option
@click.option("--every", "interval", callback=duration, default="60s", show_default=True,
              help="How often each host is read again (60s, 5m, ...). Hosts are read in rounds on one clock; a "
                   "host that is down is retried with its own backoff.")
@click.option("--for", "run_for", callback=duration, default=None,
              help="Stop after this long (default: run until Ctrl-C or SIGTERM).")
@forks_option("Host cycles running at once.", default=200)
@connect_timeout_option
@timeout_option(30.0, 3600, "Seconds for a host's cycle once logged in; a host that takes longer is reported down.")
@ssh_config_option
@click.option("--history", "history_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help=HISTORY_HELP)
@click.option("--keep", callback=duration, default="30d", show_default=True,
              help="How long the history keeps watch cycles (30d, 12h, ...); older ones are deleted at the start "
                   "and every hour. 0 keeps them all. Audit, apply and smoke records are always kept.")
@click.option("--prom-port", type=click.IntRange(1, 65535), default=None,
              help="Serve Prometheus metrics on this port (/metrics).")
@click.option("--prom-listen", default="127.0.0.1", show_default=True,
              help="Address the metrics server listens on (0.0.0.0: every interface).")
@click.option("--prom", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the metrics as a node_exporter textfile after every cycle.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per change, one a line.")
@click.option("--drain-failed", is_flag=True,
              help="Drain a host in Slurm (reason 'fabnet: watch: ...') when a cycle finds new drift, a rising "
                   "error counter, a link flap or the host down; once per watch, never resumed by it.")
@become_option
def watch_command(inventory: Path, playbook: Path | None, limit: str | None, interval: float, run_for: float | None,
                  forks: int, connect_timeout: float, command_timeout: float, ssh_config: Path | None,
                  history_file: Path | None, keep: float, prom_port: int | None, prom_listen: str, prom: Path | None,
                  as_json: bool, drain_failed: bool, ask_become_pass: bool) -> None:
    """Keep watching the fleet: each host is read again every interval over its kept SSH session (one
    run in a shell kept open there: the playbook's facts and the RDMA port counters and link carrier
    changes), and only what
    CHANGED is reported: new drift, drift gone, an error counter that rose (with its rate), a link that
    went down and up, a host down or back. Every cycle is recorded in the history (fabnet history).

    A host that is down is reported once and retried with a growing delay (at most 60 s, or the
    interval); the other hosts' cycles are never held up by it. Only one watch per inventory runs at a
    time (an flock in $XDG_STATE_HOME/fabnet). SIGTERM stops it cleanly (exit 0), as systemd does.

    \b
    Examples:
      fabnet watch inventory.yml --every 60s
      fabnet watch inventory.yml -p playbooks/site.yml --every 30s --prom-port 9464
      fabnet watch inventory.yml --every 5m --prom /var/lib/node_exporter/textfile/fabnet.prom
      fabnet watch inventory.yml --every 60s --drain-failed     (Slurm: see fabnet audit --help)
    """
    from provisioner.evaluate import engine
    from provisioner.history.record import history_path
    from provisioner.history.store import History, default_path
    from provisioner.output import watch_metrics
    from provisioner.output.core import check_report
    from provisioner.run import runner
    from provisioner.run.session import Sessions
    from provisioner.watch.lock import WatchLock
    from provisioner.watch.loop import Cycle, Watcher

    if interval is None or interval < 0.5:
        raise click.BadParameter("must be at least 0.5 s", param_hint="--every")
    plans, playbook = load_targets(inventory, playbook, limit, ssh_config)
    check_report(prom)
    options = engine.Options(forks=forks, connect_timeout=connect_timeout, command_timeout=command_timeout,
                             ssh_config=ssh_config, become_password=become_password(ask_become_pass))
    target = history_path(history_file)
    drainer = _drainer(inventory, playbook, options) if drain_failed else None
    state = watch_metrics.WatchState()
    registry = watch_metrics.registry(state)
    with WatchLock(inventory, default_path().parent), Sessions(options, keep_shells=True) as sessions:
        history = History(target) if target is not None else None
        run = history.start_run("watch", str(inventory), str(playbook)) if history is not None else 0
        if prom_port is not None:
            try:
                watch_metrics.serve(registry, prom_port, prom_listen)
            except OSError as exc:
                raise click.BadParameter(f"cannot listen on {prom_listen}:{prom_port}: {exc.strerror}",
                                         param_hint="--prom-port") from None

        def cycled(cycle: Cycle) -> None:
            if prom is not None:
                watch_metrics.write_textfile(prom, registry)

        def found(changes: Sequence[Change]) -> None:
            watch_report.changes(changes, as_json)
            if drainer is not None:
                watch_report.drained(*drainer(changes))

        watcher = Watcher(plans, sessions, interval=interval, history=history, run=run, state=state,
                          on_changes=found,
                          on_cycle=cycled if prom is not None else None, on_problem=report.warn, keep=keep)
        watcher.seed_busbw()
        watcher.prune(on_batch=watch_report.pruning)  # a history never pruned before can take a while
        until = time.monotonic() + run_for if run_for else None
        if not as_json:
            watch_report.started(len(plans), interval, str(target) if target else None,
                                 f"{prom_listen}:{prom_port}" if prom_port else None)
        why, code = "time is up" if run_for else "stopped", 0
        try:
            with runner.terminate_like_interrupt():
                watcher.run_until(threading.Event(), forks, until)
        except runner.Terminated:
            why = "SIGTERM"
        except KeyboardInterrupt:
            why, code = "interrupted", 130
        finally:
            if history is not None:
                history.finish_run(run, why, {"cycles": watcher.cycles, "interval": interval})
                history.close()
    if not as_json:
        watch_report.stopped(watcher.cycles, why)
    raise SystemExit(code)



def _drainer(inventory: Path, playbook: Path, options: Options) -> Drainer:
    from provisioner.scheduler.select import connect, controller_name, load, node_names
    from provisioner.watch.drainer import Drainer

    slurm_inventory = load(inventory, playbook.parent)
    # Refused now (exit 3, nothing contacted), not at the first drain: the drainer catches scheduler errors only.
    controller_name(slurm_inventory)
    node_names(slurm_inventory)
    return Drainer(lambda: connect(slurm_inventory, options))
