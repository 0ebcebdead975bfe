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
    cut: bool = False  # run_stdin gave up waiting after its `shorten_after` marker (the output is partial)


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
    """Run `script` with /bin/sh in ONE exec; the script's own exit code is returned, never raised."""
    started = time.monotonic()
    command = "sh -c " + shlex.quote(script)
    try:
        result = conn.run(command, hide=True, warn=True, in_stream=False, timeout=timeout, pty=False)
    except Exception as exc:  # invoke wraps timeouts and channel errors in several types
        raise CommandFailed(f"{conn.host}: remote command failed: {type(exc).__name__}: {exc}") from exc
    return ExecResult(result.stdout, result.stderr, result.exited, time.monotonic() - started)


def run_stdin(conn: Connection, script: str, *, timeout: float = 600.0, become_user: str | None = None,
              shorten_after: tuple[str, float] | None = None) -> ExecResult:
    """Run `script` with /bin/sh in ONE exec, the script on standard input (no argument-length limit,
    and the script's text never shows in the host's process list); through `sudo -n` when
    `become_user` is given. The script's own exit code is returned, never raised.

    The channel is driven with paramiko directly: invoke feeds a non-terminal stdin one byte per
    poll interval, which made a 10 kB script take minutes. Once the text `shorten_after[0]` shows in
    stdout, at most `shorten_after[1]` more seconds are waited; past that the partial output comes back
    with `cut` set (a change that cut the session's own path never ends the exec by itself).
    """
    started = time.monotonic()
    command = "sh -s"
    if become_user:
        # sudo resets the environment; the script needs SSH_CONNECTION to find the management path.
        command = " ".join(shlex.quote(p) for p in ("sudo", "-n", "-H", "-u", become_user, "--", "env")) + \
            ' "FABNET_SSH=$SSH_CONNECTION" sh -s'
    cut = False
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
                if shorten_after and shorten_after[0].encode() in out:
                    deadline = min(deadline, time.monotonic() + shorten_after[1])
                    shorten_after = None
                if not busy:
                    if channel.exit_status_ready() and not channel.recv_ready() and not channel.recv_stderr_ready():
                        break
                    if time.monotonic() > deadline and cut_allowed(shorten_after, deadline, started, timeout):
                        cut = True
                        break
                    if time.monotonic() > deadline:
                        raise CommandFailed(f"{conn.host}: remote command timed out after {timeout:g} s")
                    time.sleep(0.002)
            code = -1 if cut else channel.recv_exit_status()
        finally:
            channel.close()
    except CommandFailed:
        raise
    except Exception as exc:  # paramiko raises several types for channel and socket errors
        raise CommandFailed(f"{conn.host}: remote command failed: {type(exc).__name__}: {exc}") from exc
    return ExecResult(out.decode(errors="replace"), err.decode(errors="replace"), code, time.monotonic() - started,
                      cut=cut)


def cut_allowed(pending: tuple[str, float] | None, deadline: float, started: float, timeout: float) -> bool:
    """Whether a passed deadline is the shortened one (partial output returned) rather than the timeout."""
    return pending is None and deadline < started + timeout
