"""Private key files checked once, before any host is contacted: one that cannot log anyone in is a
configuration error naming the file, not one "unreachable" per host with an OS error and no path.

The files are those the SSH transport hands to paramiko: the inventory's `ansible_ssh_private_key_file`
and every `IdentityFile` the ssh_config gives a host. Each is loaded as paramiko loads it at login, so
what passes here is what the login can use.
"""

from __future__ import annotations

import base64
import binascii
import re
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import paramiko

from provisioner.errors import ConfigError, ConfigErrors
from provisioner.load.inventory import Host

KEY_CLASSES = (paramiko.RSAKey, paramiko.ECDSAKey, paramiko.Ed25519Key)  # what paramiko's login tries
MAX_KEY_BYTES = 1024 * 1024  # a private key larger than this is not one
HOSTS_SHOWN = 3
_PUBLIC_KEY = re.compile(rb"^\s*(?:ssh-|ecdsa-|sk-)[A-Za-z0-9@.-]+ +[A-Za-z0-9+/]{16,}={0,3}(?: |\s*$)")
_OPENSSH_BODY = re.compile(rb"-----BEGIN OPENSSH PRIVATE KEY-----(.*?)-----END OPENSSH PRIVATE KEY-----", re.DOTALL)


@dataclass
class _Use:
    """One key file and who uses it: the hosts, and where the setting was written (for the message)."""

    path: Path
    hosts: list[str] = field(default_factory=list)
    origin: tuple[str | None, int | None, str | None] = (None, None, None)  # file, line, key


def check_keys(hosts: Sequence[Host], ssh_config: Path | None = None, *,
               agent_keys: Callable[[], set[bytes]] | None = None) -> None:
    """Raise ConfigError (ConfigErrors for several) naming each unusable key file once, with its hosts.

    `ssh_config` replaces ~/.ssh/config as in transport.connect; `agent_keys` lists the public keys an
    SSH agent holds (default: ask the agent of SSH_AUTH_SOCK), which makes a passphrase-protected key
    usable.
    """
    uses: dict[Path, _Use] = {}
    for host in hosts:
        if host.key_file is not None:
            use = uses.setdefault(host.key_file, _Use(host.key_file))
            use.hosts.append(host.name)
            if use.origin == (None, None, None):
                origin = next((host.var_origins[v] for v in ("ansible_ssh_private_key_file",
                                                             "ansible_private_key_file") if v in host.var_origins),
                              None)
                if origin is not None:
                    use.origin = (origin.file, origin.line, origin.key or None)
    config_files = _identity_files(hosts, ssh_config)
    for host in hosts:
        for path in config_files.get(host.ssh_config_host, ()):
            use = uses.setdefault(path, _Use(path, origin=(str(ssh_config) if ssh_config else "ssh_config",
                                                           None, "IdentityFile")))
            if host.name not in use.hosts:
                use.hosts.append(host.name)
    errors: list[ConfigError] = []
    agent: set[bytes] | None = None
    for use in uses.values():
        problem = key_problem(use.path)
        if problem == _ENCRYPTED:
            if agent is None:
                agent = (agent_keys or _agent_keys)()
            public = public_blob(use.path)
            # An agent holding this key (or, when the file does not say which key it is, any key) logs in.
            if (public in agent) if public is not None else bool(agent):
                continue
            problem = ("is protected by a passphrase and no SSH agent holds it: add it to an agent "
                       "(ssh-add) or use a key without a passphrase")
        if problem is not None:
            file, line, key = use.origin
            errors.append(ConfigError(f"private key {use.path} {problem} ({_hosts(use.hosts)})",
                                      file=file, line=line, key=key))
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ConfigErrors(errors)


_ENCRYPTED = "encrypted"


def key_problem(path: Path) -> str | None:
    """What makes `path` unusable as a private key, in words ending a sentence "private key PATH ...";
    `_ENCRYPTED` for a key that needs its passphrase; None for a usable key."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    if stat.S_ISDIR(info.st_mode):
        return "is a directory, not a key file"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"  # a FIFO or device would hang the login that reads it
    if info.st_size > MAX_KEY_BYTES:
        return f"is not a private key ({info.st_size} bytes)"
    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    if _PUBLIC_KEY.match(data):
        hint = f" (the private key is usually {path.with_suffix('')})" if path.suffix == ".pub" else ""
        return f"is a public key: name the private key instead{hint}"
    encrypted = False
    for key_class in KEY_CLASSES:
        try:
            key_class.from_private_key_file(str(path))
            return None
        except paramiko.PasswordRequiredException:
            encrypted = True
        except (paramiko.SSHException, ValueError, TypeError, OSError):
            continue
    if encrypted:
        return _ENCRYPTED
    return "is not a private key that SSH can use (RSA, ECDSA or Ed25519, in OpenSSH or PEM format)"


def public_blob(path: Path) -> bytes | None:
    """The public key of a private key file without its passphrase: from an OpenSSH-format file (which
    stores it in clear) or a `PATH.pub` beside it; None when neither says."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    body = _OPENSSH_BODY.search(data)
    if body is not None:
        try:
            raw = base64.b64decode(b"".join(body.group(1).split()))
            magic = b"openssh-key-v1\x00"
            if raw.startswith(magic):
                message = paramiko.Message(raw[len(magic):])
                for _ in range(3):  # cipher, kdf, kdf options
                    message.get_string()
                if message.get_int() >= 1:
                    return message.get_binary()
        except (binascii.Error, ValueError, paramiko.SSHException, IndexError):
            pass
    try:
        fields = path.with_name(path.name + ".pub").read_bytes().split()
        return base64.b64decode(fields[1]) if len(fields) >= 2 else None
    except (OSError, binascii.Error, ValueError):
        return None


def _agent_keys() -> set[bytes]:
    try:
        agent = paramiko.Agent()
    except (paramiko.SSHException, OSError):
        return set()
    try:
        return {key.asbytes() for key in agent.get_keys()}
    finally:
        agent.close()


def _identity_files(hosts: Sequence[Host], ssh_config: Path | None) -> dict[str, list[Path]]:
    """ssh_config host name -> the IdentityFile paths the config gives it, looked up as the transport
    does (Fabric's config: `ssh_config` alone, else ~/.ssh/config and /etc/ssh/ssh_config)."""
    from fabric import Config  # here: only the key check needs it at load time

    try:
        lookup = (Config(runtime_ssh_path=str(ssh_config)) if ssh_config else Config()).base_ssh_config
    except Exception:  # an unreadable config fails each login with its own reason, as before
        return {}
    found: dict[str, list[Path]] = {}
    for name in dict.fromkeys(h.ssh_config_host for h in hosts):
        try:
            files = lookup.lookup(name).get("identityfile", [])
        except Exception:
            continue
        found[name] = [Path(f).expanduser() for f in ([files] if isinstance(files, str) else files)]
    return found


def _hosts(names: Sequence[str]) -> str:
    shown = ", ".join(names[:HOSTS_SHOWN])
    more = len(names) - HOSTS_SHOWN
    word = "host" if len(names) == 1 else "hosts"
    return f"{word} {shown}" + (f" and {more} more" if more > 0 else "")


__all__ = ["check_keys", "key_problem", "public_blob"]
