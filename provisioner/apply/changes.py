"""One exec per host for all its changes: order a host's remedy steps, join them into one POSIX shell
script with per-step markers, and read back each step's outcome. Pure: nothing here runs anything.

The script takes a per-host lock first (`lock_lines`, shared with rollback), so a second run refuses
that host and says who holds it. Under the lock, before anything changes and again right before each
step, it checks that every file and setting a step is about to change still holds what the plan read
(`Step.expect`), or what an earlier step of this run left there (guards.py): a step whose target
changed since is not run but reported as a conflict. Each step runs in its own `sh -e`,
between marker lines carrying a per-run random nonce; a failing or conflicting step makes the steps
that need it (same resource, or a resource named in `needs`) skip, never the others. A step's undo is
recorded before it runs (its outcome after), so a rollback also undoes a step a kill cut off. Each
outcome is appended to a journal on the host as a JSON line. SIGPIPE and SIGHUP are ignored, so a
control machine that dies mid-run leaves the host finishing its steps (every file write is atomic)
rather than stopping between two of them.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from provisioner.apply import guard_shell
from provisioner.apply.guard_shell import ack_seconds
from provisioner.apply.guards import Guards
from provisioner.resources import REGISTRY
from provisioner.resources.service import restart_handler, unit_name
from provisioner.resources.steps import Step

LOCK_DIR = "/run/fabnet.lock"
JOURNAL_DIR = "/var/log/fabnet"
JOURNAL = JOURNAL_DIR + "/journal.jsonl"
BACKUP_ROOT = "/var/backups/fabnet"
LOCKED_EXIT = 75
# A lock directory without a holder is a run killed between mkdir and writing the holder, unless it
# is this young: then its holder may be writing the file right now.
ORPHAN_SECONDS = 10

StepStatus = Literal["ok", "failed", "skipped", "not_run", "conflict", "unknown"]


@dataclass(frozen=True)
class Holder:
    """Who holds a host's lock: written into the lock, shown to a run that finds it taken."""

    run_id: str
    control: str  # the control machine (hostname) and user
    since: str  # ISO 8601 UTC

    def line(self) -> str:
        return f"run={self.run_id} control={self.control} since={self.since}"


def lock_lines(tag: str, holder: Holder, run_id: str, *, max_seconds: int, break_lock: bool = False) -> list[str]:
    """Shell taking the host lock: the one policy of apply and rollback.

    The lock is a directory; its `holder` file names the run (line 1), its pid, its start (epoch s),
    the longest it may run (`max_seconds`), the holder process's start (`pstart`, from /proc/PID/stat)
    and the host's boot id. A lock is stale, and taken over, only when its holder is gone: the lock is
    from another boot, its pid is gone, or that pid now has another start (another process took the
    number); or when it has no holder and is older than ORPHAN_SECONDS (a kill between mkdir and the
    write). Its age alone never makes it stale (a clock stepped forward would hand a live run's lock
    over), except for a lock without `pstart` (an older fabnet's), past `max`. A `stale`
    marker says why, and the host journal records it. Otherwise the script prints a `locked` marker
    with the holder, its age and pid, and exits LOCKED_EXIT. `break_lock` removes any lock first
    (journaled, `broken` marker). A stale lock is moved aside, then checked to be the one judged
    stale: two runs taking it over at once cannot remove each other's fresh lock.
    """
    clean = "tr -d '\"\\\\\\000-\\037'"  # what may not go raw into a JSON string
    journal = (f"printf '{{\"run\":\"%s\",\"action\":\"%s\",\"reason\":\"%s\",\"holder\":\"%s\","
               f"\"time\":\"%s\"}}\\n' {shlex.quote(run_id)} \"$1\" \"$(printf %s \"$2\" | {clean})\" "
               f"\"$(printf %s \"$3\" | {clean})\" \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\" >> {JOURNAL}")
    legacy_why = ("it is $__fn_age s old, longer than its run could last ($__fn_max s): pid $__fn_pid is "
                  "another process")
    lines = [
        f"__fn_lock={LOCK_DIR}; __fn_locked=; __fn_age=0; __fn_pid=",
        f"mkdir -p -m 0700 {JOURNAL_DIR}",
        f"__fn_lock_journal() {{ {journal}; }}",
        '__fn_field() { sed -n "s/^$1=//p" "$__fn_lock/holder" 2>/dev/null | head -n 1; }',
        # A process's start (clock ticks since boot, field 22 of /proc/PID/stat, counted after the
        # command name, which may hold spaces and parentheses): with the pid, it names one process.
        '__fn_pstart() { __fn_s=; read -r __fn_s 2>/dev/null </proc/"$1"/stat; __fn_s=${__fn_s##*\\)}; '
        'set -f; set -- $__fn_s; set +f; [ $# -ge 20 ] && shift 19 && echo "$1"; }',
        "__fn_boot=; read -r __fn_boot 2>/dev/null </proc/sys/kernel/random/boot_id",
        "__fn_stale() {",
        '  __fn_now=$(date +%s); __fn_start=$(__fn_field start); __fn_max=$(__fn_field max)',
        '  case "$__fn_start" in ""|*[!0-9]*)',
        '    __fn_start=$(stat -c %Y "$__fn_lock" 2>/dev/null || echo "$__fn_now");; esac',
        '  __fn_age=$((__fn_now - __fn_start)); __fn_pid=$(__fn_field pid)',
        '  __fn_was_boot=$(__fn_field boot); __fn_was_pstart=$(__fn_field pstart)',
        '  case "$__fn_pid" in *[!0-9]*) __fn_pid=;; esac; case "$__fn_max" in *[!0-9]*) __fn_max=;; esac',
        '  case "$__fn_was_pstart" in *[!0-9]*) __fn_was_pstart=;; esac',
        '  if [ -z "$__fn_pid" ]; then',
        f'    if [ "$__fn_age" -gt {ORPHAN_SECONDS} ]; then echo "it has no holder and is $__fn_age s old"; fi',
        '  elif [ -n "$__fn_was_boot" ] && [ -n "$__fn_boot" ] && [ "$__fn_was_boot" != "$__fn_boot" ]; then',
        '    echo "it was taken before the host last booted: its holder (pid $__fn_pid) is gone"',
        '  elif ! kill -0 "$__fn_pid" 2>/dev/null && [ ! -d "/proc/$__fn_pid" ]; then',
        '    echo "its holder (pid $__fn_pid) is gone"',
        '  elif [ -n "$__fn_was_pstart" ]; then',
        # Its age says nothing here: the clock may have jumped. Only the holder's own start does.
        '    __fn_ps=$(__fn_pstart "$__fn_pid")',
        '    if [ -n "$__fn_ps" ] && [ "$__fn_ps" != "$__fn_was_pstart" ]; then',
        '      echo "its holder (pid $__fn_pid) is gone: that pid is now another process"; fi',
        '  elif [ -n "$__fn_max" ] && [ "$__fn_age" -gt "$__fn_max" ]; then',
        # A lock of a fabnet that did not record its holder's start: its age is all there is.
        f'    echo "{legacy_why}"',
        "  fi",
        "}",
    ]
    if break_lock:
        lines += [
            'if [ -d "$__fn_lock" ]; then',
            '  __fn_was=$(head -n 1 "$__fn_lock/holder" 2>/dev/null); rm -rf "$__fn_lock"',
            f"  printf '%s\\n' '{tag}:broken@@' \"${{__fn_was:-no recorded run}}\"",
            '  __fn_lock_journal break-lock "--break-lock" "$__fn_was"',
            "fi",
        ]
    lines += [
        'if ! mkdir "$__fn_lock" 2>/dev/null; then',
        '  __fn_why=$(__fn_stale); __fn_was=$(cat "$__fn_lock/holder" 2>/dev/null)',
        '  __fn_aside="$__fn_lock.stale.$$"',
        '  if [ -n "$__fn_why" ] && mv "$__fn_lock" "$__fn_aside" 2>/dev/null; then',
        '    if [ "$(cat "$__fn_aside/holder" 2>/dev/null)" != "$__fn_was" ]; then',
        # Another run took the stale lock over in between: what was moved is its fresh lock, given back.
        '      mv "$__fn_aside" "$__fn_lock" 2>/dev/null; __fn_locked=1',
        '    elif mkdir "$__fn_lock" 2>/dev/null; then',
        '      rm -rf "$__fn_aside"; __fn_was=$(printf %s "$__fn_was" | head -n 1)',
        f"      printf '%s\\n' '{tag}:stale@@' \"$__fn_why; it was held by ${{__fn_was:-no recorded run}}\"",
        '      __fn_lock_journal take-over-lock "$__fn_why" "$__fn_was"',
        '    else rm -rf "$__fn_aside"; __fn_locked=1; fi',
        "  else __fn_locked=1; fi",
        "fi",
        'if [ -n "$__fn_locked" ]; then',
        "  __fn_stale >/dev/null",
        f"  printf '%s\\n' '{tag}:locked@@'",
        "  printf '%s age=%ss pid=%s\\n' \"$(head -n 1 \"$__fn_lock/holder\" 2>/dev/null || echo unknown)\" "
        f"\"$__fn_age\" \"${{__fn_pid:-unknown}}\"; exit {LOCKED_EXIT}",
        "fi",
        f"printf '%s\\npid=%s\\nstart=%s\\nmax=%s\\npstart=%s\\nboot=%s\\n' {shlex.quote(holder.line())} \"$$\" "
        f"\"$(date +%s)\" {int(max_seconds)} \"$(__fn_pstart $$)\" \"$__fn_boot\" > \"$__fn_lock/holder\"",
        "trap 'rm -rf \"$__fn_lock\"' EXIT",
    ]
    return lines


def order(per_resource: Sequence[tuple[str, str, Sequence[Step]]]) -> list[Step]:
    """A host's steps in run order, with handlers and dependencies filled in.

    `per_resource` is (kind, target, steps) in playbook order. Steps sort by phase (packages, modules,
    network, QoS, sysctls, files, services, handlers), keeping playbook order within a phase. A kind's
    steps need those of the kinds its ResourceType `needs` (RoCE QoS: the OFED stack) to have worked; a
    resource that is a notified unit (a service) needs the resources that notify it; each notified unit
    gets one restart handler, run once at the end if any notifier ran.
    """
    targets_of_kind: dict[str, list[str]] = {}
    notifiers: dict[str, list[str]] = {}
    for kind, target, steps in per_resource:
        targets_of_kind.setdefault(kind, []).append(target)
        for step in steps:
            for unit in step.notify:
                notifiers.setdefault(unit_name(unit), [])
                if target not in notifiers[unit_name(unit)]:
                    notifiers[unit_name(unit)].append(target)
    ordered: list[Step] = []
    for kind, target, steps in per_resource:
        rtype = REGISTRY[kind]
        extra = [needed for other in rtype.needs for needed in targets_of_kind.get(other, [])]
        if rtype.notified_unit is not None:
            extra += notifiers.get(rtype.notified_unit(target), [])
        for step in steps:
            needs = tuple(dict.fromkeys([*step.needs, *(t for t in extra if t != target)]))
            ordered.append(Step(**{**step.__dict__, "needs": needs}))
    ordered.sort(key=lambda s: s.phase)  # stable: playbook order within a phase
    ordered += [restart_handler(unit, tuple(targets)) for unit, targets in notifiers.items()]
    return ordered


def _journal_prefix(step: Step, index: int, run_id: str, host: str, before: str | None, after: str | None) -> str:
    # The step's number lets a controller whose exec ended early read back what ran (recovery.py).
    record = {"run": run_id, "step": index, "host": host, "resource": step.resource, "action": step.action,
              "command": step.shown, "before": before, "after": after, "writes": list(step.writes)}
    text = json.dumps(record, separators=(",", ":"))
    return text[:-1] + ',"time":"'  # the script appends the time and the outcome


def revert_unit(run_id: str) -> str:
    return f"fabnet-revert-{run_id}"


def reverted_flag(run_id: str) -> str:
    return f"/run/fabnet-reverted-{run_id}"


def redo_list(run_id: str) -> str:
    """Where a rollback lists, for its revert timer, the undos it ran that a re-do can take back."""
    return f"/run/fabnet-redo-{run_id}"


def _arm(steps: Sequence[Step], run_id: str, revert_seconds: int, host: str = "") -> str:
    """The command arming the revert of every runtime link change of the run (last first), unless a
    fresh connection disarms it in time (apply.confirm): "commit confirmed", as network gear does it.
    When it fires it writes the reverted flag, for confirm to report, and a `revert` journal line."""
    undo = [s.undo for s in reversed(steps) if s.netdev is not None and s.undo]
    record = {"run": run_id, "host": host, "resource": "management path", "command": "; ".join(undo)}
    revert = guard_shell.revert_command(undo, record, reverted_flag(run_id), JOURNAL_DIR, JOURNAL)
    return guard_shell.arm_command(revert_unit(run_id), revert_seconds, revert)


def build_script(steps: Sequence[Step], nonce: str, run_id: str, host: str, holder: Holder,
                 states: dict[str, tuple[str | None, str | None]] | None = None, revert_seconds: int = 60,
                 *, max_seconds: int = 3600, break_lock: bool = False) -> str:
    """The change script for one host. `states` maps a step id to (before, after) for the journal.

    A runtime change to the interface the SSH session arrives on (found on the host, or marked
    `lockout` from the inventory) first arms an automatic revert and prints an `armed` marker; where
    no revert can be armed, the step is refused. `max_seconds` is the longest the script may hold the
    lock (an older lock is taken over); `break_lock` removes another run's lock first.
    """
    states = states or {}
    tag = f"@@fabnet:{nonce}"
    arm = _arm(steps, run_id, revert_seconds, host)
    ack_in = ack_seconds(revert_seconds)
    guards = Guards(steps)
    lines = [
        "exec 3<&0 </dev/null",
        "trap '' PIPE HUP",
        "umask 022",
        f"FABNET_RUN={shlex.quote(run_id)}; FABNET_BACKUP_DIR={shlex.quote(f'{BACKUP_ROOT}/{run_id}')}",
        "export FABNET_RUN FABNET_BACKUP_DIR",
        f"mkdir -p -m 0700 {JOURNAL_DIR} {BACKUP_ROOT} \"$FABNET_BACKUP_DIR\"",
        *lock_lines(tag, holder, run_id, max_seconds=max_seconds, break_lock=break_lock),
        *guard_shell.find_lines(),
        # Compare-and-swap: what the plan read is read again under the lock, before the first change
        # (and each step's targets once more right before it runs, below).
        *(line for i in range(len(steps)) for line in guards.before_any(i)),
    ]
    index_of: dict[str, int] = {}
    by_resource: dict[str, list[int]] = {}
    handler_units = {s.resource: i for i, s in enumerate(steps) if s.resource.startswith("handler[")}
    for i, step in enumerate(steps):
        conditions = [f'[ "$__fn_ok_{j}" = 1 ]' for j in by_resource.get(step.resource, [])]
        for target in step.needs:
            if step.resource.startswith("handler["):
                continue
            conditions += [f'[ "$__fn_ok_{j}" = 1 ]' for j in by_resource.get(target, [])]
        if step.resource.startswith("handler["):
            conditions = [f'[ -n "$__fn_n_{i}" ]']
        notify_sets = [f"__fn_n_{handler_units[f'handler[{unit_name(u)}]']}=1" for u in step.notify
                       if f"handler[{unit_name(u)}]" in handler_units]
        before, after = states.get(step.id, (None, None))
        prefix = shlex.quote(_journal_prefix(step, i, run_id, host, before, after))
        journal = (f"printf '%s%s\",\"outcome\":\"%s\",\"rc\":%s%s}}\\n' {prefix} "
                   f"\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\" \"$__fn_st\" \"${{__fn_rc:-null}}\" \"$__fn_jx\" >> {JOURNAL}")
        condition = " && ".join(conditions) or "true"
        # Evaluated in a subshell, not passed to `sh -c`: a command line is readable by every user of the
        # host (ps, /proc/PID/cmdline), and a file write carries the file's content.
        run = f"__fn_o=$( (set -e; eval {shlex.quote(step.command)}) 2>&1 </dev/null); __fn_rc=$?"
        if step.netdev is not None or step.lockout:
            carries = f'[ "$__fn_mgmt" = {shlex.quote(step.netdev or "")} ]' + (" || true" if step.lockout else "")
            run = guard_shell.guarded(carries, arm, shlex.quote(f"{tag}:armed:{i}@@"), ack_in,
                                      revert_unit(run_id), run)
        # The step's undo is kept on the host for `fabnet rollback` BEFORE the step runs (a kill mid-step
        # leaves it there), its outcome after. Every undo is safe where its step did not happen: a
        # file's restores the backup taken before the write, or does nothing when there is none; a
        # setting's sets the old value. No file contents: a file's undo restores the run's backup.
        outcome = ""
        if step.undo:
            run = (f"if {guard_shell.undo_record(step, i)}; then {run}; "
                   "else __fn_rc=91; __fn_o='refused: its undo could not be recorded'; fi")
            outcome = f"printf '%s\\n' \"$__fn_st\" > \"$FABNET_BACKUP_DIR/state/{i:04d}\" 2>/dev/null; "
        lines += [
            f"__fn_ok_{i}=0; __fn_rc=; __fn_jx=; __fn_go=",
            f"if {condition}; then __fn_go=1",
            *("  " + line for line in guards.before_step(i)),
            "fi",
            f"if [ -n \"$__fn_go\" ] && [ -n \"$__fn_cf_{i}\" ]; then",
            f"  printf '%s\\n' '{tag}:conflict:{i}@@' \"$__fn_cf_{i}\" '{tag}:end:{i}@@'; __fn_st=conflict",
            f"  __fn_jx=',\"conflict\":['\"${{__fn_cj_{i}#,}}\"']'",
            "elif [ -n \"$__fn_go\" ]; then",
            f"  printf '%s\\n' '{tag}:begin:{i}@@'",
            f"  {run}",
            *("  " + line for line in guards.after_step(i)),
            "  printf '%s\\n' \"$__fn_o\"",
            f"  printf '%s\\n' \"{tag}:rc:{i}:$__fn_rc@@\"",
            "  if [ \"$__fn_rc\" = 0 ]; then __fn_ok_" + str(i) + "=1; __fn_st=ok; "
            + "".join(f"{s}; " for s in notify_sets) + "else __fn_st=failed; fi; " + outcome,
            "else",
            f"  printf '%s\\n' '{tag}:skip:{i}@@'; __fn_st=skipped",
            "fi",
            "  " + journal,
        ]
        index_of[step.id] = i
        by_resource.setdefault(step.resource, []).append(i)
    lines.append(f"printf '%s\\n' '{tag}:done@@'")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class StepResult:
    status: StepStatus
    exit_code: int | None = None
    output: str = ""


@dataclass(frozen=True)
class ScriptResult:
    steps: list[StepResult]
    locked_by: str | None = None  # the holder line (with age and pid) when another run holds the host
    finished: bool = False  # the script reached its end
    armed: bool = False  # an automatic revert was armed before a management-path change
    took_over: str | None = None  # why a stale lock was taken over, and whose it was
    broke: str | None = None  # whose lock --break-lock removed


def lock_markers(stdout: str, nonce: str) -> tuple[str | None, str | None, str | None]:
    """(locked_by, took_over, broke) from the markers `lock_lines` prints."""
    tag = re.escape(f"@@fabnet:{nonce}")
    found: list[str | None] = []
    for name in ("locked", "stale", "broken"):
        match = re.search(rf"^{tag}:{name}@@\n(.*)$", stdout, re.MULTILINE)
        found.append(None if match is None else (match[1].strip() or "unknown"))
    return found[0], found[1], found[2]


def parse_output(stdout: str, nonce: str, count: int) -> ScriptResult:
    tag = re.escape(f"@@fabnet:{nonce}")
    locked, took_over, broke = lock_markers(stdout, nonce)
    if locked:
        return ScriptResult([StepResult("not_run")] * count, locked_by=locked, broke=broke)
    results = [StepResult("not_run")] * count
    ran = re.compile(rf"^{tag}:begin:(?P<i>\d+)@@\n(?P<out>.*?)\n?{tag}:rc:(?P=i):(?P<rc>\d+)@@$",
                     re.MULTILINE | re.DOTALL)
    for match in ran.finditer(stdout):
        i, rc = int(match["i"]), int(match["rc"])
        if i < count:
            results[i] = StepResult("ok" if rc == 0 else "failed", rc, match["out"].strip("\n"))
    for match in re.finditer(rf"^{tag}:skip:(?P<i>\d+)@@$", stdout, re.MULTILINE):
        if int(match["i"]) < count:
            results[int(match["i"])] = StepResult("skipped")
    conflict = re.compile(rf"^{tag}:conflict:(?P<i>\d+)@@\n(?P<out>.*?)\n{tag}:end:(?P=i)@@$",
                          re.MULTILINE | re.DOTALL)
    for match in conflict.finditer(stdout):
        if int(match["i"]) < count:  # what changed, as "PATH changed since it was read; ..."
            results[int(match["i"])] = StepResult("conflict", None, match["out"].strip().rstrip(";"))
    finished = re.search(rf"^{tag}:done@@$", stdout, re.MULTILINE) is not None
    armed = re.search(rf"^{tag}:armed:\d+@@$", stdout, re.MULTILINE) is not None
    # A step cut off after its begin marker (the exec ended) is reported as not run: its outcome is
    # unknown here, and the re-check says what is there.
    return ScriptResult(results, finished=finished, armed=armed, took_over=took_over, broke=broke)
