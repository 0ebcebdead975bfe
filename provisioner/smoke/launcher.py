"""Running one planned job over SSH: every host's exec started at once, one deadline for all of them.

On the deadline, or as soon as one host's ranks fail (the others would only wait for it), a second
exec per host kills every process group the job started there and brings back how far each rank got
and the state of the data interface; the hosts are then asked which of those processes are still
alive, so a report can say that none was left behind.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from provisioner.run import runner, transport
from provisioner.run.session import HostSession
from provisioner.smoke import diagnose, plan
from provisioner.smoke.targets import Target

SessionOf = Callable[[Target], HostSession]  # the run's kept-open session of a target's host
KILL_TIMEOUT = 20.0
# Once one host has failed, how long the others get to end by themselves before the job is killed: the
# rank whose fault it was may be a moment behind the one that saw it (it reset a connection and is still
# writing its error), and a kill at once loses the first error from the job's log.
FAILED_GRACE = 2.0


@dataclass(frozen=True)
class Exec:
    stdout: str = ""
    error: str | None = None  # the exec itself failed (not a rank)
    unreachable: str | None = None


def _exec(session_of: SessionOf, target: Target, script: str, timeout: float) -> Exec:
    try:
        result = session_of(target).exec(script, timeout=timeout)
    except transport.HostUnreachable as exc:
        return Exec(unreachable=exc.reason)
    except transport.CommandFailed as exc:
        return Exec(error=str(exc))
    return Exec(stdout=result.stdout, error=None if result.exit_code == 0 else
                f"exit {result.exit_code}: {result.stderr.strip()[-300:]}")


def _host_failed(job: plan.Job, target: Target, result: Exec) -> bool:
    if result.error or result.unreachable:
        return True
    report = plan.parse_host_output(result.stdout)
    ranks = [r.rank for r in job.ranks() if r.host == target.name]
    return any(not any(e.get("event") == "done" for e in report.events.get(r, [])) for r in ranks)


def run_job(job: plan.Job, session_of: SessionOf, deadline: float) -> diagnose.JobResult:
    """Run `job`; the result has figures when every rank finished, else the named cause."""
    started = time.monotonic()
    hosts = list(job.hosts)
    # Every host at once: the ranks wait for each other. The exec's own limit is only a safety net:
    # the kill below ends it at the deadline.
    launched = runner.AllAtOnce(hosts, lambda target: _exec(session_of, target, plan.launch_script(job, target),
                                                               deadline + KILL_TIMEOUT), name="fabnet-smoke")
    failed = False

    def one_failed(index: int, result: Exec) -> bool:
        nonlocal failed
        failed = failed or _host_failed(job, hosts[index], result)
        return failed

    ended = launched.wait(started + deadline, stop=one_failed)
    timed_out = not ended and not failed
    if failed and not ended:
        ended = launched.wait(min(started + deadline, time.monotonic() + FAILED_GRACE))
    killed: dict[str, Exec] = {}
    if not ended or failed:
        # A failed or late job is killed everywhere; a finished one has already removed its files.
        killed = _kill_everywhere(job, session_of)
        launched.collect(KILL_TIMEOUT, lambda index, exc: Exec(error=f"{type(exc).__name__}: {exc}"))
    launched.close()
    outputs = {hosts[index].name: result for index, result in sorted(launched.results.items())}
    return _result(job, outputs, killed, timed_out, time.monotonic() - started, deadline)


def _kill_everywhere(job: plan.Job, session_of: SessionOf) -> dict[str, Exec]:
    results = runner.each(job.hosts, lambda t: _exec(session_of, t, plan.kill_script(job, t), KILL_TIMEOUT),
                          forks=len(job.hosts))
    return dict(zip(job.host_names, results, strict=True))


def _result(job: plan.Job, outputs: dict[str, Exec], killed: dict[str, Exec], timed_out: bool, seconds: float,
            deadline: float) -> diagnose.JobResult:
    reports = [plan.parse_host_output(e.stdout) for e in [*outputs.values(), *killed.values()]]
    merged = plan.merge(reports)
    progress = diagnose.rank_progress(job, merged.events, merged.states)
    rows = diagnose.figures(job, merged.events)
    pairs = diagnose.pair_figures(job, merged.events)
    unreachable = {h: e.unreachable for h, e in {**outputs, **killed}.items() if e.unreachable}
    ok = not killed and not unreachable and all(p.stage == "done" for p in progress) and len(rows) == len(job.sizes)
    result = diagnose.JobResult(hosts=job.host_names, ok=ok, rows=rows, progress=progress, timed_out=timed_out,
                                seconds=seconds, pairs=pairs)
    result.left_running = {h: r for h, e in killed.items() if (r := plan.parse_host_output(e.stdout).alive)}
    result.unreachable = unreachable
    if not ok:
        result.outputs = {rank: text[-2000:] for rank, text in sorted(merged.outputs.items()) if rank >= 0}
        ifaces = {h: diagnose.iface_state(plan.parse_host_output(e.stdout).iface) for h, e in killed.items()}
        result.failed_hosts, result.cause = diagnose.explain(job, progress, ifaces, timed_out=timed_out,
                                                             unreachable=unreachable, deadline=deadline,
                                                             outputs=merged.outputs)
        errors = [f"{h}: {e.error}" for h, e in outputs.items() if e.error]
        if errors and not any(p.error for p in progress):
            result.cause += " [" + "; ".join(errors) + "]"
    return result
