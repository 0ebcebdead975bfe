"""The only place that connects and opens channels: strict host keys, a cancellable login, and one exec
with hard limits (its channel is read in channels.py, which also keeps a shell open for watch's cycles).

Host keys are checked against the inventory's `fabnet_known_hosts` file, the user's known_hosts and
any UserKnownHostsFile from ~/.ssh/config, read as OpenSSH reads them (knownhosts.py); an unknown,
changed or revoked key refuses the connection (Fabric's default would accept any key). ~/.ssh/config
is honoured, ProxyJump included; jump hosts get the same policy, and an error on one names it.

The exec sends its script on standard input (through sudo where the inventory asks: become.py) and
reads at most a fixed amount of output until a deadline, whatever the host prints; `interrupt()`
(Ctrl-C) ends every login and exec within a poll.
"""

from __future__ import annotations

import logging
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paramiko
from fabric import Config, Connection

from provisioner.errors import FabnetError
from provisioner.load.inventory import Host
from provisioner.run import knownhosts
from provisioner.run.become import Become
from provisioner.run.become import failure as become_failure
from provisioner.run.channels import ENDINGS as ENDINGS
from provisioner.run.channels import Ended as Ended
from provisioner.run.channels import ExecResult as ExecResult
from provisioner.run.channels import KeptShell, Unanswered, collect, framed
from provisioner.run.loginerrors import UnknownHostKey, login_failure, oserror, short
from provisioner.run.sockets import dial, interrupted
from provisioner.run.sockets import interrupt as interrupt  # Ctrl-C stops every login and exec through here
from provisioner.run.sockets import reset as reset

# paramiko logs a traceback for every failed handshake; its errors reach the operator as one reason
# each (HostUnreachable), so its log stays out of the terminal.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

MAX_STDOUT = 96 * 1024 * 1024  # one host's whole exec; the script caps each probe far below this
MAX_STDERR = 64 * 1024


class HostUnreachable(FabnetError):
    """The host could not be reached or logged into; `reason` says why in words an operator can act on."""

    def __init__(self, host: str, reason: str) -> None:
        self.host = host
        self.reason = reason
        super().__init__(f"{host}: {reason}")


class CommandFailed(FabnetError):
    """The remote exec itself failed (not one probe inside it)."""


class NotStarted(CommandFailed):
    """The exec could not be started (the connection was gone, or the server refused a channel): nothing
    of the script ran, so it may be tried again over a new connection."""


class BecomeFailed(CommandFailed):
    """sudo refused to run the script (wrong or missing password, not allowed): nothing of it ran."""


class _Refuse(paramiko.MissingHostKeyPolicy):
    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        raise UnknownHostKey(key)


def _harden(conn: Connection, known: knownhosts.KnownHosts) -> None:
    conn.client.set_missing_host_key_policy(_Refuse())
    # SSHClient keeps its trusted keys here; ours understands patterns and skips what it must. The
    # "system" set stays empty, so no key reaches the check without passing our loader.
    conn.client._host_keys = known.keys
    conn.client._system_host_keys = paramiko.HostKeys()


# -------------------------------------------------------------------------------------------- connect


def connect(host: Host, *, connect_timeout: float = 10.0, ssh_config: Path | None = None) -> Connection:
    """An open connection to `host`, or HostUnreachable with the reason.

    `ssh_config` replaces ~/.ssh/config (HostName, User, Port, IdentityFile, ProxyJump are honoured).
    """
    conn = _connection(host, connect_timeout, ssh_config, login=True)
    known = knownhosts.load_cached(knownhosts.files_for(conn.ssh_config.get("userknownhostsfile"), host.known_hosts))
    try:
        _open_chain(_hops(conn, known), host.name, known, connect_timeout, target=conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _connection(host: Host, timeout: float, ssh_config: Path | None, *, login: bool = False) -> Connection:
    """A Connection not yet opened: the inventory's user and port only where it set them, so that
    ~/.ssh/config (or `ssh_config`) decides the rest, as ssh would. For a login, the inventory's key
    goes first, before the config's IdentityFile ones (Fabric merges them)."""
    kwargs: dict[str, object] = {"banner_timeout": timeout, "auth_timeout": timeout}
    if login and host.key_file:
        kwargs["key_filename"] = [str(host.key_file)]
    return Connection(host.ssh_config_host, user=host.user if "user" in host.explicit else None,
                      port=host.port if "port" in host.explicit else None, connect_timeout=max(0.5, timeout),
                      connect_kwargs=kwargs,
                      config=Config(runtime_ssh_path=str(ssh_config)) if ssh_config else Config())


def _hops(first: Connection, known: knownhosts.KnownHosts) -> list[Connection]:
    """`first`, then each jump host outwards, every one held to known_hosts."""
    chain: list[Connection] = []
    hop: Connection | None = first
    while isinstance(hop, Connection):
        _harden(hop, known)
        chain.append(hop)
        hop = hop.gateway if isinstance(hop.gateway, Connection) else None
    return chain


def _open_chain(chain: list[Connection], host_name: str, known: knownhosts.KnownHosts, timeout: float,
                target: Connection | None = None) -> None:
    # Outermost jump host first, so a failure is blamed on the hop where it happened.
    for hop in reversed(chain):
        _open(hop, host_name, "" if hop is target else f"jump host {hop.host}: ", known, timeout)


def _open(hop: Connection, host_name: str, role: str, known: knownhosts.KnownHosts, timeout: float) -> None:
    where = f"{hop.host}:{hop.port}"
    if interrupted.is_set():
        raise HostUnreachable(host_name, f"{role}interrupted before connecting")
    hop.connect_kwargs["transport_factory"] = _transport
    if not hop.gateway:
        try:
            hop.connect_kwargs["sock"] = dial(hop.host, int(hop.port), timeout)
        except InterruptedError as exc:
            raise HostUnreachable(host_name, f"{role}interrupted while connecting to {where}") from exc
        except OSError as exc:
            raise HostUnreachable(host_name, f"{role}cannot connect to {where}: {oserror(exc)}") from exc
    started = time.monotonic()
    try:
        hop.open()
    except Exception as exc:  # paramiko and the socket raise many types; each becomes one clear reason
        if interrupted.is_set():
            raise HostUnreachable(host_name, f"{role}interrupted while logging in to {where}") from exc
        slow = time.monotonic() - started >= 0.5 * timeout
        raise HostUnreachable(host_name, role + login_failure(exc, hop, known, timeout if slow else None)) from exc


# AES-GCM first where the server has it (OpenSSH since 6.2): one call into the C library per packet each way,
# where paramiko's default, AES-CTR with a separate HMAC, also compares every packet's MAC in Python. A watch
# reads every host each cycle, so the controller pays that per packet per host. The other ciphers stay behind it.
_AEAD = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")


def _transport(*args: Any, **kwargs: Any) -> paramiko.Transport:
    made = paramiko.Transport(*args, **kwargs)
    options = made.get_security_options()
    options.ciphers = tuple(c for c in _AEAD if c in options.ciphers) + tuple(
        c for c in options.ciphers if c not in _AEAD)
    return made


@dataclass(frozen=True)
class ServerKey:
    """The key a host presented, the name its known_hosts lines go under, and the files read for it."""

    key: paramiko.PKey
    lookup_name: str  # `address`, or `[address]:port` off port 22, as OpenSSH and paramiko look it up
    known_hosts: list[Path]


def host_key(host: Host, *, timeout: float = 10.0, ssh_config: Path | None = None) -> ServerKey:
    """Read the key `host` presents with a key exchange and nothing after it: no login, no trust given.

    As a login does, the key types known_hosts already holds for the host are asked for first, so a
    known host shows the key it is known by. Behind ProxyJump, each jump host is logged into as a login
    would (its own key checked against known_hosts) and the key exchange goes through it; a ProxyCommand
    is not supported here: HostUnreachable says so.
    """
    conn = _connection(host, timeout, ssh_config)
    files = knownhosts.files_for(conn.ssh_config.get("userknownhostsfile"), host.known_hosts)
    where = f"{conn.host}:{conn.port}"
    name = conn.host if int(conn.port) == 22 else f"[{conn.host}]:{conn.port}"
    known_hosts = knownhosts.load_cached(files)
    known = known_hosts.keys.lookup(name)
    prefer = list(known.keys()) if known else []
    if conn.gateway and not isinstance(conn.gateway, Connection):
        raise HostUnreachable(host.name, "its host key cannot be read through a ProxyCommand; pin it by hand")
    try:
        sock = _through_jumps(conn, host.name, known_hosts, timeout)
    except (InterruptedError, OSError) as exc:
        conn.close()
        raise HostUnreachable(host.name, f"cannot connect to {where}: {oserror(exc)}") from exc
    except BaseException:
        conn.close()
        raise
    client_transport = paramiko.Transport(sock)
    try:
        client_transport.banner_timeout = timeout
        options = client_transport.get_security_options()
        options.key_types = [k for k in prefer if k in options.key_types] + \
            [k for k in options.key_types if k not in prefer]
        client_transport.start_client(timeout=timeout)
        key = client_transport.get_remote_server_key()
    except Exception as exc:  # paramiko raises many types; each becomes one reason
        raise HostUnreachable(host.name, f"no SSH key exchange with {where}: {short(exc)}") from exc
    finally:
        client_transport.close()
        conn.close()  # and the jump hosts' connections, if any
    return ServerKey(key, name, files)


def _through_jumps(conn: Connection, host_name: str, known: knownhosts.KnownHosts,
                   timeout: float) -> socket.socket | paramiko.Channel:
    """A byte stream to `conn`'s SSH port: a TCP socket, or a channel through its logged-in jump hosts."""
    gateway = conn.gateway if isinstance(conn.gateway, Connection) else None
    if gateway is None:
        return dial(conn.host, int(conn.port), timeout)
    _open_chain(_hops(gateway, known), host_name, known, timeout)
    jump = gateway.client.get_transport()
    if jump is None:
        raise HostUnreachable(host_name, f"jump host {gateway.host}: its connection closed")
    try:
        channel: paramiko.Channel = jump.open_channel("direct-tcpip", (conn.host, int(conn.port)), ("", 0),
                                                      timeout=timeout)
        return channel
    except paramiko.ChannelException as exc:
        raise HostUnreachable(host_name, f"the jump host could not open a connection to {conn.host}:{conn.port}: "
                                         f"{exc.text or exc.code}") from exc
    except paramiko.SSHException as exc:
        raise HostUnreachable(host_name, f"jump host {gateway.host}: {short(exc)}") from exc


# ----------------------------------------------------------------------------------------------- exec


def run(conn: Connection, script: str, *, become: Become | None = None, timeout: float = 120.0, partial: bool = False,
        shorten_after: tuple[str, float] | None = None, max_stdout: int = MAX_STDOUT,
        max_stderr: int = MAX_STDERR, ticks: float | None = None, open_timeout: float | None = None) -> ExecResult:
    """Run `script` with `sh -s` in ONE exec, the script on its standard input, for at most `timeout` seconds;
    through sudo as `become` says (become.py: the password, if any, goes on standard input before it).

    The script's text never shows in the host's process list and has no length limit; it goes as
    `framed` makes it. The command's own exit code is returned, never raised; a sudo that refused to
    run it raises BecomeFailed.

    Output past `max_stdout` ends the exec ("overflow"); stderr past `max_stderr` is read and dropped.
    A lost connection, the deadline and `interrupt()` end it too: with `partial`, the result keeps what
    arrived so far and `ended` says why; without, they raise CommandFailed with a one-line reason.
    Once the text `shorten_after[0]` shows in stdout, at most `shorten_after[1]` more seconds are waited;
    past that the output so far comes back with `cut` set (a change that cut the session's own path
    never ends the exec by itself). Until then standard input stays open; the marker's arrival is
    acknowledged with a newline on it, then it is closed. A script can wait for that line before a
    change that may cut its path, so the marker has surely arrived by then (changes.py).

    With `ticks` (seconds), standard input stays open after the script and a newline goes on it every
    `ticks` seconds: the clock of the script's watchdog (batch.py), whose end tells it the connection
    is gone.

    `open_timeout` bounds the wait for the exec's channel (one round trip on a live connection): a kept
    session whose path died since its last use is found within it, not at the end of `timeout`.
    """
    started = time.monotonic()
    deadline = started + timeout
    client_transport = conn.client.get_transport()
    if client_transport is None or not client_transport.is_active():
        raise NotStarted("connection lost before the command started")
    try:
        opening = min(timeout, 30.0, open_timeout if open_timeout is not None else 30.0)
        channel = client_transport.open_session(timeout=max(1.0, opening))
        channel.settimeout(max(1.0, min(timeout, 30.0)))
        channel.exec_command(become.command() if become else "sh -s")
        prefix = become.stdin_prefix() if become else b""
        channel.sendall(prefix + framed(script).encode())
        if ticks is None and shorten_after is None:
            channel.shutdown_write()
    except (paramiko.SSHException, OSError, EOFError) as exc:
        if interrupted.is_set():
            raise CommandFailed("interrupted") from exc
        # The script is one brace group: a shell that got only part of it runs none of it.
        raise _not_started(client_transport, exc) from exc
    try:
        result = collect(channel, client_transport, started, deadline, max_stdout, max_stderr, shorten_after,
                         ticks)
    finally:
        channel.close()
    if become and (refused := become_failure(become, result.exit_code, result.stdout, result.stderr)):
        raise BecomeFailed(refused)
    if not partial and result.ended != "exited" and not result.cut:
        raise CommandFailed(f"{conn.host}: {ENDINGS.get(result.ended, result.ended)}")
    return result


def open_shell(conn: Connection, *, become: Become | None = None, open_timeout: float = 30.0) -> KeptShell:
    """A shell kept open on `conn` for many runs (channels.KeptShell), through sudo as `become` says.
    Raises NotStarted when no channel opens."""
    client_transport = conn.client.get_transport()
    if client_transport is None or not client_transport.is_active():
        raise NotStarted("connection lost before the command started")
    try:
        channel = client_transport.open_session(timeout=max(1.0, min(open_timeout, 30.0)))
        channel.exec_command(become.command() if become else "sh -s")
        if become:
            channel.sendall(become.stdin_prefix())
    except (paramiko.SSHException, OSError, EOFError) as exc:
        raise _not_started(client_transport, exc) from exc
    return KeptShell(channel, client_transport)


def run_kept(shell: KeptShell, host: str, script: str, *, become: Become | None = None, timeout: float = 120.0,
             partial: bool = False, ticks: float | None = None, open_timeout: float = 30.0) -> ExecResult:
    """`run`, in a kept shell instead of an exec of its own: the same result, limits and errors, for a
    script that only reads. The shell must be ready (shell.ready()); one whose run did not end by itself is
    left unusable. A shell that does not acknowledge the run within `open_timeout` (as an exec's channel
    must open within it) raises NotStarted: a read-only run may be tried again over a new login."""
    started = time.monotonic()
    try:
        end = shell.send(script)
        result = shell.read(end, started, started + timeout, MAX_STDOUT, MAX_STDERR, ticks,
                            answer_by=started + max(1.0, min(open_timeout, timeout)))
    except (paramiko.SSHException, OSError, EOFError, Unanswered) as exc:
        shell.usable = False
        ended = exc.ended if isinstance(exc, Unanswered) else None
        if become and ended and (refused := become_failure(become, ended.exit_code, ended.stdout, ended.stderr)):
            raise BecomeFailed(refused) from exc
        if interrupted.is_set():
            raise CommandFailed("interrupted") from exc
        raise _not_started(shell.client_transport, exc) from exc
    if not partial and result.ended != "exited":
        raise CommandFailed(f"{host}: {ENDINGS.get(result.ended, result.ended)}")
    return result


def _not_started(client_transport: paramiko.Transport, exc: BaseException) -> NotStarted:
    return NotStarted("connection lost" if not client_transport.is_active() else
                      f"cannot start the command: {short(exc)}")
