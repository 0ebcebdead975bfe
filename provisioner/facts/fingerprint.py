"""Watch's shortcut for probes whose output files decide: run each again only when one of its files changed.

A watch re-reads every host each interval, and much of what it reads rarely changes: the network and
sysctl boot files, the NCCL env files, dpkg's database (on a real node `dpkg-query` parses a status file of
megabytes), and the state of systemd's units (each `systemctl` costs the node a program that links
systemd's shared library, and PID 1 a D-Bus round). A probe that says which files decide its output
(`Probe.reads`) is run in a cycle only when `stat -L` of those files (device, inode, size, mode, owner,
mtime and ctime to the nanosecond, and which of them exist) differs from the reading the watch kept. One
`stat` in the cycle's one exec, first of all, for every such probe: the probes' parts of its output are
told apart by the fact script's CLOCK file, named again before each part, and each part is compared on
the node, so a skipped probe costs it nothing and a changed file re-runs only the probes that read it.

A probe whose output also follows a process (a service's main process) says so with `Probe.still`: from
its output, the paths that must keep their status too (`/proc/PID`: gone, or another process by that
number, is another inode), or None where its output can change with no file changing (a unit starting
or failing): then it runs every cycle until its reading is one that can be kept.

Why ctime is enough: every write, rename over, chmod or chown sets a file's ctime to the current time,
and nothing but the clock can set it back (`touch -d`, `cp -p` and dpkg's unpack restore mtime, never
ctime). Two changes within one tick of the kernel's clock can leave ctime equal, so a reading is kept
only when every file's ctime is at least RACY_SECONDS older than the node's clock at the reading (the
same rule as git's racily clean index); otherwise the next cycle reads it again. A file on NFS is seen
changed once the client's attribute cache expires (at most a minute by default) rather than at once.
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
# shell's runs share). Its line also starts each probe's part of the output.
CLOCK = "clock"
# The file in the fact script's folder where the fingerprint step lists the parts that matched.
SAME = "same"


@dataclass(frozen=True)
class Kept:
    """One probe's kept reading: its part of the fingerprint when it was read (None: not trusted, read it
    again), its result, and the paths its `still` named, stat'd with its files from then on."""

    status: str | None = None
    result: ProbeResult | None = None
    extra: tuple[str, ...] = ()


@dataclass
class FactCache:
    """One host's kept readings of the probes that files decide, by probe key."""

    kept: dict[str, Kept] = field(default_factory=dict)


@dataclass(frozen=True)
class Shortcut:
    """For one exec: the fingerprint probe, run first; the probes it covers, in the order of their parts;
    the ones the node skips when their part matches; and the host's cache."""

    probe: Probe
    covered: tuple[Probe, ...]
    skippable: frozenset[str]
    cache: FactCache

    def part(self, key: str) -> int:
        return next(number for number, probe in enumerate(self.covered) if probe.key == key)


def command(parts: Sequence[tuple[Sequence[str], str | None]]) -> str:
    """Shell printing the status of the fact script's CLOCK file (the node's clock at the run's start) and,
    for each part (its files as shell words, and the status they had, or None), the CLOCK line again and
    the files'; then writing to the SAME file the numbers of the parts whose status is as given. Runs
    inside the fact script, where `$__fn_d` is its folder. The words are globs of the package's own paths
    or quoted paths."""
    clock = f'"$__fn_d/{CLOCK}"'
    words = " ".join(f"{clock} {' '.join(dict.fromkeys(reads))}".rstrip() for reads, _ in parts)
    lines = [f"__fn_f=$(stat -L -c {shlex.quote(FORMAT)} -- {words} 2>/dev/null)", "printf '%s\\n' \"$__fn_f\""]
    if any(expect is not None for _, expect in parts):
        # From the last part to the first, each compared where the text ends and then cut off with its CLOCK
        # line: dash removes a suffix in one pass, and a prefix in a pass per character (quadratic, on
        # kilobytes). A part holds no CLOCK line, so the last one in the text is its own.
        lines.append('__fn_c=${__fn_f%%"\n"*}; __fn_r="\n$__fn_f"; __fn_ok=')
        for number in reversed(range(len(parts))):
            expect = parts[number][1]
            if expect is not None:
                lines.append(f'case $__fn_r in *"\n$__fn_c"{shlex.quote(expect) if expect else ""}) '
                             f'__fn_ok="$__fn_ok {number}";; esac')
            lines.append('__fn_r=${__fn_r%"\n$__fn_c"*}')
        lines.append(f'printf \'%s\\n\' "$__fn_ok" >"$__fn_d/{SAME}"')
    return "\n".join(lines)


def split(stdout: str, count: int) -> tuple[str, list[str]] | None:
    """The CLOCK line and the `count` parts of a fingerprint's output, cut as the node's shell cuts them;
    None when they are not all there."""
    text = stdout[:-1] if stdout.endswith("\n") else stdout
    clock = text.partition("\n")[0]
    parts = f"\n{text}".split(f"\n{clock}")[1:] if clock else []
    return (clock, parts) if len(parts) == count else None


def shortcut(probes: Sequence[Probe], cache: FactCache | None) -> Shortcut | None:
    """The fingerprint step for this exec, or None when files decide no probe (or there is no cache)."""
    if cache is None:
        return None
    covered = tuple(p for p in probes if p.reads)
    if not covered:
        return None
    parts = []
    for probe in covered:
        kept = cache.kept.get(probe.key, Kept())
        parts.append(((*probe.reads, *kept.extra), kept.status if kept.result is not None else None))
    skippable = frozenset(p.key for p, (_, expect) in zip(covered, parts, strict=True) if expect is not None)
    return Shortcut(Probe(command(parts), timeout=10), covered, skippable, cache)


def fill_in(step: Shortcut, by_key: dict[str, ProbeResult]) -> dict[str, ProbeResult]:
    """The exec's results with the skipped probes' kept results in (and the fingerprint's out), and the
    cache brought up to date: a reading kept while its files did not change, replaced when read again."""
    cache = step.cache
    out = dict(by_key)
    seen = out.pop(step.probe.key, None)
    cut = split(seen.stdout, len(step.covered)) if seen is not None else None
    for number, probe in enumerate(step.covered):
        kept = cache.kept.get(probe.key, Kept())
        status = cut[1][number] if cut is not None else None
        fresh = out.get(probe.key)
        if fresh is None:
            if probe.key in step.skippable and kept.result is not None and status == kept.status:
                out[probe.key] = kept.result
            else:
                cache.kept.pop(probe.key, None)  # not run (the budget, a lost connection): nothing to keep
            continue
        extra = probe.still(fresh.stdout) if probe.still is not None and fresh.exit_code == 0 else ()
        if fresh.exit_code != 0 or extra is None:
            cache.kept.pop(probe.key, None)
        elif extra != kept.extra:
            # Paths this reading depends on that were not stat'd before it: stat'd from the next cycle on.
            cache.kept[probe.key] = Kept(extra=extra)
        else:
            # The files' status is taken before the probe reads them: a change in between shows next time.
            trust = cut is not None and status is not None and trusted(cut[0] + status) is not None
            # A process's path must have been seen: one stat cannot see (gone already, or hidden from a login
            # that is not root by /proc's hidepid) would stay unseen when it goes.
            seen_all = status is not None and all(f" {path}\n" in f"{status}\n" for path in extra)
            cache.kept[probe.key] = Kept(status if trust and seen_all else None, fresh, extra)
    return out


def trusted(stdout: str, racy: float | None = None) -> str | None:
    """The files' part of a fingerprint's output (its CLOCK line first), to compare with next time; None
    when it cannot be trusted: a line that does not parse, or a file whose ctime is within `racy` seconds
    (RACY_SECONDS) of the clock."""
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
