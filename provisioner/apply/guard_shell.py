"""The shell of the management-path guard, shared by apply (changes.py) and rollback (rollback.py): find the
interface the SSH session arrives on, arm a systemd-run timer that puts the host's links back unless a
fresh connection disarms it (confirmation.py), wait for fabnet to acknowledge the `armed` marker, and
refuse a change that cannot be guarded. Also the record apply keeps beside each undo, so that a rollback
knows which undos touch a link and how to re-do the step if its own change has to be reverted.
Pure: builds shell text only.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence

from provisioner.resources.steps import Step, read_setting

# Exit codes of a guarded change (or undo) that was not made, as reported for the step.
NOT_ARMED, NOT_ACKED, NOT_REDOABLE = 90, 92, 93
RECORD_PREFIX = "#@ "  # line 2 of an undo file: `#@ netdev=NAME lockout=0|1`


def ack_seconds(revert_seconds: int) -> int:
    """How long an armed script waits for fabnet's acknowledgement of its marker: one round trip on a path
    that works, with room for a loaded controller, and well inside the revert time, so the timer never
    fires before the change it guards."""
    return max(2, min(10, revert_seconds // 3))


def ack_wait(seconds: int) -> str:
    """The wait itself. It reads the exec's own standard input, kept as fd 3 by the script's first line:
    every other command of the script reads /dev/null, so none can take the line or block on the input."""
    return f"timeout {seconds} sh -c 'read -r __fn_x' <&3 2>/dev/null"


def find_lines() -> list[str]:
    """Shell setting `__fn_mgmt` to the interface the SSH session arrives on (empty: not found)."""
    return [
        # sudo resets the environment: apply hands SSH_CONNECTION over as FABNET_SSH (become.forward_ssh).
        '__fn_ssh=${FABNET_SSH:-$SSH_CONNECTION}; __fn_armed=; __fn_unacked=',
        '__fn_mgmt=$(set -- $__fn_ssh; [ -n "$1" ] && ip -o route get "$1" 2>/dev/null '
        r"| sed -n 's/.* dev \([^ ]*\).*/\1/p' | head -n 1)",
    ]


def revert_command(body: Sequence[str], record: dict[str, str], flag: str, journal_dir: str, journal: str) -> str:
    """What the timer runs: `body`, then "ARMED FIRED" (epoch seconds) into `flag` for the confirmation to
    report, and a `revert` line (`record` plus when it was armed and how long it took) into the journal.
    Its first argument is the time it was armed."""
    text = json.dumps({**record, "action": "revert", "outcome": "ran"}, separators=(",", ":"))[:-1]
    return "; ".join([
        '__fn_at=$1', *body, '__fn_now=$(date +%s)',
        f"printf '%s %s\\n' \"$__fn_at\" \"$__fn_now\" > {shlex.quote(flag)}",
        f"mkdir -p -m 0700 {shlex.quote(journal_dir)}",
        f"printf '%s,\"armed\":%s,\"after_s\":%s,\"time\":\"%s\"}}\\n' {shlex.quote(text)} \"$__fn_at\" "
        f"\"$((__fn_now - __fn_at))\" \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\" >> {shlex.quote(journal)}",
    ])


def arm_command(unit: str, revert_seconds: int, revert: str, args: str = "") -> str:
    """A command arming `revert` (its arguments: the time now, then `args`, shell words) to run in
    `revert_seconds` unless the unit's timer is stopped first. It fires within a second of its time
    (systemd's default accuracy would allow a minute). Fails where there is no systemd-run."""
    return ("command -v systemd-run >/dev/null 2>&1 && "
            f"systemd-run --quiet --unit={shlex.quote(unit)} --on-active={revert_seconds}s "
            f"--timer-property=AccuracySec=1s /bin/sh -c {shlex.quote(revert)} sh \"$(date +%s)\"{args}")


def guarded(carries: str, arm: str, marker: str, ack_in: int, unit: str, run: str) -> str:
    """Shell running `run` (which sets `__fn_o` and `__fn_rc`) behind the guard when `carries` (a shell
    condition) says it changes the management path: the first such change arms the revert (`arm`) and
    prints `marker` (a shell word), then waits for fabnet to acknowledge it (transport.run): a change that
    cuts the path at once could otherwise hold the marker back, and fabnet would not know to stop
    waiting on this session. Unacknowledged, the timer is stopped and this and every later guarded
    change is refused; where nothing can be armed, the change is refused."""
    return (f"__fn_g=; if {{ {carries}; }}; then if [ -n \"$__fn_unacked\" ]; then __fn_g=unacked; "
            f"elif [ -z \"$__fn_armed\" ]; then if {arm}; then __fn_armed=1; "
            f"printf '%s\\n' {marker}; if ! {ack_wait(ack_in)}; then __fn_g=unacked; __fn_unacked=1; "
            f"systemctl stop {shlex.quote(unit + '.timer')} >/dev/null 2>&1; fi; "
            "else __fn_g=failed; fi; fi; fi; "
            f'if [ "$__fn_g" = failed ]; then __fn_rc={NOT_ARMED}; __fn_o="refused: this changes the interface the '
            'SSH session arrives on and no automatic revert could be armed (systemd-run)"; '
            f'elif [ "$__fn_g" = unacked ]; then __fn_rc={NOT_ACKED}; __fn_o="refused: this changes the interface '
            f'the SSH session arrives on, and fabnet did not acknowledge the armed revert within {ack_in} s"; '
            f"else {run}; fi")


def redo(step: Step) -> str:
    """The command that makes `step`'s runtime change again, after a rollback undid it: the step's own
    command, run only while every setting it is guarded on reads what the plan read (what the undo put
    back); a value changed since is left as it is, as an undo leaves one."""
    settings = [e for e in step.expect if e.read is not None]
    if not settings:
        return step.command
    holds = " && ".join(f"[ \"{read_setting(e.read or '')}\" = {shlex.quote(e.value)} ]" for e in settings)
    changed = shlex.quote(f"{', '.join(e.path for e in settings)} changed since the rollback: not re-done")
    return f"if {holds}; then {step.command}; else printf '%s\\n' {changed} >&2; false; fi"


def undo_record(step: Step, index: int) -> str:
    """Shell (a condition: it fails when nothing could be written) keeping `step`'s undo for rollback in
    `$FABNET_BACKUP_DIR/undo/NNNN`: a header naming the step (line 1), the record line (line 2: the
    network device a runtime link change touches, empty for any other step, and whether the inventory
    names it a management interface), then the undo. A link step's re-do goes to `redo/NNNN`."""
    name = f"{index:04d}"
    header = "# " + " ".join(f"{step.id} {step.shown}".split())
    netdev = step.netdev if step.netdev is not None and step.undo else ""
    record = f"{RECORD_PREFIX}netdev={netdev} lockout={int(step.lockout)}"
    dirs = '"$FABNET_BACKUP_DIR/undo" "$FABNET_BACKUP_DIR/state"' + (' "$FABNET_BACKUP_DIR/redo"' if netdev else "")
    keep = (f"mkdir -p {dirs} && printf '%s\\n' {shlex.quote(header)} {shlex.quote(record)} "
            f"{shlex.quote(step.undo or '')} > \"$FABNET_BACKUP_DIR/undo/{name}\"")
    if netdev:
        keep += f" && printf '%s\\n' {shlex.quote(redo(step))} > \"$FABNET_BACKUP_DIR/redo/{name}\""
    return keep
