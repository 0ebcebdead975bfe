"""gather -> evaluate -> fleet checks, over a bounded worker pool. `audit` stops here; it changes nothing.

Per host: every resource's probes are joined into ONE remote exec (see batch.py), then each resource
evaluates its own probe results. A host that cannot be reached, or whose exec fails, is reported as
such and never stops the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from provisioner.facts import batch, fingerprint, probejoin
from provisioner.load.devicevars import MANAGEMENT_IFACES, SYSFS_ROOT, iface_list
from provisioner.load.hostplans import HostPlan, Resource
from provisioner.parsers._live import reading_host_output
from provisioner.resources import REGISTRY
from provisioner.resources.base import NOT_RUN_EXIT, Check, HostContext, Probe, ProbeResult, Results
from provisioner.run import knownhosts, runner, transport
from provisioner.run.session import HostSession, Options, open_session

__all__ = ["Options"]  # how every command reaches hosts (run/session.py); named here for its callers

HostStatus = Literal["in_sync", "drifted", "unreachable", "failed"]


@dataclass
class ResourceOutcome:
    kind: str
    target: str
    source: str  # playbook file:line
    play: str
    checks: list[Check] = field(default_factory=list)

    @property
    def status(self) -> str:
        statuses = {c.status for c in self.checks}
        return "error" if "error" in statuses else "drift" if "drift" in statuses else "ok"


@dataclass
class HostOutcome:
    name: str
    address: str
    status: HostStatus
    error: str | None = None
    resources: list[ResourceOutcome] = field(default_factory=list)
    seconds: float = 0.0
    execs: int = 0


@dataclass
class AuditOutcome:
    hosts: list[HostOutcome]
    seconds: float
    warnings: list[str] = field(default_factory=list)  # e.g. known_hosts lines skipped

    def count(self, status: HostStatus) -> int:
        return sum(1 for h in self.hosts if h.status == status)


Progress = Callable[[str, HostStatus | None], None]


def host_context(plan: HostPlan) -> HostContext:
    variables = plan.host.vars
    return HostContext(
        name=plan.host.name,
        sysfs_root=str(variables.get(SYSFS_ROOT, "/sys")),
        package_manager=str(variables.get("fabnet_package_manager", "apt")),
        ofed_install_command=str(variables["fabnet_ofed_install_command"])
        if variables.get("fabnet_ofed_install_command") else None,
        # Checked as interface names when the inventory loaded; "eth0,eth1" and a list both work, as for
        # fabnet_data_ifaces.
        management_interfaces=tuple(iface_list(variables.get(MANAGEMENT_IFACES))),
    )


def plan_probes(plan: HostPlan) -> list[Probe]:
    ctx = host_context(plan)
    probes: dict[str, Probe] = {}
    for resource in plan.resources:
        for probe in REGISTRY[resource.kind].probes(resource.spec, ctx):
            probes.setdefault(probe.key, probe)
    return list(probes.values())


def _prepare(plan: HostPlan, extra: Sequence[Probe]) -> tuple[list[Probe], list[Probe], probejoin.Joined]:
    """The host's probes (its plan's, then `extra`), the ones to run once joined, and how to split them."""
    probes = plan_probes(plan)
    probes += [p for p in extra if p.key not in {q.key for q in probes}]
    return (probes, *probejoin.join(probes))


def gather(plan: HostPlan, session: HostSession, extra: Sequence[Probe] = (),
           memo: Memo | None = None) -> tuple[Results, int]:
    """Run every probe of the host (and `extra` probes, e.g. watch's link readings) in one exec over
    `session`. Returns the results and the number of execs (1). With `memo` (watch), probes that only
    read files are run only when those files changed since the results kept there, and the probes are
    planned once (a host's plan does not change during a watch)."""
    options = session.options
    if memo is None:
        probes, to_run, joined = _prepare(plan, extra)
    else:
        if memo.prepared is None or memo.prepared[0] != tuple(p.key for p in extra):
            memo.prepared = (tuple(p.key for p in extra), *_prepare(plan, extra))
        _, probes, to_run, joined = memo.prepared
    cache = memo.files if memo is not None else None
    nonce = batch.new_nonce()
    shortcut = fingerprint.shortcut(to_run, cache)
    script = batch.build_script(to_run, nonce, budget=options.command_timeout, shortcut=shortcut)
    # The host stops its own probes at the budget; the margin lets it say so before we hang up.
    result = session.exec(script, timeout=options.command_timeout + batch.REPORT_MARGIN, partial=True,
                          ticks=batch.TICK)
    found = batch.split_output(result.stdout, nonce)
    if shortcut is not None:
        found = fingerprint.fill_in(shortcut, found)
    by_key = joined.split(found)
    if result.ended != "exited":
        # Probes that completed keep their results; the others say why they have none.
        reason = _not_run_reason(result.ended, options)
        if not by_key and probes:
            raise transport.CommandFailed(reason.replace("its result", "any result"))
        by_key.update({p.key: ProbeResult("", reason, NOT_RUN_EXIT) for p in probes if p.key not in by_key})
    elif not by_key and probes:
        first = (result.stderr.strip().splitlines() or [f"exit code {result.exit_code}"])[0][:200]
        raise transport.CommandFailed(f"the fact-gathering script produced no results: {first}")
    return Results(by_key), 1


def _not_run_reason(ended: str, options: Options) -> str:
    return {
        "lost": "connection lost before its result arrived",
        "killed": "the remote shell was killed before its result arrived",
        "timeout": f"the host's --timeout of {options.command_timeout:g} s ran out before its result came",
        "interrupted": "interrupted",
        "overflow": f"the host's output passed {transport.MAX_STDOUT // (1024 * 1024)} MiB before its result came",
    }.get(ended, f"not run ({ended})")


def evaluate(plan: HostPlan, results: Results) -> list[ResourceOutcome]:
    ctx = host_context(plan)
    outcomes = []
    with reading_host_output():  # the probes' own output: no paste to clean (parsers/_live.py)
        for host_play in plan.plays:
            for resource in host_play.resources:
                outcomes.append(_evaluate_one(resource, results, ctx, host_play.play.title))
    return outcomes


def _evaluate_one(resource: Resource, results: Results, ctx: HostContext, play: str) -> ResourceOutcome:
    outcome = ResourceOutcome(resource.kind, resource.target, str(resource.origin), play)
    try:
        outcome.checks = REGISTRY[resource.kind].evaluate(resource.spec, results, ctx)
    except Exception as exc:  # a bug in one resource must not hide the others' results
        outcome.checks = [Check("evaluate", "", None, "error", f"internal error: {type(exc).__name__}: {exc}")]
    return outcome


@dataclass
class Memo:
    """A host's last facts and what they evaluated to. Evaluation is a pure function of the host's plan
    and facts, so `watch`, which reads every host each cycle, evaluates again only when a fact changed:
    a quiet host's cycle then costs the controller a comparison of the probes' outputs."""

    facts: dict[str, ProbeResult | None] = field(default_factory=dict)
    resources: list[ResourceOutcome] = field(default_factory=list)
    keys: tuple[str, ...] = ()  # the plan's probe keys (a host's plan does not change during a watch)
    files: fingerprint.FactCache = field(default_factory=fingerprint.FactCache)  # readings files decide (watch)
    # gather's planned probes, for the `extra` probe keys they were planned with
    prepared: tuple[tuple[str, ...], list[Probe], list[Probe], probejoin.Joined] | None = None


def evaluate_memo(plan: HostPlan, results: Results, memo: Memo | None) -> list[ResourceOutcome]:
    """`evaluate(plan, results)`, or the outcomes it gave last time for the same facts (`memo`). The
    outcomes returned may be shared with earlier calls: callers never change them (fleet checks copy)."""
    if memo is None:
        return evaluate(plan, results)
    if not memo.keys:
        memo.keys = tuple(probe.key for probe in plan_probes(plan))
    facts = {key: results.by_key.get(key) for key in memo.keys}
    if not memo.facts or facts != memo.facts:
        memo.facts, memo.resources = facts, evaluate(plan, results)
    return list(memo.resources)


def read_host(plan: HostPlan, session: HostSession, extra: Sequence[Probe] = (),
              memo: Memo | None = None) -> tuple[HostOutcome, Results | None]:
    """Gather and evaluate one host: its outcome, and the facts read (None when none could be). With
    `memo`, facts equal to the last ones evaluated are not evaluated again, and probes that only read
    files are run only when those files changed (the memo keeps their last results)."""
    started = time.monotonic()
    host = plan.host
    try:
        results, execs = gather(plan, session, extra, memo)
    except transport.HostUnreachable as exc:
        return HostOutcome(host.name, host.address, "unreachable", exc.reason,
                           seconds=time.monotonic() - started), None
    except transport.CommandFailed as exc:  # its message is the reason (a sudo refusal among them)
        return HostOutcome(host.name, host.address, "failed", str(exc), seconds=time.monotonic() - started), None
    except Exception as exc:
        message = " ".join(f"{type(exc).__name__}: {exc}".split())  # one line, never a page of script
        return HostOutcome(host.name, host.address, "failed", message[:300],
                           seconds=time.monotonic() - started), None
    outcome = HostOutcome(host.name, host.address, "in_sync", resources=evaluate_memo(plan, results, memo),
                          execs=execs)
    outcome.seconds = time.monotonic() - started
    return outcome, results


def audit_host(plan: HostPlan, options: Options) -> HostOutcome:
    """`read_host` over a session of its own (audit reads a host once)."""
    with open_session(plan.host, options) as session:
        return read_host(plan, session)[0]


def apply_fleet_checks(plans: Sequence[HostPlan], outcomes: dict[str, HostOutcome]) -> None:
    """Checks that need every host's facts (e.g. one MTU across the fleet), per play and resource."""
    for members, fleet in _fleet_checks(plans, outcomes):
        for host, outcome in members:
            if host in fleet:
                outcome.checks = [fleet[host]]


def _fleet_checks(plans: Sequence[HostPlan], outcomes: Mapping[str, HostOutcome]
                  ) -> Iterator[tuple[list[tuple[str, ResourceOutcome]], dict[str, Check]]]:
    """For each fleet-checked resource of the playbook: its hosts' outcomes of it and the checks the fleet
    gives them. Only reads `outcomes`."""
    # Grouped by the playbook line that declared the check, not by the rendered interface name: hosts
    # whose data port is named differently (another NIC slot) are still on the same fabric.
    groups: dict[str, list[tuple[str, Resource, ResourceOutcome]]] = {}
    # A watch calls this for every host every cycle, each time over every host: the kinds with fleet checks
    # are found once per call, and the loops below are plain set lookups (no call per resource).
    kinds = {r.kind for plan in plans for host_play in plan.plays for r in host_play.resources}
    fleet = {kind for kind in kinds if REGISTRY[kind].fleet_checks is not None}
    if not fleet:
        return
    for plan in plans:
        host_outcome = outcomes.get(plan.host.name)
        if host_outcome is None or host_outcome.status in ("unreachable", "failed"):
            continue
        by_source = {r.source: r for r in host_outcome.resources if r.kind in fleet}
        if not by_source:
            continue
        for host_play in plan.plays:
            for resource in host_play.resources:
                if resource.kind in fleet:
                    key = str(resource.origin)
                    groups.setdefault(key, []).append((plan.host.name, resource, by_source[key]))
    for members in groups.values():
        spec = members[0][1].spec
        values = {}
        for host, _resource, outcome in members:
            check = outcome.checks[0] if outcome.checks else None
            values[host] = int(check.actual) if check and check.status == "ok" and check.actual else None
        fleet_checks = REGISTRY[members[0][1].kind].fleet_checks
        assert fleet_checks is not None  # only such kinds were grouped
        yield [(host, outcome) for host, _resource, outcome in members], fleet_checks(spec, values)


def with_fleet_checks(plans: Sequence[HostPlan], latest: dict[str, HostOutcome], name: str) -> HostOutcome:
    """Host `name`'s outcome with its fleet checks made against the other hosts' outcomes in `latest`
    (each host's last reading, as watch keeps them); nothing in `latest` is changed. A watch calls it for
    every host every cycle: only this host's outcome is copied, the others are only read."""
    own = latest[name]
    checked = [REGISTRY[r.kind].fleet_checks is not None for r in own.resources]
    # Only the fleet-checked resources get new check lists: copy those, share the rest.
    mine = replace(own, resources=[replace(r) if fleet else r for r, fleet in zip(own.resources, checked, strict=True)])
    if not any(checked):
        return mine
    for members, fleet in _fleet_checks(plans, {**latest, name: mine}):
        for host, outcome in members:
            if host == name and host in fleet:
                outcome.checks = [fleet[host]]
    return mine


def finish_status(outcome: HostOutcome) -> None:
    if outcome.status in ("unreachable", "failed"):
        return
    statuses = {r.status for r in outcome.resources}
    # A resource that could not be read leaves the audit of this host incomplete: that is a failure a CI
    # job must see (exit 4), even though the drift found on its other resources is still reported.
    if "error" in statuses:
        outcome.status = "failed"
        failed = [r.target for r in outcome.resources if r.status == "error"]
        outcome.error = "could not read: " + ", ".join(failed)
    else:
        outcome.status = "drifted" if "drift" in statuses else "in_sync"


def audit(plans: Sequence[HostPlan], options: Options, progress: Progress | None = None) -> AuditOutcome:
    """Read every host (in parallel, at most `options.forks` at once) and compare with its plan."""
    started = time.monotonic()
    outcomes: dict[str, HostOutcome] = {}

    def done(outcome: HostOutcome) -> None:
        outcomes[outcome.name] = outcome
        if progress:
            progress(outcome.name, outcome.status if outcome.status in ("unreachable", "failed") else None)

    # Threads, or for a large fleet a few worker processes each with its own threads (run/pool.py).
    runner.each(plans, lambda plan: audit_host(plan, options), forks=options.forks, on_result=done,
                lost=lambda plan, why: HostOutcome(plan.host.name, plan.host.address, "failed", why))
    apply_fleet_checks(plans, outcomes)
    for outcome in outcomes.values():
        finish_status(outcome)
    ordered = [outcomes[plan.host.name] for plan in plans]
    return AuditOutcome(ordered, time.monotonic() - started, knownhosts.take_warnings())
