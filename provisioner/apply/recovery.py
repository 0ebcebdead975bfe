"""What a change script really did when its exec ended early (a lost connection, --timeout, Ctrl-C).

The host keeps running the script after the controller is gone (it ignores SIGHUP and SIGPIPE), and
every step leaves its outcome in the host's journal, with its number. So an exec that ended early is
followed by a short read of the host's own record of the run: it waits (bounded) while the run still
holds the host's lock, then prints the run's journal lines and which steps had started (their undo is
written before they run). A step the host has no outcome for is `unknown` when it had started or the
script may still run, and `not_run` only when the script is known to have ended before it.
Pure: the script is built and its output read here; apply.py runs it.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from provisioner.apply import changes

# How long the read waits for a script that still runs (a step that still works after the connection
# dropped); past it the outcome of what is unrecorded stays unknown.
WAIT_SECONDS = 20
TRIES = 3  # logins tried for the read, with a growing pause between them
KNOWN = ("ok", "failed", "skipped", "conflict")


def script(run_id: str, nonce: str, wait: int = WAIT_SECONDS) -> str:
    tag = f"@@fabnet:{nonce}"
    holder = shlex.quote(f"run={run_id} ")
    backups = shlex.quote(f"{changes.BACKUP_ROOT}/{run_id}")
    return "\n".join([
        f"n=0; while [ $n -lt {int(wait)} ] && grep -qF {holder} {changes.LOCK_DIR}/holder 2>/dev/null; do",
        "  sleep 1; n=$((n+1))",
        "done",
        f"if grep -qF {holder} {changes.LOCK_DIR}/holder 2>/dev/null; then printf '%s\\n' '{tag}:running@@'; fi",
        f"printf '%s\\n' '{tag}:started@@'",
        f"ls -1 {backups}/undo 2>/dev/null",
        f"printf '%s\\n' '{tag}:journal@@'",
        f"grep -F {shlex.quote(chr(34) + 'run' + chr(34) + ':' + chr(34) + run_id + chr(34))} "
        f"{changes.JOURNAL} 2>/dev/null",
        f"printf '%s\\n' '{tag}:end@@'",
    ]) + "\n"


@dataclass(frozen=True)
class Recovered:
    steps: list[changes.StepResult]
    running: bool  # the script still held the lock when the read gave up waiting


def parse(stdout: str, nonce: str, count: int, known: Sequence[changes.StepResult]) -> Recovered | None:
    """The host's account merged with what the exec's own output already told (`known`); None when the
    read's output is not complete (its end marker missing)."""
    tag = re.escape(f"@@fabnet:{nonce}")
    sections = re.search(rf"^{tag}:started@@\n(?P<started>.*?)^{tag}:journal@@\n(?P<journal>.*?)^{tag}:end@@$",
                         stdout, re.MULTILINE | re.DOTALL)
    if sections is None:
        return None
    running = re.search(rf"^{tag}:running@@$", stdout, re.MULTILINE) is not None
    started = {int(name) for name in sections["started"].split() if name.isdigit()}
    recorded: dict[int, changes.StepResult] = {}
    for line in sections["journal"].splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut by a full disk or a kill: its step counts as unrecorded
        step, outcome = record.get("step"), record.get("outcome")
        if isinstance(step, int) and 0 <= step < count and outcome in KNOWN:
            rc = record.get("rc")
            recorded[step] = changes.StepResult(outcome, rc if isinstance(rc, int) else None,
                                                "(outcome read from the host's journal after the exec ended)")
    results: list[changes.StepResult] = []
    last_recorded = max(recorded, default=-1)
    for index in range(count):
        if index < len(known) and known[index].status in KNOWN:
            results.append(known[index])
        elif index in recorded:
            results.append(recorded[index])
        elif running or index in started or index < last_recorded:
            # Started without an outcome (cut mid-step), or the script may still get to it.
            results.append(changes.StepResult("unknown", None, "no outcome recorded on the host"))
        else:
            results.append(changes.StepResult("not_run"))
    return Recovered(results, running)


def unknown_after(known: Sequence[changes.StepResult]) -> list[changes.StepResult]:
    """When the host cannot be asked: what the exec's output told, and `unknown` for every other step."""
    return [r if r.status in KNOWN else changes.StepResult("unknown", None, "the host could not be asked")
            for r in known]
