"""`--drain-failed`, `--drain-cmd` and `--resume-fixed`: what a command tells the scheduler once its hosts
are checked. The one place that drains, whichever backend: Slurm (`--drain-failed`) or a local command
(`--drain-cmd`), each drain recorded as one `Action` of the same shape.

Every reason fabnet sets reads `fabnet: SOURCE: CAUSE` (SOURCE: audit, apply or smoke). A host is
resumed only when its reason starts with `fabnet:`, came from a check this command repeats (audit and
apply resume what audit or apply drained; smoke what smoke drained), and the host passed that check
now. A node drained by anyone else, or for another reason, is left as it is and reported.

Slurm keeps one reason per node and a drain replaces it, so fabnet never drains a node that is already
out of service for a reason another check (or anyone else) set: the reason decides who may resume it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from provisioner.run.session import Options
from provisioner.scheduler import REASON_PREFIX, NoStates, Ran, Scheduler, SchedulerError
from provisioner.scheduler.command import Command, uses
from provisioner.scheduler.select import SchedulerArgs, connect, load, node_names

Source = Literal["audit", "apply", "smoke"]
RESUMES: dict[str, tuple[str, ...]] = {"audit": ("audit", "apply"), "apply": ("audit", "apply"), "smoke": ("smoke",)}
MAX_CAUSE = 160


@dataclass(frozen=True)
class Action:
    host: str
    action: Literal["drained", "resumed", "left", "failed"]
    detail: str  # drained: the reason set; failed: the scheduler's error; else why
    scheduler: str = "slurm"  # the backend told: slurm or command
    command: str | None = None  # what the backend ran for this host, where it says
    exit_code: int | None = None
    output: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "action": self.action, "detail": self.detail, "scheduler": self.scheduler,
                "command": self.command, "exit_code": self.exit_code, "output": self.output}

    def line(self) -> str:
        """One line for a person, the same for every backend: `slurm: drained gpu03: fabnet: smoke: ...`."""
        ran = "" if self.command is None else f" [{self.command} -> exit {self.exit_code}" + (
            f": {self.output}" if self.output else "") + "]"
        return f"{self.scheduler}: {self.action} {self.host}: {self.detail}{ran}"


@dataclass
class Settled:
    drains: list[Action] = field(default_factory=list)  # every host it tried to drain, done or refused
    resumes: list[Action] = field(default_factory=list)  # resumed, left, or refused
    error: str | None = None  # the scheduler could not be reached or asked
    scheduler: str = "slurm"

    @property
    def actions(self) -> list[Action]:
        return self.drains + self.resumes

    @property
    def failed(self) -> bool:
        return self.error is not None or any(a.action == "failed" for a in self.actions)


def reason(source: str, cause: str) -> str:
    text = " ".join(f"{REASON_PREFIX} {source}: {cause}".split())
    return text if len(text) <= MAX_CAUSE else text[: MAX_CAUSE - 3] + "..."


def reason_source(text: str) -> str | None:
    """'fabnet: smoke: below 20 GB/s' -> 'smoke'; None for a reason fabnet did not write."""
    if not text.startswith(REASON_PREFIX):
        return None
    return text[len(REASON_PREFIX):].strip().split(":", 1)[0].strip() or None


def audit_causes(outcome: Any) -> dict[str, str]:
    """Hosts of an engine.AuditOutcome that fail it: unreachable, failed, or drifted (what drifted)."""
    causes = {}
    for host in outcome.hosts:
        if host.status == "drifted":
            drifted = [r.target or r.kind for r in host.resources if r.status != "ok"]
            causes[host.name] = "drifted: " + ", ".join(drifted[:4]) + (" ..." if len(drifted) > 4 else "")
        elif host.status in ("unreachable", "failed"):
            causes[host.name] = host.status + (f": {host.error}" if host.error else "")
    return causes


def apply_causes(outcome: Any) -> dict[str, str]:
    """Hosts of an apply.ApplyOutcome that did not converge."""
    causes = {}
    for host in outcome.hosts:
        if host.status not in ("ok", "changed"):
            bad = [r.before.target or r.before.kind for r in host.resources
                   if r.status not in ("ok", "changed")]
            detail = ", ".join(bad[:4]) or (host.error or "")
            causes[host.name] = "not converged: " + host.status + (f": {detail}" if detail else "")
    return causes


def smoke_causes(outcome: Any) -> dict[str, str]:
    """Hosts a smoke.run.SmokeOutcome names as failed or slow. One SSH could not reach is said to be unreachable
    (smoke keeps only SSH's own words), as audit words it, so a node power saving has off is left alone."""
    if outcome.verdict == "pass":
        return {}
    unreachable = getattr(outcome, "unreachable", {})
    return {host: f"unreachable: {why}" if host in unreachable and not _UNREACHABLE.match(why) else why
            for host, why in outcome.failed_hosts.items()}


# Slurm's power saving: a node powered off, or powering up or down, answers no one, and that is by design.
POWER_SAVING = {"~": "powered off", "#": "powering up", "%": "powering down"}
POWERED_DOWN = "by the scheduler's power saving"  # in the detail of a host left for that reason
# A cause that says only that the host could not be reached, as audit, apply and watch word it.
_UNREACHABLE = re.compile(r"^(?:not converged: )?unreachable\b|^host down\b")


def kept_reasons(scheduler: Scheduler, source: str, hosts: Sequence[str],
                 causes: Mapping[str, str] | None = None) -> dict[str, str]:
    """Hosts a drain for `source` must leave alone, and why: out of service already, with a reason that
    `source` does not resume. Replacing it would lose why the node is out, and hand it to this check to
    resume. Its own reason (a host still failing the same check) may be brought up to date. A host whose
    only fault is that it could not be reached (`causes`) while the scheduler has it powered off for power
    saving is left too: a drain would keep the scheduler from powering it up for the next job."""
    try:
        states = scheduler.state(list(hosts))
    except NoStates:  # a drain command: fabnet cannot see, so it drains as told
        return {}
    kept = {}
    for host in hosts:
        state = states.get(host)
        if (state is not None and state.flag in POWER_SAVING
                and _UNREACHABLE.match((causes or {}).get(host, ""))):
            kept[host] = (f"{state.state}{state.flag}: {POWER_SAVING[state.flag]} {POWERED_DOWN}, so it cannot be "
                          "reached; it is checked once it is up")
            continue
        if state is None or not state.out_of_service or not state.reason:
            continue
        if reason_source(state.reason) in RESUMES.get(source, (source,)):
            continue
        by = f" by {state.reason_user}" if state.reason_user else ""
        kept[host] = f"already {state.state}{state.flag}{by} for: {state.reason} (a drain would replace that reason)"
    return kept


def drain_failed(scheduler: Scheduler, source: str, causes: dict[str, str], name: str = "slurm") -> list[Action]:
    """Drain each host with fabnet's reason for `causes`, but those `kept_reasons` names; `name` is the
    backend, for the record."""
    reasons = {host: reason(source, cause) for host, cause in causes.items()}
    kept = kept_reasons(scheduler, source, list(reasons), causes) if reasons else {}
    todo = {host: why for host, why in reasons.items() if host not in kept}
    answers = scheduler.drain(todo) if todo else {}
    actions = []
    for host, why in reasons.items():
        if host in kept:
            actions.append(Action(host, "left", kept[host], name))
            continue
        answer = answers.get(host)
        extra: dict[str, Any] = {}
        if isinstance(answer, Ran):
            error = answer.error
            extra = {"command": answer.command, "exit_code": answer.exit_code, "output": answer.output}
        else:
            error = answer
        actions.append(Action(host, "failed", f"drain refused: {error}", name, **extra) if error
                       else Action(host, "drained", why, name, **extra))
    return actions


def resume_fixed(scheduler: Scheduler, source: str, checked: Sequence[str], passing: set[str]) -> list[Action]:
    states = scheduler.state(list(checked))
    actions, resume = [], []
    for host in checked:
        state = states.get(host)
        if state is None:
            continue
        if not state.drained:
            # Out for fabnet's reason but not shown drained (down, failed, rebooting, refused at registration):
            # resuming would undo what Slurm or a person did since, so it is only said.
            if state.out_of_service and reason_source(state.reason) is not None:
                actions.append(Action(host, "left", f"{state.state}{state.flag}, not shown drained: fabnet resumes "
                                                    f"only a node Slurm shows drained: {state.reason}"))
            continue
        origin = reason_source(state.reason)
        by = f" by {state.reason_user}" if state.reason_user else ""
        if state.rebooting and origin in RESUMES.get(source, ()):
            # Slurm's resume clears the reboot request too: the reboot someone asked for would never happen.
            actions.append(Action(host, "left", f"drained, {state.state}{state.flag}: a reboot is asked for or under "
                                                f"way and a resume would cancel it; resumed once it is back and "
                                                f"passes: {state.reason}"))
        elif origin is None or (origin not in RESUMES and origin != "watch"):  # e.g. a --drain-cmd's own words
            actions.append(Action(host, "left", f"drained{by} for another reason: {state.reason or '(none)'}"))
        elif origin == "watch":  # watch drains and never resumes: a person decides when it is fixed
            actions.append(Action(host, "left", f"drained by fabnet {origin}, which resumes no host (resume it "
                                                f"once fixed: scontrol update nodename={state.node or host} "
                                                f"state=resume): "
                                                f"{state.reason}"))
        elif origin not in RESUMES[source]:
            actions.append(Action(host, "left", f"drained by fabnet {origin}, which `fabnet {origin} --resume-fixed` "
                                                f"re-checks: {state.reason}"))
        elif host not in passing:
            # Not "still failing": the run may have failed for another host, or for the fleet as a whole.
            actions.append(Action(host, "left", f"does not pass {source} now; drained for: {state.reason}"))
        else:
            resume.append(host)
    errors = scheduler.resume(resume) if resume else {}
    actions += [Action(host, "failed", f"resume refused: {errors[host]}") if errors.get(host)
                else Action(host, "resumed", f"passes {source} now") for host in resume]
    return actions


@contextmanager
def told(args: SchedulerArgs, inventory: Path, playbook_dir: Path | None, options: Options,
         fields: Mapping[str, Mapping[str, str]] | None = None) -> Iterator[tuple[str, Scheduler]]:
    """The backend the options choose, and its name: the drain command when given, else Slurm."""
    if args.drain_cmd is not None:
        # Only {node} needs the inventory: a drain command otherwise reads nothing and asks no controller.
        nodes = node_names(load(inventory, playbook_dir)).to_node if uses(args.drain_cmd, "node") else None
        yield Command.name, Command(args.drain_cmd, fields, nodes=nodes)
        return
    with connect(load(inventory, playbook_dir), options) as slurm:
        yield "slurm", slurm


def settle(args: SchedulerArgs, source: Source, checked: Sequence[str], causes: dict[str, str], passing: set[str],
           inventory: Path, playbook_dir: Path | None, options: Options,
           fields: Mapping[str, Mapping[str, str]] | None = None) -> Settled:
    """Drain the failing hosts and resume the fixed ones as the options ask; never raises for the scheduler.
    `fields`: host -> extra values for a drain command's template ({busbw})."""
    settled = Settled(scheduler=Command.name if args.drain_cmd is not None else "slurm")
    if not (args.drains or args.resume_fixed):
        return settled
    try:
        with told(args, inventory, playbook_dir, options, fields) as (name, scheduler):
            if args.drains:
                settled.drains = drain_failed(scheduler, source, causes, name)
            if args.resume_fixed:
                settled.resumes = resume_fixed(scheduler, source, [h for h in checked if h not in causes], passing)
    except SchedulerError as exc:
        settled.error = str(exc)
    return settled
