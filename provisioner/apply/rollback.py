"""`fabnet rollback`: put back what a run changed on a host, from the undo steps and backups it left there.

Each step of a run left its undo in /var/backups/fabnet/RUN/undo/NNNN BEFORE it ran, and its outcome
in RUN/state/NNNN after (a file's undo restores the backup taken before it was replaced, or removes a
file that did not exist; any undo is safe where its step did not happen). Rollback runs them newest
first in ONE exec per host, under the same per-host lock as apply (changes.lock_lines), and reports
each with the step it undoes and that step's outcome ("started": cut off mid-step). Each undo that
worked is moved to RUN/undone.TIME/, so a second rollback does not undo it twice; one that failed (a
file changed by hand since the run) stays in RUN/undo/, and the next rollback of that run, once the
host is sorted out, retries only those. The run is rolled back when RUN/undo/ is empty.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from provisioner.apply import changes
from provisioner.evaluate import engine
from provisioner.facts import batch
from provisioner.load.hostplans import HostPlan
from provisioner.run import runner, transport
from provisioner.run.session import open_session

RUN_ID = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$")


@dataclass
class UndoResult:
    step: str
    exit_code: int
    output: str
    state: str = "ok"  # the undone step's outcome: ok, failed, or started (cut off before it ended)
    what: str = ""  # the undone step: its id and its command as shown


@dataclass
class HostRollback:
    name: str
    status: str  # "rolled_back", "failed", "nothing", "unreachable"
    run_id: str | None = None
    error: str | None = None
    undone: list[UndoResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # a stale lock taken over, a lock broken


def build_script(run_id: str | None, nonce: str, holder: changes.Holder, *, max_seconds: int = 3600,
                 break_lock: bool = False) -> str:
    tag = f"@@fabnet:{nonce}"
    pick = (f"d={shlex.quote(changes.BACKUP_ROOT + '/' + run_id)}" if run_id else
            # The newest run that still has something to undo (run ids sort by time).
            f"d=$(for r in $(ls -1 {changes.BACKUP_ROOT} 2>/dev/null | sort -r); do "
            f"if [ -d {changes.BACKUP_ROOT}/$r/undo ]; then echo {changes.BACKUP_ROOT}/$r; break; fi; done)")
    return "\n".join([
        "trap '' PIPE HUP",
        *changes.lock_lines(tag, holder, holder.run_id, max_seconds=max_seconds, break_lock=break_lock),
        pick,
        f'if [ -z "$d" ] || [ ! -d "$d/undo" ]; then printf \'%s\\n\' \'{tag}:none@@\'; exit 3; fi',
        'FABNET_BACKUP_DIR=$d; export FABNET_BACKUP_DIR; r=${d##*/}; u="$d/undone.$(date -u +%Y%m%dT%H%M%SZ)"',
        f"printf '%s\\n' \"{tag}:run:$r@@\"",
        'for f in $(ls -1 "$d/undo" | sort -r); do',
        '  case "$f" in *[!0-9]*) continue;; esac',
        # No outcome recorded: the step was cut off (its undo is safe either way). Runs of fabnet
        # versions without state/ kept undo files only for the steps that succeeded.
        '  s=$(cat "$d/state/$f" 2>/dev/null)',
        '  if [ -z "$s" ]; then if [ -d "$d/state" ]; then s=started; else s=ok; fi; fi',
        "  w=$(sed -n '1s/^# //p' \"$d/undo/$f\")",
        '  o=$(sh -e "$d/undo/$f" 2>&1 </dev/null); rc=$?',
        # Only an undo that worked is set aside: a failed one stays for the next rollback to retry.
        '  if [ "$rc" = 0 ]; then mkdir -p "$u" && mv -f "$d/undo/$f" "$u/$f"; fi',
        f"  printf '%s\\n' \"{tag}:undo:$f:$rc:$s@@\" \"$w\" \"$o\"",
        f"  printf '{{\"run\":\"%s\",\"action\":\"rollback\",\"step\":\"%s\",\"rc\":%s,\"time\":\"%s\"}}\\n' "
        f"\"$r\" \"$f\" \"$rc\" \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\" >> {changes.JOURNAL}",
        "done",
        # Everything undone: the run is rolled back, and a second rollback finds nothing left of it.
        'rmdir "$d/undo" 2>/dev/null',
        f"printf '%s\\n' '{tag}:done@@'",
    ]) + "\n"


def parse(stdout: str, nonce: str) -> tuple[str | None, list[UndoResult], str | None]:
    """(run id, undo results, problem) from the rollback script's output."""
    tag = re.escape(f"@@fabnet:{nonce}")
    if re.search(rf"^{tag}:none@@$", stdout, re.MULTILINE):
        return None, [], "no run with something to undo on this host"
    locked, _, _ = changes.lock_markers(stdout, nonce)
    if locked:
        return None, [], (f"another fabnet run holds this host ({locked}); if that run is dead, roll back "
                          "again with --break-lock")
    run = re.search(rf"^{tag}:run:(\S+)@@$", stdout, re.MULTILINE)
    undone = [UndoResult(m[1], int(m[2]), m[5].strip(), m[3], m[4]) for m in re.finditer(
        rf"^{tag}:undo:(\d+):(\d+):(\w+)@@\n([^\n]*)\n(.*?)(?=^@@fabnet:|\Z)", stdout, re.MULTILINE | re.DOTALL)]
    finished = re.search(rf"^{tag}:done@@$", stdout, re.MULTILINE) is not None
    return (run[1] if run else None), undone, None if finished else "the rollback did not finish"


def rollback_host(plan: HostPlan, options: engine.Options, run_id: str | None,
                  holder: changes.Holder, break_lock: bool = False) -> HostRollback:
    host = plan.host
    nonce = batch.new_nonce()
    max_seconds = int(2 * options.command_timeout + 60)  # past it, another run may take the lock over
    try:
        with open_session(host, options) as session:
            result = session.exec(build_script(run_id, nonce, holder, max_seconds=max_seconds, break_lock=break_lock))
    except transport.HostUnreachable as exc:
        return HostRollback(host.name, "unreachable", run_id, exc.reason)
    except transport.CommandFailed as exc:
        return HostRollback(host.name, "failed", run_id, str(exc))
    found, undone, problem = parse(result.stdout, nonce)
    _, took_over, broke = changes.lock_markers(result.stdout, nonce)
    warnings = [*([f"--break-lock removed the lock of {broke}"] if broke else []),
                *([f"took over a stale lock: {took_over}"] if took_over else [])]
    if problem and not undone and "no run" in problem:
        return HostRollback(host.name, "nothing", run_id, problem, warnings=warnings)
    failed = [u for u in undone if u.exit_code != 0]
    status = "failed" if problem or failed else "rolled_back"
    error = problem or (f"{len(failed)} undo steps failed; they are kept: roll back again to retry them"
                        if failed else None)
    return HostRollback(host.name, status, found or run_id, error, undone, warnings)


def rollback(plans: Sequence[HostPlan], options: engine.Options, run_id: str | None,
             break_lock: bool = False) -> list[HostRollback]:
    if run_id is not None and not RUN_ID.match(run_id):
        raise ValueError(f"{run_id!r} is not a fabnet run id (like 20261123T114934Z-554de5)")
    from provisioner.apply.converge import control_machine, new_run_id

    holder = changes.Holder(new_run_id(), control_machine(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    return runner.each(plans, lambda plan: rollback_host(plan, options, run_id, holder, break_lock),
                       forks=options.forks)


def to_json(results: Sequence[HostRollback]) -> dict[str, Any]:
    return {"schema": "fabnet/rollback/v1", "hosts": [
        {"name": r.name, "status": r.status, "run_id": r.run_id, "error": r.error, "warnings": r.warnings,
         "undone": [{"step": u.step, "undoes": u.what, "state": u.state, "exit_code": u.exit_code,
                     "output": u.output[-1000:]} for u in r.undone]}
        for r in results]}



