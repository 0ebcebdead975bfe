"""One host's SSH session for one command: opened on first use, reused for every exec after it (facts,
changes, re-check, smoke launch and kill), closed once by its owner.

An SSH login costs about seven round trips and an exec about three, so a command that talks to a host
more than once keeps its session. A session whose connection has died (an idle session during a prompt,
a restarted sshd) is logged into again before an exec that has not started; an exec that did start is
never repeated, since what it did on the host cannot be known from here. transport.py stays the only
module that speaks SSH; this is where the rest of fabnet gets a connection from.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fabric import Connection

from provisioner.load.inventory import Host
from provisioner.run import become, transport
from provisioner.run.channels import KeptShell
from provisioner.run.sockets import interrupted

# Idle sessions (a run waiting at its confirmation prompt, a batch waiting its turn) send a keepalive
# this often, so a NAT or firewall between does not forget them.
KEEPALIVE_SECONDS = 15


@dataclass(frozen=True)
class Options:
    """How every command reaches its hosts."""

    forks: int = 50
    connect_timeout: float = 10.0
    command_timeout: float = 120.0
    ssh_config: Path | None = None
    become_password: become.Secret | None = None  # for hosts with ansible_become; never shown (Secret)


class HostSession:
    """A host's connection for one command. Thread-safe: the smoke launcher's rank exec and its kill
    exec run at once over one session, on two channels."""

    def __init__(self, host: Host, options: Options, *, keep_shell: bool = False) -> None:
        self.host = host
        self.options = options
        self.execs = 0
        self.logins = 0
        self._conn: Connection | None = None
        self._lock = threading.Lock()
        # A command that runs a script again and again (watch) keeps one shell open for them (channels.py):
        # each run then costs the host no new process for the channel, login shell and `sh`.
        self._keep_shell = keep_shell
        self._shell: KeptShell | None = None
        self._shell_as: tuple[Connection, str | None] | None = None
        self._shell_lock = threading.Lock()

    def _connection(self, fresh: bool = False) -> Connection:
        with self._lock:
            conn = self._conn
            client_transport = conn.client.get_transport() if conn is not None else None
            alive = client_transport is not None and client_transport.is_active()
            if conn is not None and (fresh or not alive):
                conn.close()
                conn = self._conn = None
            if conn is None:
                conn = transport.connect(self.host, connect_timeout=self.options.connect_timeout,
                                         ssh_config=self.options.ssh_config)
                client_transport = conn.client.get_transport()
                if client_transport is not None:
                    client_transport.set_keepalive(KEEPALIVE_SECONDS)
                self._conn = conn
                self.logins += 1
            return conn

    def connect(self) -> None:
        """Log in now (raises HostUnreachable), where a command wants to know before it goes on."""
        self._connection()

    def exec(self, script: str, *, timeout: float | None = None, partial: bool = False,
             ticks: float | None = None, shorten_after: tuple[str, float] | None = None,
             forward_ssh: bool = False, sudo: bool = True) -> transport.ExecResult:
        """Run `script` in one exec (transport.run), through sudo where the inventory asks.

        Raises HostUnreachable when no login gets through, CommandFailed when the exec fails.
        """
        how = become.for_host(self.host, self.options.become_password, forward_ssh=forward_ssh) if sudo else None
        limit = self.options.command_timeout if timeout is None else timeout
        # A run that talks back on standard input (shorten_after) needs an exec of its own; so does one that
        # finds the kept shell busy (two runs at once on one session).
        kept = self._keep_shell and shorten_after is None and not forward_ssh and self._shell_lock.acquire(False)
        try:
            for attempt in (1, 2):
                conn = self._connection(fresh=attempt == 2)
                try:
                    if kept:
                        result = self._run_kept(conn, how, script, limit, partial, ticks)
                    else:
                        # A channel that does not open within the login's own timeout is a dead path: it is
                        # found there (then logged into again, once), not at the end of the command's timeout.
                        result = transport.run(conn, script, become=how, timeout=limit, partial=partial,
                                               ticks=ticks, shorten_after=shorten_after,
                                               open_timeout=self.options.connect_timeout)
                except transport.NotStarted:
                    # Nothing ran on the host: a kept session that died while idle is opened again, once.
                    if attempt == 2 or interrupted.is_set():
                        raise
                    continue
                self.execs += 1
                return result
            raise AssertionError("unreachable")  # the loop returns or raises
        finally:
            if kept:
                self._shell_lock.release()

    def _run_kept(self, conn: Connection, how: become.Become | None, script: str, limit: float, partial: bool,
                  ticks: float | None) -> transport.ExecResult:
        """One run in the kept shell, opened first where there is none, or it failed its last run, or it
        belongs to an older connection or another sudo user. Called with the shell's lock held."""
        as_whom = (conn, how.user if how else None)
        shell = self._shell
        if shell is None or self._shell_as != as_whom or not shell.ready():
            if shell is not None:
                shell.close()
            self._shell = None
            shell = transport.open_shell(conn, become=how, open_timeout=self.options.connect_timeout)
            self._shell, self._shell_as = shell, as_whom
        try:
            return transport.run_kept(shell, self.host.name, script, become=how, timeout=limit, partial=partial,
                                      ticks=ticks, open_timeout=self.options.connect_timeout)
        finally:
            if not shell.usable:
                # A run that did not end by itself may still be going: the end of its standard input tells
                # its watchdog to stop it, as a closed exec does.
                shell.close()
                self._shell = None

    def close(self) -> None:
        with self._lock:
            self._shell = None  # closed with its connection
            if self._conn is not None:
                self._conn.close()
                self._conn = None


@contextmanager
def open_session(host: Host, options: Options) -> Iterator[HostSession]:
    """A session that is closed when the block ends, however it ends."""
    session = HostSession(host, options)
    try:
        yield session
    finally:
        session.close()


class Sessions:
    """The sessions of one command, one per host, kept open from the first exec to the command's end
    (apply: gather, then the prompt, then changes and re-check over the same connection)."""

    def __init__(self, options: Options, *, keep_shells: bool = False) -> None:
        self.options = options
        self.keep_shells = keep_shells  # one kept shell per host (watch: HostSession's keep_shell)
        self._by_name: dict[str, HostSession] = {}
        self._lock = threading.Lock()

    def __call__(self, host: Host) -> HostSession:
        with self._lock:
            session = self._by_name.get(host.name)
            if session is None:
                session = self._by_name[host.name] = HostSession(host, self.options, keep_shell=self.keep_shells)
            return session

    def close(self) -> None:
        with self._lock:
            sessions, self._by_name = list(self._by_name.values()), {}
        for session in sessions:
            session.close()

    def __enter__(self) -> Sessions:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
