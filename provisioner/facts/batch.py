"""One SSH exec per host: join many read-only probes into one POSIX shell script, and split its output.

The script travels on the exec's standard input (`sh -s`), so the per-run nonce that marks output
boundaries never appears in any process's command line. Each probe runs with its stdout and stderr
written to files of its own in a private temporary directory, under a file-size limit, and only then
goes out between marker lines. So a probe cannot write to the channel at all (its markers cannot be
forged), cannot stall the others by holding a pipe open, and cannot make the host send much more than
the caps. Every process a probe starts carries a per-run marker in its environment. A watchdog, woken
by the controller's ticks on the exec's standard input, stops a probe at its timeout by that marker and
by the pid of the probe's own shell (TERM, then KILL); when the script ends, however it ends, whatever
is left with the marker (daemons too) is killed. (A copy of a probe's shell forked but not yet started as
a program has no marker yet: one caught in that instant by the script's end is missed; fabnet's own probes
start nothing in the background.) The end of that input tells the watchdog the connection is gone.

A probe's whole block is one file: its begin line, then what the probe writes (appended), then its exit
status, the head of its stderr (kept apart while it runs) and its end line, appended once it has ended.
Every file created, sent and removed costs the node too: three more per probe were a tenth of a `site`
exec. (A probe that truncated its own stdout through /proc would lose its begin line, and its result:
reported as missing, never as another probe's.)

A process start costs a node about a millisecond, and a full audit runs tens of probes, so the script
starts as few as it can. Per probe: a fork of the script's shell, which runs the command's shell code
itself (a plain command replaces it), and the programs that code runs. Per run: the temporary
directory, the watchdog (a fork, no program), one copy-out per second and the removal of the directory;
a timer only for a run that outlasts its first tick; the sweep through every process's environment only
when a process outlived its probe.
The script needs the ticks: run it with transport.run(..., ticks=TICK).
"""

from __future__ import annotations

import re
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from provisioner.facts.fingerprint import CLOCK, SAME, Shortcut
from provisioner.resources.base import NOT_RUN_EXIT, Probe, ProbeResult
from provisioner.run.channels import KEPT_FOLDER, make_folder

TIMEOUT_EXIT = 124
STDOUT_CAP = 8 * 1024 * 1024  # per probe: base64 of a 6 MiB file still fits
STDERR_CAP = 16 * 1024  # per probe: only its first lines are ever shown
KILL_GRACE = 2  # seconds between SIGTERM and SIGKILL at a probe's timeout
TICK = 1  # seconds between the watchdog's checks: timeouts are kept to within about this
REPORT_MARGIN = KILL_GRACE + 2 * TICK + 1  # seconds past the budget the control side waits for the report
ENV_MARKER = "FABNET_PROBE"
_BEGIN_LINE_MAX = 128  # bytes of "@@fabnet:NONCE:begin:KEY@@" and its line break, with room to spare


def new_nonce() -> str:
    return secrets.token_hex(8)


@dataclass(frozen=True)
class Caps:
    stdout: int = STDOUT_CAP
    stderr: int = STDERR_CAP


def _prologue(nonce: str, run_id: str, caps: Caps) -> list[str]:
    # ulimit -f counts 512-byte blocks (dash, POSIX); a writer past it gets SIGXFSZ. The limit lets at
    # least one byte past the larger cap through (at most a block more), so the control side can tell
    # "exactly the cap" from "over", and a flood costs the node a few MiB of temporary file, never the
    # disk, and never the network. A probe's stdout file starts with its begin line, which counts too.
    blocks = (max(caps.stdout, caps.stderr) + _BEGIN_LINE_MAX) // 512 + 1
    tag = f"@@fabnet:{nonce}"
    return [
        # The script's own process: $$ names the shell that read it, which is another process when a kept
        # shell runs it in a subshell (channels.KeptShell). The builtin `cd -P` resolves /proc/self for the
        # shell itself: a few system calls, where `read` of /proc/self/stat takes one per byte (hundreds).
        "__fn_pwd=$PWD; __fn_me=; ! cd -P /proc/self 2>/dev/null || __fn_me=${PWD##*/}; "
        'case $__fn_me in ""|*[!0-9]*) __fn_me=$$;; esac; cd "$__fn_pwd" 2>/dev/null',
        # A kept shell keeps one folder for all its runs (its KEPT_FOLDER): each run then costs no mktemp and
        # no rm, and leaves the folder as it found it (__fn_clean). Otherwise the run makes its own.
        f'if [ -n "${{{KEPT_FOLDER}-}}" ] && [ -d "${KEPT_FOLDER}" ]; then __fn_d=${KEPT_FOLDER}; else {KEPT_FOLDER}=; '
        f'{make_folder("__fn_d")} || '
        '{ echo "fabnet: cannot create a temporary directory (mktemp -d)" >&2; exit 125; }; fi',
        # Probes run where the login put us; the script itself works in its folder, so the list of
        # files to send holds short names whatever TMPDIR is.
        f'cd "$__fn_d" || exit 125; : >{CLOCK}',
        # Send a signal to every process carrying this marker in its environment; repeat for KILL,
        # because a dying daemon may have forked once more between the scan and the kill.
        "__fn_sweep() {",
        "  __fn_n=0",
        "  while [ $__fn_n -lt 5 ]; do",
        # grep exits 2 when a process vanished between the glob and the read: judge by what it printed.
        f'    __fn_l=$(grep -lsF -- "{ENV_MARKER}=$1" /proc/[0-9]*/environ 2>/dev/null)',
        '    [ -n "$__fn_l" ] || break',
        '    for __fn_f in $__fn_l; do __fn_f=${__fn_f#/proc/}; kill -"$2" "${__fn_f%/environ}" 2>/dev/null; done',
        '    [ "$2" = KILL ] || break',
        "    __fn_n=$((__fn_n + 1))",
        "  done",
        "}",
        # The processes alive before any probe: if the same ones are alive at the end, nothing a probe
        # started survived it, and the sweep (a grep through every process's environment, the dearest
        # step of a short run) is skipped. Only a process id reused within the run could fool it.
        "__fn_pids() { __fn_ps=$*; }",
        # KILL, not TERM: a TERM that reaches the watchdog before it has dropped the traps it inherited
        # is caught and then forgotten. Reaped before the list is taken, so it is not in it.
        "__fn_clean() {",
        '  [ -z "$__fn_w" ] || { kill -KILL "$__fn_w" 2>/dev/null; wait "$__fn_w" 2>/dev/null; }',
        # The running probe's own shell carries no marker (it was forked, not started): by its pid.
        '  [ -z "$__fn_p" ] || { kill -KILL "$__fn_p" 2>/dev/null; wait "$__fn_p" 2>/dev/null; }',
        # The timer (a run that saw a tick has one) wrote its shell's and its sleep's pids to file tm: they
        # are killed by pid and left out of the comparison, so a run whose only survivor is its own timer
        # (most runs past a second: every watch cycle on a busy node) costs no sweep. A timer pid not yet
        # written leaves its process in the list, and the sweep finds it by its marker as before.
        '  __fn_t=; if [ -s tm ]; then while read -r __fn_x; do case $__fn_x in ""|*[!0-9]*) ;; '
        '*) __fn_t="$__fn_t $__fn_x";; esac; done <tm; [ -z "$__fn_t" ] || kill -KILL $__fn_t 2>/dev/null; fi',
        "  __fn_pids /proc/[0-9]*",
        '  for __fn_x in $__fn_t; do case " $__fn_ps " in *" /proc/$__fn_x "*) __fn_a=" $__fn_ps "; '
        '__fn_pids ${__fn_a%%" /proc/$__fn_x "*} ${__fn_a#*" /proc/$__fn_x "};; esac; done',
        f'  [ "$__fn_ps" = "$__fn_ps0" ] || __fn_sweep "{run_id}-" KILL',
        # A kept folder is emptied without a process: every file truncated (a probe's output never waits there
        # for the next run), and only timeout flags (t.N, which count by being there) removed.
        f'  cd /; if [ -n "${KEPT_FOLDER}" ]; then __fn_y=; for __fn_x in "$__fn_d"/*; do case ${{__fn_x##*/}} in '
        't.*) __fn_y=1;; *) [ ! -f "$__fn_x" ] || : >"$__fn_x";; esac; done; '
        '[ -z "$__fn_y" ] || rm -f -- "$__fn_d"/t.*; else rm -rf "$__fn_d"; fi',
        "}",
        "__fn_w=; __fn_p=; __fn_ps0=",
        "trap __fn_clean EXIT",
        "trap '__fn_clean; trap - EXIT; exit 129' HUP",
        "trap '__fn_clean; trap - EXIT; exit 130' INT",
        "trap '__fn_clean; trap - EXIT; exit 141' PIPE",
        "trap '__fn_clean; trap - EXIT; exit 143' TERM",
        # Signal $1 to the probe shell $2 (a pid from file w) if it is still this script's child; with
        # $3 = gone, the script has died and the shell is an orphan: then it must at least be a shell
        # like the watchdog itself (same program name), so a pid reused since is never hit.
        "__fn_stop() {",
        '  __fn_s=; read -r __fn_s </proc/"$2"/stat 2>/dev/null || return 0',
        '  if [ "$3" = gone ]; then',
        '    __fn_me=; read -r __fn_me </proc/self/stat 2>/dev/null',
        '    __fn_me=${__fn_me#*" ("}; __fn_c=${__fn_s#*" ("}',
        '    [ "${__fn_c%%") "*}" = "${__fn_me%%") "*}" ] && kill -"$1" "$2" 2>/dev/null; return 0',
        "  fi",
        '  __fn_s=${__fn_s##*") "}; set -- "$1" "$2" $__fn_s',
        '  [ "$4" = "$__fn_me" ] && kill -"$1" "$2" 2>/dev/null; return 0',
        "}",
        # The clock, in hundredths of a second since boot (no leading zero: the shell reads that as octal).
        "__fn_now() {",
        "  __fn_up=0.00; read -r __fn_up __fn_x </proc/uptime 2>/dev/null",
        "  __fn_x=${__fn_up#*.}; __fn_up=$((${__fn_up%.*} * 100 + 1${__fn_x%${__fn_x#??}} - 100))",
        "}",
        "__fn_now; __fn_end=$((__fn_up + __fn_budget * 100))",
        # The watchdog wakes on each tick, a line the controller sends on the script's standard input
        # every TICK seconds (no timer process on the node), and keeps the running probe's deadline,
        # which the script writes to file w ("number deadline") before starting it: past it, the
        # probe's processes get TERM and a flag file, and KILL one grace period later. The end of
        # standard input means the connection is gone (Ctrl-C, --timeout, a network fault; without a
        # terminal nobody signals us): it stops the script, whose TERM trap kills the running probe.
        # It holds neither stdout nor stderr, so it can never keep the channel open. A background job
        # gets /dev/null as standard input, so the exec's goes to it through fd 3. The list of processes
        # alive at the start is taken before it exists: it is gone again at the end.
        "__fn_pids /proc/[0-9]*; __fn_ps0=$__fn_ps",
        "exec 3<&0",
        "( trap '' PIPE; __fn_k=; __fn_kat=; __fn_fb=",
        # The script died (even SIGKILL, which runs no trap): stop what it ran and clean up for it.
        "  __fn_orphaned() {",
        '    read -r __fn_i __fn_dl __fn_pp <w 2>/dev/null; __fn_stop KILL "$__fn_pp" gone',
        f'    __fn_sweep "{run_id}-" KILL; cd /; rm -rf "$__fn_d"',
        "  }",
        "  while read -r __fn_t; do",
        # The script gone however it went: clean up for it and leave.
        '    [ -d "$__fn_d" ] || exit 0',
        "    kill -0 $__fn_me 2>/dev/null || { __fn_orphaned; exit 0; }",
        '    __fn_i=; __fn_dl=; __fn_pp=; read -r __fn_i __fn_dl __fn_pp <w 2>/dev/null',
        '    __fn_now',
        # A run that lasts a tick also gets a timer of its own, for the network going silent without
        # closing (no more ticks, no end of input): well after the controller has hung up (budget +
        # REPORT_MARGIN), it stops the script, whose TERM trap kills what runs. Its pids go to file tm,
        # so the end of the script kills it by pid; it carries the run's marker too, for the sweep.
        '    if [ -z "$__fn_fb" ]; then __fn_fb=1',
        f'      ( {ENV_MARKER}="{run_id}-t-"; export {ENV_MARKER}; '
        f"sleep $(( (__fn_end - __fn_up) / 100 + {REPORT_MARGIN + 5} )) & echo $! >>tm; wait $!; "
        '[ -d "$__fn_d" ] && kill -TERM $__fn_me ) </dev/null >/dev/null 2>&1 &',
        "      echo $! >>tm",
        "    fi",
        '    if [ -n "$__fn_k" ] && [ "$__fn_up" -ge "$__fn_kat" ]; then',
        f'      __fn_stop KILL "$__fn_kp"; __fn_sweep "{run_id}-$__fn_k-" KILL; __fn_k=',
        "    fi",
        '    case $__fn_dl in ""|*[!0-9]*) continue;; esac',
        '    if [ "$__fn_up" -ge "$__fn_dl" ] && [ "$__fn_i" != "$__fn_k" ] && ! [ -e "t.$__fn_i" ]; then',
        f'      : >"t.$__fn_i"; __fn_stop TERM "$__fn_pp"; __fn_sweep "{run_id}-$__fn_i-" TERM',
        f"      __fn_k=$__fn_i; __fn_kp=$__fn_pp; __fn_kat=$((__fn_up + {KILL_GRACE * 100}))",
        "    fi",
        "  done",
        "  if kill -0 $__fn_me 2>/dev/null; then kill -TERM $__fn_me",
        "  else __fn_orphaned; fi",
        ") <&3 >/dev/null 2>&1 &",
        "__fn_w=$!; exec 3<&-",
        # Finished blocks queue up as file names and go out with one `cat` when a second has passed since
        # the last send, and at the end: a fast host sends everything in one write (controller CPU goes
        # per SSH message, not per byte), a slow one still sends what finished, which a lost connection
        # then does not lose. The queue is looked at as the next probe starts, with the clock it reads for its
        # deadline (dash's `read` takes a system call per byte of /proc/uptime): the same moment as right
        # after the last one ended.
        "__fn_q=; __fn_sent=$__fn_up",
        "__fn_flush() {",
        '  [ -n "$__fn_q" ] || return 0',
        '  if [ "$1" = all ] || [ $((__fn_up - __fn_sent)) -ge 100 ]; then',
        "    cat $__fn_q; __fn_q=; __fn_sent=$__fn_up",
        "  fi",
        "}",
        # $1 key, $2 number, $3 timeout in hundredths of a second, $4 the command, $5 x if it is plain.
        "__fn_probe() {",
        "  __fn_now; __fn_flush; __fn_dl=$((__fn_up + $3))",
        # No probe outlives the host's whole budget; once it is spent the rest are reported, not run.
        f"  if [ $__fn_up -ge $__fn_end ]; then printf '%s\\n\\n%s:124:s@@\\n\\n%s\\n' '{tag}:begin:'\"$1\"'@@' "
        f"'{tag}:rc:'\"$1\" '{tag}:end:'\"$1\"'@@' >\"o.$2\"; __fn_q=\"$__fn_q o.$2\"; return; fi",
        '  if [ $__fn_dl -gt $__fn_end ]; then __fn_dl=$__fn_end; fi',
        f"  printf '%s\\n' '{tag}:begin:'\"$1\"'@@' >\"o.$2\"",
        # A plain command ($5 = x: words of safe characters only) is exec'd in place of the probe's
        # subshell; any other runs in that subshell itself (eval: no second shell started). Only what it
        # starts carries the marker, so the watchdog is told the subshell's pid too, in file w.
        f'  ( ulimit -f {blocks} 2>/dev/null; {ENV_MARKER}="{run_id}-$2-"; export {ENV_MARKER}; '
        'cd "$__fn_pwd" 2>/dev/null; if [ "$5" = x ]; then set -f; exec $4; fi; __fn_c=$4; set --; eval "$__fn_c" ) '
        '</dev/null >>"o.$2" 2>"e.$2" &',
        "  __fn_p=$!; printf '%s %s %s\\n' \"$2\" \"$__fn_dl\" \"$__fn_p\" >w",
        '  wait "$__fn_p"; __fn_rc=$?; __fn_p=',
        '  __fn_fl=; case $__fn_rc in 1[2-5][0-9]) if [ -e "t.$2" ]; then __fn_fl=t; fi;; esac',
        f"  __fn_s=\"{tag}:rc:$1:$__fn_rc:$__fn_fl@@\"; __fn_z=\"{tag}:end:$1@@\"",
        # One byte past the stderr cap goes, and the control side judges the overflow (split_output).
        # An empty stderr, the usual case, costs no process at all.
        f'  if [ -s "e.$2" ]; then printf \'\\n%s\\n\' "$__fn_s" >>"o.$2"; head -c {caps.stderr + 1} "e.$2" >>"o.$2"; '
        'printf \'\\n%s\\n\' "$__fn_z" >>"o.$2"; '
        'else printf \'\\n%s\\n\\n%s\\n\' "$__fn_s" "$__fn_z" >>"o.$2"; fi',
        '  __fn_q="$__fn_q o.$2"',
        "}",
    ]


def build_script(probes: Sequence[Probe], nonce: str, *, run_id: str | None = None, caps: Caps = Caps(),
                 budget: float = 3600, shortcut: Shortcut | None = None) -> str:
    """The script for one host, to be fed to `sh -s`. Probes with the same key are run once.

    `budget` (seconds) bounds the whole script on the host's own clock: each probe's timeout is cut
    to what is left, and probes that find nothing left are reported as skipped (flag `s`).

    With `shortcut` (watch: fingerprint.py), its probe runs first, and each probe it can skip runs only
    when that probe's files changed: otherwise it sends no block at all.

    The whole script is one brace group, so the shell reads all of it before running any of it: a
    connection lost while sending runs nothing.
    """
    run_id = run_id or new_nonce()
    lines = ["{", f"__fn_budget={max(1, int(budget))}", *_prologue(nonce, run_id, caps)]
    seen: set[str] = set()

    def add(probe: Probe, guard: str = "") -> None:
        seen.add(probe.key)
        hundredths = max(1, round(probe.timeout * 100))  # the shell's clock counts hundredths of a second
        plain = " x" if _plain(probe.command) else ""
        lines.append(f"{guard}__fn_probe {probe.key} {len(seen)} {hundredths} {shlex.quote(probe.command)}{plain}")

    if shortcut is not None:
        # The numbers of the parts that matched, from the fingerprint's file (emptied first: a fingerprint
        # the budget did not leave time for matches nothing). A few bytes: dash reads them one at a time.
        lines.append(f": >{SAME}")
        add(shortcut.probe)
        lines.append(f'__fn_same=; read -r __fn_same <{SAME} 2>/dev/null; __fn_same=" $__fn_same "')
    for probe in probes:
        if probe.key in seen:
            continue
        if shortcut is not None and probe.key in shortcut.skippable:
            # Run unless its part's number is in the list.
            add(probe, f'[ "${{__fn_same#*" {shortcut.part(probe.key)} "}}" != "$__fn_same" ] || ')
        else:
            add(probe)
    lines += ["__fn_flush all", "exit 0", "}"]
    return "\n".join(lines) + "\n"


# Words the shell itself gives meaning to, which no program on PATH stands in for.
_SHELL_WORDS = frozenset((
    "if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until", "for", "in",
    "alias", "bg", "break", "cd", "command", "continue", "eval", "exec", "exit", "export", "fg", "getopts",
    "hash", "jobs", "local", "read", "readonly", "return", "set", "shift", "times", "trap", "type", "ulimit",
    "umask", "unalias", "unset", "wait", ".", ":",
))
_PLAIN = re.compile(r"[A-Za-z0-9_./:,@%+-]+(?: [A-Za-z0-9_./:,@%+=-]+)*")


def _plain(command: str) -> bool:
    """Whether `command` is one program and its arguments, each a word no shell would expand or split
    differently: it can then be exec'd straight from the probe's subshell (a process start saved)."""
    return _PLAIN.fullmatch(command) is not None and command.split(" ", 1)[0] not in _SHELL_WORDS


def split_output(stdout: str, nonce: str, caps: Caps = Caps()) -> dict[str, ProbeResult]:
    """Probe key -> result, for every probe whose block is complete in `stdout`.

    Found with plain string searches for the run's own marker lines: a regular expression holding the
    nonce would be compiled anew for every host and every cycle (a new nonce each time), which cost a
    `watch` a sixth of its per-cycle controller time.
    """
    tag = f"@@fabnet:{nonce}"
    begin = f"{tag}:begin:"
    results = {}
    at = stdout.find(begin)
    while at >= 0:
        found = _block(stdout, tag, at + len(begin))
        if found is None:
            at = stdout.find(begin, at + 1)
            continue
        key, out, code, flags, err, end = found
        results[key] = _result(out, code, flags, err, caps)
        at = stdout.find(begin, end)
    return results


def _block(text: str, tag: str, at: int) -> tuple[str, str, int, str, str, int] | None:
    """The block whose key starts at `at` (just past its begin marker): key, stdout, exit code, flags,
    stderr and where the block ends; None when it is incomplete or not well formed."""
    line_end = text.find("@@\n", at)
    key = text[at:line_end] if line_end >= 0 else ""
    if not key or not _HEX.fullmatch(key):
        return None
    out_start = line_end + 3
    rc_mark = f"\n{tag}:rc:{key}:"
    rc_at = text.find(rc_mark, out_start)
    while True:  # the first well-formed status line after the output is the block's
        if rc_at < 0:
            return None
        status_at = rc_at + len(rc_mark)
        status_end = text.find("@@\n", status_at)
        status = _STATUS.fullmatch(text, status_at, status_end) if status_end >= 0 else None
        if status is not None:
            break
        rc_at = text.find(rc_mark, rc_at + 1)
    end_mark = f"\n{tag}:end:{key}@@"
    err_start = status_end + 3
    end_at = text.find(end_mark, err_start)
    if end_at < 0:
        return None
    return (key, text[out_start:rc_at], int(status["rc"]), status["flags"], text[err_start:end_at],
            end_at + len(end_mark))


_HEX = re.compile(r"[0-9a-f]+")
_STATUS = re.compile(r"(?P<rc>\d+):(?P<flags>[a-z]*)")


def _result(out: str, code: int, flags: str, err: str, caps: Caps) -> ProbeResult:
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
    return ProbeResult(stdout=out, stderr=err, exit_code=code)


def _over(text: str, cap: int) -> bool:
    """Whether the node sent more than `cap` bytes (it sends at most a few hundred more).

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
