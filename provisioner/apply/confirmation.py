"""A management-path change's "commit confirmed": before such a change (apply's, changes.py) or undo
(rollback's, rollback.py) the host arms a revert of its own (guard_shell.py); after it, only a fresh
login proves the path still carries SSH and disarms the revert.
"""

from __future__ import annotations

import time

from provisioner.apply import changes
from provisioner.load.inventory import Host
from provisioner.run import transport
from provisioner.run.session import Options, open_session

REVERT_MARGIN = 3.0  # seconds past the timer's time: its 1 s accuracy, and the undo itself
HELD_BACK_SECONDS = 1.0  # a marker that came this close to the exec's end came with its last output


def confirm(host: Host, options: Options, run_id: str, revert_seconds: int,
            armed_at: float) -> tuple[str, int, float | None]:
    """"Commit confirmed": a FRESH connection disarms the revert armed before a management-path change.

    Returns ("confirmed" | "reverted" | "unreachable", execs, seconds from arming to the revert as the
    host measured them, when it reverted). `armed_at` (time.monotonic()) is when the host armed its
    timer. When no fresh connection gets through, the host reverts on its own once its timer fires, at
    `armed_at + revert_seconds`; fabnet waits for that (plus a small margin) and checks again.
    """
    unit = changes.revert_unit(run_id)
    flag = changes.reverted_flag(run_id)
    # A rollback's revert reads the undos it may re-do from a list; confirmed, nothing will read it.
    command = (f"systemctl stop {unit}.timer >/dev/null 2>&1; rm -f {changes.redo_list(run_id)}; "
               f"if [ -e {flag} ]; then echo \"reverted $(cat {flag})\"; else echo confirmed; fi")

    def attempt(connect_timeout: float) -> tuple[str, float | None] | None:
        # A session of its own: only a fresh login proves the management path still carries SSH.
        fresh = Options(connect_timeout=connect_timeout, ssh_config=options.ssh_config,
                        become_password=options.become_password)
        with open_session(host, fresh) as session:
            try:
                result = session.exec(command, timeout=30)
            except (transport.HostUnreachable, transport.CommandFailed):
                return None
        words = (result.stdout.strip().splitlines() or [""])[-1].split()
        if not words:
            return None
        took = None
        if words[0] == "reverted" and len(words) == 3 and words[1].isdigit() and words[2].isdigit():
            took = float(int(words[2]) - int(words[1]))  # the host's own clock, both ends
        return words[0], took

    answer = attempt(min(options.connect_timeout, 5.0))
    if answer is not None:
        return answer[0], 1, answer[1]
    # No way in: the host reverts on its own when its timer fires. Wait for that, then keep trying for
    # as long again (at least a minute): a link that comes back takes a moment to carry SSH again.
    time.sleep(max(0.0, armed_at + revert_seconds + REVERT_MARGIN - time.monotonic()))
    give_up = time.monotonic() + max(60.0, revert_seconds)
    while time.monotonic() < give_up:
        answer = attempt(5.0)
        if answer is not None:
            return answer[0], 1, answer[1]
        time.sleep(1)
    return "unreachable", 0, None


def path_lost(result: transport.ExecResult, revert_seconds: int) -> bool:
    """Whether a guarded change's exec lost its session's path: it hung after the `armed` marker (cut), or
    the cut held back the marker itself (it went down before sshd sent it), so the marker came only with the
    rest of the output once the host's own revert had brought the path back, the revert time or more on."""
    if result.cut:
        return True
    held = result.marked_at is not None and result.seconds - result.marked_at < HELD_BACK_SECONDS
    return held and result.seconds >= revert_seconds
