"""`fabnet explain`: read a failed or slow job's logs and name the likely causes, optionally checking the
hosts the logs name against the playbook (one SSH round trip each)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from provisioner.commands.options import become_option, become_password, forks_option
from provisioner.errors import FabnetError

if TYPE_CHECKING:  # imported where used: `fabnet --help` does not load rich, pydantic or the parsers
    from provisioner.explain import Explanation
    from provisioner.run.become import Secret

EXIT_OK, EXIT_UNREADABLE, EXIT_FOUND = 0, 1, 2


def _read(paths: tuple[str, ...]) -> list[tuple[str, str]]:
    logs = []
    for path in paths:
        try:
            raw = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
        except OSError as exc:
            # A FabnetError exits EXIT_UNREADABLE (1): an input that cannot be read is no finding.
            raise FabnetError(f"{path}: cannot read: {exc.strerror}") from exc
        logs.append(("<stdin>" if path == "-" else path, raw.decode("utf-8", errors="replace")))
    return logs


def _seen(result: Explanation) -> list[str]:
    items: list[str] = []
    for cause in result.causes:
        items += cause.hosts + cause.addresses
    for use in result.networks:
        items += use.hosts
    return list(dict.fromkeys(items))


def _audit_hosts(inventory: Path, playbook: Path, hosts: list[str], forks: int,
                 password: Secret | None) -> list[dict[str, Any]]:
    from provisioner.evaluate import engine
    from provisioner.load.loading import load_plans
    from provisioner.output import report

    # The one loading path audit uses: group_vars/ and host_vars/ beside the playbook count here too.
    plans, warnings = load_plans(inventory, playbook, ",".join(hosts))
    for warning in warnings:
        report.warn(warning)
    plans = [plan for plan in plans if plan.host.name in hosts]  # a name is a name, not a pattern
    if not plans:
        return []
    outcome = engine.audit(plans, engine.Options(forks=forks, become_password=password))
    audited = []
    for host in outcome.hosts:
        findings = [{"target": r.target, "attribute": c.attribute, "desired": c.desired, "actual": c.actual,
                     "status": c.status, "message": c.message}
                    for r in host.resources for c in r.checks if c.status != "ok"]
        interfaces = sorted({r.target[len("interface["):-1] for r in host.resources
                             if r.target.startswith("interface[")})
        audited.append({"host": host.name, "status": host.status, "error": host.error, "findings": findings,
                        "data_interfaces": interfaces})
    return audited


def _mapping(inventory: Path, playbook: Path, seen: list[str]) -> dict[str, str]:
    from provisioner.explain.hosts import map_hosts
    from provisioner.load.inventory import load_inventory

    # Variables beside the playbook too (a data_ip in its group_vars/), as the audit that follows reads them.
    loaded = load_inventory(inventory, playbook_dir=playbook.parent)
    return map_hosts(seen, [(h.name, h.address, h.vars) for h in loaded.hosts.values()],
                     {h.name: h.node_name for h in loaded.hosts.values()})


class _Out:
    """Plain lines, never re-wrapped: evidence must stay one log line per printed line. Log lines and
    hosts' errors are foreign text: cleaned (no terminal escapes) and never read as markup."""

    def print(self, text: str, *, bold: bool = False) -> None:
        from provisioner.output import report
        from provisioner.output.core import clean

        with report.writing():
            report.console.print(clean(text), markup=False, highlight=False, soft_wrap=True,
                                 style="bold" if bold else None)


def _print(result: Explanation, mapping: dict[str, str], audited: list[dict[str, Any]]) -> None:
    out = _Out()
    out.print("Networks", bold=True)
    for use in result.networks:
        network = use.network or "not shown in this log (no 'Using network' or NET/ line)"
        network += f" (provider {use.provider})" if use.provider else ""
        network += f" (plugin {use.plugin})" if use.plugin else ""
        parts = [f"NCCL {use.nccl_version}" if use.nccl_version else "NCCL", f"network {network}"]
        if use.devices:
            parts.append(f"devices {', '.join(use.devices)}")
        if use.interfaces:
            parts.append(f"interfaces {', '.join(use.interfaces)}")
        if use.control:
            parts.append(f"control interface {', '.join(use.control)} (no data)")
        out.print(f"  {use.file}: " + "; ".join(parts))
        for ev in use.evidence:
            out.print(f"      {ev.file}:{ev.line}  {ev.text}")
    if not result.networks:
        out.print("  no NCCL network lines in these logs")
    out.print("Causes (most likely first)" if result.causes else "No known cause found", bold=True)
    by_host = {a["host"]: a for a in audited}
    for number, cause in enumerate(result.causes, start=1):
        out.print(f"  {number}. {cause.title}")
        out.print(f"     {cause.detail}")
        hosts = list(dict.fromkeys([mapping.get(h, h) for h in cause.hosts + cause.addresses]))
        if hosts:
            out.print(f"     where: {', '.join(hosts)}")
        if cause.settings:
            out.print(f"     setting: {', '.join(cause.settings)}")
        for host in hosts:
            for finding in by_host.get(host, {}).get("findings", []):
                out.print(f"     {host}: {finding['target']} {finding['attribute']} is {finding['actual']} "
                          f"(playbook: {finding['desired']}) {finding['message']}".rstrip())
        out.print(f"     fix: {cause.fix}")
        for ev in cause.evidence:
            out.print(f"       {ev.file}:{ev.line}  {ev.text}")
    if mapping:
        out.print("Inventory hosts named in the logs", bold=True)
        for seen, host in mapping.items():
            out.print(f"  {seen} -> {host}")
    for entry in audited:
        state = entry["status"] if not entry["error"] else f"{entry['status']}: {entry['error']}"
        out.print(f"  audit {entry['host']}: {state}, {len(entry['findings'])} finding(s)")


@click.command("explain")
@click.argument("logs", nargs=-1, required=True)
@click.option("-i", "--inventory", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Map hosts and addresses in the logs to this inventory's hosts and audit those hosts.")
@click.option("-p", "--playbook", type=click.Path(path_type=Path), default=Path("playbooks/site.yml"),
              show_default=True, help="Playbook the named hosts are audited against (with --inventory).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (schema fabnet/explain/v1).")
@forks_option("Hosts audited in parallel (with --inventory).")
@become_option
def explain_command(logs: tuple[str, ...], inventory: Path | None, playbook: Path, as_json: bool,
                    forks: int, ask_become_pass: bool) -> None:
    """Name the likely causes of a failed or slow job from its logs, most likely first, with evidence.

    LOGS are NCCL_DEBUG=INFO logs, nccl-tests output, PyTorch/DeepSpeed tracebacks, NCCL's `ncclras`
    reports (text, or `ncclras -f json`) (several files, or one log interleaving many ranks; - reads
    standard input). Launcher and logger prefixes are read
    through; a `host: ` label on each line says which host a line came from.

    \b
    With --inventory, hostnames and addresses in the logs are matched to inventory hosts (by name,
    ansible_host, or an address variable such as data_ip) and those hosts alone are audited against
    the playbook, one SSH round trip each, so a cause can point at a setting: "gpu07: interface[eth1]
    state is down".

    \b
    Examples:
      fabnet explain rank*.log
      fabnet explain job.log --inventory hosts.yml -p playbooks/site.yml --json

    \b
    Exit codes: 0 no failure found, 1 an input could not be read, 2 a failure or slow path found and
    named (every cause printed is one). `fabnet smoke --json` output is read too.
    """
    from provisioner.explain import explain
    from provisioner.output import report

    texts = _read(logs)
    result = explain(texts)
    mapping: dict[str, str] = {}
    audited: list[dict[str, Any]] = []
    if inventory is not None:
        mapping = _mapping(inventory, playbook, _seen(result))
        if mapping:
            # Again, knowing which names and addresses are one host: a cause that names the node common
            # to several errors (one reported by its name, another by its address) can then name it.
            result = explain(texts, aliases=mapping)
        hosts = list(dict.fromkeys(mapping.values()))
        if hosts:
            audited = _audit_hosts(inventory, playbook, hosts, forks, become_password(ask_become_pass))
    code = EXIT_FOUND if result.failed else EXIT_OK
    if as_json:
        data = result.model_dump(mode="json", by_alias=True)
        data.update({"inventory_hosts": mapping, "audit": audited, "exit_code": code})
        report.print_json(data)
    else:
        _print(result, mapping, audited)
    raise SystemExit(code)
