"""`fabnet rollback`: put back what a run changed on a host, from the undo steps and backups it left there.

Each step of a run that succeeded left its undo in /var/backups/fabnet/RUN/undo/NNNN (a file's undo
restores the backup taken before it was replaced, or removes a file that did not exist). Rollback
runs them newest first in ONE exec per host, under the same per-host lock as apply, then marks the
run rolled back so a second rollback does not undo twice.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from provisioner import batch, become, changes, engine, transport
from provisioner.hostplans import HostPlan

RUN_ID = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$")


@dataclass
class UndoResult:
    step: str
    exit_code: int
    output: str


@dataclass
class HostRollback:
    name: str
    status: str  # "rolled_back", "failed", "nothing", "unreachable"
    run_id: str | None = None
    error: str | None = None
    undone: list[UndoResult] = field(default_factory=list)


def build_script(run_id: str | None, nonce: str, holder: changes.Holder) -> str:
    tag = f"@@fabnet:{nonce}"
    pick = (f"d={shlex.quote(changes.BACKUP_ROOT + '/' + run_id)}" if run_id else
            # The newest run that still has something to undo (run ids sort by time).
            f"d=$(for r in $(ls -1 {changes.BACKUP_ROOT} 2>/dev/null | sort -r); do "
            f"if [ -d {changes.BACKUP_ROOT}/$r/undo ]; then echo {changes.BACKUP_ROOT}/$r; break; fi; done)")
    return "\n".join([
        "trap '' PIPE HUP",
        pick,
        f'if [ -z "$d" ] || [ ! -d "$d/undo" ]; then printf \'%s\\n\' \'{tag}:none@@\'; exit 3; fi',
        f"if ! mkdir {changes.LOCK_DIR} 2>/dev/null; then printf '%s\\n' '{tag}:locked@@'; "
        f"head -n 1 {changes.LOCK_DIR}/holder 2>/dev/null; exit {changes.LOCKED_EXIT}; fi",
        f"printf '%s\\npid=%s\\n' {shlex.quote(holder.line())} \"$$\" > {changes.LOCK_DIR}/holder",
        f"trap 'rm -rf {changes.LOCK_DIR}' EXIT",
        'FABNET_BACKUP_DIR=$d; export FABNET_BACKUP_DIR; r=${d##*/}',
        f"printf '%s\\n' \"{tag}:run:$r@@\"",
        'for f in $(ls -1 "$d/undo" | sort -r); do',
        '  o=$(sh -e "$d/undo/$f" 2>&1 </dev/null); rc=$?',
        f"  printf '%s\\n' \"{tag}:undo:$f:$rc@@\" \"$o\"",
        f"  printf '{{\"run\":\"%s\",\"action\":\"rollback\",\"step\":\"%s\",\"rc\":%s,\"time\":\"%s\"}}\\n' "
        f"\"$r\" \"$f\" \"$rc\" \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\" >> {changes.JOURNAL}",
        "done",
        'mv "$d/undo" "$d/undone.$(date -u +%Y%m%dT%H%M%SZ)"',
        f"printf '%s\\n' '{tag}:done@@'",
    ]) + "\n"


def parse(stdout: str, nonce: str) -> tuple[str | None, list[UndoResult], str | None]:
    """(run id, undo results, problem) from the rollback script's output."""
    tag = re.escape(f"@@fabnet:{nonce}")
    if re.search(rf"^{tag}:none@@$", stdout, re.MULTILINE):
        return None, [], "no run with something to undo on this host"
    locked = re.search(rf"^{tag}:locked@@\n(.*)$", stdout, re.MULTILINE)
    if locked:
        return None, [], f"another fabnet run holds this host ({locked[1].strip() or 'unknown'})"
    run = re.search(rf"^{tag}:run:(\S+)@@$", stdout, re.MULTILINE)
    undone = [UndoResult(m[1], int(m[2]), m[3].strip()) for m in re.finditer(
        rf"^{tag}:undo:(\d+):(\d+)@@\n(.*?)(?=^@@fabnet:|\Z)", stdout, re.MULTILINE | re.DOTALL)]
    finished = re.search(rf"^{tag}:done@@$", stdout, re.MULTILINE) is not None
    return (run[1] if run else None), undone, None if finished else "the rollback did not finish"


def rollback_host(plan: HostPlan, options: engine.Options, run_id: str | None,
                  holder: changes.Holder) -> HostRollback:
    host = plan.host
    nonce = batch.new_nonce()
    try:
        conn = transport.connect(host, connect_timeout=options.connect_timeout, ssh_config=options.ssh_config)
        try:
            result = transport.run(conn, build_script(run_id, nonce, holder), timeout=options.command_timeout,
                                   become=become.for_host(host, options.become_password))
        finally:
            conn.close()
    except transport.HostUnreachable as exc:
        return HostRollback(host.name, "unreachable", run_id, exc.reason)
    except transport.CommandFailed as exc:
        return HostRollback(host.name, "failed", run_id, str(exc))
    found, undone, problem = parse(result.stdout, nonce)
    if problem and not undone and "no run" in problem:
        return HostRollback(host.name, "nothing", run_id, problem)
    failed = [u for u in undone if u.exit_code != 0]
    status = "failed" if problem or failed else "rolled_back"
    error = problem or (f"{len(failed)} undo steps failed" if failed else None)
    return HostRollback(host.name, status, found or run_id, error, undone)


def rollback(plans: Sequence[HostPlan], options: engine.Options, run_id: str | None) -> list[HostRollback]:
    if run_id is not None and not RUN_ID.match(run_id):
        raise ValueError(f"{run_id!r} is not a fabnet run id (like 20261123T114934Z-554de5)")
    from provisioner.apply import control_machine, new_run_id

    holder = changes.Holder(new_run_id(), control_machine(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    with ThreadPoolExecutor(max_workers=max(1, min(options.forks, len(plans)))) as pool:
        return list(pool.map(lambda plan: rollback_host(plan, options, run_id, holder), plans))


def to_json(results: Sequence[HostRollback]) -> dict[str, Any]:
    return {"schema": "fabnet/rollback/v1", "hosts": [
        {"name": r.name, "status": r.status, "run_id": r.run_id, "error": r.error,
         "undone": [{"step": u.step, "exit_code": u.exit_code, "output": u.output[-1000:]} for u in r.undone]}
        for r in results]}



