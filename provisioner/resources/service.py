"""`service`: a systemd unit running (or not) and enabled at boot (or not), from `systemctl show`.

Enabled at boot means a UnitFileState of enabled, enabled-runtime, static (no [Install] section: it
starts when something needs it and cannot be enabled), generated (made by a generator, as SysV init
scripts and fstab entries are) or alias. Not enabled: disabled, masked, masked-runtime, linked,
linked-runtime, indirect (only enabled through Also= or template instances) and transient.
A static or generated unit cannot be disabled, only masked, so `enabled: false` reports it as drift.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from provisioner.load.specs import ServiceSpec
from provisioner.resources.base import (
    Check,
    HostContext,
    Probe,
    ProbeFailed,
    ProbeGroup,
    ResourceType,
    Results,
    drift,
    errors_for,
    ok,
    sh,
    stdout_of,
)
from provisioner.resources.steps import (
    PHASE_HANDLERS,
    PHASE_SERVICES,
    Step,
    command_step,
    impossible,
    setting_undo,
)

KIND = "service"

UNIT_SUFFIXES = (
    ".service", ".socket", ".target", ".timer", ".mount", ".automount", ".path", ".swap", ".slice",
    ".scope", ".device",
)
ENABLED_STATES = frozenset({"enabled", "enabled-runtime", "static", "generated", "alias"})
# MainPID is not judged: watch keeps a running unit's reading only while that process lives (`_still`).
PROPERTIES = ("LoadState", "ActiveState", "SubState", "UnitFileState", "MainPID")

# What decides the reading besides systemd's memory, for watch (facts/fingerprint.py). systemd makes a unit's
# link in /run/systemd/units as it starts and removes it as the unit stops or fails, so that folder changes
# when any unit does; systemd-units-load is touched by every daemon-reload (and the generator folders,
# made again by it, stand in on releases before that file). The system unit search path (systemd.unit(5))
# and its .wants/.requires/.upholds folders change when a unit is enabled, disabled, masked, linked, added or
# removed; the unit's own files and drop-in folders when it is edited.
STATE_PATHS = ("/run/systemd/units", "/run/systemd/systemd-units-load", "/run/systemd/generator",
               "/run/systemd/generator.early", "/run/systemd/generator.late")
UNIT_DIRS = ("/etc/systemd/system.control", "/run/systemd/system.control", "/run/systemd/transient",
             "/etc/systemd/system", "/etc/systemd/system.attached", "/run/systemd/system",
             "/run/systemd/system.attached", "/usr/local/lib/systemd/system", "/usr/lib/systemd/system",
             "/lib/systemd/system")
LINK_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system", "/usr/lib/systemd/system",
             "/lib/systemd/system")
# States a reading may be kept in: each way out of them leaves a trace in the paths above, or ends the main
# process. Out of any other (failed: reset-failed leaves none; activating, deactivating, reloading: passing),
# the unit is read again every cycle.
_KEPT_STATES = {("inactive", "dead"), ("active", "exited"), ("active", "running")}


def unit_name(name: str) -> str:
    return name if name.endswith(UNIT_SUFFIXES) else f"{name}.service"


SHOW = sh("systemctl", "show", f"--property={','.join(PROPERTIES)}", "--")


def split_units(text: str, count: int) -> list[str] | None:
    """`systemctl show U1 .. Un`: one block of KEY=value lines per unit, in order, a blank line between."""
    blocks = text.rstrip("\n").split("\n\n")
    if len(blocks) != count or not all(block and not block.startswith("\n") for block in blocks):
        return None
    return [block + "\n" for block in blocks]


def _probe(spec: ServiceSpec) -> Probe:
    # The services of a host are read with one systemctl call (probejoin.py): each call costs PID 1 a
    # D-Bus round of its own.
    unit = unit_name(spec.name)
    return Probe(f"{SHOW} {sh(unit)}", group=ProbeGroup(SHOW, unit, _split_joined), reads=_reads(unit),
                 still=_still)


def _reads(unit: str) -> tuple[str, ...]:
    files = [unit]
    if "@" in unit:  # an instance reads its template's file (foo@bar.service: foo@.service)
        files.append(f"{unit.split('@', 1)[0]}@.{unit.rsplit('.', 1)[-1]}")
    links = (f"{d}/*.{kind}" for d in LINK_DIRS for kind in ("wants", "requires", "upholds"))
    return (*STATE_PATHS, *UNIT_DIRS, *links,
            *(sh(f"{d}/{name}{suffix}") for name in files for d in UNIT_DIRS for suffix in ("", ".d")))


def _still(text: str) -> tuple[str, ...] | None:
    """The main processes a `systemctl show` reading depends on (`/proc/PID`), or None where the units' state
    can change with no trace in a file (watch then reads them again next cycle)."""
    paths = []
    for block in text.rstrip("\n").split("\n\n"):
        values = parse_show(block)
        state = (values.get("ActiveState", ""), values.get("SubState", ""))
        if state not in _KEPT_STATES:
            return None
        if state == ("active", "running"):
            # Running, with its main process: it stops running only when that process ends (or by a stop,
            # which leaves a trace). Without one (MainPID=0) nothing says when it does.
            pid = values.get("MainPID", "")
            if not pid.isdigit() or int(pid) == 0:
                return None
            paths.append(f"/proc/{int(pid)}")
    return tuple(paths)


def _split_joined(text: str, units: Sequence[str]) -> list[str] | None:
    return split_units(text, len(units))


def probes(spec: ServiceSpec, ctx: HostContext) -> list[Probe]:
    return [_probe(spec)]


def parse_show(text: str) -> dict[str, str]:
    """`KEY=value` lines of `systemctl show` (values may be empty)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return values


def _attributes(spec: ServiceSpec) -> list[tuple[str, object]]:
    desired_active = "active" if spec.state == "started" else "inactive"
    attributes: list[tuple[str, object]] = [("active", desired_active)]
    if spec.enabled is not None:
        attributes.append(("enabled", "enabled" if spec.enabled else "disabled"))
    return attributes


def evaluate(spec: ServiceSpec, results: Results, ctx: HostContext) -> list[Check]:
    attributes = _attributes(spec)
    unit = unit_name(spec.name)
    try:
        values = parse_show(stdout_of(results, _probe(spec), f"systemctl show {unit}"))
    except ProbeFailed as exc:
        return errors_for(attributes, str(exc))
    missing = [key for key in ("LoadState", "ActiveState") if key not in values]
    if missing:
        return errors_for(attributes, f"systemctl show {unit}: no {', '.join(missing)} in its output")

    if values["LoadState"] == "not-found":
        # Not installed: in sync only where the spec wants it stopped and not enabled.
        checks = []
        for attribute, desired in attributes:
            wanted_off = desired in ("inactive", "disabled")
            checks.append((ok if wanted_off else drift)(attribute, desired, "not installed", "unit not installed"))
        return checks

    active_state = values["ActiveState"]
    sub_state = values.get("SubState", "")
    running = active_state in ("active", "reloading")
    actual_active = f"{active_state} ({sub_state})" if sub_state else active_state
    message = "unit is masked" if values["LoadState"] == "masked" else ""
    if values["LoadState"] not in ("loaded", "masked"):
        message = f"unit file not loaded cleanly (LoadState={values['LoadState']})"
    checks = [
        (ok if running == (spec.state == "started") else drift)(
            "active", attributes[0][1], actual_active, message
        )
    ]
    if spec.enabled is not None:
        state = values.get("UnitFileState", "")
        enabled = state in ENABLED_STATES
        message = ""
        if not spec.enabled and state in ("static", "generated"):
            message = f"a {state} unit cannot be disabled; mask it to keep it from starting"
        verdict = ok if enabled == spec.enabled else drift
        checks.append(verdict("enabled", attributes[1][1], state or "none", message))
    return checks


# ---------------------------------------------------------------------------------------------- remedy


_RUNNING = {"active": "active", "reloading": "active", "activating": "active", "inactive": "inactive",
            "failed": "inactive", "deactivating": "inactive"}


def _guarded(step: Step, unit: str, prop: str, was_set: str, actual: str | None) -> Step:
    """`step` with its undo run only while `prop` of `unit` is what the step sets it to, or still what
    it was (`actual`, as the check printed it: "inactive (dead)"); nothing is done in the second case."""
    old = _RUNNING.get((actual or "").split(" (", 1)[0], "") if prop == "ActiveState" else (actual or "")
    if not old or step.undo is None:
        return step
    # Running or not is what a start or stop sets: a unit that failed or is stopping counts as stopped.
    folds = "".join(f"; s/^{state}$/{to}/" for state, to in _RUNNING.items() if prop == "ActiveState" and state != to)
    read = f"{sh('systemctl', 'show', f'--property={prop}', '--', unit)} | sed {sh('s/^[^=]*=//' + folds)}"
    undo = setting_undo(f"the {prop} of {unit}", read, was_set, old, step.undo, unchanged=":")
    return dataclasses.replace(step, undo=undo)


def remedy(spec: ServiceSpec, results: Results, ctx: HostContext, checks: list[Check]) -> list[Step]:
    """systemctl start/stop and enable/disable for what drifted; a unit that is not installed cannot be."""
    unit = unit_name(spec.name)
    target = spec.target()
    drifted = {c.attribute: c for c in checks if c.status == "drift"}
    steps: list[Step] = []
    if any(c.actual == "not installed" for c in drifted.values()):
        return [impossible(target, "install", f"unit {unit} is not installed on this host", PHASE_SERVICES)]
    # Each undo puts the unit back only while `systemctl show` reads it as this run left it: one
    # started, stopped, masked or enabled by hand since is left as it is (steps.setting_undo).
    if "enabled" in drifted:
        verb, back = ("enable", "disable") if spec.enabled else ("disable", "enable")
        step = command_step(target, verb, ("systemctl", verb, "--", unit), undo=["systemctl", back, "--", unit],
                            phase=PHASE_SERVICES)
        steps.append(_guarded(step, unit, "UnitFileState", "enabled" if spec.enabled else "disabled",
                              drifted["enabled"].actual))
    if "active" in drifted:
        verb, back = ("start", "stop") if spec.state == "started" else ("stop", "start")
        step = command_step(target, verb, ("systemctl", verb, "--", unit), undo=["systemctl", back, "--", unit],
                            phase=PHASE_SERVICES)
        steps.append(_guarded(step, unit, "ActiveState", "active" if spec.state == "started" else "inactive",
                              drifted["active"].actual))
    return steps


def restart_handler(unit: str, notifiers: tuple[str, ...]) -> Step:
    """Restart `unit` once because a file or module it depends on changed (run only if one did)."""
    name = unit_name(unit)
    return Step(f"handler[{name}]", "restart", sh("systemctl", "restart", "--", name),
                f"systemctl restart {name} (notified by {', '.join(notifiers)})", phase=PHASE_HANDLERS,
                needs=notifiers)


def notified_unit(target: str) -> str:
    """The unit a service resource is, from its target `service[NAME]`: its steps wait for its notifiers."""
    return unit_name(target[len(f"{KIND}["):-1])


RESOURCE = ResourceType(KIND, ServiceSpec, probes, evaluate, remedy=remedy, notified_unit=notified_unit,
                        examples=({"name": "openibd", "state": "started", "enabled": True},))
