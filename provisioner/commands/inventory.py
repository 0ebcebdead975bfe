"""`fabnet inventory`: the inventory as fabnet sees it, in `ansible-inventory`'s shapes, to diff the two."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from provisioner.errors import ConfigError
from provisioner.lazy import lazy_module

if TYPE_CHECKING:
    from provisioner.output import report
else:
    report = lazy_module("provisioner.output.report")


@click.command("inventory", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.argument("sources", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--list", "as_list", is_flag=True, help="Groups, hosts and every host's variables as JSON (default).")
@click.option("--host", "host", default=None, metavar="HOST", help="One host's resolved variables as JSON.")
@click.option("--graph", "graph", is_flag=False, flag_value="all", default=None, metavar="[GROUP]",
              help="The group tree (from GROUP, default all) with each group's hosts.")
@click.option("-l", "--limit", default=None, help="Only these hosts (Ansible patterns, @FILE for a list of names).")
@click.option("--playbook-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also apply group_vars/ and host_vars/ beside the playbook in this directory.")
def inventory(sources: tuple[Path, ...], as_list: bool, host: str | None, graph: str | None, limit: str | None,
              playbook_dir: Path | None) -> None:
    """Show hosts, groups and resolved variables exactly as fabnet reads them, in the shapes
    `ansible-inventory` prints, so the two can be compared.

    SOURCES are inventory files (YAML or INI, recognised by content) or directories of them, merged in
    order as several `-i` options are in Ansible. Variables are shown as written (templates are rendered
    when a playbook uses them); vaulted values stay encrypted.

    \b
    Examples:
      fabnet inventory inventory/ --list > fabnet.json
      ansible-inventory -i inventory/ --list > ansible.json     # the same, modulo key order
      fabnet inventory hosts.ini --host gpu01
      fabnet inventory hosts.ini --graph gpu
      fabnet inventory hosts.ini --list --limit 'rack_a:&gpu'

    \b
    Exit codes: 0 shown; 3 invalid inventory, unknown --host/--graph group, or a --limit that is
    empty, an empty @FILE, a broken ~regex or matches nothing; 64 usage error.
    """
    from provisioner.load.inventory import load_inventory
    from provisioner.load.inventory_json import graph_lines, host_vars, list_json

    if sum(bool(x) for x in (as_list, host is not None, graph is not None)) > 1:
        raise click.UsageError("choose one of --list, --host and --graph")
    loaded = load_inventory(list(sources), playbook_dir=playbook_dir)
    selected = None
    if limit is not None:
        chosen = set(loaded.select_limit(limit))
        selected = [h for h in loaded.group_order["all"] if h in chosen]
    for warning in loaded.warnings:
        report.warn(warning)
    if host is not None:
        if host not in loaded.hosts or (selected is not None and host not in selected):
            raise ConfigError(f"no host named {host!r} in the inventory" + ("" if selected is None else
                                                                            " (or it is outside --limit)"),
                              key="--host")
        click.echo(json.dumps(host_vars(loaded, host, tag_unsafe=False), indent=4, sort_keys=True, default=str))
    elif graph is not None:
        if graph not in loaded.group_order:
            raise ConfigError(f"no group named {graph!r} in the inventory", key="--graph")
        click.echo("\n".join(graph_lines(loaded, graph)))
    else:
        click.echo(json.dumps(list_json(loaded, selected), indent=4, sort_keys=True, default=str))
