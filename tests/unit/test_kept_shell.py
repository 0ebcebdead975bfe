"""A shell kept open for many runs (channels.KeptShell), over a real local `sh -s` standing in for the
host's end of an exec channel: runs are told apart on both streams, a run's `exit`, variables and
working directory end with it, the probe script's watchdog stops a probe by its own process there, and a
run that does not end by itself leaves the shell unusable and stops when its input closes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time

import pytest

from provisioner.facts import batch, fingerprint
from provisioner.resources.base import Probe
from provisioner.run import channels, transport


class ProcessChannel:
    """The parts of a paramiko Channel a kept shell uses, on a local `sh -s`'s pipes."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(["sh", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True, env=env)
        self.buffers = {1: bytearray(), 2: bytearray()}
        self.ended = {1: False, 2: False}
        self.changed = threading.Condition()
        self.status_event = threading.Event()
        self.timeout = 0.2
        self.sent = b""
        for fd, stream in ((self.proc.stdout, 1), (self.proc.stderr, 2)):
            threading.Thread(target=self._pump, args=(fd, stream), daemon=True).start()
        threading.Thread(target=lambda: (self.proc.wait(), self.status_event.set()), daemon=True).start()

    def _pump(self, pipe, stream: int) -> None:
        while data := os.read(pipe.fileno(), 65536):
            with self.changed:
                self.buffers[stream] += data
                self.changed.notify_all()
        with self.changed:
            self.ended[stream] = True
            self.changed.notify_all()

    def _recv(self, stream: int, size: int) -> bytes:
        with self.changed:
            if not self.changed.wait_for(lambda: self.buffers[stream] or self.ended[stream], self.timeout):
                raise TimeoutError
            data = bytes(self.buffers[stream][:size])
            del self.buffers[stream][:size]
            return data

    def recv(self, size: int) -> bytes:
        return self._recv(1, size)

    def recv_stderr(self, size: int) -> bytes:
        return self._recv(2, size)

    def recv_ready(self) -> bool:
        return bool(self.buffers[1])

    def recv_stderr_ready(self) -> bool:
        return bool(self.buffers[2])

    def settimeout(self, timeout: float) -> None:
        self.timeout = timeout

    def sendall(self, data: bytes) -> None:
        assert self.proc.stdin
        self.sent += data
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send_ready(self) -> bool:
        return True

    def send(self, data: bytes) -> int:
        self.sendall(data)
        return len(data)

    @property
    def closed(self) -> bool:
        return self.proc.poll() is not None and self.ended[1] and not self.buffers[1]

    @property
    def eof_received(self) -> bool:
        return self.ended[1]

    def exit_status_ready(self) -> bool:
        return self.proc.poll() is not None

    @property
    def exit_status(self) -> int:
        return self.proc.returncode

    def recv_exit_status(self) -> int:
        return self.proc.wait()

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()  # what the host's shell sees when the channel closes: the end of its input


class Active:
    def is_active(self) -> bool:
        return True


@pytest.fixture
def kept():
    channel = ProcessChannel()
    shell = channels.KeptShell(channel, Active())
    yield shell, channel
    channel.proc.kill()
    channel.proc.wait()


def test_runs_in_one_shell_are_told_apart_and_leave_nothing_to_the_next(kept, tmp_path) -> None:
    shell, channel = kept
    first = transport.run_kept(shell, "h", f"x=set; cd {tmp_path}; echo one; echo err-one >&2; echo $$; exit 3",
                               timeout=10)
    second = transport.run_kept(shell, "h", 'echo "x=[$x]"; pwd; echo err-two >&2; echo $$', timeout=10)
    assert (first.exit_code, first.stdout, first.stderr) == (3, f"one\n{channel.proc.pid}\n", "err-one\n")
    assert (second.exit_code, second.stderr) == (0, "err-two\n")
    assert second.stdout.split("\n")[0] == "x=[]" and second.stdout.split("\n")[1] != str(tmp_path)
    assert second.stdout.split("\n")[2] == str(channel.proc.pid)  # the same shell: no new process per run
    assert shell.ready() and shell.runs == 2 and channel.proc.poll() is None


def test_a_line_like_the_end_line_without_the_runs_token_does_not_end_it(kept) -> None:
    shell, _ = kept
    result = transport.run_kept(shell, "h", "echo; echo '@@fabnet-kept:0123456789abcdef:0@@'; echo after",
                                timeout=10)
    assert (result.exit_code, result.stdout) == (0, "\n@@fabnet-kept:0123456789abcdef:0@@\nafter\n")


def test_the_watchdog_of_a_probe_script_stops_a_probe_by_its_own_process_in_a_kept_shell(kept) -> None:
    # A probe that loops in its own shell starts no program: it carries no marker, and only its pid,
    # checked against the script's own process (not the kept shell's), lets the watchdog stop it.
    shell, _ = kept
    probes = [Probe("while :; do :; done", timeout=0.5), Probe("echo next", timeout=5)]
    for _ in range(2):
        nonce = batch.new_nonce()
        started = time.monotonic()
        result = transport.run_kept(shell, "h", batch.build_script(probes, nonce, budget=30), timeout=20,
                                    ticks=0.25)
        found = batch.split_output(result.stdout, nonce)
        assert time.monotonic() - started < 8
        assert [found[p.key].exit_code for p in probes] == [batch.TIMEOUT_EXIT, 0]
        assert found[probes[1].key].stdout == "next\n" and result.exit_code == 0
    assert shell.ready()


def test_a_run_past_its_deadline_leaves_the_shell_unusable_and_stops_when_its_input_closes(kept) -> None:
    shell, channel = kept
    probes = [Probe("sleep 60", timeout=50)]
    script = batch.build_script(probes, batch.new_nonce(), budget=55)
    result = transport.run_kept(shell, "h", script, timeout=1.0, partial=True, ticks=0.25)
    assert result.ended == "timeout" and not shell.ready()
    shell.close()
    # The watchdog reads the end of input and stops the script; the shell then reads it too and exits.
    assert channel.proc.wait(timeout=10) is not None
    for _ in range(50):  # what was killed is gone once its new parent has reaped it
        leftover = subprocess.run(["pgrep", "-s", str(channel.proc.pid)], capture_output=True)
        if leftover.returncode == 1:
            break
        time.sleep(0.1)
    assert leftover.returncode == 1, leftover.stdout


def test_a_run_that_is_not_partial_raises_when_it_does_not_end_in_time(kept) -> None:
    shell, _ = kept
    with pytest.raises(transport.CommandFailed, match=r"^h: no result in time"):
        transport.run_kept(shell, "h", "sleep 5", timeout=0.5)
    assert not shell.ready()


def test_a_shell_that_does_not_acknowledge_the_run_in_time_has_not_started_it(kept) -> None:
    # As a path that died since the last run: found within the time a channel has to open, not at the
    # end of the run's timeout, and the run may go again over a new login.
    shell, channel = kept
    assert transport.run_kept(shell, "h", "echo ok", timeout=10).stdout == "ok\n"
    os.kill(channel.proc.pid, signal.SIGSTOP)
    started = time.monotonic()
    try:
        with pytest.raises(transport.NotStarted, match="no answer from the kept shell"):
            transport.run_kept(shell, "h", "echo late", timeout=30, open_timeout=1)
    finally:
        os.kill(channel.proc.pid, signal.SIGCONT)
    assert time.monotonic() - started < 3 and not shell.ready()


def test_a_shell_that_dies_during_a_run_ends_it_as_killed_with_what_came(kept) -> None:
    shell, _ = kept
    result = transport.run_kept(shell, "h", "echo partial; kill -KILL $$; sleep 1", timeout=10, partial=True)
    assert (result.ended, result.stdout) == ("killed", "partial\n") and not shell.ready()


class WholeChannel(ProcessChannel):
    """A channel on which each run's whole output, acknowledgment to end line, arrives in one piece."""

    def sendall(self, data: bytes) -> None:
        ran = subprocess.run(["sh", "-s"], input=data, capture_output=True, timeout=30)
        with self.changed:
            self.buffers[1] += ran.stdout
            self.buffers[2] += ran.stderr
            self.changed.notify_all()


def test_a_run_whose_output_comes_in_one_piece_with_its_acknowledgment_ends_at_once() -> None:
    channel = WholeChannel()
    try:
        shell = channels.KeptShell(channel, Active())
        started = time.monotonic()
        result = transport.run_kept(shell, "h", "echo whole; echo e >&2; exit 4", timeout=10)
        assert (result.exit_code, result.stdout, result.stderr) == (4, "whole\n", "e\n")
        assert time.monotonic() - started < 1 and shell.ready()
    finally:
        channel.proc.kill()
        channel.proc.wait()


def test_stderr_past_its_cap_is_cut_and_the_run_still_ends_at_its_end_line(kept) -> None:
    shell, _ = kept
    flood = transport.run_kept(shell, "h", "head -c 300000 /dev/zero | tr '\\0' e >&2; echo done", timeout=20)
    assert (flood.ended, flood.exit_code, flood.stdout) == ("exited", 0, "done\n")
    assert flood.stderr == "e" * transport.MAX_STDERR
    assert transport.run_kept(shell, "h", "echo next", timeout=10).stdout == "next\n" and shell.ready()


def _folder_of_a_run(shell: channels.KeptShell, probes: list[Probe]) -> tuple[str, dict[str, int]]:
    """The temporary folder a fact script ran in (its first probe prints it) and its probes' exit codes."""
    nonce = batch.new_nonce()
    result = transport.run_kept(shell, "h", batch.build_script(probes, nonce, budget=30), timeout=20, ticks=0.25)
    found = batch.split_output(result.stdout, nonce)
    return found[probes[0].key].stdout.strip(), {p.command: found[p.key].exit_code for p in probes}


def test_a_kept_shell_keeps_one_folder_for_its_runs_left_empty_between_them_and_removed_at_its_end(kept) -> None:
    shell, channel = kept
    where = Probe('printf "%s\\n" "$__fn_d"')
    secret = Probe("echo a probe output that must not wait on the disk; echo its stderr >&2")
    slow = Probe("sleep 5", timeout=0.3)  # its timeout leaves a flag file
    first, codes = _folder_of_a_run(shell, [where, secret, slow])
    assert codes[slow.command] == batch.TIMEOUT_EXIT and os.path.isdir(first)
    left = {name: os.path.getsize(os.path.join(first, name)) for name in os.listdir(first)}
    assert left and not any(name.startswith("t.") for name in left) and set(left.values()) == {0}, left
    second, codes = _folder_of_a_run(shell, [where, Probe("sleep 0.1", timeout=5)])
    assert second == first and set(codes.values()) == {0}  # no flag of the first run's timeout counts here
    shutil.rmtree(first)  # as a run's clean-up after its script was killed: the next run makes a new one
    third, _ = _folder_of_a_run(shell, [where])
    assert third != first and os.path.isdir(third) and shell.ready()
    shell.close()
    channel.proc.wait(timeout=10)
    assert not os.path.exists(third)


def test_a_folder_named_by_the_logins_environment_is_never_used(tmp_path) -> None:
    # The variable is the kept shell's own: one the environment brings (an exec, or a new kept shell) names
    # nothing to reuse, and whatever folder it names is left alone.
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "o.1").write_text("keep me\n")
    env = {**os.environ, channels.KEPT_FOLDER: str(theirs)}
    where = Probe('printf "%s\\n" "$__fn_d"')
    channel = ProcessChannel(env)
    try:
        used, _ = _folder_of_a_run(channels.KeptShell(channel, Active()), [where])
    finally:
        channel.proc.kill()
        channel.proc.wait()
    nonce = batch.new_nonce()
    script = channels.framed(batch.build_script([where], nonce, budget=30))
    # As an exec runs it: its standard input stays open (the end of input would stop the script) until its
    # output has ended.
    exec_run = subprocess.Popen(["sh", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    assert exec_run.stdin and exec_run.stdout
    exec_run.stdin.write(script.encode())
    exec_run.stdin.flush()
    out = exec_run.stdout.read().decode()
    exec_run.stdin.close()
    assert exec_run.wait(timeout=30) == 0
    used_by_exec = batch.split_output(out, nonce)[where.key].stdout.strip()
    assert used and used_by_exec and str(theirs) not in (used, used_by_exec)
    assert not os.path.exists(used_by_exec)  # an exec's own folder goes with it
    assert os.listdir(theirs) == ["o.1"] and (theirs / "o.1").read_text() == "keep me\n"


def test_a_kept_shells_runs_skip_file_only_probes_whose_files_kept_their_status(kept, tmp_path) -> None:
    # The racy rule compares the files' ctime with the node's clock at each run's start. The kept folder's own
    # ctime would stay its first run's: a file changed shortly before that run would never be trusted.
    shell, _ = kept
    conf = tmp_path / "nccl.conf"
    conf.write_text("A=1\n")
    reader = Probe(f"cat {conf}", reads=(str(conf),))
    cache = fingerprint.FactCache()
    ran = []
    for _ in range(4):
        nonce = batch.new_nonce()
        step = fingerprint.shortcut([reader], cache)
        assert step is not None
        result = transport.run_kept(shell, "h", batch.build_script([reader], nonce, budget=30, shortcut=step),
                                    timeout=20, ticks=0.25)
        found = batch.split_output(result.stdout, nonce)
        ran.append(reader.key in found)
        assert fingerprint.fill_in(step, found)[reader.key].stdout == "A=1\n"
        time.sleep(fingerprint.RACY_SECONDS / 2 + 0.6)
    # Racily clean at first (read again); trusted once the file's ctime is RACY_SECONDS old; then skipped.
    assert ran[0] and not ran[-1], ran
