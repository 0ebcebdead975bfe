"""gather -> plan -> change -> re-check: converge hosts to the playbook.

Per host: ONE exec gathers the facts (engine.gather, shared with audit), the resources' remedies make
the plan, ONE exec runs every step of it (changes.py) and ONE exec re-reads the host; each resource is
then ok / changed / failed from what is really there. A host with nothing to change costs one exec.
Hosts run in parallel (bounded by --forks) within rolling batches (--serial); no new batch starts once
more than --max-fail-percent of the hosts so far failed. A failing host never stops the others.
"""

from __future__ import annotations

import dataclasses
import getpass
import secrets
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from provisioner.apply import changes, confirmation, recovery
from provisioner.evaluate import engine
from provisioner.evaluate.engine import ResourceOutcome
from provisioner.facts import batch
from provisioner.plan.planner import HostPlanned, make_plan
from provisioner.resources.base import Check, shown_actual
from provisioner.resources.steps import Step
from provisioner.run import runner, transport
from provisioner.run.session import HostSession, Sessions
from provisioner.run.sockets import interrupted

__all__ = ["ApplyOutcome", "HostApplied", "HostPlanned", "apply", "make_plan", "unchanged_host"]

# unknown: the change exec ended early and the host could not say what ran (exit 4, as unreachable).
HostApplyStatus = Literal["ok", "changed", "failed", "unreachable", "skipped", "unknown"]
ResourceStatus = Literal["ok", "changed", "failed", "conflict", "unknown"]


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def control_machine() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry (containers): the uid still says who
        user = "uid" + str(__import__("os").getuid())
    return f"{user}@{socket.gethostname()}"


# ----------------------------------------------------------------------------------------------- apply


@dataclass
class StepRun:
    step: Step
    result: changes.StepResult


@dataclass
class ResourceApplied:
    before: ResourceOutcome
    after: ResourceOutcome | None
    steps: list[StepRun] = field(default_factory=list)
    pending: bool = False  # --check: steps would run

    @property
    def status(self) -> ResourceStatus:
        """ok / changed / failed from the re-check; "conflict" (not converged, and not a failure of
        fabnet's) when a step was not run because its target changed since the plan read it."""
        if self.pending:
            return "changed"
        if any(s.result.status == "conflict" for s in self.steps):
            return "conflict"
        if self.after is None:
            if any(s.result.status == "unknown" for s in self.steps):
                return "unknown"
            return "failed" if self.before.status != "ok" else "ok"
        if self.after.status != "ok" or any(s.result.status == "failed" for s in self.steps):
            return "failed"
        return "ok" if self.before.status == "ok" else "changed"


@dataclass
class HostApplied:
    name: str
    address: str
    status: HostApplyStatus
    error: str | None = None
    resources: list[ResourceApplied] = field(default_factory=list)
    handlers: list[StepRun] = field(default_factory=list)
    execs: int = 0
    seconds: float = 0.0
    digest: str = ""
    warnings: list[str] = field(default_factory=list)  # a stale lock taken over, a lock broken

    def count(self, status: ResourceStatus) -> int:
        return sum(1 for r in self.resources if r.status == status)


@dataclass
class ApplyOutcome:
    run_id: str
    hosts: list[HostApplied]
    seconds: float
    batches: list[list[str]] = field(default_factory=list)
    stopped: str | None = None  # why no further batch started (max-fail-percent), if so
    check: bool = False

    def count(self, status: HostApplyStatus) -> int:
        return sum(1 for h in self.hosts if h.status == status)


Journal = Callable[[Sequence[dict[str, object]]], None]  # records of one host, written at once


def _states(planned: HostPlanned) -> dict[str, tuple[str | None, str | None]]:
    """step id -> (before, after) for the journals: the checks' actual and desired values (never content:
    file checks hold fingerprints only)."""
    states: dict[str, tuple[str | None, str | None]] = {}
    for rp in planned.resources:
        drifted: list[Check] = [c for c in rp.outcome.checks if c.status != "ok"]
        before = "; ".join(f"{c.attribute}={shown_actual(c)}" for c in drifted) or None
        after = "; ".join(f"{c.attribute}={c.desired}" for c in drifted) or None
        for step in rp.steps:
            if step.resource == rp.outcome.target:  # a shared write (plan.merge_writes) is its owner's
                states[step.id] = (before, after)
    return states


def apply_host(planned: HostPlanned, session: HostSession, run_id: str, holder: changes.Holder,
               journal: Journal | None = None, revert_seconds: int = 60, break_lock: bool = False) -> HostApplied:
    """Change one host in one exec, then re-read it in one more, both over the session that gathered it.
    Only for a host that has steps.

    A change to the management path adds a confirming exec on a fresh connection (see confirmation.py).
    """
    started = time.monotonic()
    options = session.options
    host = planned.plan.host
    applied = HostApplied(host.name, host.address, "ok", execs=planned.audit.execs, digest=planned.digest)
    steps = planned.steps
    nonce = batch.new_nonce()
    # The longest this run can hold the host's lock: past it, another run may take the lock over.
    max_seconds = int(2 * options.command_timeout + revert_seconds + 60)
    script = changes.build_script(steps, nonce, run_id, host.name, holder, _states(planned), revert_seconds,
                                  max_seconds=max_seconds, break_lock=break_lock)
    guarded = any(s.netdev is not None or s.lockout for s in steps)
    # Once a revert is armed, the exec is given half the revert time to end; a change that cut the
    # session's path leaves it hanging, and only a fresh connection can tell.
    shorten = (f"@@fabnet:{nonce}:armed:", revert_seconds / 2) if guarded else None
    if journal:
        journal([{"run": run_id, "host": host.name, "resource": step.resource, "action": step.action,
                  "command": step.shown, "outcome": "started"} for step in steps])
    try:
        result = session.exec(script, shorten_after=shorten, forward_ssh=True, partial=True)
        applied.execs += 1
    except transport.HostUnreachable as exc:  # no login: nothing of the script started
        applied.status, applied.error = "unreachable", exc.reason
        _journal_outcomes(journal, run_id, host.name, steps, [changes.StepResult("not_run")] * len(steps))
        return _finish(applied, planned, None, None, started)
    except transport.CommandFailed as exc:  # the exec did not start, or sudo refused it: nothing ran
        applied.status, applied.error = "failed", f"{exc}; nothing was changed" if isinstance(
            exc, transport.BecomeFailed | transport.NotStarted) else str(exc)
        _journal_outcomes(journal, run_id, host.name, steps, [changes.StepResult("not_run")] * len(steps))
        return _finish(applied, planned, None, None, started)
    except Exception as exc:
        applied.status, applied.error = "failed", f"{type(exc).__name__}: {exc}"
        _journal_outcomes(journal, run_id, host.name, steps, [changes.StepResult("unknown")] * len(steps))
        return _finish(applied, planned, None, None, started)
    parsed = changes.parse_output(result.stdout, nonce, len(steps))
    ended_early = result.ended != "exited" and not result.cut and parsed.locked_by is None
    if ended_early:
        parsed, state = _recover(session, run_id, parsed, result.ended)
        applied.warnings.append(state)
    _journal_outcomes(journal, run_id, host.name, steps, parsed.steps)
    if ended_early and any(r.status == "unknown" for r in parsed.steps):
        applied.status, applied.error = "unknown", applied.warnings[-1]
        return _finish(applied, planned, parsed, None, started)
    if parsed.broke is not None:
        applied.warnings.append(f"--break-lock removed the lock of {parsed.broke}")
    if parsed.took_over is not None:
        applied.warnings.append(f"took over a stale lock: {parsed.took_over}")
    if parsed.locked_by is not None:
        applied.status = "failed"
        applied.error = (f"another fabnet run holds this host ({parsed.locked_by}); nothing was changed. "
                         "If that run is dead, apply again with --break-lock")
        return _finish(applied, planned, parsed, None, started)
    if not parsed.finished and not any(s.status != "not_run" for s in parsed.steps):
        detail = (result.stderr.strip().splitlines() or [f"exit code {result.exit_code}"])[0]
        applied.status, applied.error = "failed", f"the change script did not run: {detail}"
    if parsed.armed:
        # A cut session ends its exec half the revert time after the `armed` marker came (shorten above).
        armed_at = time.monotonic() - (revert_seconds / 2 if result.cut else 0.0)
        answer, execs, took = confirmation.confirm(planned.plan.host, options, run_id, revert_seconds, armed_at)
        applied.execs += execs
        if journal:
            journal([{"run": run_id, "host": host.name, "resource": "management path", "action": "confirm",
                      "outcome": answer}])
        if answer != "confirmed":
            applied.status = "failed" if answer == "reverted" else "unreachable"
            lost = ("the management path was lost" if confirmation.path_lost(result, revert_seconds)
                    else "the change could not be confirmed")
            took_text = f"{took:g} s" if took is not None else f"its revert time ({revert_seconds} s)"
            applied.error = (f"{lost}; the host reverted the change on its own after {took_text}"
                             if answer == "reverted" else
                             f"{lost}, and the host is still unreachable after its revert time ({revert_seconds} s)")
            if answer != "reverted":
                return _finish(applied, planned, parsed, None, started)
    after = None
    try:
        if result.cut:
            session.close()  # the change cut the path this session used; the re-check logs in afresh
        results, execs = engine.gather(planned.plan, session)
        applied.execs += execs
        after = engine.evaluate(planned.plan, results)
    except transport.HostUnreachable as exc:
        applied.status, applied.error = "unreachable", f"re-check: {exc.reason}"
    except Exception as exc:
        applied.status, applied.error = "failed", f"re-check: {type(exc).__name__}: {exc}"
    return _finish(applied, planned, parsed, after, started)


def _journal_outcomes(journal: Journal | None, run_id: str, host: str, steps: Sequence[Step],
                      results: Sequence[changes.StepResult]) -> None:
    """An outcome record for every step of the run in the local journal, `unknown` included."""
    if journal:
        journal([{"run": run_id, "host": host, "resource": step.resource, "action": step.action,
                  "command": step.shown, "outcome": outcome.status, "rc": outcome.exit_code,
                  "writes": list(step.writes)} for step, outcome in zip(steps, results, strict=True)])


def _recover(session: HostSession, run_id: str, parsed: changes.ScriptResult,
             ended: str) -> tuple[changes.ScriptResult, str]:
    """After a change exec that ended early: the host's own record of the run, read over the same session
    (logged into again if the connection died), a few tries with a growing pause. Returns the step results
    and a sentence saying what happened."""
    why = transport.ENDINGS.get(ended, ended)
    if interrupted.is_set():
        return (dataclasses.replace(parsed, steps=recovery.unknown_after(parsed.steps)),
                f"{why} during the change exec; the steps not reported before it are unknown")
    count = len(parsed.steps)
    problem = ""
    for attempt in range(recovery.TRIES):
        if attempt:
            time.sleep(2.0 ** attempt)
        nonce = batch.new_nonce()
        try:
            result = session.exec(recovery.script(run_id, nonce), timeout=recovery.WAIT_SECONDS + 30)
        except (transport.HostUnreachable, transport.CommandFailed) as exc:
            problem = str(getattr(exc, "reason", exc))
            session.close()  # the next try logs in afresh
            continue
        read = recovery.parse(result.stdout, nonce, count, parsed.steps)
        if read is None:
            problem = "its record could not be read"
            continue
        still = "; the script was still running on the host" if read.running else ""
        return (dataclasses.replace(parsed, steps=read.steps, finished=not read.running),
                f"{why} during the change exec; the outcomes were read back from the host's journal{still}")
    return (dataclasses.replace(parsed, steps=recovery.unknown_after(parsed.steps)),
            f"{why} during the change exec and the host could not be asked afterwards ({problem}): "
            "the outcome of the steps not reported before is unknown")


def _finish(applied: HostApplied, planned: HostPlanned, parsed: changes.ScriptResult | None,
            after: list[ResourceOutcome] | None, started: float) -> HostApplied:
    step_results = dict(zip((s.id for s in planned.steps), parsed.steps, strict=True)) if parsed else {}
    for index, rp in enumerate(planned.resources):
        runs = [StepRun(s, step_results.get(s.id, changes.StepResult("not_run"))) for s in rp.steps]
        applied.resources.append(ResourceApplied(rp.outcome, after[index] if after is not None else None, runs))
    applied.handlers = [StepRun(s, step_results.get(s.id, changes.StepResult("not_run")))
                        for s in planned.steps if s.resource.startswith("handler[")]
    if applied.status == "ok":
        statuses = {r.status for r in applied.resources}
        failed_handler = any(h.result.status == "failed" for h in applied.handlers)
        applied.status = "failed" if statuses & {"failed", "conflict"} or failed_handler else \
            "changed" if "changed" in statuses else "ok"
        conflicts = [f"{r.before.target}: {s.result.output}" for r in applied.resources for s in r.steps
                     if s.result.status == "conflict"]
        if conflicts and applied.error is None:
            applied.error = ("conflict, not changed (changed on the host since the plan read it; plan again): "
                             + "; ".join(dict.fromkeys(conflicts)))
        if applied.status == "failed" and applied.error is None:
            applied.error = "not converged: " + ", ".join(r.before.target for r in applied.resources
                                                          if r.status == "failed")
    applied.seconds += time.monotonic() - started
    return applied


def unchanged_host(planned: HostPlanned, check: bool = False) -> HostApplied:
    """A host not changed: its gathered state is the result (no further exec). With `check`, resources
    whose steps would run count as changed (what apply would do), as Ansible's check mode reports."""
    audit = planned.audit
    applied = HostApplied(planned.name, audit.address, "ok", audit.error, execs=audit.execs, seconds=audit.seconds,
                          digest=planned.digest)
    if planned.refusal is not None:
        applied.status, applied.error = "failed", planned.refusal
        applied.resources = [ResourceApplied(rp.outcome, None) for rp in planned.resources]
        return applied
    if audit.status == "unreachable":
        applied.status = "unreachable"
        return applied
    host_changes = any(s.possible for s in planned.steps)
    for rp in planned.resources:
        # A drifted resource without steps of its own (an RDMA MTU that follows the netdev's) is left
        # to the other steps of its host; the real run's re-check decides.
        pending = check and rp.outcome.status == "drift" and (
            all(s.possible for s in rp.steps) if rp.steps else host_changes)
        applied.resources.append(ResourceApplied(rp.outcome, rp.outcome if rp.outcome.status == "ok" else None,
                                                 pending=pending))
    if check and any(r.pending for r in applied.resources):
        applied.status = "changed"
    if audit.status == "failed" or any(r.status == "failed" for r in applied.resources):
        applied.status = "failed"
        applied.error = audit.error or "not converged: " + ", ".join(
            r.before.target for r in applied.resources if r.status == "failed")
    return applied


HostDone = Callable[[HostApplied], None]


def apply(planned: Sequence[HostPlanned], sessions: Sessions, *, run_id: str | None = None,
          serial: Sequence[str] | None = None, max_fail_percent: float | None = None,
          journal: Journal | None = None, on_host: HostDone | None = None, revert_seconds: int = 60,
          break_lock: bool = False) -> ApplyOutcome:
    """Run every host's plan, batch by batch, over the sessions that gathered them. Hosts without steps
    are reported from their gathered state. `break_lock` removes another run's lock on each host changed
    (journaled there)."""
    started = time.monotonic()
    run_id = run_id or new_run_id()
    holder = changes.Holder(run_id, control_machine(), datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))

    def one(host: HostPlanned) -> HostApplied:
        if host.steps and host.audit.status != "unreachable":
            return apply_host(host, sessions(host.plan.host), run_id, holder, journal, revert_seconds, break_lock)
        return unchanged_host(host)

    def skip(host: HostPlanned, why: str) -> HostApplied:
        return HostApplied(host.name, host.audit.address, "skipped", why, digest=host.digest)

    rolled = runner.rolling(planned, one, name=lambda h: h.name, forks=sessions.options.forks, serial=serial,
                            max_fail_percent=max_fail_percent, failed=lambda h: h.status in ("failed", "unreachable"),
                            skip=skip, on_result=on_host)
    return ApplyOutcome(run_id, rolled.results, time.monotonic() - started, rolled.batches, rolled.stopped)
