"""Why an SSH login failed, in words an operator can act on: one reason per failure, from the many
exception types paramiko and the socket raise (run/transport.py raises them as HostUnreachable)."""

from __future__ import annotations

import socket
from typing import Protocol

import paramiko

from provisioner.run import knownhosts


class Hop(Protocol):
    """What a reason needs of the connection it is about (fabric's Connection has these)."""

    host: str
    port: int
    user: str


class UnknownHostKey(paramiko.SSHException):
    def __init__(self, key: paramiko.PKey) -> None:
        super().__init__("host key not found in known_hosts")
        self.key = key


def fingerprint(key: paramiko.PKey) -> str:
    return f"{key.get_name()} {key.fingerprint}"


def login_failure(exc: Exception, hop: Hop, known: knownhosts.KnownHosts,
                   waited: float | None = None) -> str:
    """Why a login failed, in words to act on; `waited` is set when it failed only after a long wait."""
    where = f"{hop.host}:{hop.port}"
    files = ", ".join(map(str, known.files)) or "none found"
    if isinstance(exc, paramiko.BadHostKeyException | UnknownHostKey):
        key = exc.key
        if known.is_revoked(key):
            return (f"host key of {hop.host} ({fingerprint(key)}) is marked @revoked in known_hosts. "
                    "Refusing to connect.")
        if isinstance(exc, paramiko.BadHostKeyException):
            return (f"host key mismatch for {hop.host}: it presented {fingerprint(key)}, which does not match "
                    "known_hosts (the host was reinstalled, or someone is in the middle). Refusing to connect.")
        return (f"host key of {hop.host} ({fingerprint(key)}) is not in known_hosts ({files}); add it "
                "(ssh-keyscan, then verify the fingerprint) or set fabnet_known_hosts. Refusing to connect.")
    if isinstance(exc, paramiko.ChannelException):
        return f"the jump host could not open a connection to {where}: {exc.text or exc.code}"
    if isinstance(exc, paramiko.AuthenticationException):
        return f"authentication failed as {hop.user}: {short(exc)}"
    message = str(exc)
    closed = ("No existing session", "Error reading SSH protocol banner", "Connection reset")
    if any(text in message for text in closed) or isinstance(exc, EOFError | ConnectionError):
        if waited is not None:
            return f"no answer from the SSH server at {where} within {waited:g} s (overloaded, or not an SSH server?)"
        return (f"the SSH server at {where} closed the connection before login (is sshd running and accepting "
                "connections? see MaxStartups, and the host's sshd log)")
    if isinstance(exc, paramiko.SSHException):
        return f"SSH error with {where}: {short(exc)}"
    if isinstance(exc, OSError):
        return f"cannot connect to {where}: {oserror(exc)}"
    return f"cannot log in to {where}: {type(exc).__name__}: {short(exc)}"


def short(exc: BaseException, limit: int = 200) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def oserror(exc: OSError) -> str:
    if isinstance(exc, TimeoutError | socket.timeout):
        return "timed out"
    return exc.strerror or str(exc) or type(exc).__name__
