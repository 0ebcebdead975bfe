"""One exec per host for all its changes: order a host's remedy steps, join them into one POSIX shell
script with per-step markers, and read back each step's outcome. Pure: nothing here runs anything.

The script takes a per-host lock first (a directory under /run naming the holder: run id, control
machine, since when, pid), so a second run refuses that host and says who holds it; a lock whose
holder died is taken over. Each step runs in its own `sh -e`, between marker lines carrying a per-run
random nonce; a failing step makes the steps that need it (same resource, or a resource named in
`needs`) skip, never the others. Each outcome is appended to a journal on the host as a JSON line.
SIGPIPE and SIGHUP are ignored, so a control machine that dies mid-run leaves the host finishing its
steps (every file write is atomic) rather than stopping between two of them.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from provisioner.resources import REGISTRY
from provisioner.resources.service import restart_handler, unit_name
from provisioner.resources.steps import Step

LOCK_DIR = "/run/fabnet.lock"
JOURNAL_DIR = "/var/log/fabnet"
JOURNAL = JOURNAL_DIR + "/journal.jsonl"
BACKUP_ROOT = "/var/backups/fabnet"
LOCKED_EXIT = 75

StepStatus = Literal["ok", "failed", "skipped", "not_run"]


@dataclass(frozen=True)
class Holder:
    """Who holds a host's lock: written into the lock, shown to a run that finds it taken."""

    run_id: str
    control: str  # the control machine (hostname) and user
    since: str  # ISO 8601 UTC

    def line(self) -> str:
        return f"run={self.run_id} control={self.control} since={self.since}"


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


def _journal_prefix(step: Step, run_id: str, host: str, before: str | None, after: str | None) -> str:
    record = {"run": run_id, "host": host, "resource": step.resource, "action": step.action,
              "command": step.shown, "before": before, "after": after, "writes": list(step.writes)}
    text = json.dumps(record, separators=(",", ":"))
    return text[:-1] + ',"time":"'  # the script appends the time and the outcome


def revert_unit(run_id: str) -> str:
    return f"fabnet-revert-{run_id}"


def reverted_flag(run_id: str) -> str:
    return f"/run/fabnet-reverted-{run_id}"


def _guard_lines(steps: Sequence[Step], run_id: str, revert_seconds: int) -> tuple[list[str], str]:
    """Shell finding the interface the SSH session arrives on, and the command arming the revert.

    The revert undoes every runtime link change of the run (last first) unless a fresh connection
    disarms it in time (apply.confirm): "commit confirmed", as network gear does it.
    """
    undo = [s.undo for s in reversed(steps) if s.netdev is not None and s.undo]
    revert = "; ".join([*undo, f": > {reverted_flag(run_id)}"])
    find = [
        # sudo resets the environment: apply hands SSH_CONNECTION over as FABNET_SSH (become.forward_ssh).
        '__fn_ssh=${FABNET_SSH:-$SSH_CONNECTION}; __fn_armed=',
        '__fn_mgmt=$(set -- $__fn_ssh; [ -n "$1" ] && ip -o route get "$1" 2>/dev/null '
        r"| sed -n 's/.* dev \([^ ]*\).*/\1/p' | head -n 1)",
    ]
    arm = ("command -v systemd-run >/dev/null 2>&1 && "
           f"systemd-run --quiet --unit={shlex.quote(revert_unit(run_id))} --on-active={revert_seconds}s "
           f"/bin/sh -c {shlex.quote(revert)}")
    return find, arm


def build_script(steps: Sequence[Step], nonce: str, run_id: str, host: str, holder: Holder,
                 states: dict[str, tuple[str | None, str | None]] | None = None, revert_seconds: int = 60) -> str:
    """The change script for one host. `states` maps a step id to (before, after) for the journal.

    A runtime change to the interface the SSH session arrives on (found on the host, or marked
    `lockout` from the inventory) first arms an automatic revert and prints an `armed` marker; where
    no revert can be armed, the step is refused.
    """
    states = states or {}
    tag = f"@@fabnet:{nonce}"
    guard_find, arm = _guard_lines(steps, run_id, revert_seconds)
    lines = [
        "trap '' PIPE HUP",
        "umask 022",
        f"FABNET_RUN={shlex.quote(run_id)}; FABNET_BACKUP_DIR={shlex.quote(f'{BACKUP_ROOT}/{run_id}')}",
        "export FABNET_RUN FABNET_BACKUP_DIR",
        f"mkdir -p -m 0700 {JOURNAL_DIR} {BACKUP_ROOT} \"$FABNET_BACKUP_DIR\"",
        f"__fn_lock={LOCK_DIR}; __fn_locked=",
        'if ! mkdir "$__fn_lock" 2>/dev/null; then',
        '  __fn_pid=$(sed -n "s/^pid=//p" "$__fn_lock/holder" 2>/dev/null)',
        # A holder that no longer runs (killed, host rebooted) leaves a stale lock: take it over.
        '  if [ -n "$__fn_pid" ] && ! kill -0 "$__fn_pid" 2>/dev/null; then',
        '    rm -rf "$__fn_lock"; mkdir "$__fn_lock" 2>/dev/null || __fn_locked=1',
        "  else __fn_locked=1; fi",
        "fi",
        'if [ -n "$__fn_locked" ]; then',
        f"  printf '%s\\n' '{tag}:locked@@'; head -n 1 \"$__fn_lock/holder\" 2>/dev/null; exit {LOCKED_EXIT}",
        "fi",
        f"printf '%s\\npid=%s\\n' {shlex.quote(holder.line())} \"$$\" > \"$__fn_lock/holder\"",
        "trap 'rm -rf \"$__fn_lock\"' EXIT",
        *guard_find,
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
        prefix = shlex.quote(_journal_prefix(step, run_id, host, before, after))
        journal = (f"printf '%s%s\",\"outcome\":\"%s\",\"rc\":%s}}\\n' {prefix} "
                   f"\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\" \"$__fn_st\" \"${{__fn_rc:-null}}\" >> {JOURNAL}")
        condition = " && ".join(conditions) or "true"
        run = f"__fn_o=$(sh -ec {shlex.quote(step.command)} 2>&1 </dev/null); __fn_rc=$?"
        if step.netdev is not None or step.lockout:
            carries = f'[ "$__fn_mgmt" = {shlex.quote(step.netdev or "")} ]' + (" || true" if step.lockout else "")
            run = (f"__fn_g=; if {{ {carries}; }} && [ -z \"$__fn_armed\" ]; then "
                   f"if {arm}; then __fn_armed=1; printf '%s\\n' '{tag}:armed:{i}@@'; else __fn_g=failed; fi; fi; "
                   'if [ "$__fn_g" = failed ]; then __fn_rc=90; __fn_o="refused: this changes the interface the '
                   'SSH session arrives on and no automatic revert could be armed (systemd-run)"; '
                   f"else {run}; fi")
        # What undoes a step that ran, kept on the host for `fabnet rollback` (no file contents: a
        # file's undo restores it from the run's backup).
        keep_undo = (f"mkdir -p \"$FABNET_BACKUP_DIR/undo\" && printf '%s\\n' {shlex.quote(step.undo)} "
                     f"> \"$FABNET_BACKUP_DIR/undo/{i:04d}\"; ") if step.undo else ""
        lines += [
            f"__fn_ok_{i}=0; __fn_rc=",
            f"if {condition}; then",
            f"  printf '%s\\n' '{tag}:begin:{i}@@'",
            f"  {run}",
            "  printf '%s\\n' \"$__fn_o\"",
            f"  printf '%s\\n' \"{tag}:rc:{i}:$__fn_rc@@\"",
            "  if [ \"$__fn_rc\" = 0 ]; then __fn_ok_" + str(i) + "=1; __fn_st=ok; " + keep_undo
            + "".join(f"{s}; " for s in notify_sets) + "else __fn_st=failed; fi",
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
    locked_by: str | None = None  # the holder line when another run holds the host
    finished: bool = False  # the script reached its end
    armed: bool = False  # an automatic revert was armed before a management-path change


def parse_output(stdout: str, nonce: str, count: int) -> ScriptResult:
    tag = re.escape(f"@@fabnet:{nonce}")
    locked = re.search(rf"^{tag}:locked@@\n(?P<holder>.*)$", stdout, re.MULTILINE)
    if locked:
        return ScriptResult([StepResult("not_run")] * count, locked_by=locked["holder"].strip() or "unknown")
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
    finished = re.search(rf"^{tag}:done@@$", stdout, re.MULTILINE) is not None
    armed = re.search(rf"^{tag}:armed:\d+@@$", stdout, re.MULTILINE) is not None
    # A step cut off after its begin marker (the exec ended) is reported as not run: its outcome is
    # unknown here, and the re-check says what is there.
    return ScriptResult(results, finished=finished, armed=armed)
