"""gather -> plan: every host read in one exec (engine.gather, shared with audit) and, from what was
read, each drifted resource's remedy steps, ordered into the host's plan. Changes nothing."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from provisioner.apply import changes
from provisioner.evaluate import engine
from provisioner.evaluate.engine import HostOutcome, ResourceOutcome
from provisioner.load.hostplans import HostPlan
from provisioner.resources import REGISTRY
from provisioner.resources.base import Results
from provisioner.resources.steps import EDITS, Step, impossible, rewrite_step
from provisioner.run import runner
from provisioner.run.session import Sessions

# ------------------------------------------------------------------------------------------------ plan


@dataclass
class ResourcePlan:
    outcome: ResourceOutcome  # the evaluation before any change
    steps: list[Step] = field(default_factory=list)


@dataclass
class HostPlanned:
    """What gathering found on a host and what would change it."""

    plan: HostPlan
    audit: HostOutcome
    resources: list[ResourcePlan] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)  # ordered, handlers included
    digest: str = ""  # of the facts the plan was made from (saved plans refuse a host that changed)
    refusal: str | None = None  # why this host is not changed at all (a saved plan that no longer fits)

    @property
    def name(self) -> str:
        return self.plan.host.name


def facts_digest(results: Results) -> str:
    payload = json.dumps({k: [v.stdout, v.exit_code] for k, v in sorted(results.by_key.items())})
    return "sha256:" + hashlib.sha256(payload.encode()).hexdigest()


def remedies(plan: HostPlan, results: Results, outcomes: list[ResourceOutcome]) -> list[ResourcePlan]:
    ctx = engine.host_context(plan)
    planned = []
    for resource, outcome in zip(plan.resources, outcomes, strict=True):
        steps: list[Step] = []
        remedy = REGISTRY[resource.kind].remedy
        if outcome.status == "drift" and remedy is not None:
            try:
                steps = remedy(resource.spec, results, ctx, outcome.checks)
            except Exception as exc:  # a bug in one remedy must not hide the others' plans
                steps = [impossible(resource.target, "plan", f"internal error: {type(exc).__name__}: {exc}")]
        planned.append(ResourcePlan(outcome, steps))
    return planned


def merge_writes(resources: list[ResourcePlan]) -> None:
    """Steps editing one file (`Step.edit`, keyed on `Step.writes`) become ONE write of it.

    Each such step's content is its own edit of the text read at gather time, so two of them writing
    one file in turn would each drop the other's edit (two sysctls in one sysctl.d file). The merged
    step applies every edit, in playbook order, to that text; it belongs to the first resource, and
    the others list it among their steps (for the report) without owning it (it runs once).
    """
    by_path: dict[str, list[tuple[int, Step]]] = {}
    for index, rp in enumerate(resources):
        for step in rp.steps:
            if step.edit is not None and len(step.writes) == 1:
                by_path.setdefault(step.writes[0], []).append((index, step))
    for path, group in by_path.items():
        edits = [step.edit for _, step in group if step.edit is not None]
        if len(group) < 2 or len({(e.base, e.mode) for e in edits}) != 1:
            continue
        text = edits[0].base or ""
        for edit in edits:
            text = EDITS[edit.function](text, *edit.args)
        first = group[0][1]
        owners = list(dict.fromkeys(step.resource for _, step in group))
        merged = rewrite_step(first.resource, first.action, path, text.encode(), edits[0].base,
                              phase=min(s.phase for _, s in group), mode=edits[0].mode,
                              notify=tuple(dict.fromkeys(u for _, s in group for u in s.notify)),
                              needs=tuple(dict.fromkeys(n for _, s in group for n in s.needs if n not in owners)))
        merged = dataclasses.replace(merged, shown=f"{merged.shown}; the edits of {', '.join(owners)}")
        for index, step in group:
            resources[index].steps = [merged if s is step else s for s in resources[index].steps]


def owned_steps(rp: ResourcePlan) -> list[Step]:
    """A resource's steps that run as its own (not a write it shares with another resource)."""
    return [s for s in rp.steps if s.resource == rp.outcome.target]


def gather_all(plans: Sequence[HostPlan], sessions: Sessions,
               progress: engine.Progress | None = None) -> tuple[dict[str, HostOutcome], dict[str, Results]]:
    """Read every host over its session (kept open for the changes that may follow)."""
    outcomes: dict[str, HostOutcome] = {}
    facts: dict[str, Results] = {}

    def one(plan: HostPlan) -> tuple[HostOutcome, Results | None]:
        return engine.read_host(plan, sessions(plan.host))

    def done(result: tuple[HostOutcome, Results | None]) -> None:
        outcome, results = result
        outcomes[outcome.name] = outcome
        if results is not None:
            facts[outcome.name] = results
        if progress:
            progress(outcome.name, outcome.status if outcome.status in ("unreachable", "failed") else None)

    runner.each(plans, one, forks=sessions.options.forks, on_result=done)
    engine.apply_fleet_checks(plans, outcomes)
    for outcome in outcomes.values():
        engine.finish_status(outcome)
    return outcomes, facts


def make_plan(plans: Sequence[HostPlan], sessions: Sessions,
              progress: engine.Progress | None = None) -> list[HostPlanned]:
    """Gather every host (one exec each, over sessions kept open for apply) and work out its steps.
    Changes nothing."""
    outcomes, facts = gather_all(plans, sessions, progress)
    planned = []
    for plan in plans:
        outcome = outcomes[plan.host.name]
        results = facts.get(plan.host.name)
        host = HostPlanned(plan, outcome)
        if results is not None:
            host.digest = facts_digest(results)
            host.resources = remedies(plan, results, outcome.resources)
            merge_writes(host.resources)
            host.steps = changes.order([(rp.outcome.kind, rp.outcome.target, owned_steps(rp))
                                        for rp in host.resources])
        planned.append(host)
    return planned
