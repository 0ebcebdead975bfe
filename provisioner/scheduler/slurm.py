"""Slurm behind the scheduler interface: `scontrol`, `sinfo` and `squeue` run on the controller node over
fabnet's own host session (one exec per call, every value shell-quoted)."""

from __future__ import annotations

import re
import secrets
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import replace
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
# The one mark Slurm's node_state_string() may put after a state word. It prints at most one, the first of
# this order that holds, so `*` (not responding) is hidden whenever another holds too.
FLAGS: dict[str, str] = {
    "$": "maintenance reservation",
    "^": "reboot issued",  # 21.08 on
    "@": "reboot pending",
    "#": "powering up",
    "%": "powering down",
    "~": "powered off",
    "!": "power down pending",  # 21.08 on
    "*": "not responding",
    "+": "completing",  # `allocated+` only
    "-": "planned",  # `mixed-` only, 21.08 on
}
# What follows this record in Slurm.state's answer is the list of drained nodes.
DRAIN_LIST = "drain-flag"
_STATE = re.compile(r"([a-z_]+|\?)(.?)")
# Both ask beyond sinfo's and squeue's defaults: `--all` shows nodes and jobs of hidden partitions and of
# partitions the controller's login may not use (else such a node reads as unknown to Slurm, and such a
# job as one with no nodes); sinfo's `--local` keeps a federation's other clusters, whose node names may
# be the same, out of the answer.
SINFO = ["sinfo", "--all", "--local", "--noheader", "--Node"]
SQUEUE = ["squeue", "--all", "--noheader"]
# sinfo, squeue and scontrol take options from their environment too (SQUEUE_STATES, SQUEUE_USERS,
# SINFO_PARTITION, SLURM_CLUSTERS, ...), and the controller's login may set them (~/.bashrc,
# /etc/environment): a running job filtered out by SQUEUE_STATES=PD read as one with no nodes. Every call
# drops them first, the SINFO_/SQUEUE_/SCONTROL_ ones by prefix, so a release's new one goes too.
# SLURM_CONF stays: it is where the cluster's configuration is. `command` keeps a read-only variable
# from ending the script.
CLEAN_ENVIRONMENT = (
    "for __fn_v in $(env | sed -n -e 's/^\\(SINFO_[A-Za-z0-9_]*\\)=.*/\\1/p' "
    "-e 's/^\\(SQUEUE_[A-Za-z0-9_]*\\)=.*/\\1/p' -e 's/^\\(SCONTROL_[A-Za-z0-9_]*\\)=.*/\\1/p') "
    "SLURM_CLUSTERS SLURM_BITSTR_LEN SLURM_TIME_FORMAT; do "
    'command unset "$__fn_v" 2>/dev/null; done\n'
)


class Runs(Protocol):
    def exec(self, script: str, *, timeout: float | None = None) -> transport.ExecResult: ...


class Slurm:
    def __init__(self, session: Runs) -> None:
        self.session = session

    def _run(self, script: str) -> transport.ExecResult:
        try:
            return self.session.exec(CLEAN_ENVIRONMENT + script, timeout=TIMEOUT)
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
        # A reason is free text and may hold line breaks, which sinfo prints as they are: each record starts
        # with a mark of this call's own, so a line that lacks it continues the reason above and a reason
        # cannot pass for another node's record. The second sinfo lists the nodes whose DRAIN flag is set:
        # %T hides it behind `reboot`, `reboot^` and `inval` (node_state_string(), every release).
        mark = f"fabnet-{secrets.token_hex(6)}|"
        nodes = ["--nodes", ",".join(names)]
        result = self._run(shlex.join([*SINFO, *nodes, "--format", f"{mark}%N|%T|%u|%E"]) + " && printf '%s\\n' "
                           + shlex.quote(mark + DRAIN_LIST) + " && "
                           + shlex.join([*SINFO, *nodes, "--states=drain", "--format", f"{mark}%N"]))
        if result.exit_code != 0:
            raise SchedulerError(f"sinfo failed on the Slurm controller: {(result.stderr or result.stdout).strip()}")
        return parse_sinfo(result.stdout, names, mark)

    def nodes_of_job(self, jobid: str) -> list[str]:
        if not _JOBID.fullmatch(jobid):
            raise SchedulerError(f"invalid Slurm job id {jobid!r}: expected a number (or N_M, N+M)")
        result = self._run(shlex.join([*SQUEUE, "--jobs", jobid, "--format", "%N"]))
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


def parse_state(word: str) -> tuple[str, str]:
    """sinfo's `%T` word -> (state, flag): `drained*` -> ("drained", "*"), `mixed-` -> ("mixed", "-").
    A word of another shape is kept whole with no flag, so it can never read as a known state."""
    word = word.strip().lower()
    match = _STATE.fullmatch(word)
    if match is None or (match.group(2) and match.group(2) not in FLAGS):
        return word, ""
    return match.group(1), match.group(2)


def _records(text: str, mark: str) -> list[str]:
    """The records of sinfo's answer: each line, or with a mark, what lies between a line break and the mark
    at the start of the next line (a reason's further lines included), the mark taken off. sinfo ends every
    record with one line break, which is not the reason's: a reason's own line breaks, even at its end, stay."""
    if not mark:
        return text.split("\n")
    records = ("\n" + text).split("\n" + mark)[1:]
    if records and records[-1].endswith("\n"):
        records[-1] = records[-1][:-1]
    return records


def parse_sinfo(text: str, wanted: Sequence[str], mark: str = "") -> dict[str, NodeState]:
    """`sinfo -N -h -o '%N|%T|%u|%E'` -> host -> state. The reason is last, so a '|' in it is kept, and it is
    kept as Slurm holds it: blanks around it and line breaks in it are the reason's own (sinfo pads nothing
    and adds one line break after the record), and a reason with a blank before `fabnet:` is not fabnet's.
    sinfo prints `none` for no reason and `Unknown` for no reason's user (`Unk(UID)` for a user it cannot
    name): a reason `none` set by someone is that word. With `mark` (see Slurm.state), each record starts
    with it, a reason may span lines, and the records after `DRAIN_LIST` name the nodes whose DRAIN flag is
    set."""
    states: dict[str, NodeState] = {}
    drain: set[str] | None = None
    for record in _records(text, mark):
        if mark and record == DRAIN_LIST:
            drain = set()
            continue
        if drain is not None:
            drain.add(record.strip())
            continue
        fields = record.split("|", 3)
        if len(fields) != 4 or fields[0] not in wanted:
            continue
        name, word, user, reason = fields
        state, flag = parse_state(word)
        nobody = user.strip() in ("Unknown", "N/A")
        states[name] = NodeState(
            state=state,
            reason="" if reason == "none" and nobody else reason,
            reason_user="" if nobody else user.strip(),
            responding=flag != "*",
            flag=flag,
        )
    if drain is not None:
        states = {name: replace(state, drain=name in drain) for name, state in states.items()}
    return states
