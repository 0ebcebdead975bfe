"""Trusting a new host's SSH key: read it, say what it is, decide, and pin it into known_hosts.

A key is trusted only when known_hosts already holds that same key, when the operator confirmed its
fingerprint, when it matches a fingerprint given beforehand (--fingerprint), or when the operator chose
trust on first use (--accept-new). A host whose known key changed is refused, as every login would
refuse it. Reading a key goes through transport.host_key (a key exchange, no login).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import paramiko

from provisioner.errors import ConfigError, FabnetError
from provisioner.load.connvars import check_address
from provisioner.load.hostplans import HostPlan
from provisioner.output.files import write_atomic
from provisioner.run import knownhosts, runner, transport
from provisioner.run.session import Options

KeyState = Literal["known", "unknown", "changed", "revoked", "unreachable"]
Trust = Literal["known_hosts", "fingerprint", "accept_new", "confirmed"]
TRUST_WORDS: dict[str, str] = {
    "known_hosts": "already in known_hosts with this key",
    "fingerprint": "matches the --fingerprint given",
    "accept_new": "trusted on first use (--accept-new): not verified",
    "confirmed": "fingerprint confirmed by the operator",
}


class PinError(FabnetError):
    """known_hosts could not be written; the message names the file."""


@dataclass
class KeyCheck:
    """One host's key: what it presented, what known_hosts says of it, and the decision."""

    name: str
    address: str
    state: KeyState
    key_type: str = ""
    key_base64: str = ""
    fingerprint: str = ""  # OpenSSH's form: SHA256:<base64 without padding>
    lookup_name: str = ""  # the name logins look the key up by (address, or [address]:port)
    pin_file: Path | None = None
    error: str | None = None  # why the key could not be read (unreachable)
    trust: Trust | None = None
    refused: str | None = None
    pinned: bool = False

    @property
    def trusted(self) -> bool:
        return self.trust is not None and self.refused is None


def fingerprint(blob: bytes) -> str:
    """The SHA256 fingerprint of a public key blob, as `ssh-keygen -l` prints it."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def valid_fingerprint(text: str) -> bool:
    """Whether `text` has the form of an OpenSSH SHA256 fingerprint (43 base64 characters after SHA256:)."""
    body = text.removeprefix("SHA256:")
    if not text.startswith("SHA256:") or len(body) != 43:
        return False
    try:
        return len(base64.b64decode(body + "=", validate=True)) == 32
    except ValueError:
        return False


def pin_file(plan: HostPlan) -> Path:
    """Where a host's key is pinned: the inventory's fabnet_known_hosts, else the user's known_hosts."""
    return plan.host.known_hosts or Path("~/.ssh/known_hosts").expanduser()


def classify(key: paramiko.PKey, lookup_name: str, known: knownhosts.KnownHosts) -> KeyState:
    """known (this very key), changed (other keys are known for the host), revoked, or unknown."""
    if known.is_revoked(key):
        return "revoked"
    entries = known.keys.lookup(lookup_name)
    if not entries:
        return "unknown"
    blob = key.asbytes()
    return "known" if any(k.asbytes() == blob for k in entries.values()) else "changed"


def read_key(plan: HostPlan, options: Options) -> KeyCheck:
    """The key the host presents and its standing in known_hosts (never raises: a task for the runner)."""
    host = plan.host
    try:
        server = transport.host_key(host, timeout=options.connect_timeout, ssh_config=options.ssh_config)
    except transport.HostUnreachable as exc:
        return KeyCheck(host.name, host.address, "unreachable", pin_file=pin_file(plan), error=exc.reason)
    blob = server.key.asbytes()
    state = classify(server.key, server.lookup_name, knownhosts.load_cached(server.known_hosts))
    return KeyCheck(host.name, host.address, state, server.key.get_name(), base64.b64encode(blob).decode(),
                    fingerprint(blob), server.lookup_name, pin_file(plan))


def read_keys(plans: Sequence[HostPlan], options: Options) -> list[KeyCheck]:
    return runner.each(plans, lambda plan: read_key(plan, options), forks=options.forks)


def decide(check: KeyCheck, fingerprints: frozenset[str], accept_new: bool,
           ask: Callable[[KeyCheck], bool] | None) -> None:
    """Set `check.trust` or `check.refused`. `ask` confirms on a terminal; None: there is none."""
    where = str(check.pin_file)
    if check.state == "unreachable":
        check.refused = check.error or "unreachable"
    elif check.state == "known":
        check.trust = "known_hosts"
    elif check.state == "revoked":
        check.refused = f"its host key {check.fingerprint} is marked @revoked in known_hosts"
    elif check.state == "changed":
        check.refused = (f"host key changed: it presents {check.fingerprint}, which does not match the key "
                         f"known_hosts holds for {check.lookup_name} (reinstalled, or someone in the middle); "
                         "remove the old line (ssh-keygen -R) only once you know why")
    elif fingerprints:
        if check.fingerprint in fingerprints:
            check.trust = "fingerprint"
        else:
            check.refused = f"it presents {check.fingerprint}, which is not the --fingerprint given"
    elif accept_new:
        check.trust = "accept_new"
    elif ask is not None:
        if ask(check):
            check.trust = "confirmed"
        else:
            check.refused = "its host key was not confirmed"
    else:
        check.refused = (f"unknown host key {check.fingerprint} and no terminal to confirm it: verify it out of "
                         "band, then pass --fingerprint (or --accept-new to trust on first use); "
                         f"{where} was not changed")


_BRACKETED = re.compile(r"\[(?P<address>[^\[\]]+)\]:(?P<port>[0-9]{1,5})")


def pinnable(name: str) -> bool:
    """Whether `name` stands for one host alone in known_hosts: a host name or IP address, or `[that]:port`.

    An inventory takes any text as a host name, but known_hosts reads `*`, `?`, `!`, `,` and whitespace
    as patterns and separators, and a line break starts a line of its own: pinned under such a name, the
    key would be trusted for other hosts, by fabnet and by OpenSSH alike."""
    bracketed = _BRACKETED.fullmatch(name)
    address = bracketed["address"] if bracketed else name
    try:
        check_address(address, None)
    except ConfigError:
        return False
    return True


def known_lines(check: KeyCheck, hashed: bool) -> list[str]:
    """The known_hosts lines pinning `check`'s key: plain `name,address type key`, or one hashed line
    per name where the file hashes its names (pure). Only names that stand for this host alone are
    written (`pinnable`); the inventory name is left out where it is not one."""
    names = [name for name in dict.fromkeys([check.name, check.lookup_name]) if pinnable(name)]
    if check.lookup_name not in names:
        raise PinError(f"{check.name}: cannot pin its key under {check.lookup_name!r}, which is not a plain "
                       "host name or address")
    key = f"{check.key_type} {check.key_base64}"
    if hashed:
        return [f"{paramiko.HostKeys.hash_host(name)} {key}" for name in names]
    return [f"{','.join(names)} {key}"]


def hashes_names(text: str) -> bool:
    """Whether a known_hosts file hashes its host names (every entry does; an empty file does not)."""
    entries = [line.split()[0] for line in text.splitlines()
               if line.strip() and not line.lstrip().startswith(("#", "@"))]
    return bool(entries) and all(name.startswith("|1|") for name in entries)


def with_pins(text: str, checks: Sequence[KeyCheck]) -> str:
    """`text` of a known_hosts file with the lines of `checks` appended (pure)."""
    hashed = hashes_names(text)
    added = [line for check in checks for line in known_lines(check, hashed)]
    if text and not text.endswith("\n"):
        text += "\n"
    return text + "".join(line + "\n" for line in added)


def pin(checks: Sequence[KeyCheck]) -> None:
    """Append the keys trusted but not yet known to their known_hosts files, each file in one atomic write."""
    by_file: dict[Path, list[KeyCheck]] = {}
    for check in checks:
        if check.trusted and check.state == "unknown" and check.pin_file is not None:
            by_file.setdefault(check.pin_file, []).append(check)
    for path, group in by_file.items():
        try:
            text = path.read_text() if path.exists() else ""
            mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
            if not path.parent.exists():
                path.parent.mkdir(mode=0o700, parents=True)
            write_atomic(path, with_pins(text, group), mode=mode)
        except (OSError, FabnetError) as exc:
            raise PinError(f"cannot pin host keys in {path}: {getattr(exc, 'strerror', None) or exc}") from exc
        for check in group:
            check.pinned = True
