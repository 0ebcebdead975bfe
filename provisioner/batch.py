"""One SSH exec per host: join many read-only probes into one POSIX shell script, and split its output.

The script travels on the exec's standard input (`sh -s`), so the per-run nonce that marks output
boundaries never appears in any process's command line. Each probe runs in a session of its own
(`setsid`) under `timeout`, with its stdout and stderr written to files in a private temporary
directory, and only then copied out between marker lines, capped. So a probe cannot write to the
channel at all (its markers cannot be forged), cannot stall the others by holding a pipe open, and
cannot make the host send more than the caps. At its timeout the whole session is killed; processes
that left the session (daemons) are found by a per-run marker in their environment and killed too,
after a timed-out probe and when the script ends, however it ends.
"""

from __future__ import annotations

import re
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from provisioner.resources.base import NOT_RUN_EXIT, Probe, ProbeResult

TIMEOUT_EXIT = 124
STDOUT_CAP = 8 * 1024 * 1024  # per probe: base64 of a 6 MiB file still fits
STDERR_CAP = 16 * 1024  # per probe: only its first lines are ever shown
KILL_GRACE = 2  # seconds between SIGTERM and SIGKILL at a probe's timeout
REPORT_MARGIN = KILL_GRACE + 2  # seconds past the budget the control side waits for the host's report
ENV_MARKER = "FABNET_PROBE"


def new_nonce() -> str:
    return secrets.token_hex(8)


@dataclass(frozen=True)
class Caps:
    stdout: int = STDOUT_CAP
    stderr: int = STDERR_CAP


def _prologue(nonce: str, run_id: str, caps: Caps) -> list[str]:
    # ulimit -f counts 512-byte blocks (dash, POSIX); a writer past it gets SIGXFSZ, so a flood costs
    # the node a few MiB of temporary file, never the disk, and never the network.
    blocks = max(caps.stdout, caps.stderr) // 512 + 2
    tag = f"@@fabnet:{nonce}"
    return [
        # A node whose /tmp is full or read-only still has /dev/shm or /run.
        "__fn_d=$(mktemp -d 2>/dev/null || mktemp -d -p /dev/shm 2>/dev/null || mktemp -d -p /run 2>/dev/null) || "
        '{ echo "fabnet: cannot create a temporary directory (mktemp -d)" >&2; exit 125; }',
        # Kill every process carrying this run's marker in its environment; repeat, because a dying
        # daemon may have forked once more between the scan and the kill.
        "__fn_sweep() {",
        "  __fn_n=0",
        "  while [ $__fn_n -lt 5 ]; do",
        # grep exits 2 when a process vanished between the glob and the read: judge by what it printed.
        f'    __fn_l=$(grep -lsF -- "{ENV_MARKER}=$1" /proc/[0-9]*/environ 2>/dev/null)',
        '    [ -n "$__fn_l" ] || break',
        '    for __fn_f in $__fn_l; do __fn_f=${__fn_f#/proc/}; kill -KILL "${__fn_f%/environ}" 2>/dev/null; done',
        "    __fn_n=$((__fn_n + 1))",
        "  done",
        "}",
        f'__fn_clean() {{ kill "$__fn_w" 2>/dev/null; __fn_sweep "{run_id}-"; rm -rf "$__fn_d"; }}',
        "trap __fn_clean EXIT",
        "trap '__fn_clean; trap - EXIT; exit 129' HUP",
        "trap '__fn_clean; trap - EXIT; exit 130' INT",
        "trap '__fn_clean; trap - EXIT; exit 141' PIPE",
        "trap '__fn_clean; trap - EXIT; exit 143' TERM",
        # Without a terminal nobody signals us when the connection goes (Ctrl-C, --timeout, a network
        # fault): a watchdog writes a newline to stderr every second, and when that fails it stops the
        # script, whose TERM trap kills the running probe at once instead of at its timeout.
        "( trap '' PIPE; while sleep 1 2>/dev/null; do printf '\\n' >&2 2>/dev/null || break; done; "
        "kill -TERM $$ 2>/dev/null ) </dev/null >/dev/null &",
        "__fn_w=$!",
        # Without coreutils' timeout or util-linux's setsid the probes still run, only less contained.
        'if command -v timeout >/dev/null 2>&1; then __fn_t=timeout; else __fn_t=""; fi',
        'if command -v setsid >/dev/null 2>&1; then __fn_s=setsid; else __fn_s=""; fi',
        '__fn_now() { __fn_up=0; read -r __fn_up __fn_x </proc/uptime 2>/dev/null; __fn_up=${__fn_up%.*}; }',
        "__fn_now; __fn_end=$((__fn_up + $__fn_budget))",
        # Blocks collect in a file and go out when the clock has ticked since the last send, and at the
        # end: a fast host sends everything in one write (controller CPU goes per SSH message, not per
        # byte), a slow one still sends what finished, which a lost connection then does not lose.
        "__fn_sent=$__fn_up",
        "__fn_flush() {",
        '  __fn_now; if [ "$__fn_up" -ne "$__fn_sent" ] || [ "$1" = all ]; then',
        '    cat "$__fn_d/b"; : >"$__fn_d/b"; __fn_sent=$__fn_up',
        "  fi",
        "}",
        ': >"$__fn_d/b"',
        # $1 key, $2 timeout (seconds, may be fractional), $3 whole seconds, $4 the command.
        "__fn_probe() {",
        "  __fn_now; __fn_t0=$__fn_up; __fn_lim=$2; __fn_left=$((__fn_end - __fn_up))",
        # No probe outlives the host's whole budget; once it is spent the rest are reported, not run.
        f"  if [ $__fn_left -le 0 ]; then printf '%s\\n\\n%s:124:s@@\\n\\n%s\\n' '{tag}:begin:'\"$1\"'@@' "
        f"'{tag}:rc:'\"$1\" '{tag}:end:'\"$1\"'@@' >>\"$__fn_d/b\"; return; fi",
        '  if [ $__fn_left -lt "$3" ]; then __fn_lim=$__fn_left; fi',
        # The background subshell is never a process-group leader, so setsid makes it one without
        # forking: its pid is the session's id and the group's id.
        f'  ( ulimit -f {blocks} 2>/dev/null; {ENV_MARKER}="{run_id}-$1"; export {ENV_MARKER}; '
        f'exec $__fn_s ${{__fn_t:+$__fn_t -k {KILL_GRACE} $__fn_lim}} sh -c "$4" ) '
        '</dev/null >"$__fn_d/o" 2>"$__fn_d/e" &',
        "  __fn_p=$!",
        '  wait "$__fn_p"; __fn_rc=$?',
        '  [ -n "$__fn_s" ] && kill -KILL -- "-$__fn_p" 2>/dev/null',
        '  __fn_fl=""',
        "  case $__fn_rc in 124|137) __fn_now; if [ $((__fn_up - __fn_t0)) -ge \"${__fn_lim%.*}\" ]; then __fn_fl=t; "
        f'__fn_sweep "{run_id}-$1"; fi;; esac',
        # One byte past each cap goes back, and the control side judges the overflow (split_output): no
        # wc per probe (a process start costs the node about a millisecond, and a full audit runs tens
        # of probes). An empty stderr, the usual case, costs no process at all.
        "  {",
        f"    printf '%s\\n' '{tag}:begin:'\"$1\"'@@'",
        f'    head -c {caps.stdout + 1} "$__fn_d/o"',
        f"    printf '\\n%s:%s:%s@@\\n' '{tag}:rc:'\"$1\" \"$__fn_rc\" \"$__fn_fl\"",
        f'    if [ -s "$__fn_d/e" ]; then head -c {caps.stderr + 1} "$__fn_d/e"; fi',
        f"    printf '\\n%s\\n' '{tag}:end:'\"$1\"'@@'",
        '  } >>"$__fn_d/b"',
        # No rm: the next probe's redirections truncate both files, and the EXIT trap removes the folder.
        "  __fn_flush",
        "}",
    ]


def build_script(probes: Sequence[Probe], nonce: str, *, run_id: str | None = None, caps: Caps = Caps(),
                 budget: float = 3600) -> str:
    """The script for one host, to be fed to `sh -s`. Probes with the same key are run once.

    `budget` (seconds) bounds the whole script on the host's own clock: each probe's timeout is cut
    to what is left, and probes that find nothing left are reported as skipped (flag `s`).

    The whole script is one brace group, so the shell reads all of it before running any of it: a
    connection lost while sending runs nothing.
    """
    run_id = run_id or new_nonce()
    lines = ["{", f"__fn_budget={max(1, int(budget))}", *_prologue(nonce, run_id, caps)]
    seen: set[str] = set()
    for probe in probes:
        if probe.key in seen:
            continue
        seen.add(probe.key)
        whole = int(probe.timeout)  # whole seconds, for the shell's integer clock
        lines.append(f"__fn_probe {probe.key} {probe.timeout:g} {whole} {shlex.quote(probe.command)}")
    lines += ["__fn_flush all", "exit 0", "}"]
    return "\n".join(lines) + "\n"


def split_output(stdout: str, nonce: str, caps: Caps = Caps()) -> dict[str, ProbeResult]:
    """Probe key -> result, for every probe whose block is complete in `stdout`."""
    tag = re.escape(f"@@fabnet:{nonce}")
    pattern = re.compile(
        rf"{tag}:begin:(?P<key>[0-9a-f]+)@@\n(?P<out>.*?)\n{tag}:rc:(?P=key):(?P<rc>\d+):(?P<flags>[a-z]*)@@\n"
        rf"(?P<err>.*?)\n{tag}:end:(?P=key)@@",
        re.DOTALL,
    )
    results = {}
    for match in pattern.finditer(stdout):
        flags, code, out, err = match["flags"], int(match["rc"]), match["out"], match["err"]
        if _over(out, caps.stdout):
            flags, out = flags + "o", _cut(out, caps.stdout)
        if _over(err, caps.stderr):
            flags, err = flags + "e", _cut(err, caps.stderr)
        if "t" in flags:
            code = TIMEOUT_EXIT
        if "s" in flags:
            code, err = NOT_RUN_EXIT, "not run: the host's --timeout was spent by the probes before it"
        notes = []
        if "o" in flags:
            notes.append(f"fabnet: its output passed {_size(caps.stdout)} and was cut")
            code = code or 1
        if "e" in flags:
            notes.append(f"fabnet: its stderr passed {_size(caps.stderr)} and was cut")
        if notes:
            err = "\n".join([*notes, err])
        results[match["key"]] = ProbeResult(stdout=out, stderr=err, exit_code=code)
    return results


def _over(text: str, cap: int) -> bool:
    """Whether the node sent more than `cap` bytes (it sends at most one more).

    `text` was decoded with errors="replace": a character stands for at least one byte of what was sent
    and its UTF-8 for at least as many bytes as it stood for, so a count is exact for valid UTF-8 and can
    only err towards "over" for invalid bytes within a few bytes of the cap.
    """
    if len(text) > cap:
        return True
    return len(text) * 4 > cap and len(text.encode("utf-8")) > cap


def _cut(text: str, cap: int) -> str:
    return text.encode("utf-8")[:cap].decode("utf-8", errors="replace")


def _size(count: int) -> str:
    return f"{count // (1024 * 1024)} MiB" if count >= 1024 * 1024 else f"{count // 1024} KiB"
