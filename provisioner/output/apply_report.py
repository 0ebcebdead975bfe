"""How `fabnet apply` shows itself: the plan, per-host results, the Ansible-style recap, JSON
(schema fabnet/apply/v1) and JUnit. Printing goes through report's consoles; nothing else prints.

Every value that came from a host or the playbook (names, errors, diffs of host files, step output)
is escaped by provisioner.output.core: `markup` for the console, print_json and `junit_xml` for the rest.
"""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree as ET

from provisioner.output.core import junit_xml, markup
from provisioner.output.report import console, err_console
from provisioner.resources.base import shown_actual

SCHEMA = "fabnet/apply/v1"


def plan_text(planned: list[Any], *, diff: bool = False) -> None:
    """Per host: what will change and the commands that will run (file contents never shown)."""
    for host in planned:
        audit = host.audit
        if audit.status == "unreachable":
            console.print(f"[bold]{markup(host.name)}[/]: [red]unreachable[/] — {markup(audit.error or '')}",
                          highlight=False)
            continue
        if not host.steps:
            unfixable = [r.outcome.target for r in host.resources if r.outcome.status != "ok"]
            note = f" — [yellow]{markup(', '.join(unfixable))} not in sync, no remedy[/]" if unfixable else ""
            console.print(f"[bold]{markup(host.name)}[/]: [green]no changes[/]{note}", highlight=False)
            continue
        console.print(f"[bold]{markup(host.name)}[/]: [yellow]{len(host.steps)} steps[/] (one exec)", highlight=False)
        for step in host.steps:
            flag = " [red](management path: guarded)[/]" if step.lockout else ""
            console.print(f"  [cyan]{markup(step.id)}[/]{flag}: {markup(step.shown)}", highlight=False, soft_wrap=True)
            if diff and step.diff:
                for line in step.diff.splitlines():
                    style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
                    console.print(f"      [{style}]{markup(line)}[/]", highlight=False)


def host_line(host: Any) -> None:
    style = {"ok": "green", "changed": "yellow", "failed": "red", "unreachable": "red", "skipped": "dim",
             "unknown": "magenta"}[host.status]
    detail = f" — {markup(host.error)}" if host.error else ""
    err_console.print(f"[{style}]{host.status}[/]: {markup(host.name)}{detail}", highlight=False, soft_wrap=True)
    for warning in host.warnings:
        err_console.print(f"[yellow]warning[/]: {markup(host.name)}: {markup(warning)}", highlight=False,
                          soft_wrap=True)


def results(outcome: Any, *, verbose: bool = False) -> None:
    for host in outcome.hosts:
        for resource in host.resources:
            if resource.status == "ok" and not verbose:
                continue
            style = {"ok": "green", "changed": "yellow", "failed": "red", "conflict": "magenta",
                     "unknown": "magenta"}[resource.status]
            console.print(f"{markup(host.name)} [{style}]{resource.status}[/] {markup(resource.before.target)}",
                          highlight=False)
            for run in resource.steps:
                mark = {"ok": "green", "failed": "red", "skipped": "yellow", "not_run": "dim",
                        "conflict": "magenta", "unknown": "magenta"}[run.result.status]
                console.print(f"    [{mark}]{run.result.status}[/] {markup(run.step.shown)}", highlight=False,
                              soft_wrap=True)
                if run.result.status in ("failed", "conflict") and run.result.output:
                    for line in run.result.output.splitlines()[-5:]:
                        console.print(f"        [dim]{markup(line)}[/]", highlight=False)
            if resource.status == "failed" and resource.after is not None:
                for check in resource.after.checks:
                    if check.status != "ok":
                        console.print(f"    still {check.status}: {markup(check.attribute)} wants "
                                      f"{markup(check.desired)}, has {markup(shown_actual(check))}", highlight=False)
        for run in host.handlers:
            if run.result.status != "not_run" or verbose:
                console.print(f"{markup(host.name)} handler {run.result.status}: {markup(run.step.shown)}",
                              highlight=False)


def recap(outcome: Any) -> None:
    """PLAY RECAP, as Ansible prints it: one line per host with ok / changed / failed / unreachable."""
    console.print(f"\n[bold]PLAY RECAP[/] (run {outcome.run_id}, {outcome.seconds:.2f} s)", highlight=False)
    for host in outcome.hosts:
        ok = host.count("ok") + host.count("changed")
        unreachable = 1 if host.status == "unreachable" else 0
        style = {"ok": "green", "changed": "yellow", "failed": "red", "unreachable": "red", "skipped": "dim",
                 "unknown": "magenta"}[host.status]
        failed = host.count("failed") + host.count("conflict") or int(host.status == "failed")
        console.print(f"[{style}]{markup(host.name):<20}[/] : ok={ok:<4} changed={host.count('changed'):<4} "
                      f"unreachable={unreachable:<4} failed={failed:<4} skipped={int(host.status == 'skipped'):<4} "
                      f"execs={host.execs}", highlight=False, soft_wrap=True)
    if outcome.stopped:
        console.print(f"[red]stopped:[/] {markup(outcome.stopped)}", highlight=False)


def to_json(outcome: Any, *, inventory: str, playbook: str, limit: str | None, exit_code: int) -> dict[str, Any]:
    """The document as data; print_json cleans its strings on the way out, as for audit's."""
    def checks(resource_outcome: Any) -> list[dict[str, Any]]:
        if resource_outcome is None:
            return []
        return [{"attribute": c.attribute, "desired": c.desired, "actual": c.actual, "status": c.status,
                 "message": c.message} for c in resource_outcome.checks]

    hosts = []
    for host in outcome.hosts:
        hosts.append({
            "name": host.name, "address": host.address, "status": host.status, "error": host.error,
            "warnings": list(host.warnings),
            "seconds": round(host.seconds, 3), "execs": host.execs, "facts_digest": host.digest,
            "resources": [{
                "kind": r.before.kind, "target": r.before.target, "source": r.before.source, "play": r.before.play,
                "status": r.status, "before": checks(r.before), "after": checks(r.after),
                "steps": [{"id": s.step.id, "command": s.step.shown, "status": s.result.status,
                           "exit_code": s.result.exit_code, "output": s.result.output[-2000:]} for s in r.steps],
            } for r in host.resources],
            "handlers": [{"id": s.step.id, "command": s.step.shown, "status": s.result.status} for s in host.handlers],
        })
    return {
        "schema": SCHEMA, "run_id": outcome.run_id, "inventory": inventory, "playbook": playbook, "limit": limit,
        "check": outcome.check, "seconds": round(outcome.seconds, 3), "exit_code": exit_code,
        "batches": outcome.batches, "stopped": outcome.stopped,
        "summary": {status: outcome.count(status)
                    for status in ("ok", "changed", "failed", "unreachable", "skipped", "unknown")}
        | {"hosts": len(outcome.hosts),
           "resources_changed": sum(h.count("changed") for h in outcome.hosts),
           "resources_failed": sum(h.count("failed") for h in outcome.hosts),
           "resources_conflict": sum(h.count("conflict") for h in outcome.hosts)},
        "hosts": hosts,
    }


def junit(outcome: Any) -> str:
    """One test case per resource (per host when it has none); a failed resource carries its failed
    steps' output, which `junit_xml` cleans like every other text."""
    suite = ET.Element("testsuite", name="fabnet apply", tests="0", failures="0")
    tests = failures = 0
    for host in outcome.hosts:
        if not host.resources:
            tests += 1
            case = ET.SubElement(suite, "testcase", classname=host.name, name="host")
            if host.status in ("failed", "unreachable", "skipped"):
                failures += 1
                ET.SubElement(case, "failure", message=f"{host.status}: {host.error or ''}")
        for resource in host.resources:
            tests += 1
            case = ET.SubElement(suite, "testcase", classname=host.name, name=resource.before.target)
            if resource.status in ("failed", "conflict"):
                failures += 1
                failure = ET.SubElement(case, "failure", message=host.error or "not converged")
                output = [f"{run.step.shown}\n{run.result.output[-2000:]}" for run in resource.steps
                          if run.result.status == "failed" and run.result.output]
                if output:
                    failure.text = "\n".join(output)
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    return junit_xml(suite)


def plan_json(planned: list[Any]) -> list[dict[str, Any]]:
    """The plan per host: facts digest and steps (commands as shown: no file contents)."""
    return [{
        "name": host.name, "status": host.audit.status, "error": host.audit.error, "facts_digest": host.digest,
        "steps": [{"id": s.id, "resource": s.resource, "action": s.action, "command": s.shown, "phase": s.phase,
                   "needs": list(s.needs), "writes": list(s.writes), "lockout": s.lockout} for s in host.steps],
    } for host in planned]


def interrupted(finished: list[Any], with_steps: list[str], code: int) -> None:
    """After Ctrl-C or SIGTERM: the hosts whose changes are known, and those whose outcome is not."""
    signal = "SIGTERM" if code == 143 else "SIGINT"
    err_console.print(f"[red]interrupted[/] ({signal}): hosts go on with a change script that had started; "
                      "`fabnet audit` shows where each host now stands.", highlight=False, soft_wrap=True)
    done = {host.name for host in finished}
    for host in finished:
        changed = [r.before.target for r in host.resources if any(s.result.status == "ok" for s in r.steps)]
        unknown = [r.before.target for r in host.resources if any(s.result.status == "unknown" for s in r.steps)]
        parts = ([f"changed: {', '.join(changed)}"] if changed else []) + (
            [f"unknown: {', '.join(unknown)}"] if unknown else [])
        err_console.print(f"  {markup(host.name)}: {markup('; '.join(parts) or host.status)}", highlight=False,
                          soft_wrap=True)
    for name in with_steps:
        if name not in done:
            err_console.print(f"  {markup(name)}: outcome unknown (its changes may have started)", highlight=False,
                              soft_wrap=True)
