"""known_hosts files read as OpenSSH reads them: patterns, hashed names, `@revoked`, and bad lines skipped.

paramiko's own loader stops at the first line it cannot decode ("Incorrect padding"), which refused
every host for one stray line, and it knows neither `@revoked` nor `@cert-authority`. Here a bad line
is skipped with a warning naming file:line, a revoked key is refused for every host (as OpenSSH
does), and `@cert-authority` lines are skipped with a warning: paramiko cannot verify host
certificates, so such hosts need their own key listed.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import paramiko
from paramiko.hostkeys import HostKeyEntry

if TYPE_CHECKING:
    from paramiko.hostkeys import _SubDict  # what HostKeys.lookup returns (a name of the stubs only)

MAX_FILE_BYTES = 16 * 1024 * 1024  # a known_hosts file larger than this is not one


def files_for(configured: object, inventory: str | Path | None) -> list[Path]:
    """The known_hosts files a login checks, those that exist: the user's, each UserKnownHostsFile of the
    ssh config (`configured`, its words), and the inventory's `fabnet_known_hosts`."""
    files = [Path("~/.ssh/known_hosts").expanduser()]
    files += [Path(word).expanduser() for word in str(configured or "").split()]
    if inventory:
        files.append(Path(inventory))
    return [f for f in files if f.is_file()]


@functools.lru_cache(maxsize=4096)
def _pattern(text: str) -> re.Pattern[str]:
    # OpenSSH patterns: `*` and `?` are wildcards; everything else (brackets of [host]:port included)
    # is literal, and names compare without regard to case.
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in text), re.IGNORECASE)


def _plain(name: str) -> bool:
    """A name that matches only itself (case aside): no wildcard, negation or hash."""
    return name.isascii() and not name.startswith(("!", "|1|")) and "*" not in name and "?" not in name


class PatternHostKeys(paramiko.HostKeys):
    """paramiko's HostKeys, with OpenSSH's wildcards and negated patterns (`!host`) in the names.

    paramiko tries every line for every connection, which makes a fleet's logins quadratic in its size
    (1000 hosts: a million matches). Lines that name only plain hosts are indexed by name; only lines
    with patterns or hashed names are tried one by one. The matches keep the files' order.
    """

    _index: _NameIndex | None = None
    _entries: list[HostKeyEntry]  # paramiko's own list of lines, absent from its stubs

    def lookup(self, hostname: str) -> _SubDict | None:
        entries = self._entries
        index = self._index
        if index is None or not index.describes(entries):  # built again after lines were added or replaced
            index = self._index = _NameIndex.of(entries)
        view = PatternHostKeys()
        view._entries = [entries[i] for i in index.positions(hostname)] if hostname.isascii() else entries
        found = paramiko.HostKeys.lookup(view, hostname)
        if found is not None:
            found._hostkeys = self  # type: ignore[attr-defined]  # a key set through the result lands in this set, as in paramiko
        return found


    def _hostname_matches(self, hostname: str, entry: HostKeyEntry) -> bool:  # paramiko's hook, not in its stubs
        matched = False
        for name in entry.hostnames:
            negated = name.startswith("!")
            pattern = name[1:] if negated else name
            if pattern.startswith("|1|"):
                hit = super()._hostname_matches(hostname, HostKeyEntry([pattern], entry.key))  # type: ignore[misc]
            else:
                hit = bool(_pattern(pattern).fullmatch(hostname))
            if hit and negated:
                return False
            matched = matched or hit
        return matched


@dataclass(frozen=True)
class _NameIndex:
    """Positions of the lines naming each plain host, and of the lines with patterns or hashes."""

    entries_id: int
    count: int
    by_name: dict[str, list[int]]
    others: list[int]

    @classmethod
    def of(cls, entries: list[HostKeyEntry]) -> _NameIndex:
        by_name: dict[str, list[int]] = {}
        others: list[int] = []
        for position, entry in enumerate(entries):
            if entry.hostnames and all(_plain(name) for name in entry.hostnames):
                for name in {name.lower() for name in entry.hostnames}:
                    by_name.setdefault(name, []).append(position)
            else:
                others.append(position)
        return cls(id(entries), len(entries), by_name, others)

    def describes(self, entries: list[HostKeyEntry]) -> bool:
        return self.entries_id == id(entries) and self.count == len(entries)

    def positions(self, hostname: str) -> list[int]:
        """The lines that may match `hostname`, in the files' order."""
        return sorted(self.by_name.get(hostname.lower(), []) + self.others)


@dataclass
class KnownHosts:
    """Every usable host key of some files, the revoked keys, and what was skipped and why."""

    keys: PatternHostKeys = field(default_factory=PatternHostKeys)
    revoked: set[bytes] = field(default_factory=set)  # key blobs
    warnings: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)

    def is_revoked(self, key: paramiko.PKey) -> bool:
        return key.asbytes() in self.revoked


class BadLine(ValueError):
    """A known_hosts line that cannot be used; the message says why."""


def _key(kind: str, text: str) -> tuple[paramiko.PKey, bytes]:
    try:
        blob = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BadLine("the key is not valid base64") from None
    # The blob names its own type; OpenSSH refuses a line whose type field disagrees with it.
    if len(blob) < 4:
        raise BadLine("the key is too short")
    (length,) = struct.unpack(">I", blob[:4])
    inner = blob[4:4 + length].decode("ascii", errors="replace")
    if inner != kind:
        raise BadLine(f"the line says {kind} but the key is {inner or 'unreadable'}")
    try:
        return paramiko.PKey.from_type_string(kind, blob), blob
    except paramiko.pkey.UnknownKeyType:
        raise BadLine(f"key type {kind} is not supported by this SSH library") from None
    except Exception as exc:  # a malformed key body: paramiko raises several types
        raise BadLine(f"the {kind} key cannot be read ({type(exc).__name__})") from None


def parse_line(line: str) -> tuple[str | None, list[str], paramiko.PKey, bytes] | None:
    """(marker, host patterns, key, blob) of one line; None for blank lines and comments; BadLine else."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    fields = text.split()
    marker = None
    if fields[0].startswith("@"):
        marker, fields = fields[0], fields[1:]
        if marker not in ("@revoked", "@cert-authority"):
            raise BadLine(f"unknown marker {marker}")
    if len(fields) < 3:
        raise BadLine("expected: host patterns, key type, base64 key")
    names, kind, encoded = fields[0], fields[1], fields[2]
    key, blob = _key(kind, encoded)
    return marker, names.split(","), key, blob


def load(paths: list[Path]) -> KnownHosts:
    known = KnownHosts()
    for path in paths:
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                known.warnings.append(f"{path}: larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB; not read")
                continue
            lines = path.read_bytes().decode("utf-8", errors="replace").splitlines()
        except OSError as exc:
            known.warnings.append(f"{path}: cannot be read ({exc.strerror}); its keys are not trusted")
            continue
        known.files.append(path)
        for number, line in enumerate(lines, 1):
            try:
                parsed = parse_line(line)
            except BadLine as exc:
                known.warnings.append(f"{path}:{number}: {exc}; line skipped")
                continue
            if parsed is None:
                continue
            marker, names, key, blob = parsed
            if marker == "@revoked":
                known.revoked.add(blob)
            elif marker == "@cert-authority":
                known.warnings.append(
                    f"{path}:{number}: @cert-authority is not supported (host certificates cannot be checked); "
                    "line skipped: list the hosts' own keys to reach them")
            else:
                known.keys._entries.append(HostKeyEntry(names, key))
    # A revoked key is refused even where another line lists it as known.
    known.keys._entries = [e for e in known.keys._entries if not known.is_revoked(e.key)]
    return known


# ------------------------------------------------------------------ parsed once per run, warned once

_known_cache: dict[tuple[tuple[str, int, int], ...], KnownHosts] = {}
_known_lock = threading.Lock()
_warned: set[str] = set()
_pending_warnings: list[str] = []


def load_cached(files: list[Path]) -> KnownHosts:
    """The parsed files, once per run (keyed by their size and mtime); their warnings queued once."""
    stamp = []
    for path in files:
        try:
            info = path.stat()
            stamp.append((str(path), info.st_size, info.st_mtime_ns))
        except OSError:
            stamp.append((str(path), -1, -1))
    key = tuple(stamp)
    with _known_lock:
        if key not in _known_cache:
            known = load(files)
            _known_cache[key] = known
            for warning in known.warnings:
                if warning not in _warned:
                    _warned.add(warning)
                    _pending_warnings.append(warning)
        return _known_cache[key]


def take_warnings() -> list[str]:
    """Warnings (such as skipped known_hosts lines) not yet handed out, each once per process."""
    with _known_lock:
        taken = list(_pending_warnings)
        _pending_warnings.clear()
    return taken
