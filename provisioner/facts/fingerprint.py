"""Watch's shortcut for probes that only read files: run them again only when one of those files changed.

A watch re-reads every host each interval, and most of what it reads is files that rarely change: the
network and sysctl boot files, the NCCL env files, dpkg's database (on a real node `dpkg-query` parses a
status file of megabytes). A probe that says which files alone decide its output (`Probe.reads`) is run
in a cycle only when `stat -L` of those files (device, inode, size, mode, owner, mtime and ctime to the
nanosecond, and which of them exist) differs from the cycle whose results the watch kept. One `stat` in
the cycle's one exec, first of all; the comparison is made on the node, so the skipped probes cost it
nothing.

Why ctime is enough: every write, rename over, chmod or chown sets a file's ctime to the current time,
and nothing but the clock can set it back (`touch -d`, `cp -p` and dpkg's unpack restore mtime, never
ctime). Two changes within one tick of the kernel's clock can leave ctime equal, so a reading is kept
only when every file's ctime is at least RACY_SECONDS older than the node's clock at the reading (the
same rule as git's racily clean index); otherwise the next cycle reads everything again. A file on NFS
is seen changed once the client's attribute cache expires (at most a minute by default) rather than at
once.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from provisioner.resources.base import Probe, ProbeResult

# ctime in seconds first (for the racy rule), then what identifies the file and its content; the name last,
# so names with spaces stay one line.
FORMAT = "%Z %d:%i:%s:%f:%u:%g:%y:%z %n"
RACY_SECONDS = 2
# A file the fact script writes as it starts, in its temporary folder: its ctime is the node's clock then, an
# instant before any file is read (the folder's own would do only for a folder made by this run, which a kept
# shell's runs share).
CLOCK = "clock"


@dataclass
class FactCache:
    """One host's kept results of its file-only probes, and the files' status they were read at (None:
    nothing kept, or not trusted: the next cycle runs them all)."""

    fingerprint: str | None = None
    results: dict[str, ProbeResult] = field(default_factory=dict)


@dataclass(frozen=True)
class Shortcut:
    """For one exec: the fingerprint probe, run first, the probes the node skips when it matches, and the
    host's cache those probes' results come from and go to."""

    probe: Probe
    skippable: frozenset[str]
    cache: FactCache


def command(reads: Sequence[str], expect: str | None) -> str:
    """Shell printing the status of the fact script's CLOCK file (the node's clock at the run's start) and
    then the files', and exiting 0 only when the files' part equals `expect`. Runs inside the fact script,
    where `$__fn_d` is its folder. `reads` are shell words (globs of the package's own paths, quoted user
    paths)."""
    words = " ".join(dict.fromkeys(reads))
    stat = f'__fn_f=$(stat -L -c {shlex.quote(FORMAT)} -- "$__fn_d/{CLOCK}" {words} 2>/dev/null)'
    if expect is None:
        return f"{stat}; printf '%s\\n' \"$__fn_f\"; false"
    # Everything after the first line (the clock file's): a literal line break inside the pattern.
    return f"{stat}; printf '%s\\n' \"$__fn_f\"; [ \"${{__fn_f#*\"\n\"}}\" = {shlex.quote(expect)} ]"


def shortcut(probes: Sequence[Probe], cache: FactCache | None) -> Shortcut | None:
    """The fingerprint step for this exec, or None when no probe only reads files (or there is no cache)."""
    if cache is None:
        return None
    file_only = [p for p in probes if p.reads]
    if not file_only:
        return None
    keys = frozenset(p.key for p in file_only)
    complete = cache.fingerprint is not None and keys <= cache.results.keys()
    reads = [word for p in file_only for word in p.reads]
    return Shortcut(Probe(command(reads, cache.fingerprint if complete else None), timeout=10), keys, cache)


def fill_in(step: Shortcut, by_key: dict[str, ProbeResult]) -> dict[str, ProbeResult]:
    """The exec's results with the skipped probes' kept results in (and the fingerprint's out), and the
    cache brought up to date: kept when the files did not change, replaced when they were read again."""
    cache = step.cache
    out = dict(by_key)
    seen = out.pop(step.probe.key, None)
    if seen is not None and seen.exit_code == 0 and not (step.skippable & out.keys()):
        out.update({key: cache.results[key] for key in step.skippable})
        return out
    fresh = {key: out[key] for key in step.skippable if key in out}
    whole = len(fresh) == len(step.skippable) and all(r.exit_code == 0 for r in fresh.values())
    # The files' status is taken before the probes read them: a change in between shows next time.
    cache.fingerprint = trusted(seen.stdout) if seen is not None and seen.exit_code == 1 and whole else None
    cache.results = fresh if cache.fingerprint is not None else {}
    return out


def trusted(stdout: str, racy: float | None = None) -> str | None:
    """The files' part of a fingerprint's output, to compare with next time; None when it cannot be
    trusted: a line that does not parse, or a file whose ctime is within `racy` seconds (RACY_SECONDS)
    of the clock."""
    racy = RACY_SECONDS if racy is None else racy
    first, _, rest = stdout.rstrip("\n").partition("\n")
    now = _ctime(first)
    if now is None:
        return None
    for line in rest.splitlines():
        changed = _ctime(line)
        if changed is None or changed >= now - racy:
            return None
    return rest


def _ctime(line: str) -> int | None:
    head = line.split(" ", 1)[0]
    return int(head) if head.isdigit() else None
