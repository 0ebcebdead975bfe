"""The smoke run from end to end: pre-flight -> fleet all-reduce -> localisation -> outcome (what is drained
afterwards is the scheduler's step: scheduler/drain.py, as for audit and apply).

Library code: it reports progress through a callback and returns a `SmokeOutcome`; the CLI decides
how to show it and which exit code it means.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provisioner.facts import batch
from provisioner.load.hostplans import HostPlan
from provisioner.load.inventory import Host
from provisioner.run import runner, session, transport
from provisioner.run.become import Secret
from provisioner.smoke import linkspeed, localise, nccl_run, nccltests, preflight, verdicts
from provisioner.smoke import pairs as pairs_run
from provisioner.smoke.busbw import SizeResult, average_busbw
from provisioner.smoke.diagnose import JobResult
from provisioner.smoke.launcher import SessionOf
from provisioner.smoke.settings import Settings
from provisioner.smoke.targets import Target

if TYPE_CHECKING:
    from provisioner.scheduler.drain import Action

Log = Callable[[str], None]

FORKS = 64  # hosts read at once by the pre-flight
# Verdicts, and the exit code each one means for CI: 2 the fabric failed the test, 1 the test could
# not run at all (no torch anywhere, a single host), 4 a host could not be reached.
EXIT = {"pass": 0, "below_threshold": 2, "slow": 2, "wrong_result": 2, "failed": 2, "preflight_failed": 2,
        "not_run": 1, "unreachable": 4}


@dataclass(frozen=True)
class Options:
    connect_timeout: float = 10.0
    ssh_config: Path | None = None
    become_password: Secret | None = None  # sudo's, for hosts with ansible_become; never shown
    # Called once the pre-flight has passed, before any rank starts (tests use it to break things).
    after_preflight: Callable[[], None] | None = None
    slurm_controller: Host | None = None  # the inventory's; where nccl-tests' srun runs


@dataclass
class SmokeOutcome:
    hosts: list[str]
    settings: Settings
    verdict: str = "pass"
    reason: str = ""
    backend: str | None = None
    ranks_per_host: int = 1
    findings: list[preflight.Finding] = field(default_factory=list)
    findings_after: list[preflight.Finding] = field(default_factory=list)  # pre-flight checks re-run after a failure
    mtus: dict[str, int | None] = field(default_factory=dict)
    link_mbps: dict[str, int | None] = field(default_factory=dict)  # data link speed per host, None: unknown
    judgement: verdicts.Judgement | None = None  # the verdicts of a run that finished with right results
    unreachable: dict[str, str] = field(default_factory=dict)
    job: JobResult | None = None
    rows: list[SizeResult] = field(default_factory=list)
    avg_busbw: float | None = None
    pairs: list[dict[str, Any]] = field(default_factory=list)
    localisation: localise.Verdict | None = None
    failed_hosts: dict[str, str] = field(default_factory=dict)  # host -> reason
    drained: list[Action] = field(default_factory=list)  # every drain tried, set once the scheduler was told
    seconds: float = 0.0
    preflight_seconds: float = 0.0
    launch: dict[str, Any] = field(default_factory=dict)  # nccl-tests: launcher, host, command line
    notes: list[str] = field(default_factory=list)  # what a reader of the figures must know

    @property
    def exit_code(self) -> int:
        return EXIT[self.verdict]

    def host_verdict(self, host: str) -> str:
        """pass, slow, failed (anything else that names it), unreachable, or not_run."""
        if host in self.unreachable:
            return "unreachable"
        if host in self.failed_hosts or (self.judgement and host in self.judgement.slow_hosts):
            return "slow" if self.verdict in ("slow", "below_threshold") else "failed"
        return "not_run" if self.verdict == "not_run" else "pass"

    def busbw_of(self, host: str) -> float | None:
        """The host's figure in GB/s: its busbw in the localisation, else with its best partner."""
        if self.localisation is not None:
            return self.localisation.slow_hosts.get(host)
        figure = next((f for f in self.judgement.figures if f.host == host), None) if self.judgement else None
        return figure.busbw if figure else None


def _sessions(options: Options) -> session.Sessions:
    """One session per host for the whole smoke run: pre-flight, launch, kill and post-mortem."""
    return session.Sessions(session.Options(connect_timeout=options.connect_timeout, ssh_config=options.ssh_config,
                                            become_password=options.become_password))


def _session_of(sessions: session.Sessions) -> SessionOf:
    return lambda target: sessions(target.host)


# ------------------------------------------------------------------------------------------ pre-flight


def _probe_host(target: Target, probes: dict[str, Any], session_of: SessionOf) -> dict[str, Any] | str:
    nonce = batch.new_nonce()
    script = preflight.build_script(probes, nonce)
    try:
        result = session_of(target).exec(script, timeout=60, ticks=batch.TICK)
    except transport.HostUnreachable as exc:
        return exc.reason
    except transport.CommandFailed as exc:
        return f"pre-flight exec failed: {exc}"
    return batch.split_output(result.stdout, nonce)


def run_preflight(targets: Sequence[Target], settings: Settings, session_of: SessionOf,
                  outcome: SmokeOutcome, tools: Mapping[str, Sequence[str]] | None = None
                  ) -> dict[str, preflight.HostFacts]:
    """One exec per host (a second one only for the pings when the inventory gives no data addresses)."""
    names = [t.name for t in targets]
    peers_of = preflight.ping_peers(names)
    known_ips = {t.name: t.data_ip for t in targets}

    def peers(target: Target, ips: dict[str, str | None]) -> list[tuple[str, str]] | None:
        wanted = peers_of[target.name]
        if any(not ips.get(p) for p in wanted):
            return None
        return [(p, str(ips[p])) for p in wanted]

    all_known = all(known_ips.values())
    plans = {t.name: preflight.probes(t, peers(t, known_ips) if all_known else None,
                                      tools=(tools or {}).get(t.name, ())) for t in targets}
    for target in targets:  # the link speed rides in the same exec
        if (speed := linkspeed.probe(target)) is not None:
            plans[target.name][linkspeed.KEY] = speed
    raw = dict(zip(names, runner.each(targets, lambda t: _probe_host(t, plans[t.name], session_of),
                                      forks=FORKS), strict=True))
    facts: dict[str, preflight.HostFacts] = {}
    for target in targets:
        got = raw[target.name]
        if isinstance(got, str):
            outcome.unreachable[target.name] = got
        else:
            facts[target.name] = preflight.parse_facts(target.name, plans[target.name], got)
            speed = plans[target.name].get(linkspeed.KEY)
            outcome.link_mbps[target.name] = linkspeed.from_result(got.get(speed.key) if speed else None,
                                                                   target.data_ifaces)
    if outcome.unreachable or all_known:
        return facts
    ips = {t.name: preflight.data_address(t, facts[t.name]) for t in targets}
    ping_plans = {t.name: preflight.probes(t, peers(t, ips), facts=False) for t in targets}
    raw = dict(zip(names, runner.each(targets, lambda t: _probe_host(t, ping_plans[t.name], session_of),
                                      forks=FORKS), strict=True))
    for target in targets:
        got = raw[target.name]
        if isinstance(got, str):
            outcome.unreachable[target.name] = got
        elif "ping" in ping_plans[target.name]:
            facts[target.name].pings = preflight.parse_facts(target.name, ping_plans[target.name], got).pings
    return facts


# ------------------------------------------------------------------------------------------- nccl-tests


def _run_nccl_tests(targets: Sequence[Target], settings: Settings, ranks: int, session_of: SessionOf,
                    outcome: SmokeOutcome, chosen: nccltests.Launch, launch_host: Target) -> None:
    result = nccl_run.run(targets, settings, ranks, chosen, launch_host, session_of)
    outcome.launch, outcome.notes = result.launch, outcome.notes + result.notes
    outcome.verdict, outcome.reason = result.verdict, result.reason
    outcome.rows, outcome.avg_busbw = result.rows, result.avg_busbw
    outcome.unreachable.update(result.unreachable)
    outcome.findings_after = result.findings
    outcome.failed_hosts = result.failed_hosts or {t.name: result.reason for t in targets}


def _nccl_launch(settings: Settings, session_of: SessionOf,
                 facts: dict[str, preflight.HostFacts], launch: nccl_run.Plan | None
                 ) -> tuple[nccltests.Launch, dict[str, tuple[str, ...]], list[preflight.Finding]] | None:
    """nccl-tests: the launcher chosen from what the pre-flight found, the programs each host must have,
    and what is missing on a launch host that runs no rank."""
    if launch is None:
        return None
    outside = None if launch.inside else nccl_run.probe_outside(launch, settings, session_of)
    chosen, required = nccl_run.resolve(launch, settings, facts, outside if not isinstance(outside, str) else None)
    return chosen, required, nccl_run.missing_launcher(launch, chosen, outside)


def _post_mortem(targets: Sequence[Target], settings: Settings, session_of: SessionOf, outcome: SmokeOutcome,
                 log: Log) -> None:
    """The run failed without singling out a host: what changed since the pre-flight? Its checks run
    again (seconds), and what they find now names the hosts and the cause."""
    log("the run failed on every host alike: checking the fabric again")
    again = SmokeOutcome(hosts=outcome.hosts, settings=settings)
    facts = run_preflight(targets, settings, session_of, again)
    if again.unreachable:
        outcome.reason += "; unreachable now: " + ", ".join(f"{h} ({r})" for h, r in again.unreachable.items())
        outcome.failed_hosts = dict(again.unreachable)
        outcome.unreachable.update(again.unreachable)  # what a drain reads as unreachable (power saving)
        return
    findings = preflight.evaluate(targets, facts, runner=settings.runner, backend=settings.backend)
    if not findings:
        return
    outcome.findings_after = findings
    outcome.reason += "; checked again after the failure: " + "; ".join(f.message for f in findings)
    outcome.failed_hosts = {}
    for finding in findings:
        for host in finding.hosts:
            outcome.failed_hosts.setdefault(host, finding.message)


# ----------------------------------------------------------------------------------------------- main


def smoke(targets: Sequence[Target], settings: Settings, options: Options, log: Log = lambda m: None) -> SmokeOutcome:
    started = time.monotonic()
    outcome = SmokeOutcome(hosts=[t.name for t in targets], settings=settings)
    try:
        with _sessions(options) as sessions:
            _smoke(targets, settings, options, _session_of(sessions), log, outcome)
    finally:
        outcome.seconds = time.monotonic() - started
    return outcome


def _smoke(targets: Sequence[Target], settings: Settings, options: Options, session_of: SessionOf, log: Log,
           outcome: SmokeOutcome) -> None:
    log(f"pre-flight on {len(targets)} hosts")
    t0 = time.monotonic()
    launch = nccl_run.make_plan(targets, settings, options.slurm_controller) if settings.runner == "nccl-tests" \
        else None
    facts = run_preflight(targets, settings, session_of, outcome, tools=launch.tools if launch else None)
    outcome.preflight_seconds = time.monotonic() - t0
    outcome.mtus = {t.name: (facts[t.name].ifaces[t.data_iface].mtu
                             if t.name in facts and t.data_iface in facts[t.name].ifaces else None) for t in targets}
    if outcome.unreachable:
        outcome.verdict = "unreachable"
        outcome.reason = "; ".join(f"{h}: {r}" for h, r in outcome.unreachable.items())
        outcome.failed_hosts = dict(outcome.unreachable)
        return
    backend, ranks = preflight.resolve_backend(settings.backend, facts)
    outcome.backend, outcome.ranks_per_host = backend, ranks
    runs = pairs_run.Runs(targets, facts, settings, backend, ranks, session_of, outcome.pairs)
    nccl = _nccl_launch(settings, session_of, facts, launch)
    outcome.findings = preflight.evaluate(targets, facts, runner=settings.runner, backend=settings.backend,
                                          tools=nccl[1] if nccl else None) + (nccl[2] if nccl else [])
    if outcome.findings:
        outcome.verdict = "preflight_failed"
        outcome.reason = "; ".join(f.message for f in outcome.findings)
        for finding in outcome.findings:
            for host in finding.hosts:
                outcome.failed_hosts.setdefault(host, finding.message)
        if any(f.check == "python" and len(f.hosts) == len(targets) for f in outcome.findings):
            # No host can run a rank: the test never ran, which says nothing about the fabric.
            outcome.verdict = "not_run"
        return
    log(f"pre-flight passed in {outcome.preflight_seconds:.1f} s")
    if options.after_preflight:
        options.after_preflight()
    if len(targets) < 2:
        outcome.verdict, outcome.reason = "not_run", "an all-reduce across the fabric needs at least two hosts"
        return
    pairs: dict[tuple[str, str], float] = {}
    if nccl is not None and launch is not None:
        log(f"all_reduce_perf on {len(targets)} hosts x {ranks} ranks, started by {nccl[0].launcher} on "
            f"{launch.launch_host.name}")
        _run_nccl_tests(targets, settings, ranks, session_of, outcome, nccl[0], launch.launch_host)
        if outcome.verdict != "pass":
            return
    else:
        log(f"all-reduce on {len(targets)} hosts x {ranks} ranks ({backend}), deadline {settings.timeout:g} s")
        result = runs.fleet()
        outcome.job = result
        outcome.rows = result.rows
        if not result.ok:
            outcome.verdict, outcome.reason = "failed", result.cause or "the all-reduce failed"
            outcome.failed_hosts = {h: outcome.reason for h in result.failed_hosts}
            if result.unreachable:
                outcome.verdict = "unreachable"
                outcome.unreachable = dict(result.unreachable)
            if len(result.failed_hosts) == len(targets) and not outcome.unreachable:
                _post_mortem(targets, settings, session_of, outcome, log)
            return
        outcome.avg_busbw = average_busbw(result.rows)
        pairs = result.pairs
        wrong = [r for r in result.rows if r.wrong]
        if wrong:
            outcome.verdict = "wrong_result"
            outcome.reason = f"wrong all-reduce results at {', '.join(str(r.size) for r in wrong)} bytes"
            return
    _judge(runs, pairs, outcome, log)


def _judge(runs: pairs_run.Runs, pairs: dict[tuple[str, str], float], outcome: SmokeOutcome, log: Log) -> None:
    """The verdicts of a run that finished with right results: --min-busbw, each host against the
    fleet, the fleet against its links. Any one that fails fails the run."""
    settings, targets = runs.settings, runs.targets

    def judged(confirmation: verdicts.Confirmation | None = None) -> verdicts.Judgement:
        return verdicts.judge(outcome.hosts, pairs, outcome.link_mbps, outcome.rows,
                              len(targets) * runs.ranks_per_host, outcome.avg_busbw,
                              slow_fraction=settings.slow_fraction, link_fraction=settings.link_fraction,
                              min_busbw=settings.min_busbw, backend=runs.backend, confirmation=confirmation)

    judgement = judged()
    if judgement.slow_hosts:
        judgement = judged(runs.confirm(judgement, pairs, log))
    outcome.judgement = judgement
    failing = [c for c in judgement.checks if c.status == "slow"]
    if not failing:
        outcome.verdict = "pass"
        outcome.reason = f"average busbw {outcome.avg_busbw:.3f} GB/s" + (
            f" >= {settings.min_busbw:g} GB/s" if settings.min_busbw is not None else " (no threshold set)")
        return
    outcome.verdict = "below_threshold" if judgement.failed("min_busbw") else "slow"
    outcome.reason = "; ".join(c.message for c in failing)
    outcome.failed_hosts.update(judgement.slow_hosts)
    threshold = settings.min_busbw
    if (threshold is not None and judgement.failed("min_busbw") and not judgement.slow_hosts
            and settings.runner == "torch" and settings.localise and len(targets) >= 3):
        verdict = outcome.localisation = runs.localise(threshold, log)
        if verdict is not None:
            outcome.reason += "; " + verdict.message
            for host, value in verdict.slow_hosts.items():
                shown = "failed" if value is None else f"{value:.3f} GB/s"
                outcome.failed_hosts[host] = f"slow all-reduce: {shown} with a good host, threshold {threshold:g} GB/s"


def verify_plans(plans: Sequence[HostPlan], options: Options | None = None,
                 log: Log = lambda m: None) -> SmokeOutcome | None:
    """The smoke test a playbook asks for after a change (`verify: all_reduce:` in a play), across the
    hosts of `plans`; None when no play asks for one. For `fabnet apply` and other callers."""
    from provisioner.smoke.targets import targets_from_plans, verify_spec

    spec = verify_spec(plans)
    if spec is None:
        return None
    return smoke(targets_from_plans(plans), Settings().merged(spec, {}), options or Options(), log)
