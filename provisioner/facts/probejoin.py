"""Probes one command answers together: several `systemctl show UNIT` become one `systemctl show U1 U2`,
and the boot files of several kinds (network, module lists, sysctl) one `tail -v` for them all.

Some tools cost the node far more per call than per argument: `systemctl show` asks PID 1 over D-Bus
(about 5 ms of node CPU a call, against about 1 ms for a small C tool), so a playbook with six services
pays six times for what one call says; and every probe costs the node's shell a fork and its bookkeeping
besides. A probe that can be joined names its group: the command without its last argument (or how to
build the one call), that argument, and how to cut the joined output into one part per argument.
Resources keep writing and reading their own probes; only the script between them changes.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from provisioner.resources.base import Probe, ProbeResult


@dataclass(frozen=True)
class Joined:
    """What `join` merged: the key of the probe that runs -> the probes it stands for, in argument order.

    A watch keeps one Joined per host and splits every cycle's results with it: a result that is the very
    object split last time (a kept reading, facts/fingerprint.py) is not split again."""

    members: Mapping[str, tuple[Probe, ...]]
    _last: dict[str, tuple[ProbeResult, dict[str, ProbeResult]]] = field(default_factory=dict, compare=False)

    def split(self, by_key: dict[str, ProbeResult]) -> dict[str, ProbeResult]:
        """The results by each member's own key, in place of the joined probes' results."""
        out = dict(by_key)
        for key, members in self.members.items():
            result = out.pop(key, None)
            if result is None:
                continue  # never completed: the caller reports its members as not run
            last = self._last.get(key)
            if last is not None and last[0] is result:
                out.update(last[1])
                continue
            parts = _split_one(result, members)
            self._last[key] = (result, parts)
            out.update(parts)
        return out


def _split_one(result: ProbeResult, members: tuple[Probe, ...]) -> dict[str, ProbeResult]:
    """The joined call's result cut into its members' results, by their keys."""
    group = members[0].group
    parts = None
    if result.exit_code == 0 and group is not None:
        parts = group.split(result.stdout, [m.group.argument for m in members if m.group is not None])
    out = {}
    for number, member in enumerate(members):
        if parts is not None:
            out[member.key] = ProbeResult(parts[number], result.stderr, 0)
        elif result.exit_code != 0:
            out[member.key] = ProbeResult("", result.stderr, result.exit_code)
        else:
            command = group.command if group is not None else "one call"
            reason = f"fabnet: could not tell the {len(members)} parts of `{command} ...` apart"
            out[member.key] = ProbeResult("", "\n".join(filter(None, (reason, result.stderr))), 1)
    return out


def join(probes: Sequence[Probe]) -> tuple[list[Probe], Joined]:
    """The probes to run (groups of two or more joined into one, at the first member's place)."""
    groups: dict[str, list[Probe]] = {}
    for probe in probes:
        if probe.group is not None:
            groups.setdefault(probe.group.command, []).append(probe)
    run: list[Probe] = []
    members: dict[str, tuple[Probe, ...]] = {}
    placed: set[str] = set()
    for probe in probes:
        group = probe.group
        together = groups.get(group.command, []) if group is not None else []
        if group is None or len(together) < 2:
            run.append(probe)
            continue
        if group.command in placed:
            continue
        placed.add(group.command)
        arguments = [p.group.argument for p in together if p.group is not None]
        command = group.join(arguments) if group.join is not None else \
            f"{group.command} {' '.join(shlex.quote(a) for a in arguments)}"
        # Files alone decide the one call's output only when they decide each member's (facts/fingerprint.py).
        # A `still` reads the one call's output as it reads its own: only where every member has the same.
        stills = {p.still for p in together}
        shared = len(stills) == 1 and all(p.reads for p in together)
        reads = tuple(dict.fromkeys(r for p in together for r in p.reads)) if shared else ()
        merged = Probe(command, timeout=max(p.timeout for p in together), reads=reads,
                       still=stills.pop() if shared else None)
        run.append(merged)
        members[merged.key] = tuple(together)
    return run, Joined(members)
