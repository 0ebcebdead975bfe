"""Runner nccl-tests end to end: where the launcher runs and which programs each host needs (for the
pre-flight), the one exec that starts all_reduce_perf, and what its output means.

A program that is not there is named with the host it is missing on, by the pre-flight (PATH read on
every host before anything starts) or, when it disappears later, by checking again after the launch
failed: never reported as an unreadable output. One that is there but may not be executed is named with
the hosts the launcher says it was refused on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from provisioner.errors import ParseError
from provisioner.facts import batch
from provisioner.load.inventory import Host
from provisioner.run import runner, transport
from provisioner.run.session import HostSession
from provisioner.smoke import nccltests, plan, preflight, programs
from provisioner.smoke.busbw import SizeResult, average_busbw
from provisioner.smoke.settings import Settings
from provisioner.smoke.targets import Target

SessionOf = Callable[[Target], HostSession]
CONTROLLER_VAR = "fabnet_slurm_controller"
FORKS = 64
# `timeout`'s own status when it ended the launcher.
TIMED_OUT = 124


@dataclass(frozen=True)
class Plan:
    """Before the pre-flight: the host the launcher runs on and the programs to look for on each host."""

    launch_host: Target
    inside: bool  # one of the run's hosts (its PATH is read by their pre-flight)
    controller: bool  # the inventory names a Slurm controller
    tools: dict[str, tuple[str, ...]]  # host -> programs its pre-flight looks for


def make_plan(targets: Sequence[Target], settings: Settings, controller: Host | None) -> Plan:
    names = {t.name: t for t in targets}
    named = controller.name if controller is not None else next(
        (str(t.host.vars[CONTROLLER_VAR]) for t in targets if t.host.vars.get(CONTROLLER_VAR)), None)
    if named in names:
        launch_host, inside = names[named], True
    elif controller is not None:
        launch_host, inside = Target(name=controller.name, host=controller), False
    else:
        launch_host, inside = targets[0], True
    launchers = nccltests.wanted_launchers(settings, named is not None)
    tools: dict[str, tuple[str, ...]] = {t.name: (settings.binary,) for t in targets}
    if inside:
        tools[launch_host.name] = (*launchers, settings.binary)
    return Plan(launch_host, inside, named is not None, tools)


def probe_outside(launch: Plan, settings: Settings, session_of: SessionOf) -> preflight.HostFacts | str:
    """The launch host's PATH when it is not one of the run's hosts (a controller that runs no rank)."""
    wanted = nccltests.wanted_launchers(settings, launch.controller)
    found = {"tools": programs.tools_probe(wanted)}
    nonce = batch.new_nonce()
    try:
        result = session_of(launch.launch_host).exec(preflight.build_script(found, nonce), timeout=60,
                                                     ticks=batch.TICK)
    except (transport.HostUnreachable, transport.CommandFailed) as exc:
        return str(getattr(exc, "reason", exc))
    return preflight.parse_facts(launch.launch_host.name, found, batch.split_output(result.stdout, nonce))


def resolve(launch: Plan, settings: Settings, facts: Mapping[str, preflight.HostFacts],
            outside: preflight.HostFacts | None) -> tuple[nccltests.Launch, dict[str, tuple[str, ...]]]:
    """The launch, and the programs each host must have (the launcher only where it runs)."""
    host = outside if outside is not None else facts.get(launch.launch_host.name)
    found = host.tools if host else {}
    chosen = nccltests.choose(settings, launch.launch_host.name, launch.controller, found,
                              host.mpi_plugins if host else ())
    required: dict[str, tuple[str, ...]] = {name: (settings.binary,) for name in launch.tools}
    if launch.inside:
        required[launch.launch_host.name] = (chosen.launcher, settings.binary)
    return chosen, required


def missing_launcher(launch: Plan, chosen: nccltests.Launch, outside: preflight.HostFacts | str | None
                     ) -> list[preflight.Finding]:
    """Findings for a launch host outside the run's hosts (the pre-flight's check_tools covers the rest)."""
    if launch.inside or outside is None:
        return []
    name = launch.launch_host.name
    if isinstance(outside, str):
        return [preflight.Finding("tools", (name,), f"{name}: cannot look for {chosen.launcher}: {outside}",
                                  f"check that {name} (the Slurm controller) is reachable over SSH")]
    if outside.tools.get(chosen.launcher, "") is None:
        return [preflight.Finding("tools", (name,), f"{name}: {chosen.launcher} not found on PATH",
                                  f"install {chosen.launcher} on {name} or choose another --launcher")]
    return []


# ----------------------------------------------------------------------------------------------- run


@dataclass
class Result:
    verdict: str = "pass"
    reason: str = ""
    rows: list[SizeResult] = field(default_factory=list)
    avg_busbw: float | None = None
    unreachable: dict[str, str] = field(default_factory=dict)
    failed_hosts: dict[str, str] = field(default_factory=dict)
    findings: list[preflight.Finding] = field(default_factory=list)  # checked again after the failure
    notes: list[str] = field(default_factory=list)
    launch: dict[str, Any] = field(default_factory=dict)


def launch_line(targets: Sequence[Target], settings: Settings, ranks: int, chosen: nccltests.Launch, *,
                shown: bool = False) -> str:
    """The script that starts the launcher; with `shown`, as reports show it (secret values hidden)."""
    first = targets[0]
    env = plan.rank_env(plan.Job("nccl-tests", tuple(targets), "", settings.port, "nccl", ranks, settings.sizes,
                                 settings.iters, settings.warmup, settings.timeout, settings.timeout), first)
    env.pop("PYTHONWARNINGS", None)
    if shown:
        env = plan.shown_env(env, first.secret_env)
    # The launcher ends a little before fabnet's own deadline, so its output (how far it got) comes back,
    # and srun/mpirun take their ranks down with them instead of leaving them on the nodes.
    limit = max(3.0, settings.timeout * 0.9)
    line = nccltests.command(chosen.template, hosts=[t.host.address for t in targets], ranks_per_host=ranks,
                             binary=settings.binary, sizes=settings.sizes, iters=settings.iters, env=env,
                             names=[t.host.node_name for t in targets], limit=limit)
    return f"{line} 2>&1"


def run(targets: Sequence[Target], settings: Settings, ranks: int, chosen: nccltests.Launch, launch_host: Target,
        session_of: SessionOf) -> Result:
    result = Result()
    for attempt in (chosen, nccltests.without_pmix(chosen)):
        line = launch_line(targets, settings, ranks, attempt)
        result.launch = {"launcher": chosen.launcher, "host": launch_host.name,
                         "command": launch_line(targets, settings, ranks, attempt, shown=True)}
        try:
            done = session_of(launch_host).exec(line, timeout=settings.timeout + 10)
        except transport.HostUnreachable as exc:
            result.unreachable[launch_host.name] = exc.reason
            result.verdict, result.reason = "unreachable", f"{launch_host.name}: {exc.reason}"
            return result
        except transport.CommandFailed as exc:
            result.verdict, result.reason = "failed", f"nccl-tests did not finish within {settings.timeout:g} s: {exc}"
            return result
        output, code = done.stdout, done.exit_code
        if attempt is chosen and attempt.template != nccltests.without_pmix(chosen).template \
                and nccltests.pmix_unusable(output, code):
            # Slurm lists the plugin but cannot load libpmix there: the step never started, so once more
            # without it (an all_reduce_perf built without MPI needs no PMI; one with MPI says so itself).
            result.notes.append(f"{launch_host.name}: srun --mpi=pmix could not load the PMIx library; ran "
                                "without --mpi")
            continue
        break
    if (note := nccltests.emulation_note(output)) is not None:
        result.notes.append(f"{launch_host.name}: all_reduce_perf is an emulation: {note}")
    denied = nccltests.not_executable(output, code) if code != TIMED_OUT else None
    if denied is not None:
        _name_not_executable(denied[0], _inventory_names(targets, denied[1]), result)
        return result
    missing = nccltests.missing_program(output, code) if code != TIMED_OUT else None
    if missing is not None:
        missing = missing[0], _inventory_names(targets, missing[1])
    if missing is not None or code == 127:
        _name_missing(targets, settings, chosen, launch_host, missing, session_of, result)
        return result
    unstarted = _inventory_names(targets, nccltests.tasks_failed_to_start(output, code) if code != TIMED_OUT else [])
    if unstarted and _name_missing(targets, settings, chosen, launch_host, (settings.binary, unstarted),
                                   session_of, result, only_if_found=True):
        return result
    tail = " | ".join(output.strip().splitlines()[-3:])
    if code == TIMED_OUT:
        result.verdict, result.reason = "failed", f"nccl-tests did not finish within {settings.timeout:g} s: {tail}"
        return result
    try:
        rows, avg, problem = nccltests.rows(output, len(targets) * ranks)
    except ParseError as exc:
        # A launcher that failed before any rank printed (such as srun with no Slurm controller to reach) said why
        # in its own words: those are the reason, not what the parser makes of them.
        result.verdict, result.reason = "failed", (
            f"{chosen.launcher} exited {code} before all_reduce_perf printed a result: {tail}" if code
            else f"nccl-tests output: {exc}")
        return result
    if problem and code == 0:
        result.verdict, result.reason = "failed", f"nccl-tests output is not a complete, passing run: {problem}"
        return result
    if code != 0 or not rows:
        result.verdict, result.reason = "failed", f"nccl-tests exited {code}: {tail}"
        return result
    result.rows = rows
    result.avg_busbw = avg if avg is not None else average_busbw(rows)
    return result


def _inventory_names(targets: Sequence[Target], named: Sequence[str]) -> list[str]:
    """The targets a launcher's message names: srun names Slurm nodes (`fabnet_slurm_node`), mpirun the
    addresses it was given; a name that is neither is kept as it is."""
    known = {t.host.address: t.name for t in targets} | {t.host.node_name: t.name for t in targets}
    return [known.get(name, name) for name in named]


def _name_not_executable(program: str, hosts: list[str], result: Result) -> None:
    """The launch failed for a program that is there but may not be run: name the hosts the launcher named."""
    where = ", ".join(hosts)
    message = (f"{where}: {program} is not executable (Permission denied)" if hosts
               else f"{program} is not executable on a host of the run (Permission denied)")
    result.findings.append(preflight.Finding(
        "tools", tuple(hosts), message,
        f"make {program} executable{' on ' + where if hosts else ''} (chmod +x), or move it off a filesystem "
        "mounted noexec"))
    result.verdict, result.reason = "failed", message
    result.failed_hosts = dict.fromkeys(hosts, message)


def _name_missing(targets: Sequence[Target], settings: Settings, chosen: nccltests.Launch, launch_host: Target,
                  missing: tuple[str, list[str]] | None, session_of: SessionOf, result: Result,
                  only_if_found: bool = False) -> bool:
    """The launch failed for a program that is not there: look on the hosts again, name where it lacks.
    With `only_if_found` (the output only suggests it), nothing is said unless a host really lacks it, or
    a host the launcher named cannot be looked at again (then that is said). Returns whether a host was
    named."""
    program, named = missing if missing is not None else (chosen.launcher, [launch_host.name])
    # The launcher is looked for where it runs; anything else (all_reduce_perf) on every rank's host.
    where = [launch_host] if program == chosen.launcher else list(targets)
    probe = {"tools": programs.tools_probe([program])}

    def look(target: Target) -> str:
        """"lacks", "has", or why the host could not be looked at (a busy node gets a second try)."""
        why = ""
        for _ in range(2):
            nonce = batch.new_nonce()
            try:
                done = session_of(target).exec(preflight.build_script(probe, nonce), timeout=30, ticks=batch.TICK)
            except (transport.HostUnreachable, transport.CommandFailed) as exc:
                why = str(exc)
                continue
            found = preflight.parse_facts(target.name, probe, batch.split_output(done.stdout, nonce)).tools
            if program in found:
                return "lacks" if found[program] is None else "has"
            why = f"the look for {program} gave no answer"
        return why

    looked = dict(zip([t.name for t in where], runner.each(where, look, forks=FORKS), strict=True))
    lacking = [h for h, seen in looked.items() if seen == "lacks"]
    unseen = {h: looked[h] for h in named if looked.get(h, "has") not in ("lacks", "has")}
    if not lacking and only_if_found:
        if not unseen:
            return False
        message = (f"{', '.join(unseen)}: the task ended as a program that could not start ({chosen.launcher}), "
                   f"and the host could not be checked again for {program}: {'; '.join(unseen.values())}")
        result.verdict, result.reason = "failed", message
        result.failed_hosts = dict.fromkeys(unseen, message)
        return True
    hosts = lacking or [h for h in named if h] or [launch_host.name]
    message = f"{', '.join(hosts)}: {program} not found on PATH"
    result.findings.append(preflight.Finding("tools", tuple(hosts), message,
                                             f"install {program} on {', '.join(hosts)} or put it on the PATH "
                                             f"{chosen.launcher} gives its tasks"))
    result.verdict, result.reason = "failed", message
    result.failed_hosts = dict.fromkeys(hosts, message)
    return True

