"""Runner `nccl-tests`: `all_reduce_perf` started by a launcher (srun or mpirun, or a template of one's
own), its output read with the same parser as `fabnet parse nccl_tests`.

Which launcher (`--launcher auto`, the default): srun when the inventory names a Slurm controller
(`fabnet_slurm_controller` or a `slurm_controller` group) or when srun is on the first host's PATH,
else mpirun. srun runs on the Slurm controller (the first host when the inventory names none) with
`--mpi=pmix` where `srun --mpi=list` offers it; mpirun runs on the first host.

The template is split into words before values go in (as for --drain-cmd), and each word is quoted
for the remote shell, so host names and paths from the inventory cannot inject commands. `{hostlist}`
is the inventory's host names (Slurm's node names), `{hosts}` their SSH addresses with `:ppn`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from provisioner.errors import ParseError
from provisioner.load import cmdtemplate
from provisioner.parsers.nccl_tests import parse_nccl_tests
from provisioner.parsers.nccl_tests_copies import separate_copies, single_rank_runs
from provisioner.parsers.nccl_tests_verdict import deciding
from provisioner.resources.base import sh
from provisioner.scheduler.hostlist import HostlistError
from provisioner.scheduler.hostlist import expand as expand_hostlist
from provisioner.smoke.busbw import SizeResult, all_reduce_factor
from provisioner.smoke.plan import exports
from provisioner.smoke.settings import DEFAULT_LAUNCH, LAUNCH_FIELDS, SRUN_LAUNCH, Settings

# The first line of the lab's stand-in (provisioner/lab/emulation/all_reduce_perf.py): its figures are
# gloo's over TCP, and a report that shows them says so.
EMULATION_MARK = "# fabnet lab emulation of nccl-tests"


@dataclass(frozen=True)
class Launch:
    """How this run starts all_reduce_perf: with which launcher, on which host, from which template."""

    launcher: str  # srun, mpirun, or the first word of a template of one's own
    host: str  # the inventory name of the host the launcher runs on
    template: str


def wanted_launchers(settings: Settings, controller: bool) -> tuple[str, ...]:
    """The launchers to look for on the launch host: the one asked for, or both when `auto` must decide
    between them (with a Slurm controller in the inventory, auto means srun)."""
    if settings.launch is not None:
        words = shlex.split(settings.launch)
        return (words[0],) if words else ()
    if settings.launcher == "auto" and not controller:
        return ("srun", "mpirun")
    return ("mpirun",) if settings.launcher == "mpirun" else ("srun",)


def choose(settings: Settings, host: str, controller: bool, found: Mapping[str, str | None],
           mpi_plugins: Sequence[str]) -> Launch:
    """The launch, once the launch host's PATH is known (`found`: program -> path or None)."""
    if settings.launch is not None:
        return Launch(wanted_launchers(settings, controller)[0], host, settings.launch)
    launcher = settings.launcher
    if launcher == "auto":
        launcher = "srun" if controller or found.get("srun") else "mpirun"
    if launcher == "mpirun":
        return Launch("mpirun", host, DEFAULT_LAUNCH)
    template = SRUN_LAUNCH
    if "pmix" in mpi_plugins:
        # nccl-tests built with MPI learns its rank through PMIx; a build without MPI ignores it.
        template = template.replace("srun ", "srun --mpi=pmix ", 1)
    return Launch("srun", host, template)


def without_pmix(launch: Launch) -> Launch:
    return Launch(launch.launcher, launch.host, launch.template.replace("srun --mpi=pmix ", "srun ", 1))


# srun's words when the plugin it lists cannot be loaded where srun runs (20.11 to 25.11): the plugin's own
# `mpi/pmix_v4: init: ... can not load PMIx library`, then Slurm's `Couldn't load specified plugin name for
# mpi/pmix: ...` (also `Dlopen of plugin file failed`, where a library the plugin links is missing), `cannot
# create mpi context for mpi/pmix` (before 22.05; `MPI: Cannot create context for mpi/pmix` since) and
# `invalid MPI type 'pmix'` (`Invalid` since 22.05).
_PMIX_UNUSABLE = re.compile(
    r"mpi/pmix\S*: init:|(?:can ?not|cannot) load PMIx library"
    r"|^srun: error: Couldn't load specified plugin name for mpi/pmix\S*:"
    r"|^srun: error: (?:MPI: )?cannot create (?:mpi )?context for mpi/pmix"
    r"|^srun: error: invalid MPI type '?pmix", re.IGNORECASE | re.MULTILINE)


def pmix_unusable(output: str, exit_code: int) -> bool:
    """srun offered --mpi=pmix but could not load its plugin (no libpmix where srun runs): no task ran."""
    return exit_code != 0 and bool(_PMIX_UNUSABLE.search(output))


def command(template: str, *, hosts: Sequence[str], ranks_per_host: int, binary: str, sizes: Sequence[int],
            iters: int, env: Mapping[str, str], names: Sequence[str] | None = None,
            limit: float | None = None) -> str:
    """The remote script: `export K=V ...` (plan.exports: no value on a command line), then the template
    rendered, every word quoted, under `timeout` when a `limit` (seconds) is given. `names` are the hosts'
    Slurm node names for {hostlist}; `hosts` their addresses for {hosts}; {forward}, a word of its own, is
    Open MPI's `-x NAME` for each of `env` (no words when it is empty)."""
    values = {
        "np": str(len(hosts) * ranks_per_host), "ppn": str(ranks_per_host), "nodes": str(len(hosts)),
        "hosts": ",".join(f"{h}:{ranks_per_host}" for h in hosts),
        "hostlist": ",".join(names if names is not None else hosts),
        "binary": binary, "min_bytes": str(min(sizes)), "max_bytes": str(max(sizes)), "iters": str(iters),
    }
    forward = [word for name in sorted(env) for word in ("-x", name)]
    rendered = cmdtemplate.fill(template, LAUNCH_FIELDS, "launch template", values, {"forward": forward})
    line = " ".join(sh(word) for word in rendered)
    if limit is not None:
        line = f"timeout -k 5 {limit:g} {line}"
    return f"{exports(env)}; {line}" if env else line


def rows(text: str, ranks: int) -> tuple[list[SizeResult], float | None, str | None]:
    """Per-size figures (out-of-place, as nccl-tests' own summary uses), its `Avg bus bandwidth`, and
    what is wrong with the output when the parser found it incomplete (a run cut off, NCCL failures).

    Raises ParseError for output the parser cannot read. busbw is taken as printed; when a row lacks
    it, it is derived from algbw with the same all-reduce factor.
    """
    parsed = parse_nccl_tests(text)
    if not parsed.rows and parsed.unplaced:
        # A header and nothing readable under it: the run printed something, but no figures to judge.
        first = parsed.unplaced[0]
        raise ParseError("nccl_tests", f"no result rows: {first.reason}", line=first.line, text=first.text)
    problem = None
    failures = [str(failure) for failure in parsed.failures]
    # A whole run can still fail: wrong or out-of-bounds results, a row that cannot be read, an average below
    # NCCL_TESTS_MIN_BW. Its exit status says so too, but a launcher may not pass that status on.
    # Each process ran a job of its own (no PMI between them: a build with MPI started by srun without
    # --mpi, as after a PMIx plugin that would not load, or a build without MPI): every copy may pass, alone.
    # This output is one launch's, so every rank list in it is that job's, however late a copy printed its own.
    copies = max(single_rank_runs(parsed.devices), len(separate_copies(parsed.devices)))
    if copies > 1:
        failures.insert(0, f"{copies} processes each ran a job of their own, not one job of {ranks} ranks")
    # nccl-tests lists every rank it ran (one per GPU of each process: never fewer than the processes
    # started). Fewer means processes that never joined: the figures are those of a smaller job.
    elif parsed.devices and (joined := len({d.rank for d in parsed.devices})) < ranks:
        failures.insert(0, f"nccl-tests lists {joined} ranks, fewer than the {ranks} processes started")
    if not parsed.complete or failures or parsed.verdict != "ok":
        missing = ", ".join(parsed.missing)
        # The parser's verdict where it names a failure; `ok` only says no row or footer did.
        verdict = str(parsed.verdict) if parsed.verdict != "ok" else "" if parsed.complete else "incomplete"
        problem = "; ".join(p for p in (verdict, f"missing: {missing}" if missing else "", *failures[:3]) if p)
    found = []
    # The rows of the run whose footer `avg_busbw` is (the one the verdict comes from), not another run's.
    decided = deciding(parsed.run_results)
    table = parsed.rows[decided.first_row:decided.first_row + decided.rows] if decided else parsed.rows
    for row in table:
        time_us = row.oop_time_us if row.oop_time_us is not None else row.ip_time_us
        alg = row.oop_algbw if row.oop_algbw is not None else row.ip_algbw
        bus = row.oop_busbw if row.oop_busbw is not None else row.ip_busbw
        if time_us is None or alg is None:
            continue
        if bus is None:
            bus = alg * all_reduce_factor(ranks)
        # Wrong elements in either group: an in-place run that corrupts data is as wrong as the other.
        wrong = sum(w for w in (row.oop_wrong, row.ip_wrong) if isinstance(w, int))
        found.append(SizeResult(row.size, time_us, alg, bus, wrong))
    return found, parsed.avg_busbw, problem


# A shell that could not find a program: bash `X: command not found`, dash `X: not found`, env's
# `env: 'X': No such file or directory`; srun's step `execve(): X: No such file or directory` (slurmstepd,
# 20.11 to 25.11, X as the task's PATH gave it, or as named where no PATH entry has it); srun's own `srun:
# fatal: Can not execute X` where it looks first (`--bcast`, LaunchParameters=test_exec): X is missing where
# srun runs; Open MPI's "unable to find the specified executable".
_NOT_FOUND = (
    re.compile(r"^(?:\S+: )?(?:line \d+: |\d+: )?(?P<tool>[^\s:]+): (?:command )?not found\s*$", re.MULTILINE),
    re.compile(r"^env: [\u2018'`]?(?P<tool>[^\s\u2019']+)[\u2019']?: No such file or directory\s*$", re.MULTILINE),
    re.compile(r"execve\(\): (?P<tool>[^\s:]+): No such file or directory"),
    re.compile(r"^srun: fatal: Can not execute (?P<tool>\S+)\s*$", re.MULTILINE),
    re.compile(r"^\s*Executable:\s*(?P<tool>\S+)\s*$", re.MULTILINE),
)
# A program that is there but cannot be run (no execute bit, or on a filesystem mounted noexec): srun's step
# `execve(): X: Permission denied` (slurmstepd, its exit status errno: 13, EACCES); Open MPI's "lacked
# permissions to execute an executable" (4.x; "could not access or execute" before), then `Executable: X`;
# bash `bash: line 1: X: Permission denied`, dash `sh: 1: X: Permission denied`, read only with the shell's
# status 126 (the same words with status 1 are a redirection the shell could not open).
_NOT_EXECUTABLE = (
    re.compile(r"execve\(\): (?P<tool>[^\s:]+): Permission denied"),
    re.compile(r"(?:lacked\s+permissions\s+to\s+execute|could\s+not\s+access\s+or\s+execute)\s+an\s+executable:"
               r"\s*^\s*Executable:\s*(?P<tool>\S+)\s*$", re.MULTILINE),
)
_SHELL_DENIED = re.compile(r"^(?:\S+: )?(?:line \d+: |\d+: )?(?P<tool>[^\s:]+): Permission denied\s*$", re.MULTILINE)
# srun: `srun: error: gpu02: task 1: Exited with exit code 2` (20.11 to 25.11: the nodes of the tasks that
# one message reports, as a hostlist, `task` or `tasks` and a task range such as `0-3,8`); Open MPI:
# `Node: gpu02`.
_SRUN_EXIT = r"^srun: error: (?P<host>[^\s:]+): tasks? [0-9,\-\[\]]+: Exited with exit code (?:{})\b"
_NODE = re.compile(r"^\s*Node:\s*(?P<host>\S+)\s*$", re.MULTILINE)
_FAILED_ON = (re.compile(_SRUN_EXIT.format("2|127"), re.MULTILINE), _NODE)
_DENIED_ON = (re.compile(_SRUN_EXIT.format("13|126"), re.MULTILINE), _NODE)


def missing_program(output: str, exit_code: int) -> tuple[str, list[str]] | None:
    """(program, hosts the output names) when the launch failed because a program was not found (the
    hosts list is empty when the output does not say where); else None."""
    if exit_code == 0 or not_executable(output, exit_code) is not None:
        return None
    for pattern in _NOT_FOUND:
        match = pattern.search(output)
        if match:
            return match["tool"], _failed_on(output)
    return None


def not_executable(output: str, exit_code: int) -> tuple[str, list[str]] | None:
    """(program, hosts the output names) when the launch failed because a program that is there could not
    be executed (Permission denied); the hosts list is empty when the output does not say where; else None."""
    if exit_code == 0:
        return None
    for pattern in _NOT_EXECUTABLE + ((_SHELL_DENIED,) if exit_code == 126 else ()):
        match = pattern.search(output)
        if match:
            return match["tool"], _failed_on(output, _DENIED_ON)
    return None


def _failed_on(output: str, patterns: tuple[re.Pattern[str], ...] = _FAILED_ON) -> list[str]:
    """The hosts the launcher's task-exit lines name, a hostlist such as `gpu[01-02]` expanded."""
    hosts: list[str] = []
    for pattern in patterns:
        for match in pattern.finditer(output):
            try:
                names = expand_hostlist(match["host"]) if "[" in match["host"] else [match["host"]]
            except HostlistError:
                names = [match["host"]]
            hosts += [name for name in names if name not in hosts]
    return hosts


def tasks_failed_to_start(output: str, exit_code: int) -> list[str]:
    """Hosts whose task the launcher says ended as a program that could not be run does (srun: exit code
    2 or 127). Where the launcher ends the step at once (--kill-on-bad-exit), the task's own `execve(): ...`
    line can be lost, and the other ranks may have printed nccl-tests' header before they were killed
    (seen on a loaded machine): the hosts are worth a look whatever else the output holds. The caller
    names one only if it really lacks the program."""
    if exit_code == 0:
        return []
    return _failed_on(output)


def emulation_note(output: str) -> str | None:
    """The stand-in's own label when the output came from the lab's emulation, else None."""
    for line in output.splitlines():
        if line.startswith(EMULATION_MARK):
            return line.lstrip("# ").strip()
    return None
