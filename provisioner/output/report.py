"""Everything fabnet shows a person or a program: rich tables, progress, JSON. The only place that prints.

Text that came from hosts (values, error messages) may hold terminal escapes or control bytes: every
output shows them escaped by provisioner.output.core (`clean`, `markup`, `junit_xml`), so a node can neither
move the operator's cursor nor make the JUnit XML ill-formed; names are never read as rich markup.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from provisioner.output.core import clean, count, junit_xml, markup
from provisioner.output.stdout import broken_pipe
from provisioner.output.stdout import print_json as print_json  # re-exported: commands call report.print_json
from provisioner.output.stdout import writing as writing  # re-exported: commands print through report.writing

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

# rich costs a command about 15 ms to import; JSON output and a quiet audit never need it, so the
# consoles are made on first use and then kept as the module's `console` and `err_console`.
def _console(name: str = "console") -> Console:
    if name not in globals():
        from rich.console import Console

        class _StdoutConsole(Console):
            def on_broken_pipe(self) -> None:  # rich's own would exit 1 without a word
                broken_pipe()

        globals().setdefault("console", _StdoutConsole(width=_log_width(sys.stdout)))
        globals().setdefault("err_console", Console(stderr=True, width=_log_width(sys.stderr)))
    return cast("Console", globals()[name])  # set just above; globals() is untyped


# Into a pipe or a file (a CI log, `| less`), rich would wrap every table at 80 columns and split values
# such as "interface[eth1]" across lines; logs are read wide. COLUMNS still decides when it is set.
LOG_WIDTH = 160


def _log_width(stream: Any) -> int | None:
    if "COLUMNS" in os.environ:
        return None
    try:
        return None if stream.isatty() else LOG_WIDTH
    except (AttributeError, ValueError):  # replaced or closed streams: rich's own default
        return None


def _err() -> Console:
    return _console("err_console")


def __getattr__(name: str) -> Console:
    if name in ("console", "err_console"):
        return _console(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def escape(text: str) -> str:
    """Markup characters escaped only (for text fabnet wrote); foreign text takes `output.markup`."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)

def _cleaned(text: str | None) -> str | None:
    return None if text is None else clean(text)


def info(message: str) -> None:
    with writing():
        _console().print(clean(message), highlight=False, soft_wrap=True, markup=False)


def error(message: str) -> None:
    _err().print(f"[bold red]error:[/] {markup(message)}", highlight=False, soft_wrap=True)


def warn(message: str) -> None:
    _err().print(f"[yellow]warning:[/] {markup(message)}", highlight=False, soft_wrap=True)


@contextmanager
def progress_log() -> Iterator[Callable[[str], None]]:
    """A status spinner on a terminal; plain lines on stderr otherwise (CI logs stay readable)."""
    if _err().is_terminal:
        with _err().status("starting") as status:
            def log(message: str) -> None:
                _err().print(f"[dim]{markup(message)}[/]", highlight=False)
                status.update(markup(message))
            yield log
    else:
        yield lambda message: print(clean(message), file=sys.stderr, flush=True)


def lab_status(state: Any, nodes: list[Any], *, as_json: bool) -> None:
    if as_json:
        print_json({
            "name": state.name,
            "complete": state.complete,
            "slurm": getattr(state, "slurm", False),
            "inventory": str(state.inventory_path),
            "private_key": str(state.key_path),
            "known_hosts": str(state.known_hosts_path),
            "user": "root",
            "nodes": [
                {
                    "name": n.name,
                    "mgmt_ip": n.mgmt_ip,
                    "data_interfaces": [{"name": n.data_iface, "ip": n.data_ip}],
                    "netns": n.netns,
                    "running": n.running,
                    "ssh_ready": n.ssh_ready,
                    "inventory": str(state.inventory_path),
                    "private_key": str(state.key_path),
                    "known_hosts": str(state.known_hosts_path),
                }
                for n in nodes
            ],
        })
        return
    from rich.table import Table

    shown = Table(title=f"lab {state.name}", title_justify="left")
    for column in ("node", "management (ssh)", "data interface", "running", "ssh"):
        shown.add_column(column)
    for n in nodes:
        shown.add_row(n.name, n.mgmt_ip, f"{n.data_iface} {n.data_ip}", _yes(n.running), _yes(n.ssh_ready))
    table(shown)
    info(f"inventory:   {state.inventory_path}\nprivate key: {state.key_path}\nknown_hosts: {state.known_hosts_path}")
    if getattr(state, "slurm", False) and state.nodes:
        info(f"slurm:       yes (slurmctld on {state.nodes[0].name}, slurmd on every node)")


def _yes(flag: bool) -> str:
    return "[green]yes[/]" if flag else "[red]no[/]"


# ------------------------------------------------------------------------------------------- validate

VALIDATE_SCHEMA = "fabnet/validate/v1"


def validate_json(*, inventory: str, playbook: str | None, errors: list[Any], warnings: list[str], hosts: int,
                  resources: int) -> dict[str, Any]:
    """The `--json` document of `fabnet validate` (schema `fabnet/validate/v1`): each problem located by
    file, line and key, as the console line shows it."""
    return {
        "schema": VALIDATE_SCHEMA,
        "inventory": inventory,
        "playbook": playbook,
        "valid": not errors,
        "hosts": hosts,
        "resources": resources,
        "errors": [{"file": e.file, "line": e.line, "key": e.key or None, "message": e.message, "text": str(e)}
                   for e in errors],
        "warnings": warnings,
    }


# ---------------------------------------------------------------------------------------------- audit

AUDIT_SCHEMA = "fabnet/audit/v1"
_STATUS_STYLE = {
    "in_sync": "green", "drifted": "yellow", "unreachable": "red", "failed": "red",
    "ok": "green", "drift": "yellow", "error": "red",
}


def audit_json(outcome: Any, *, inventory: str, playbook: str, limit: str | None, exit_code: int) -> dict[str, Any]:
    """The stable `--json` document of `fabnet audit` (schema `fabnet/audit/v1`, see README)."""
    return {
        "schema": AUDIT_SCHEMA,
        "inventory": inventory,
        "playbook": playbook,
        "limit": limit,
        "seconds": round(outcome.seconds, 3),
        "exit_code": exit_code,
        "summary": {
            "hosts": len(outcome.hosts),
            "in_sync": outcome.count("in_sync"),
            "drifted": outcome.count("drifted"),
            "unreachable": outcome.count("unreachable"),
            "failed": outcome.count("failed"),
        },
        "warnings": [clean(w) for w in getattr(outcome, "warnings", ())],
        "hosts": [
            {
                "name": clean(host.name),
                "address": clean(host.address),
                "status": host.status,
                "error": _cleaned(host.error),
                "seconds": round(host.seconds, 3),
                "execs": host.execs,
                "resources": [
                    {
                        "kind": res.kind,
                        "target": clean(res.target),
                        "source": clean(res.source),
                        "play": clean(res.play),
                        "status": res.status,
                        "checks": [
                            {"attribute": clean(c.attribute), "desired": clean(c.desired),
                             "actual": _cleaned(c.actual), "status": c.status, "message": clean(c.message)}
                            for c in res.checks
                        ],
                    }
                    for res in host.resources
                ],
            }
            for host in outcome.hosts
        ],
    }


def audit_tables(outcome: Any, *, verbose: bool = False) -> None:
    """One table per host that needs attention (every row with --verbose), then the recap."""
    with writing():
        for host in outcome.hosts:
            _host_table(host, verbose)
        recap(outcome)


def _host_title(host: Any, style: str, label: str) -> Text:
    # Built as Text, never as markup: a host name such as `gpu[/]01` is shown, not interpreted.
    from rich.text import Text

    title = Text()
    title.append(clean(host.name), style="bold")
    title.append(f" ({clean(host.address)}): ")
    title.append(label, style=style)
    return title


def _host_table(host: Any, verbose: bool) -> None:
    from rich.table import Table
    from rich.text import Text

    style = _STATUS_STYLE[host.status]
    label = host.status.replace("_", " ")
    title = _host_title(host, style, label)
    if host.status in ("unreachable",) or (host.status == "failed" and not host.resources):
        _console().print(title + Text(f" — {clean(host.error or '')}"), highlight=False)
        return
    rows = [(r, c) for r in host.resources for c in r.checks if verbose or c.status != "ok"]
    checked = sum(len(r.checks) for r in host.resources)
    if not rows:
        _console().print(title + Text(f" — {len(host.resources)} resources, {checked} checks"), highlight=False)
        return
    # The host line printed on its own, not as the table's title, which rich pads to the table's width.
    _console().print(title, highlight=False)
    grid = Table(show_lines=False, expand=False)
    for column in ("resource", "attribute", "desired", "actual", "status", "detail"):
        grid.add_column(column, overflow="fold")
    for resource, check in rows:
        # Text cells: values such as `interface[eth1]` must never be read as rich markup.
        grid.add_row(
            Text(clean(resource.target)), Text(clean(check.attribute)), Text(clean(check.desired)),
            Text(clean(check.actual)),
            Text(check.status, style=_STATUS_STYLE[check.status]), Text(clean(check.message)),
        )
    _console().print(grid)
    if not verbose:
        hidden = checked - len(rows)
        _console().print(f"  [dim]{hidden} other checks ok (--verbose shows them)[/]", highlight=False)


def table(shown: Any) -> None:
    """Print a rich Table, its title on a line of its own: as the table's title rich pads it with spaces
    to the table's width, which a log keeps as trailing blanks."""
    title, shown.title = shown.title, None
    if title:
        _console().print(title, highlight=False, markup=False, soft_wrap=True)
    _console().print(shown)


def recap(outcome: Any) -> None:
    parts = []
    for status in ("in_sync", "drifted", "unreachable", "failed"):
        number = outcome.count(status)
        style = _STATUS_STYLE[status] if number else "dim"
        parts.append(f"[{style}]{status.replace('_', ' ')}={number}[/]")
    _console().print(f"\n[bold]recap[/] {count(len(outcome.hosts), 'host')} in {outcome.seconds:.2f} s: "
                     + "  ".join(parts), highlight=False)


def audit_junit(outcome: Any) -> str:
    """JUnit XML: one test case per checked attribute, so CI dashboards show drift like failing tests.

    Written by `output.junit_xml`, which cleans every text: XML 1.0 cannot hold most control characters.
    """
    from xml.etree import ElementTree as ET

    from provisioner.resources.base import shown_actual

    suites = ET.Element("testsuites", name="fabnet audit")
    for host in outcome.hosts:
        name = host.name
        suite = ET.SubElement(suites, "testsuite", name=name, time=f"{host.seconds:.3f}")
        cases = failures = errors = 0
        if host.status == "unreachable" or (host.status == "failed" and not host.resources):
            case = ET.SubElement(suite, "testcase", classname=name, name="reach host")
            ET.SubElement(case, "error", message=host.error or host.status)
            cases, errors = 1, 1
        for resource in host.resources:
            for check in resource.checks:
                cases += 1
                case = ET.SubElement(suite, "testcase", classname=f"{name}.{resource.target}",
                                     name=check.attribute, file=resource.source)
                if check.status == "drift":
                    failures += 1
                    failure = ET.SubElement(case, "failure",
                                            message=f"desired {check.desired}, actual {shown_actual(check)}")
                    failure.text = check.message
                elif check.status == "error":
                    errors += 1
                    ET.SubElement(case, "error", message=check.message)
        suite.set("tests", str(cases))
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
    return junit_xml(suites)


def audit_warnings(outcome: Any) -> None:
    for warning in getattr(outcome, "warnings", ()):
        warn(warning)


def _may_be_terminal() -> bool:
    """False where rich would surely find stderr no terminal (its TTY_COMPATIBLE and FORCE_COLOR rules)."""
    return sys.stderr.isatty() or os.environ.get("TTY_COMPATIBLE") == "1" or bool(os.environ.get("FORCE_COLOR"))


# A host still running after this long is named on the progress line (a silent host is the one to look at).
SLOW_HOST_SECONDS = 5.0


class _Waiting:
    """The hosts not done yet, named once the run is a few seconds old; rendered at each refresh."""

    def __init__(self, names: list[str]) -> None:
        self.pending = dict.fromkeys(names)
        self.started = time.monotonic()

    def __rich__(self) -> str:
        waited = time.monotonic() - self.started
        if waited < SLOW_HOST_SECONDS or not self.pending:
            return ""
        names = list(self.pending)
        shown = ", ".join(markup(n) for n in names[:3]) + (f" +{len(names) - 3} more" if len(names) > 3 else "")
        return f"[dim]waiting for {shown} ({waited:.0f} s)[/]"


@contextmanager
def host_progress(total: int, description: str,
                  names: list[str] | None = None) -> Iterator[Callable[[str, str | None], None]]:
    """A progress bar over hosts on a terminal (transient); silent otherwise, so pipes and CI logs stay clean.
    With `names`, hosts still running after a few seconds are named beside the bar."""
    if total < 2 or not _may_be_terminal() or not _err().is_terminal:
        yield lambda host, problem: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, RenderableColumn, TextColumn, TimeElapsedColumn

    waiting = _Waiting(names or [])
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               RenderableColumn(waiting))  # rich renders any object with __rich__
    with Progress(*columns, console=_err(), transient=True) as progress:
        task = progress.add_task(description, total=total)

        def advance(host: str, problem: str | None) -> None:
            waiting.pending.pop(host, None)
            if problem:
                progress.console.print(f"[red]{markup(host)}: {markup(problem)}[/]", highlight=False)
            progress.advance(task)

        yield advance


def config_errors(errors: list[Any]) -> None:
    for problem in errors:
        _err().print(f"[bold red]error:[/] {markup(problem)}", highlight=False, soft_wrap=True)
    if len(errors) > 1:
        _err().print(f"{len(errors)} problems found", highlight=False)
