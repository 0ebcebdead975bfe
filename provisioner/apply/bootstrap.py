"""New hosts join the fleet: host keys first, then every setting the playbook pins, a re-audit, and an
all-reduce together with healthy hosts of the fleet so each new host is proven against it.

    keys (hostkeys.py) -> pin -> plan + apply (same engine as `fabnet apply`) -> audit -> smoke

Library code: the caller supplies how to ask (a terminal, or nobody) and how to show progress, and gets
a BootstrapOutcome back. Run twice, it changes nothing the second time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from provisioner.apply import converge
from provisioner.apply.converge import ApplyOutcome, HostApplied
from provisioner.apply.journal import Journal
from provisioner.evaluate import engine
from provisioner.evaluate.engine import AuditOutcome, HostOutcome
from provisioner.load.hostplans import HostPlan
from provisioner.plan.planner import HostPlanned
from provisioner.run import hostkeys
from provisioner.run.hostkeys import KeyCheck
from provisioner.run.session import Options, Sessions
from provisioner.smoke.run import Options as SmokeOptions
from provisioner.smoke.run import SmokeOutcome, smoke
from provisioner.smoke.settings import Settings
from provisioner.smoke.targets import targets_from_plans, verify_spec

Log = Callable[[str], None]
PEERS = 3  # healthy fleet hosts the new ones are proven with
CANDIDATES = 8  # fleet hosts audited at a time while looking for healthy peers
MAX_CANDIDATES = 32
EXIT_OK, EXIT_NOT_CONVERGED, EXIT_UNREACHABLE = 0, 2, 4


@dataclass
class Hooks:
    """How the caller takes part: `ask_key` confirms a fingerprint (None: no terminal, refuse);
    `confirm` sees the plan and says whether to apply it; the rest only report."""

    ask_key: Callable[[KeyCheck], bool] | None = None
    confirm: Callable[[list[HostPlanned]], bool] = lambda planned: True
    on_keys: Callable[[list[KeyCheck]], None] = lambda checks: None
    on_host: Callable[[HostApplied], None] | None = None
    log: Log = lambda message: None


@dataclass
class HostReport:
    name: str
    key: KeyCheck
    applied: HostApplied | None = None
    audit: HostOutcome | None = None
    smoke: str | None = None  # pass / failed / ... for this host; None when no smoke ran
    smoke_reason: str = ""

    @property
    def changes(self) -> list[tuple[str, str]]:
        """(resource, status) of every resource apply changed or could not converge."""
        if self.applied is None:
            return []
        return [(r.before.target, r.status) for r in self.applied.resources if r.status != "ok"]

    @property
    def ok(self) -> bool:
        return (self.key.trusted and self.applied is not None and self.applied.status in ("ok", "changed")
                and self.audit is not None and self.audit.status == "in_sync" and self.smoke == "pass")


@dataclass
class BootstrapOutcome:
    hosts: list[HostReport]
    peers: list[str] = field(default_factory=list)
    applied: ApplyOutcome | None = None
    audit: AuditOutcome | None = None
    smoke: SmokeOutcome | None = None  # the new hosts with the peers
    fleet_smoke: SmokeOutcome | None = None  # the peers alone: the fleet's bandwidth to compare with
    declined: str | None = None  # why no change was made although keys were trusted
    note: str = ""  # why no smoke test ran, when none did

    @property
    def exit_code(self) -> int:
        unreachable = any(h.key.state == "unreachable" for h in self.hosts) or (
            self.applied is not None and self.applied.count("unreachable") > 0) or (
            self.audit is not None and self.audit.count("unreachable") > 0) or (
            self.smoke is not None and self.smoke.verdict == "unreachable")
        if unreachable:
            return EXIT_UNREACHABLE
        return EXIT_OK if self.hosts and all(h.ok for h in self.hosts) else EXIT_NOT_CONVERGED


def candidates(new: Sequence[HostPlan], fleet: Sequence[HostPlan]) -> list[HostPlan]:
    """Fleet hosts (not among `new`) that share a play with a new host, in inventory order (pure)."""
    names = {plan.host.name for plan in new}
    plays = {host_play.play.index for plan in new for host_play in plan.plays}
    return [plan for plan in fleet if plan.host.name not in names
            and any(host_play.play.index in plays for host_play in plan.plays)]


def healthy_peers(new: Sequence[HostPlan], fleet: Sequence[HostPlan], options: Options,
                  count: int = PEERS) -> list[HostPlan]:
    """Up to `count` fleet hosts of the new hosts' plays that audit in sync (a few audited at a time)."""
    pool = candidates(new, fleet)[:MAX_CANDIDATES]
    peers: list[HostPlan] = []
    for start in range(0, len(pool), CANDIDATES):
        chunk = pool[start:start + CANDIDATES]
        outcome = engine.audit(chunk, options)
        in_sync = {h.name for h in outcome.hosts if h.status == "in_sync"}
        peers += [plan for plan in chunk if plan.host.name in in_sync]
        if len(peers) >= count:
            break
    return peers[:count]


def host_verdict(outcome: SmokeOutcome, name: str) -> tuple[str, str]:
    """This host's part in a smoke run: its own failure where the run named it, else the run's verdict."""
    if outcome.verdict == "pass":
        return "pass", outcome.reason
    if name in outcome.failed_hosts:
        return "failed", outcome.failed_hosts[name]
    return outcome.verdict, outcome.reason


def bootstrap(new: Sequence[HostPlan], fleet: Sequence[HostPlan], options: Options, hooks: Hooks, *,
              fingerprints: frozenset[str] = frozenset(), accept_new: bool = False, journal: Journal | None = None,
              smoke_settings: dict[str, Any] | None = None, peers: int = PEERS) -> BootstrapOutcome:
    """Take the `new` hosts into the fleet (every host the playbook targets: `fleet`).

    `smoke_settings` override the play's `verify: all_reduce:` settings (as smoke's options do).
    """
    hooks.log(f"reading the host keys of {len(new)} new host{'s' if len(new) != 1 else ''}")
    checks = hostkeys.read_keys(new, options)
    for check in checks:
        hostkeys.decide(check, fingerprints, accept_new, hooks.ask_key)
    hostkeys.pin(checks)
    hooks.on_keys(checks)
    outcome = BootstrapOutcome([HostReport(c.name, c) for c in checks])
    trusted = [plan for plan, check in zip(new, checks, strict=True) if check.trusted]
    if not trusted:
        return outcome
    by_name = {h.name: h for h in outcome.hosts}
    with Sessions(options) as sessions:
        hooks.log("gathering the new hosts' state")
        planned = converge.make_plan(trusted, sessions)
        if any(host.steps for host in planned) and not hooks.confirm(planned):
            outcome.declined = "the changes were not confirmed: nothing changed"
            return outcome
        outcome.applied = converge.apply(planned, sessions, journal=journal, on_host=hooks.on_host)
    for applied in outcome.applied.hosts:
        by_name[applied.name].applied = applied
    hooks.log("looking for healthy fleet hosts to prove the new ones with")
    chosen = healthy_peers(trusted, fleet, options, peers)
    outcome.peers = [plan.host.name for plan in chosen]
    # Audited with the peers, so fleet-wide checks (one MTU across the play) include the new hosts.
    hooks.log("auditing the new hosts with the fleet")
    outcome.audit = engine.audit([*trusted, *chosen], options)
    for audited in outcome.audit.hosts:
        if audited.name in by_name:
            by_name[audited.name].audit = audited
    in_sync = {h.name for h in outcome.audit.hosts if h.status == "in_sync"}
    ready = [plan for plan in trusted if plan.host.name in in_sync]
    if not ready:
        outcome.note = "no new host audits in sync: no all-reduce was started"
        return outcome
    if not chosen and len(ready) < 2:
        outcome.note = "no healthy fleet host of the same play to run an all-reduce with"
        return outcome
    settings = Settings().merged(verify_spec([*ready, *chosen]), smoke_settings or {})
    _prove(outcome, ready, chosen, options, settings, hooks.log)
    return outcome


def _prove(outcome: BootstrapOutcome, ready: list[HostPlan], peers: list[HostPlan], options: Options,
           settings: Settings, log: Log) -> None:
    """The fleet's own bandwidth first (the peers alone, when two or more), then new and old together."""
    smoke_options = SmokeOptions(connect_timeout=options.connect_timeout, ssh_config=options.ssh_config,
                                 become_password=options.become_password)
    if len(peers) >= 2:
        log(f"all-reduce on the {len(peers)} fleet hosts alone (their bandwidth, for comparison)")
        outcome.fleet_smoke = smoke(targets_from_plans(peers), settings, smoke_options, log)
    log(f"all-reduce on {len(ready)} new + {len(peers)} fleet hosts")
    outcome.smoke = smoke(targets_from_plans([*ready, *peers]), settings, smoke_options, log)
    for plan in ready:
        report = next(h for h in outcome.hosts if h.name == plan.host.name)
        report.smoke, report.smoke_reason = host_verdict(outcome.smoke, plan.host.name)
