"""`fabnet history`, `fabnet runs` and `fabnet report --html`: what the run history says."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from provisioner.commands.durations import duration
from provisioner.commands.options import CONTEXT
from provisioner.lazy import lazy_module

if TYPE_CHECKING:
    from provisioner.history.store import History
    from provisioner.output import watch_report
else:
    watch_report = lazy_module("provisioner.output.watch_report")

HISTORY_HELP = "History file (SQLite) [default: $FABNET_HISTORY, else $XDG_STATE_HOME/fabnet/history.sqlite]."
history_option = click.option("--history", "history_file", type=click.Path(dir_okay=False, path_type=Path),
                              default=None, help=HISTORY_HELP)


def _open(history_file: Path | None) -> History:
    from provisioner.errors import ConfigError
    from provisioner.history.record import history_path
    from provisioner.history.store import History, default_path

    path = history_path(history_file) or default_path()
    if not path.is_file():
        raise ConfigError("no history recorded yet (audit, apply, smoke and watch record it)", file=str(path))
    return History(path)


def _since(value: float | None) -> float | None:
    return None if value is None else time.time() - value


@click.command("history", context_settings=CONTEXT)
@click.argument("host", required=False)
@click.option("--since", callback=duration, default=None, help="Only this far back: 2d, 12h, 30m.")
@click.option("--json", "as_json", is_flag=True, help="Print the changes and results as JSON.")
@history_option
def history_command(host: str | None, since: float | None, as_json: bool, history_file: Path | None) -> None:
    """What changed when, on one host or all: drift that appeared or went away, counters that rose, links
    that flapped, hosts down and back (from watch), and each audit, apply and smoke verdict.

    \b
    Examples:
      fabnet history gpu03 --since 2d
      fabnet history --json | jq '.changes[] | select(.kind == "drift_new")'
    """
    with _open(history_file) as history:
        start = _since(since)
        known = history.hosts() if host is not None else None
        watch_report.history(history.events(host, start), history.results(host, start), as_json,
                             host=host, since=since, known=known)


@click.command("runs", context_settings=CONTEXT)
@click.option("--since", callback=duration, default=None, help="Only this far back: 2d, 12h, 30m.")
@click.option("--json", "as_json", is_flag=True, help="Print the runs as JSON.")
@history_option
def runs_command(since: float | None, as_json: bool, history_file: Path | None) -> None:
    """The recorded runs: audit, apply, smoke and watch, with their verdicts and how long they took.

    \b
    Examples:
      fabnet runs --since 2d
      fabnet runs --json | jq '.runs[] | select(.command == "apply") | .verdict'
    """
    with _open(history_file) as history:
        watch_report.runs(history.runs(_since(since)), as_json)


@click.command("report", context_settings=CONTEXT)
@click.option("--html", "html_file", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Write the page here: one self-contained HTML file (inline SVG, no external assets).")
@click.option("--since", callback=duration, default="7d", show_default=True, help="How far back: 7d, 24h, 30m.")
@history_option
def report_command(html_file: Path, since: float, history_file: Path | None) -> None:
    """A page to look at, from the history: drift by host and kind, the last smoke's pairwise bandwidth
    matrix, bus bandwidth by message size against the fleet's median, and a timeline of drift, counters,
    link flaps and hosts down per host.

    \b
    Example:  fabnet report --html fleet.html --since 2d && xdg-open fleet.html
    """
    from provisioner.output.core import check_report
    from provisioner.output.files import write_report
    from provisioner.output.html_report import render
    from provisioner.output.report import info

    check_report(html_file)
    end = time.time()
    start = end - since
    with _open(history_file) as history:
        page = render(history.runs(start), history.results(since=start), history.events(since=start),
                      start=start, end=end, source=str(history.path))
    write_report(html_file, page)
    info(f"wrote {html_file}")
