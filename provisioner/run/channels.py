"""Reading an exec's channel once transport.py has opened it: the output under hard limits until a
deadline, the watchdog's ticks on standard input, and a shell kept open for many runs.

A kept shell (KeptShell) is one `sh -s` whose standard input stays open: each run is sent as a subshell
and ends with a line that only this run can print. A command that runs a script on a host again and
again over a kept connection (watch, every interval) saves the exec itself with it: the server's new
process for the channel, the login shell, `sh`, and the channel's own messages, about 4 ms of a node's
CPU and a few of the controller's for each run. Anything unexpected (the deadline, a lost channel, an
end line that never came) ends the shell: its next run opens a new one.
"""

from __future__ import annotations

import math
import re
import secrets
import time
from dataclasses import dataclass
from typing import Literal

import paramiko

from provisioner.run.sockets import POLL, interrupted

Ended = Literal["exited", "timeout", "lost", "killed", "interrupted", "overflow"]

ENDINGS = {
    "timeout": "no result in time (--timeout)",
    "lost": "connection lost",
    "killed": "the remote shell was killed",
    "interrupted": "interrupted",
    "overflow": "the host's output passed the size limit",
}


# The kept shell's own temporary folder, for all its runs (facts/batch.py uses it when it is there), removed
# when the shell ends. A folder gone meanwhile (a run's clean-up after its script was killed) is made anew.
KEPT_FOLDER = "__fn_kd"


def make_folder(var: str) -> str:
    """Shell setting `var` to a new private temporary folder, failing when none can be made: in the temporary
    directory, else /dev/shm or /run (a node whose /tmp is full or read-only). One command per substitution,
    so the shell runs it in the substitution's own process instead of forking once more."""
    return " || ".join(f"{var}=$(mktemp -d{where} 2>/dev/null)" for where in ("", " -p /dev/shm", " -p /run"))


_KEEP_FOLDER = (f'[ -d "${{{KEPT_FOLDER}-}}" ] || {{ {make_folder(KEPT_FOLDER)} || {KEPT_FOLDER}=; '
                f'trap \'[ -z "${KEPT_FOLDER}" ] || rm -rf "${KEPT_FOLDER}"\' EXIT; }}\n')


@dataclass(frozen=True)
class ExecResult:
    stdout: str
    stderr: str
    exit_code: int  # -1 when the exec did not end by itself (see `ended`)
    seconds: float
    ended: Ended = "exited"
    cut: bool = False  # run gave up waiting after its `shorten_after` marker (the output is partial)
    marked_at: float | None = None  # seconds from the start to the `shorten_after` marker's arrival, if it came


def framed(script: str, *, kept: bool = False) -> str:
    """The text `sh -s` gets: one brace group, read whole before any of it runs (so a command in it that
    reads standard input finds nothing of the script, and a script may point that input elsewhere), in
    the C locale: the parsers read tools' output in its words (`stat %F` prints "regular file", not a
    translation, on a node whose login sets another language). Only a kept shell's own run (`kept`) may
    find a kept folder (KEPT_FOLDER): a value the login's environment brought is dropped first."""
    drop = "" if kept else f"unset {KEPT_FOLDER}; "
    return "{\n" + drop + "LC_ALL=C; export LC_ALL\n" + script.rstrip("\n") + "\n}\n"


def tick(channel: paramiko.Channel, due: float, every: float) -> float:
    """One tick on the exec's standard input; the time of the next. A full window or a closed channel
    loses the tick, which is harmless: the script's end is then near anyway."""
    try:
        if channel.send_ready():
            channel.send(b"\n")
    except (paramiko.SSHException, OSError, EOFError):
        pass
    return max(due + every, time.monotonic())


def acknowledge(channel: paramiko.Channel) -> None:
    """The marker arrived: say so on the script's standard input, then end it. A line lost with the
    channel leaves the script refusing its change (changes.py), which is why it waits for one."""
    try:
        channel.sendall(b"\n")
        channel.shutdown_write()
    except (paramiko.SSHException, OSError, EOFError):
        pass


def _drain(channel: paramiko.Channel, out: bytearray, cap: int) -> None:
    """Add to `out` the output that has already arrived, without waiting for more."""
    while len(out) < cap and channel.recv_ready():
        data = channel.recv(65536)
        if not data:
            return
        out += data[: cap - len(out)]


def _stderr(channel: paramiko.Channel, err: bytearray, cap: int) -> None:
    while channel.recv_stderr_ready():
        data = channel.recv_stderr(65536)
        err += data[: max(0, cap - len(err))]


def collect(channel: paramiko.Channel, client_transport: paramiko.Transport, started: float, deadline: float,
            max_stdout: int, max_stderr: int, shorten_after: tuple[str, float] | None = None,
            ticks: float | None = None) -> ExecResult:
    """Read an exec's output until its exit status, the deadline, Ctrl-C or the output cap."""
    out, err = bytearray(), bytearray()
    channel.settimeout(POLL)
    ended: Ended | None = None
    mark = shorten_after[0].encode() if shorten_after else b""
    shortened, marked_at = False, None
    every = ticks or math.inf  # no ticks: the first is never due
    next_tick = started + every
    while ended is None:
        if time.monotonic() >= next_tick:
            next_tick = tick(channel, next_tick, every)
        _stderr(channel, err, max_stderr)
        if interrupted.is_set() or time.monotonic() >= deadline:
            ended = "interrupted" if interrupted.is_set() else "timeout"
            _drain(channel, out, max_stdout)  # what the host already sent still says what it did
            break
        try:
            data = channel.recv(65536)
        except TimeoutError:
            continue
        if not data:
            _stderr(channel, err, max_stderr)
            break  # end of output: the exit status follows
        if len(out) + len(data) > max_stdout:
            out += data[: max_stdout - len(out)]
            ended = "overflow"
            break
        out += data
        if shorten_after and not shortened and out.find(mark, max(0, len(out) - len(data) - len(mark))) >= 0:
            deadline, shortened = min(deadline, time.monotonic() + shorten_after[1]), True
            marked_at = time.monotonic() - started
            acknowledge(channel)
    code = -1
    if ended is None:
        code, ended = _exit_status(channel, client_transport, deadline, every, next_tick)
    return ExecResult(out.decode("utf-8", errors="replace"), err.decode("utf-8", errors="replace"), code,
                      time.monotonic() - started, ended, cut=shortened and ended == "timeout", marked_at=marked_at)


_END_STATUS = re.compile(rb"(\d+)@@\n")
MAX_ENDED_STDERR = 64 * 1024  # what a shell that ended before a run says, kept to tell why


class KeptShell:
    """One `sh -s` on an open channel, run after run. Not thread-safe: its session runs one at a time."""

    def __init__(self, channel: paramiko.Channel, client_transport: paramiko.Transport) -> None:
        self.channel = channel
        self.client_transport = client_transport
        self.usable = True
        self.runs = 0

    def ready(self) -> bool:
        """Whether a run can be sent: the shell never failed a run and its channel is still open."""
        channel = self.channel
        return (self.usable and self.client_transport.is_active() and not channel.closed
                and not channel.eof_received and not channel.exit_status_ready())

    def send(self, script: str) -> bytes:
        """Send one run; the end line it will print (raises what the channel raises: nothing ran then).

        The script runs in a subshell, so its `exit`, its traps and its working directory end with it; the
        shell then prints the subshell's status between the run's own marker and "@@", on stdout and on
        stderr, so both streams of one run are told from the next run's.
        """
        end = f"@@fabnet-kept:{secrets.token_hex(8)}:".encode()
        # The acknowledgment goes out as soon as the shell has read this far: the round trip that opening
        # an exec's channel would have cost, which finds a path that died since the last run.
        # A new shell trusts no folder its login's environment named.
        keep = (f"unset {KEPT_FOLDER}\n" if self.runs == 0 else "") + _KEEP_FOLDER
        text = (f"printf '\\n%sack@@\\n' '{end.decode()}'\n{keep}(\n{framed(script, kept=True)})\n__fn_kept=$?; "
                f"printf '\\n%s%s@@\\n' '{end.decode()}' \"$__fn_kept\"; "
                f"printf '\\n%s%s@@\\n' '{end.decode()}' \"$__fn_kept\" >&2\n")
        self.channel.sendall(text.encode())
        self.runs += 1
        return end

    def read(self, end: bytes, started: float, deadline: float, max_stdout: int, max_stderr: int,
             ticks: float | None, answer_by: float) -> ExecResult:
        """Read one run's output up to its end line on both streams. Any other ending leaves the shell
        unusable (the run may still be going: closing the channel tells its watchdog to stop it).

        Raises Unanswered when the shell has not acknowledged the run by `answer_by`, or ended before.
        """
        channel = self.channel
        channel.settimeout(POLL)
        out = self._acknowledged(end, min(answer_by, deadline))
        err, tail = bytearray(), bytearray()  # stderr up to its cap; its last bytes, where the end line is
        every = ticks or math.inf
        next_tick = started + every
        room = len(end) + 32  # the end line itself, past either cap
        code = _ends(out, end)  # a quick run's whole output can come with its acknowledgment
        ended: Ended | None = None
        while code is None and ended is None:  # stdout up to its end line
            if time.monotonic() >= next_tick:
                next_tick = tick(channel, next_tick, every)
            while channel.recv_stderr_ready():
                _keep(channel.recv_stderr(65536), err, max_stderr, tail, room)
            if interrupted.is_set() or time.monotonic() >= deadline:
                ended = "interrupted" if interrupted.is_set() else "timeout"
                _drain(channel, out, max_stdout)
                break
            try:
                data = channel.recv(65536)
            except TimeoutError:
                continue
            if not data:  # the shell itself ended (something killed it)
                self.usable = False
                status, ended = _exit_status(channel, self.client_transport, deadline)
                _stderr(channel, err, max_stderr)
                return ExecResult(out.decode("utf-8", errors="replace"), err.decode("utf-8", errors="replace"),
                                  status, time.monotonic() - started, ended)
            elif len(out) + len(data) > max_stdout + room:
                out += data[: max_stdout - len(out)]
                ended = "overflow"
            else:
                out += data
                code = _ends(out, end)
        while ended is None and _ends(tail, end) is None:  # then stderr's, printed right after it
            if interrupted.is_set() or time.monotonic() >= deadline:
                ended = "interrupted" if interrupted.is_set() else "timeout"
                break
            try:
                data = channel.recv_stderr(65536)
            except TimeoutError:
                continue
            if not data:
                ended = "killed" if self.client_transport.is_active() else "lost"
            _keep(data, err, max_stderr, tail, room)
        if ended is not None or code is None:
            self.usable = False
            return ExecResult(out.decode("utf-8", errors="replace"), err.decode("utf-8", errors="replace"), -1,
                              time.monotonic() - started, ended or "killed")
        return ExecResult(_before(out, end)[:max_stdout].decode("utf-8", errors="replace"),
                          _before(err, end).decode("utf-8", errors="replace"), code,
                          time.monotonic() - started)

    def _acknowledged(self, end: bytes, answer_by: float) -> bytearray:
        """Wait for the run's acknowledgment; what came after it."""
        ack, seen = b"\n" + end + b"ack@@\n", bytearray()
        while (at := seen.find(ack)) < 0:
            # Whatever came before it (a login shell's greeting, a straggler of an earlier run) is dropped;
            # the end of it stays, where the acknowledgment may have begun.
            del seen[: max(0, len(seen) - len(ack))]
            if interrupted.is_set() or time.monotonic() >= answer_by:
                self.usable = False
                raise Unanswered("interrupted" if interrupted.is_set() else "no answer from the kept shell")
            try:
                data = self.channel.recv(65536)
            except TimeoutError:
                continue
            if not data:  # sudo refused to start it, or it was killed: what it said may tell which
                self.usable = False
                status, how = _exit_status(self.channel, self.client_transport, answer_by)
                err = bytearray()  # all of it has come once the exit status has: it comes last
                _stderr(self.channel, err, MAX_ENDED_STDERR)
                raise Unanswered("the kept shell ended", ExecResult(
                    seen.decode("utf-8", errors="replace"), err.decode("utf-8", errors="replace"), status, 0.0, how))
            seen += data
        return seen[at + len(ack):]

    def close(self) -> None:
        self.usable = False
        self.channel.close()


class Unanswered(Exception):
    """A kept shell did not acknowledge a run in time: its path or the shell itself is gone, and the run
    most likely never reached it (only read-only runs go to a kept shell, so trying again is harmless).
    `ended`: how the shell ended, when it did (its stderr and exit status)."""

    def __init__(self, reason: str, ended: ExecResult | None = None) -> None:
        super().__init__(reason)
        self.ended = ended


def _exit_status(channel: paramiko.Channel, client_transport: paramiko.Transport, deadline: float,
                 every: float = math.inf, next_tick: float = math.inf) -> tuple[int, Ended]:
    """Once a channel's output has ended: its exit status (-1 without one) and how it ended, ticking on
    (`every` seconds, the next due at `next_tick`) while the status is awaited."""
    while not channel.exit_status_ready() and not channel.closed:
        if interrupted.is_set() or time.monotonic() >= deadline:
            break
        if time.monotonic() >= next_tick:
            next_tick = tick(channel, next_tick, every)
        channel.status_event.wait(POLL)
    if channel.exit_status_ready() and channel.exit_status >= 0:
        return channel.recv_exit_status(), "exited"
    if interrupted.is_set():
        return -1, "interrupted"
    if not client_transport.is_active():
        return -1, "lost"
    # Closed without an exit status: a signal ended the shell.
    return -1, "killed" if channel.closed else "timeout"


def _ends(text: bytearray, end: bytes) -> int | None:
    """The run's status when `text` ends with its end line, else None."""
    at = text.rfind(b"\n" + end, max(0, len(text) - len(end) - 32))
    if at < 0:
        return None
    found = _END_STATUS.fullmatch(text, at + 1 + len(end))
    return int(found.group(1)) if found else None


def _before(text: bytearray, end: bytes) -> bytes:
    """`text` up to the run's end line, or all of it where the line lies past a cap."""
    at = text.rfind(b"\n" + end)
    return bytes(text if at < 0 else text[:at])


def _keep(data: bytes, text: bytearray, cap: int, tail: bytearray, room: int) -> None:
    """Add `data` to `text` up to `cap` bytes, and to `tail`, which keeps the last `room` bytes of all of it:
    a run whose stderr passed its cap still has its end line found there."""
    text += data[: max(0, cap - len(text))]
    tail += data[-room:]
    del tail[:-room]
