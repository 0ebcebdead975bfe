"""Slurm behind the scheduler interface: `scontrol`, `sinfo` and `squeue` run on the controller node over
fabnet's own host session (one exec per call, every value shell-quoted)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Protocol

from provisioner.run import transport
from provisioner.scheduler import NodeState, SchedulerError
from provisioner.scheduler.hostlist import expand as expand_hostlist

TIMEOUT = 60.0
# A Slurm reason is free text, but a short one reads well in `sinfo -R`.
MAX_REASON = 200
_MARK = "fabnet-scheduler-result"
# Characters that make Slurm read one name as several (a list or a range) or as another argument.
_NOT_IN_NAME = re.compile(r"[\s,\[\]=]")
_JOBID = re.compile(r"\d+(?:[_+]\d+)?")


class Runs(Protocol):
    def exec(self, script: str, *, timeout: float | None = None) -> transport.ExecResult: ...


class Slurm:
    def __init__(self, session: Runs) -> None:
        self.session = session

    def _run(self, script: str) -> transport.ExecResult:
        try:
            return self.session.exec(script, timeout=TIMEOUT)
        except (transport.HostUnreachable, transport.CommandFailed) as exc:
            raise SchedulerError(f"Slurm controller: {exc}") from exc

    def _update_each(self, commands: Mapping[str, list[str]]) -> dict[str, str | None]:
        """Run one `scontrol update` per host in one exec; host -> None, or the error scontrol printed."""
        results: dict[str, str | None] = {}
        script = []
        for host, argv in commands.items():
            if _NOT_IN_NAME.search(host) or not host:
                results[host] = f"{host!r} cannot be a Slurm node name"
                continue
            # One line per host: marker, host, exit status, scontrol's message on one line.
            script.append(f"out=$({shlex.join(argv)} 2>&1); rc=$?; "
                          f"printf '%s\\t%s\\t%s\\t%s\\n' {_MARK} {shlex.quote(host)} \"$rc\" "
                          "\"$(printf %s \"$out\" | tr '\\n\\t' '  ')\"")
        if script:
            result = self._run("\n".join(script))
            for line in result.stdout.splitlines():
                fields = line.split("\t", 3)
                if len(fields) == 4 and fields[0] == _MARK and fields[1] in commands:
                    results[fields[1]] = None if fields[2] == "0" else (fields[3] or f"exit {fields[2]}")
        for host in commands:
            results.setdefault(host, "no answer from scontrol")
        return results

    def drain(self, reasons: Mapping[str, str]) -> dict[str, str | None]:
        return self._update_each({
            host: ["scontrol", "update", f"NodeName={host}", "State=DRAIN",
                   f"Reason={' '.join(reason.split())[:MAX_REASON]}"]
            for host, reason in reasons.items()
        })

    def resume(self, hosts: Sequence[str]) -> dict[str, str | None]:
        return self._update_each({host: ["scontrol", "update", f"NodeName={host}", "State=RESUME"] for host in hosts})

    def state(self, hosts: Sequence[str]) -> dict[str, NodeState]:
        names = [host for host in hosts if host and not _NOT_IN_NAME.search(host)]
        if not names:
            return {}
        result = self._run(shlex.join(["sinfo", "--noheader", "--Node", "--nodes", ",".join(names),
                                       "--format", "%N|%T|%u|%E"]))
        if result.exit_code != 0:
            raise SchedulerError(f"sinfo failed on the Slurm controller: {(result.stderr or result.stdout).strip()}")
        return parse_sinfo(result.stdout, names)

    def nodes_of_job(self, jobid: str) -> list[str]:
        if not _JOBID.fullmatch(jobid):
            raise SchedulerError(f"invalid Slurm job id {jobid!r}: expected a number (or N_M, N+M)")
        result = self._run(shlex.join(["squeue", "--noheader", "--jobs", jobid, "--format", "%N"]))
        if result.exit_code != 0:
            raise SchedulerError(f"Slurm job {jobid}: {(result.stderr or result.stdout).strip()}")
        names: list[str] = []
        for line in result.stdout.split():
            names += [name for name in self.expand(line) if name not in names]
        if not names:
            raise SchedulerError(f"Slurm job {jobid} has no nodes yet (pending?)")
        return names

    def expand(self, hostlist: str) -> list[str]:
        return expand_hostlist(hostlist)


def parse_sinfo(text: str, wanted: Sequence[str]) -> dict[str, NodeState]:
    """`sinfo -N -h -o '%N|%T|%u|%E'` -> host -> state. The reason is last, so a '|' in it is kept."""
    states: dict[str, NodeState] = {}
    for line in text.splitlines():
        fields = line.split("|", 3)
        if len(fields) != 4 or fields[0] not in wanted:
            continue
        name, state, user, reason = fields
        word = state.strip().lower()
        bare = word.rstrip("*~#!%$@^-")
        states[name] = NodeState(
            state=bare,
            reason="" if reason.strip() == "none" else reason.strip(),
            reason_user="" if user.strip() in ("Unknown", "N/A") else user.strip(),
            responding="*" not in word[len(bare):],
        )
    return states
