"""`fabnet rollback`: put back what a run changed on a host, from the undo steps and backups it left there.

Each step of a run left its undo in /var/backups/fabnet/RUN/undo/NNNN BEFORE it ran, and its outcome
in RUN/state/NNNN after (a file's undo restores the backup taken before it was replaced, or removes a
file that did not exist; any undo is safe where its step did not happen). Rollback runs them newest
first in ONE exec per host, under the same per-host lock as apply (changes.lock_lines), and reports
each with the step it undoes and that step's outcome ("started": cut off mid-step). Each undo that
worked is moved to RUN/undone.TIME/, so a second rollback does not undo it twice; one that failed (a
file changed by hand since the run) stays in RUN/undo/, and the next rollback of that run, once the
host is sorted out, retries only those. The run is rolled back when RUN/undo/ is empty.

An undo of the management path runs behind apply's guard (guard_shell.py): a revert timer armed before
it, acknowledged by fabnet, disarmed only by a fresh login (confirmation.py); if none gets through, the
host re-does the link changes from what apply recorded beside each undo (RUN/redo/NNNN).
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from provisioner.apply import changes, confirmation, guard_shell
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
    rollback_id: str | None = None  # this rollback's own run id (its lock, revert timer and journal lines)
    armed: bool = False  # a revert was armed before an undo of the management path
    confirmation: str | None = None  # "confirmed", "reverted" or "unreachable" when armed


def _guarded_lines(management: Sequence[str]) -> list[str]:
    """Shell, run for each undo `$f` of the loop below, setting `__fn_c`: empty when the undo leaves the
    management path alone, 1 when it changes it (its record names the interface the session arrives
    on, one the inventory lists in fabnet_management_interfaces, or a step apply marked `lockout`),
    `legacy` for an undo without a record (an older fabnet's) whose text names such an interface;
    and `__fn_n`, the network device it touches."""
    listed = " ".join(shlex.quote(name) for name in management)
    return [
        f'  __fn_c=; __fn_n=; __fn_r=$(sed -n "2s/^{guard_shell.RECORD_PREFIX}//p" "$d/undo/$f")',
        '  if [ -n "$__fn_r" ]; then',
        '    __fn_n=${__fn_r#netdev=}; __fn_n=${__fn_n%% *}',
        '    case " $__fn_r " in *" lockout=1 "*) __fn_c=1;; esac',
        f'    for __fn_i in "$__fn_mgmt" {listed}; do',
        '      if [ -n "$__fn_n" ] && [ "$__fn_n" = "$__fn_i" ]; then __fn_c=1; fi; done',
        "  else",
        f'    for __fn_i in "$__fn_mgmt" {listed}; do',
        '      if [ -n "$__fn_i" ] && grep -qwF -e "$__fn_i" "$d/undo/$f"; then __fn_c=legacy; fi; done',
        "  fi",
    ]


def build_script(run_id: str | None, nonce: str, holder: changes.Holder, *, max_seconds: int = 3600,
                 break_lock: bool = False, revert_seconds: int = 60, host: str = "",
                 management: Sequence[str] = ()) -> str:
    """The rollback script for one host. An undo that changes the management path (see `_guarded_lines`)
    runs only behind apply's guard (guard_shell.guarded): before the first, a timer is armed that re-does
    the link changes this rollback undid (redo/NNNN, listed in changes.redo_list as each undo starts)
    and puts those undos back in undo/, unless a fresh connection disarms it (confirmation.confirm).
    An undo refused (nothing could be armed, no acknowledgement, or an older fabnet's undo that names the
    management interface and has no re-do) fails and stays in undo/ for a retry; the others still run."""
    tag = f"@@fabnet:{nonce}"
    rid = holder.run_id
    pick = (f"d={shlex.quote(changes.BACKUP_ROOT + '/' + run_id)}" if run_id else
            # The newest run that still has something to undo (run ids sort by time).
            f"d=$(for r in $(ls -1 {changes.BACKUP_ROOT} 2>/dev/null | sort -r); do "
            f"if [ -d {changes.BACKUP_ROOT}/$r/undo ]; then echo {changes.BACKUP_ROOT}/$r; break; fi; done)")
    listed = shlex.quote(changes.redo_list(rid))
    # The revert re-does in the order apply made the changes (undo names sort by it), and puts each undo it
    # re-did back in undo/, for the next rollback to retry.
    redo = ('__fn_d=$2; __fn_u=$3; for __fn_f in $(sort -u ' + listed + ' 2>/dev/null); do '
            'case "$__fn_f" in *[!0-9]*) continue;; esac; '
            'if sh -e "$__fn_d/redo/$__fn_f" </dev/null && [ -e "$__fn_u/$__fn_f" ]; then '
            'mkdir -p "$__fn_d/undo" && mv -f "$__fn_u/$__fn_f" "$__fn_d/undo/$__fn_f"; fi; done; rm -f ' + listed)
    record = {"run": rid, "host": host, "resource": "management path",
              "command": "re-do the link changes this rollback undid"}
    revert = guard_shell.revert_command([redo], record, changes.reverted_flag(rid), changes.JOURNAL_DIR,
                                        changes.JOURNAL)
    arm = guard_shell.arm_command(changes.revert_unit(rid), revert_seconds, revert, ' "$d" "$u"')
    run = ('if [ -n "$__fn_n" ] && [ -f "$d/redo/$f" ] && [ "$s" != failed ]; then '
           f"printf '%s\\n' \"$f\" >> {listed}; fi; "
           '__fn_o=$(sh -e "$d/undo/$f" 2>&1 </dev/null); __fn_rc=$?')
    legacy = ("refused: this undo, recorded by an older fabnet, names the management interface (the one the SSH "
              "session arrives on, or listed in fabnet_management_interfaces) and has no record of how to re-do "
              "it, so no automatic revert could put it back; it is kept: "
              "run it from the host's console")
    guarded = guard_shell.guarded('[ "$__fn_c" = 1 ]', arm, f'"{tag}:armed:$f@@"',
                                  guard_shell.ack_seconds(revert_seconds), changes.revert_unit(rid), run)
    return "\n".join([
        "exec 3<&0 </dev/null",
        "trap '' PIPE HUP",
        *changes.lock_lines(tag, holder, rid, max_seconds=max_seconds, break_lock=break_lock),
        *guard_shell.find_lines(),
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
        *_guarded_lines(management),
        f'  if [ "$__fn_c" = legacy ]; then __fn_rc={guard_shell.NOT_REDOABLE}; __fn_o={shlex.quote(legacy)}',
        f"  else {guarded}; fi",
        # Only an undo that worked is set aside: a failed one stays for the next rollback to retry.
        '  if [ "$__fn_rc" = 0 ]; then mkdir -p "$u" && mv -f "$d/undo/$f" "$u/$f"; fi',
        f"  printf '%s\\n' \"{tag}:undo:$f:$__fn_rc:$s@@\" \"$w\" \"$__fn_o\"",
        f"  printf '{{\"run\":\"%s\",\"action\":\"rollback\",\"step\":\"%s\",\"rc\":%s,\"time\":\"%s\"}}\\n' "
        f"\"$r\" \"$f\" \"$__fn_rc\" \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\" >> {changes.JOURNAL}",
        "done",
        # Nothing armed: no revert will read the list.
        f'if [ -z "$__fn_armed" ]; then rm -f {listed}; fi',
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


def rollback_host(plan: HostPlan, options: engine.Options, run_id: str | None, holder: changes.Holder,
                  break_lock: bool = False, revert_seconds: int = 60) -> HostRollback:
    """Roll one host back in one exec. An undo of the management path adds a confirming exec on a fresh
    connection (confirmation.py), as apply's change does."""
    host = plan.host
    nonce = batch.new_nonce()
    # The longest this rollback can hold the host's lock: past it, another run may take the lock over.
    max_seconds = int(2 * options.command_timeout + revert_seconds + 60)
    management = engine.host_context(plan).management_interfaces
    script = build_script(run_id, nonce, holder, max_seconds=max_seconds, break_lock=break_lock,
                          revert_seconds=revert_seconds, host=host.name, management=management)
    try:
        with open_session(host, options) as session:
            # Once a revert is armed, the exec is given half the revert time to end: an undo that cut the
            # session's path leaves it hanging, and only a fresh connection can tell.
            result = session.exec(script, shorten_after=(f"@@fabnet:{nonce}:armed:", revert_seconds / 2),
                                  forward_ssh=True, partial=True)
    except transport.HostUnreachable as exc:
        return HostRollback(host.name, "unreachable", run_id, exc.reason, rollback_id=holder.run_id)
    except transport.CommandFailed as exc:
        return HostRollback(host.name, "failed", run_id, str(exc), rollback_id=holder.run_id)
    found, undone, problem = parse(result.stdout, nonce)
    _, took_over, broke = changes.lock_markers(result.stdout, nonce)
    warnings = [*([f"--break-lock removed the lock of {broke}"] if broke else []),
                *([f"took over a stale lock: {took_over}"] if took_over else [])]
    if problem and not undone and "no run" in problem:
        return HostRollback(host.name, "nothing", run_id, problem, warnings=warnings, rollback_id=holder.run_id)
    if problem and result.ended != "exited" and not result.cut:
        problem += f" ({transport.ENDINGS.get(result.ended, result.ended)})"
    failed = [u for u in undone if u.exit_code != 0]
    status = "failed" if problem or failed else "rolled_back"
    error = problem or (f"{len(failed)} undo steps failed; they are kept: roll back again to retry them"
                        if failed else None)
    back = HostRollback(host.name, status, found or run_id, error, undone, warnings, holder.run_id)
    if re.search(rf"^@@fabnet:{nonce}:armed:\d+@@$", result.stdout, re.MULTILINE):
        _confirm(back, plan, options, result, revert_seconds)
    return back


def _confirm(back: HostRollback, plan: HostPlan, options: engine.Options, result: transport.ExecResult,
             revert_seconds: int) -> None:
    """"Commit confirmed" of an armed rollback: a fresh connection disarms the revert; where none gets
    through, the host re-does the undone link changes on its own and the result says so."""
    back.armed = True
    # A cut session ends its exec half the revert time after the `armed` marker came (shorten above).
    armed_at = time.monotonic() - (revert_seconds / 2 if result.cut else 0.0)
    answer, _, took = confirmation.confirm(plan.host, options, back.rollback_id or "", revert_seconds, armed_at)
    back.confirmation = answer
    if answer == "confirmed":
        return
    lost = ("the management path was lost" if confirmation.path_lost(result, revert_seconds)
            else "the rollback could not be confirmed")
    took_text = f"{took:g} s" if took is not None else f"its revert time ({revert_seconds} s)"
    if answer == "reverted":
        back.status = "failed"
        back.error = (f"{lost}; the host reverted the rollback on its own after {took_text}: the link changes "
                      "it had undone are made again and their undos kept, for a later rollback to retry")
    else:
        back.status = "unreachable"
        back.error = f"{lost}, and the host is still unreachable after its revert time ({revert_seconds} s)"


def rollback(plans: Sequence[HostPlan], options: engine.Options, run_id: str | None,
             break_lock: bool = False, revert_seconds: int = 60) -> list[HostRollback]:
    if run_id is not None and not RUN_ID.match(run_id):
        raise ValueError(f"{run_id!r} is not a fabnet run id (like 20261123T114934Z-554de5)")
    from provisioner.apply.converge import control_machine, new_run_id

    holder = changes.Holder(new_run_id(), control_machine(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    return runner.each(plans, lambda plan: rollback_host(plan, options, run_id, holder, break_lock, revert_seconds),
                       forks=options.forks)


def to_json(results: Sequence[HostRollback]) -> dict[str, Any]:
    return {"schema": "fabnet/rollback/v1", "hosts": [
        {"name": r.name, "status": r.status, "run_id": r.run_id, "error": r.error, "warnings": r.warnings,
         "rollback_id": r.rollback_id, "armed": r.armed, "confirmation": r.confirmation,
         "undone": [{"step": u.step, "undoes": u.what, "state": u.state, "exit_code": u.exit_code,
                     "output": u.output[-1000:]} for u in r.undone]}
        for r in results]}



