"""Running one planned job over SSH: every host's exec started at once, one deadline for all of them.

On the deadline, or as soon as one host's ranks fail (the others would only wait for it), a second
exec per host kills every process group the job started there and brings back how far each rank got
and the state of the data interface; the hosts are then asked which of those processes are still
alive, so a report can say that none was left behind.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from fabric import Connection

from provisioner import become, transport
from provisioner.become import Secret
from provisioner.smoke import diagnose, plan
from provisioner.smoke.targets import Target

Connect = Callable[[Target], Connection]
KILL_TIMEOUT = 20.0


@dataclass(frozen=True)
class Exec:
    stdout: str = ""
    error: str | None = None  # the exec itself failed (not a rank)
    unreachable: str | None = None


def _exec(connect: Connect, target: Target, script: str, timeout: float, password: Secret | None) -> Exec:
    try:
        conn = connect(target)
    except transport.HostUnreachable as exc:
        return Exec(unreachable=exc.reason)
    try:
        result = transport.run(conn, script, timeout=timeout, become=become.for_host(target.host, password))
    except transport.CommandFailed as exc:
        return Exec(error=str(exc))
    finally:
        conn.close()
    return Exec(stdout=result.stdout, error=None if result.exit_code == 0 else
                f"exit {result.exit_code}: {result.stderr.strip()[-300:]}")


def _host_failed(job: plan.Job, target: Target, result: Exec) -> bool:
    if result.error or result.unreachable:
        return True
    report = plan.parse_host_output(result.stdout)
    ranks = [r.rank for r in job.ranks() if r.host == target.name]
    return any(not any(e.get("event") == "done" for e in report.events.get(r, [])) for r in ranks)


def run_job(job: plan.Job, connect: Connect, deadline: float, password: Secret | None = None) -> diagnose.JobResult:
    """Run `job`; the result has figures when every rank finished, else the named cause. `password` is
    sudo's, for hosts with ansible_become."""
    started = time.monotonic()
    end = started + deadline
    outputs: dict[str, Exec] = {}
    pool = ThreadPoolExecutor(max_workers=len(job.hosts), thread_name_prefix="fabnet-smoke")
    futures: dict[Future[Exec], Target] = {
        # The exec's own limit is only a safety net: the kill below ends it at the deadline.
        pool.submit(_exec, connect, target, plan.launch_script(job, target), deadline + KILL_TIMEOUT, password): target
        for target in job.hosts
    }
    pending = set(futures)
    failed = False
    while pending and not failed:
        done, pending = wait(pending, timeout=max(0.0, end - time.monotonic()), return_when=FIRST_COMPLETED)
        if not done:
            break
        for future in done:
            target = futures[future]
            outputs[target.name] = future.result()
            failed = failed or _host_failed(job, target, outputs[target.name])
    timed_out = bool(pending) and not failed
    killed: dict[str, Exec] = {}
    if pending or failed:
        # A failed or late job is killed everywhere; a finished one has already removed its files.
        killed = _kill_everywhere(job, connect, password)
        for future in list(pending):
            try:
                outputs[futures[future].name] = future.result(timeout=KILL_TIMEOUT)
            except Exception as exc:  # the safety-net timeout, or a transport error
                outputs[futures[future].name] = Exec(error=f"{type(exc).__name__}: {exc}")
    pool.shutdown(wait=False, cancel_futures=True)
    return _result(job, outputs, killed, timed_out, time.monotonic() - started, deadline)


def _kill_everywhere(job: plan.Job, connect: Connect, password: Secret | None) -> dict[str, Exec]:
    with ThreadPoolExecutor(max_workers=len(job.hosts)) as pool:
        results = pool.map(lambda t: _exec(connect, t, plan.kill_script(job, t), KILL_TIMEOUT, password), job.hosts)
        return dict(zip(job.host_names, results, strict=True))


def _result(job: plan.Job, outputs: dict[str, Exec], killed: dict[str, Exec], timed_out: bool, seconds: float,
            deadline: float) -> diagnose.JobResult:
    reports = [plan.parse_host_output(e.stdout) for e in [*outputs.values(), *killed.values()]]
    merged = plan.merge(reports)
    progress = diagnose.rank_progress(job, merged.events)
    rows = diagnose.figures(job, merged.events)
    unreachable = {h: e.unreachable for h, e in {**outputs, **killed}.items() if e.unreachable}
    ok = not killed and not unreachable and all(p.stage == "done" for p in progress) and len(rows) == len(job.sizes)
    result = diagnose.JobResult(hosts=job.host_names, ok=ok, rows=rows, progress=progress, timed_out=timed_out,
                                seconds=seconds)
    result.left_running = {h: r for h, e in killed.items() if (r := plan.parse_host_output(e.stdout).alive)}
    result.unreachable = unreachable
    if not ok:
        result.outputs = {rank: text[-2000:] for rank, text in sorted(merged.outputs.items()) if rank >= 0}
        ifaces = {h: diagnose.iface_state(plan.parse_host_output(e.stdout).iface) for h, e in killed.items()}
        result.failed_hosts, result.cause = diagnose.explain(job, progress, ifaces, timed_out=timed_out,
                                                             unreachable=unreachable, deadline=deadline)
        errors = [f"{h}: {e.error}" for h, e in outputs.items() if e.error]
        if errors and not any(p.error for p in progress):
            result.cause += " [" + "; ".join(errors) + "]"
    return result
