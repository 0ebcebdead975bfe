"""The only place that talks SSH: Fabric connections with strict host-key checking, and one exec.

Host keys are checked against the inventory's `fabnet_known_hosts` file, the user's known_hosts and
any UserKnownHostsFile from ~/.ssh/config; an unknown or changed key refuses the connection (Fabric's
default would accept any key). ~/.ssh/config is honoured, ProxyJump included, and jump hosts get the
same strict policy.
"""

from __future__ import annotations

import shlex
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import paramiko
from fabric import Config, Connection

from provisioner.errors import FabnetError
from provisioner.inventory import Host


class HostUnreachable(FabnetError):
    """The host could not be reached or logged into; `reason` says why in words an operator can act on."""

    def __init__(self, host: str, reason: str) -> None:
        self.host = host
        self.reason = reason
        super().__init__(f"{host}: {reason}")


class CommandFailed(FabnetError):
    """The remote exec itself failed (not one probe inside it)."""


@dataclass(frozen=True)
class ExecResult:
    stdout: str
    stderr: str
    exit_code: int
    seconds: float


def _known_hosts_files(host: Host, conn: Connection) -> list[Path]:
    files = [Path("~/.ssh/known_hosts").expanduser()]
    for configured in str(conn.ssh_config.get("userknownhostsfile", "")).split():
        files.append(Path(configured).expanduser())
    if host.known_hosts:
        files.append(Path(host.known_hosts))
    return [f for f in files if f.is_file()]


def _harden(conn: Connection, files: list[Path]) -> None:
    conn.client.set_missing_host_key_policy(paramiko.RejectPolicy())
    keys = conn.client.get_host_keys()
    for path in files:
        keys.load(str(path))


def connect(host: Host, *, connect_timeout: float = 10.0, ssh_config: Path | None = None) -> Connection:
    """An open connection to `host`, or HostUnreachable with the reason.

    `ssh_config` replaces ~/.ssh/config (HostName, User, Port, IdentityFile, ProxyJump are honoured).
    """
    connect_kwargs: dict[str, object] = {"banner_timeout": connect_timeout, "auth_timeout": connect_timeout}
    if host.key_file:
        connect_kwargs["key_filename"] = [str(host.key_file)]
    explicit = host.explicit
    conn = Connection(
        host.ssh_config_host,
        user=host.user if "user" in explicit else None,
        port=host.port if "port" in explicit else None,
        connect_timeout=int(max(1, connect_timeout)),
        connect_kwargs=connect_kwargs,
        config=Config(runtime_ssh_path=str(ssh_config)) if ssh_config else Config(),
    )
    files = _known_hosts_files(host, conn)
    hop: Connection | None = conn
    while isinstance(hop, Connection):
        _harden(hop, files)
        hop = hop.gateway if isinstance(hop.gateway, Connection) else None
    if not conn.gateway:
        # Our own socket, so TCP_NODELAY is set before the handshake: it cuts login time several-fold.
        try:
            sock = socket.create_connection((conn.host, conn.port), timeout=connect_timeout)
        except OSError as exc:
            raise HostUnreachable(host.name, f"cannot connect to {conn.host}:{conn.port}: {_oserror(exc)}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.connect_kwargs["sock"] = sock
    try:
        conn.open()
    except paramiko.BadHostKeyException as exc:
        conn.close()
        raise HostUnreachable(
            host.name,
            f"host key mismatch for {conn.host}: it presented a {exc.key.get_name()} key that does not match "
            "known_hosts (the host was reinstalled, or someone is in the middle). Refusing to connect.",
        ) from exc
    except paramiko.SSHException as exc:
        conn.close()
        message = str(exc)
        if "not found in known_hosts" in message:
            raise HostUnreachable(
                host.name,
                f"host key of {conn.host} is not in known_hosts ({', '.join(map(str, files)) or 'none found'}); "
                "add it (ssh-keyscan, then verify the fingerprint) or set fabnet_known_hosts. Refusing to connect.",
            ) from exc
        if isinstance(exc, paramiko.AuthenticationException):
            raise HostUnreachable(host.name, f"authentication failed as {conn.user}: {message}") from exc
        raise HostUnreachable(host.name, f"SSH error: {message}") from exc
    except OSError as exc:
        conn.close()
        raise HostUnreachable(host.name, f"cannot connect to {conn.host}:{conn.port}: {_oserror(exc)}") from exc
    return conn


def _oserror(exc: OSError) -> str:
    if isinstance(exc, TimeoutError | socket.timeout):
        return "timed out"
    return exc.strerror or str(exc) or type(exc).__name__


def run(conn: Connection, script: str, *, timeout: float = 120.0) -> ExecResult:
    """Run `script` with /bin/sh in ONE exec; the script's own exit code is returned, never raised.

    Controller CPU is spent per SSH message, not per byte: the node keeps the script's output and sends
    it in one write, followed by the script's exit code on a line of its own (hundreds of small messages
    cost ~8 ms of CPU per host, one large one ~1 ms). The channel is read directly: invoke's runner
    (behind `Connection.run`) adds three polling threads per command.
    """
    started = time.monotonic()
    command = ("__fn_o=$(sh -c " + shlex.quote(script) + "; __fn_r=$?; printf '\\n%s' \"$__fn_r\"); "
               "printf '%s' \"$__fn_o\"")
    try:
        stdout, stderr, code = _exec(conn, command, started + timeout)
    except Exception as exc:  # channel errors, timeouts, a transport closed under us
        raise CommandFailed(f"{conn.host}: remote command failed: {type(exc).__name__}: {exc}") from exc
    body, _, tail = stdout.rpartition("\n")
    if tail.isdigit():
        stdout, code = body, int(tail)
    return ExecResult(stdout, stderr, code, time.monotonic() - started)


def _exec(conn: Connection, command: str, deadline: float) -> tuple[str, str, int]:
    transport = conn.client.get_transport()
    if transport is None:
        raise ConnectionError("not connected")

    def remaining() -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no result in time (--timeout)")
        return left

    channel = transport.open_session(timeout=remaining())
    try:
        channel.exec_command(command)
        channel.shutdown_write()  # no input: a command waiting on stdin sees end of file
        out, err = bytearray(), bytearray()
        while True:
            # Short waits so stderr is drained too: a full stderr window would stall stdout.
            channel.settimeout(min(remaining(), 0.5))
            try:
                data = channel.recv(65536)
            except TimeoutError:
                data = None
            while channel.recv_stderr_ready():
                err += channel.recv_stderr(65536)
            if data == b"":
                break
            if data:
                out += data
        while True:
            channel.settimeout(remaining())
            data = channel.recv_stderr(65536)
            if not data:
                break
            err += data
        if not channel.status_event.wait(remaining()):
            raise TimeoutError("no exit status in time (--timeout)")
        code = channel.recv_exit_status()
    finally:
        channel.close()
    return out.decode("utf-8", errors="replace"), err.decode("utf-8", errors="replace"), code


def run_stdin(conn: Connection, script: str, *, timeout: float = 600.0, become_user: str | None = None) -> ExecResult:
    """Run `script` with /bin/sh in ONE exec, the script on standard input (no argument-length limit,
    and the script's text never shows in the host's process list); through `sudo -n` when
    `become_user` is given. The script's own exit code is returned, never raised.

    The channel is driven with paramiko directly: invoke feeds a non-terminal stdin one byte per
    poll interval, which made a 10 kB script take minutes.
    """
    started = time.monotonic()
    command = "sh -s"
    if become_user:
        command = " ".join(shlex.quote(p) for p in ("sudo", "-n", "-H", "-u", become_user, "--", "sh", "-s"))
    try:
        transport = conn.client.get_transport()
        if transport is None:
            raise CommandFailed(f"{conn.host}: not connected")
        channel = transport.open_session(timeout=timeout)
        try:
            channel.settimeout(timeout)
            channel.exec_command(command)
            channel.sendall(script.encode())
            channel.shutdown_write()
            out, err = bytearray(), bytearray()
            deadline = started + timeout
            while True:
                busy = False
                if channel.recv_ready():
                    out += channel.recv(65536)
                    busy = True
                if channel.recv_stderr_ready():
                    err += channel.recv_stderr(65536)
                    busy = True
                if not busy:
                    if channel.exit_status_ready() and not channel.recv_ready() and not channel.recv_stderr_ready():
                        break
                    if time.monotonic() > deadline:
                        raise CommandFailed(f"{conn.host}: remote command timed out after {timeout:g} s")
                    time.sleep(0.002)
            code = channel.recv_exit_status()
        finally:
            channel.close()
    except CommandFailed:
        raise
    except Exception as exc:  # paramiko raises several types for channel and socket errors
        raise CommandFailed(f"{conn.host}: remote command failed: {type(exc).__name__}: {exc}") from exc
    return ExecResult(out.decode(errors="replace"), err.decode(errors="replace"), code, time.monotonic() - started)
