"""The SSH transport's login, against small fake servers on loopback: every failure is one clear reason,
paramiko's own tracebacks never reach the terminal, and Ctrl-C ends a login at once."""

from __future__ import annotations

import base64
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest

from provisioner.load.inventory import Host
from provisioner.run import become, channels, knownhosts, loginerrors, sockets, transport

KEY_A = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPV0Ub2RoR8DfzKZ3NfGJ6+FxynfURNgLjfmn/sWCipv"


def key(line: str) -> paramiko.PKey:
    kind, blob = line.split()
    return paramiko.PKey.from_type_string(kind, base64.b64decode(blob))


@pytest.fixture
def fake_server(request) -> Iterator[int]:
    """A loopback listener that misbehaves as `request.param` says; yields its port."""
    behaviour = request.param
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                client, _ = server.accept()
            except OSError:
                return
            if behaviour == "banner-then-close":
                client.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
                time.sleep(0.2)
            elif behaviour == "silent":
                stop.wait(10)
            client.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


def host_at(port: int) -> Host:
    return Host("h", "127.0.0.1", port=port, explicit=frozenset({"address", "port"}))


@pytest.mark.parametrize(("fake_server", "expected"), [
    ("close", "closed the connection before login"),
    ("banner-then-close", "closed the connection before login"),
    ("silent", "no answer from the SSH server at 127.0.0.1:"),
], indirect=["fake_server"])
def test_a_server_that_hangs_up_or_stays_silent_is_one_clear_reason(fake_server: int, expected: str) -> None:
    started = time.monotonic()
    with pytest.raises(transport.HostUnreachable) as caught:
        transport.connect(host_at(fake_server), connect_timeout=1.5, ssh_config=Path("/dev/null"))
    assert expected in caught.value.reason
    assert "No existing session" not in caught.value.reason
    assert time.monotonic() - started < 1.5 + 2


def test_a_failed_handshake_prints_no_traceback(tmp_path: Path) -> None:
    # paramiko's transport thread logs a traceback for a failed handshake unless its log is handled.
    code = (
        "import socket, threading\n"
        "from pathlib import Path\n"
        "from provisioner.run import transport\n"
        "from provisioner.load.inventory import Host\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n"
        "threading.Thread(target=lambda: s.accept()[0].close(), daemon=True).start()\n"
        "h = Host('h', '127.0.0.1', port=s.getsockname()[1], explicit=frozenset({'address', 'port'}))\n"
        "try:\n    transport.connect(h, connect_timeout=2, ssh_config=Path('/dev/null'))\n"
        "except transport.HostUnreachable as e:\n    print(e.reason)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert "closed the connection" in proc.stdout
    assert proc.stderr == ""


@pytest.mark.parametrize("fake_server", ["silent"], indirect=True)
def test_interrupt_ends_a_login_within_a_poll(fake_server: int) -> None:
    transport.reset()
    timer = threading.Timer(0.5, transport.interrupt)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(transport.HostUnreachable, match="interrupted"):
            transport.connect(host_at(fake_server), connect_timeout=30, ssh_config=Path("/dev/null"))
    finally:
        timer.cancel()
        transport.reset()
    assert time.monotonic() - started < 3


def test_login_failures_read_as_reasons() -> None:
    class Hop:
        host, port, user = "10.0.0.9", 22, "root"

    known = knownhosts.KnownHosts()
    lost = loginerrors.login_failure(paramiko.SSHException("No existing session"), Hop(), known)
    assert "closed the connection before login" in lost and "sshd running" in lost
    revoked = knownhosts.KnownHosts(revoked={key(KEY_A).asbytes()})
    refused = loginerrors.login_failure(loginerrors.UnknownHostKey(key(KEY_A)), Hop(), revoked)
    assert "@revoked" in refused and "SHA256:" in refused
    long = loginerrors.login_failure(paramiko.SSHException("x" * 5000), Hop(), known)
    assert len(long) < 300
    through = loginerrors.login_failure(paramiko.ChannelException(2, "Connect failed"), Hop(), known)
    assert through == "the jump host could not open a connection to 10.0.0.9:22: Connect failed"


class FakeChannel:
    """Just the surface of paramiko's Channel that the exec's read loop uses; `feed` decides what the
    host sends (None: nothing yet)."""

    def __init__(self, feed, *, exit_status: int | None = None) -> None:
        self.feed, self.exit_status_value = feed, exit_status
        self.closed = False
        self.status_event = threading.Event()
        self.exit_status = -1

    def settimeout(self, seconds: float) -> None:
        self.timeout = seconds

    def recv_stderr_ready(self) -> bool:
        return False

    def recv_ready(self) -> bool:
        return bool(getattr(self, "buffered", b""))

    def recv(self, size: int) -> bytes:
        if getattr(self, "buffered", b""):  # arrived already: returned at once
            data, self.buffered = self.buffered, b""
            return data
        data = self.feed()
        if data is None:
            time.sleep(self.timeout)
            raise TimeoutError
        if data == b"" and self.exit_status_value is not None:
            self.exit_status = self.exit_status_value
            self.status_event.set()
        return data

    def exit_status_ready(self) -> bool:
        return self.status_event.is_set()

    def recv_exit_status(self) -> int:
        return self.exit_status


class FakeTransport:
    def __init__(self, active: bool = True) -> None:
        self.active = active

    def is_active(self) -> bool:
        return self.active


def collect(channel: FakeChannel, transport_: FakeTransport, timeout: float, max_stdout: int = 1 << 20):
    started = time.monotonic()
    return channels.collect(channel, transport_, started, started + timeout, max_stdout, 1024)


def test_a_host_that_prints_without_end_is_cut_at_the_output_cap() -> None:
    result = collect(FakeChannel(lambda: b"x" * 65536), FakeTransport(), timeout=60, max_stdout=1 << 20)
    assert (result.ended, len(result.stdout)) == ("overflow", 1 << 20)


def test_a_host_that_trickles_forever_is_cut_at_the_deadline() -> None:
    def trickle() -> bytes:
        time.sleep(0.05)
        return b"."

    result = collect(FakeChannel(trickle), FakeTransport(), timeout=1.0)
    assert result.ended == "timeout" and result.seconds < 2 and result.stdout.startswith("..")


def test_end_of_output_with_an_exit_status_is_a_normal_end() -> None:
    chunks = iter([b"out", b""])
    result = collect(FakeChannel(lambda: next(chunks), exit_status=3), FakeTransport(), timeout=5)
    assert (result.ended, result.exit_code, result.stdout) == ("exited", 3, "out")


def test_end_of_output_without_a_connection_is_a_lost_connection() -> None:
    chunks = iter([b"partial", b""])
    channel = FakeChannel(lambda: next(chunks))
    channel.closed = True
    channel.status_event.set()  # paramiko sets it on close, with no exit status
    result = collect(channel, FakeTransport(active=False), timeout=5)
    assert (result.ended, result.stdout) == ("lost", "partial")


def test_interrupt_ends_the_read_loop_within_a_poll() -> None:
    transport.reset()
    timer = threading.Timer(0.3, transport.interrupt)
    timer.start()
    try:
        result = collect(FakeChannel(lambda: None), FakeTransport(), timeout=60)
    finally:
        timer.cancel()
        transport.reset()
    assert result.ended == "interrupted" and result.seconds < 3  # not the 60 s deadline


def test_output_that_already_arrived_is_kept_when_the_exec_is_interrupted() -> None:
    # A change script reported its first step, then Ctrl-C: that report is in paramiko's buffer and
    # says what the host did; it is read before the exec ends, never waited for beyond it.
    transport.reset()
    channel = FakeChannel(lambda: None)
    transport.interrupt()
    channel.buffered = b"step 1 done\n"
    try:
        result = collect(channel, FakeTransport(), timeout=60)
    finally:
        transport.reset()
    assert (result.ended, result.stdout) == ("interrupted", "step 1 done\n") and result.seconds < 1


class SessionTransport(FakeTransport):
    """A transport whose session records what was sent and then behaves as `channel` does."""

    def __init__(self, channel: FakeChannel) -> None:
        super().__init__()
        self.channel = channel
        channel.sent = b""
        channel.exec_command = lambda command: setattr(channel, "command", command)
        channel.sendall = lambda data: setattr(channel, "sent", channel.sent + data)
        channel.shutdown_write = lambda: None
        channel.close = lambda: None

    def open_session(self, timeout: float) -> FakeChannel:
        return self.channel


def fake_conn(channel: FakeChannel):
    session = SessionTransport(channel)
    client = type("Client", (), {"get_transport": lambda self: session})()
    return type("Conn", (), {"client": client, "host": "10.0.0.9"})()


def test_the_script_goes_on_stdin_as_one_group_and_a_short_end_raises_unless_partial() -> None:
    chunks = iter([b"out", b""])
    channel = FakeChannel(lambda: next(chunks), exit_status=0)
    result = transport.run(fake_conn(channel), "echo a\nexit 3\n", timeout=5)
    assert (channel.command, channel.sent) == (
        "sh -s", b"{\nunset __fn_kd; LC_ALL=C; export LC_ALL\necho a\nexit 3\n}\n")
    assert (result.ended, result.stdout) == ("exited", "out")
    # Run locally, the group keeps a command that reads stdin from eating the rest of the script.
    local = subprocess.run(["sh", "-s"], input=channel.sent.replace(b"echo a", b"cat; echo a"),
                           capture_output=True, timeout=10)
    assert (local.stdout, local.returncode) == (b"a\n", 3)

    def trickle() -> bytes:
        time.sleep(0.05)
        return b"."

    with pytest.raises(transport.CommandFailed, match=r"^10\.0\.0\.9: no result in time \(--timeout\)$"):
        transport.run(fake_conn(FakeChannel(trickle)), "sleep 9", timeout=0.5)
    result = transport.run(fake_conn(FakeChannel(trickle)), "sleep 9", timeout=0.5, partial=True)
    assert result.ended == "timeout" and result.stdout.startswith(".")


def test_with_ticks_stdin_stays_open_and_gets_a_newline_every_tick_until_the_end() -> None:
    started = time.monotonic()

    def slow() -> bytes | None:
        return None if time.monotonic() - started < 1.3 else b""

    channel = FakeChannel(slow, exit_status=0)
    session = SessionTransport(channel)
    ticked: list[float] = []
    channel.send_ready = lambda: True
    channel.send = lambda data: ticked.append(time.monotonic() - started) or len(data) if data == b"\n" else 0
    channel.shutdown_write = lambda: ticked.append(-1.0)
    client = type("Client", (), {"get_transport": lambda self: session})()
    conn = type("Conn", (), {"client": client, "host": "10.0.0.9"})()
    result = transport.run(conn, "sleep 1", timeout=5, ticks=0.5)
    assert result.ended == "exited"
    assert len(ticked) == 2 and all(0.45 < at < 1.4 for at in ticked)  # at 0.5 and 1.0 s; no end of input


@pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="TCP_QUICKACK is Linux's")
def test_a_login_socket_acknowledges_each_read_at_once() -> None:
    # sshd holds a small packet until the one before is acknowledged; a delayed ACK made that 40 ms a login.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    sock = sockets.dial("127.0.0.1", server.getsockname()[1], timeout=5)
    peer, _ = server.accept()
    try:
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 0)  # delayed-ACK mode, as after a while
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK) == 0
        peer.sendall(b"SSH-2.0-test\r\n")
        assert sock.recv(64) == b"SSH-2.0-test\r\n"
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK) == 1
    finally:
        sock.close()
        peer.close()
        server.close()


class StderrChannel(FakeChannel):
    def __init__(self, feed, stderr: bytes, **kwargs) -> None:
        super().__init__(feed, **kwargs)
        self.stderr_left = stderr

    def recv_stderr_ready(self) -> bool:
        return bool(self.stderr_left)

    def recv_stderr(self, size: int) -> bytes:
        data, self.stderr_left = self.stderr_left, b""
        return data


def test_become_with_a_password_sends_it_before_the_script_and_a_refusal_is_one_reason() -> None:
    chunks = iter([b"out", b""])
    channel = FakeChannel(lambda: next(chunks), exit_status=0)
    how = become.Become("root", become.Secret("pw word"))
    transport.run(fake_conn(channel), "echo a", become=how, timeout=5)
    assert channel.command == how.command() and "pw word" not in channel.command
    assert channel.sent == (b"pw word\n" + how.marker.encode()
                            + b"\n{\nunset __fn_kd; LC_ALL=C; export LC_ALL\necho a\n}\n")

    refused = StderrChannel(lambda: b"", b"Sorry, try again.\nsudo: 1 incorrect password attempt\n", exit_status=1)
    with pytest.raises(transport.BecomeFailed, match=r"^sudo refused the password") as info:
        transport.run(fake_conn(refused), "echo a", become=how, timeout=5, partial=True)
    assert "pw word" not in str(info.value) and isinstance(info.value, transport.CommandFailed)
    # Without become, the same exit is the script's own.
    plain = StderrChannel(lambda: b"", b"sudo: 1 incorrect password attempt\n", exit_status=1)
    assert transport.run(fake_conn(plain), "echo a", timeout=5).exit_code == 1


def test_after_the_shorten_marker_the_exec_is_cut_soon_and_returns_what_came() -> None:
    sent = iter([b"step 1\n@@fabnet:n:ar", b"med:eth0@@\nstep 2\n"])

    def feed() -> bytes | None:
        return next(sent, None)  # then silence: the session's own path was cut

    started = time.monotonic()
    channel = FakeChannel(feed)
    conn = fake_conn(channel)
    ends: list[bytes] = []
    channel.shutdown_write = lambda: ends.append(channel.sent)
    result = transport.run(conn, "x", timeout=60, shorten_after=("@@fabnet:n:armed:", 0.5))
    assert result.cut and result.exit_code == -1 and result.stdout.endswith("step 2\n")
    assert time.monotonic() - started < 5  # not the 60 s timeout
    # Standard input stayed open after the script until the marker came, then got the one line that
    # acknowledges it, and ended.
    assert ends == [transport.framed("x").encode() + b"\n"]
    # Without the marker the deadline is the timeout, and running past it is an error.
    with pytest.raises(transport.CommandFailed, match="no result in time"):
        transport.run(fake_conn(FakeChannel(lambda: None)), "x", timeout=0.5, shorten_after=("@@never", 0.1))


def test_aes_gcm_is_offered_first_and_every_other_cipher_stays_behind_it() -> None:
    ours, theirs = socket.socketpair()
    try:
        made = transport._transport(ours)
        ciphers = made.get_security_options().ciphers
    finally:
        ours.close()
        theirs.close()
    assert ciphers[:2] == ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")
    assert sorted(ciphers) == sorted(paramiko.Transport._preferred_ciphers)  # a server without GCM still connects
