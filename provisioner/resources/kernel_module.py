"""`kernel_module`: a module loaded (or absent) now, per `lsmod`, and at boot, per modules-load.d.

Boot lists are read as systemd-modules-load reads them: `*.conf` in /etc, /run and /usr/lib
`modules-load.d` (a file in /etc hides one of the same name further down), plus Debian's /etc/modules.
Module names compare with `-` and `_` as the same character, as the kernel does.
"""

from __future__ import annotations

import dataclasses
import re

from provisioner.errors import ParseError
from provisioner.load.specs import KernelModuleSpec
from provisioner.resources.base import (
    Check,
    HostContext,
    Probe,
    ProbeFailed,
    ResourceType,
    Results,
    compare,
    drift,
    error,
    errors_for,
    files_probe,
    ok,
    parse_file_listing,
    sh,
    stdout_of,
)
from provisioner.resources.steps import PHASE_MODULES, Step, command_step, rewrite_step, setting_undo

KIND = "kernel_module"

LSMOD = Probe(sh("lsmod"))
LOAD_DIRS = ("/etc/modules-load.d/", "/run/modules-load.d/", "/usr/lib/modules-load.d/")
ETC_MODULES = "/etc/modules"
BOOT_LISTS = files_probe(*(d + "*.conf" for d in LOAD_DIRS), ETC_MODULES)

_LSMOD_LINE = re.compile(r"^(?P<name>\S+)\s+(?P<size>[0-9]+)\s+(?P<used>-?[0-9]+)(?:\s+(?P<by>\S+))?\s*$")


def _norm(name: str) -> str:
    return name.replace("-", "_")


def loaded_read(name: str) -> str:
    """Shell printing `loaded` or `absent` for module `name`, read from `lsmod` as the probe reads it."""
    program = '$1 == ENVIRON["FABNET_MODULE"] {f = 1} END {print (f ? "loaded" : "absent")}'
    return f"lsmod | FABNET_MODULE={sh(_norm(name))} awk {sh(program)}"


def parse_lsmod(text: str) -> dict[str, list[str]]:
    """Loaded module -> the modules using it. ParseError for a line that is not an lsmod row."""
    modules: dict[str, list[str]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or (number == 1 and line.split()[:1] == ["Module"]):
            continue
        match = _LSMOD_LINE.match(line)
        if not match:
            raise ParseError("lsmod", "expected 'NAME SIZE USED [BY]'", line=number, text=line)
        users = [u for u in (match["by"] or "").strip(",").split(",") if u and u != "[permanent]"]
        modules[_norm(match["name"])] = users
    return modules


def boot_listed(files: dict[str, str], name: str) -> str | None:
    """The file that has `name` loaded at boot, or None. Comments (`#`, `;`) are ignored."""
    wanted = _norm(name)
    chosen: dict[str, str] = {}
    for directory in LOAD_DIRS:  # highest precedence first
        for path in sorted(p for p in files if p.startswith(directory)):
            chosen.setdefault(path[len(directory):], path)
    ordered = [chosen[base] for base in sorted(chosen)]
    if ETC_MODULES in files:
        ordered.append(ETC_MODULES)
    for path in ordered:
        for raw in files[path].splitlines():
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            # /etc/modules allows options after the name; modules-load.d has one name per line.
            if _norm(line.split()[0]) == wanted:
                return path
    return None


def probes(spec: KernelModuleSpec, ctx: HostContext) -> list[Probe]:
    return [LSMOD, BOOT_LISTS] if spec.persistent else [LSMOD]


def evaluate(spec: KernelModuleSpec, results: Results, ctx: HostContext) -> list[Check]:
    checks: list[Check] = []
    try:
        modules = parse_lsmod(stdout_of(results, LSMOD, "lsmod"))
    except (ProbeFailed, ParseError) as exc:
        checks += errors_for([("loaded", spec.state)], str(exc))
    else:
        users = modules.get(_norm(spec.name))
        actual = "absent" if users is None else "loaded"
        message = f"used by {', '.join(users)}" if users else ""
        checks.append(compare("loaded", spec.state, actual, message))
    if not spec.persistent:
        return checks
    desired = "listed" if spec.state == "loaded" else "not listed"
    try:
        listing = parse_file_listing(stdout_of(results, BOOT_LISTS, "reading modules-load.d"))
    except ProbeFailed as exc:
        return [*checks, error("persistent", desired, str(exc))]
    source = boot_listed(listing.files, spec.name)
    if source is None and listing.unreadable:
        return [*checks, error("persistent", desired, f"cannot read {', '.join(listing.unreadable)}")]
    actual = f"listed in {source}" if source else "not listed"
    verdict = ok if (source is not None) == (spec.state == "loaded") else drift
    message = "" if verdict is ok else f"{spec.name} {'is' if source else 'is not'} loaded at boot"
    return [*checks, verdict("persistent", desired, actual, message)]


# ---------------------------------------------------------------------------------------------- remedy

MODULES_LOAD_DIR = "/etc/modules-load.d/"


def _without(text: str, name: str) -> str:
    """`text` of a boot list with every line loading `name` removed."""
    kept = [raw for raw in text.splitlines(keepends=True)
            if not (raw.strip() and raw.strip()[0] not in "#;" and _norm(raw.split()[0]) == _norm(name))]
    return "".join(kept)


def remedy(spec: KernelModuleSpec, results: Results, ctx: HostContext, checks: list[Check]) -> list[Step]:
    """modprobe (or modprobe -r) now; at boot, a modules-load.d file of its own, or the line removed."""
    target = spec.target()
    drifted = {c.attribute for c in checks if c.status == "drift"}
    notify = tuple(spec.notify)
    steps: list[Step] = []
    if "loaded" in drifted:
        load = spec.state == "loaded"
        verb, back = ((), ("-r",)) if load else (("-r",), ())
        step = command_step(target, "load" if load else "unload", ("modprobe", *verb, "--", spec.name),
                            undo=["modprobe", *back, "--", spec.name], phase=PHASE_MODULES, notify=notify)
        # Put back only while the module is as the run left it; one already as it was is left alone
        # (`modprobe -r` of a module not loaded fails). A module has two states, so a change since can
        # only be back to the old one: what the guard adds is that nothing is done then.
        old = "absent" if load else "loaded"
        steps.append(dataclasses.replace(step, undo=setting_undo(
            f"module {spec.name}", loaded_read(spec.name), spec.state, old, step.undo or "", unchanged=":")))
    if "persistent" in drifted:
        # Each write runs only if its file still holds what was read (or is still missing).
        listing = parse_file_listing(stdout_of(results, BOOT_LISTS, "reading modules-load.d"))
        if spec.state == "loaded":
            path = f"{MODULES_LOAD_DIR}{spec.name}.conf"
            text = f"{spec.name}\n"
            steps.append(rewrite_step(target, "persist", path, text.encode(), listing.files.get(path),
                                      phase=PHASE_MODULES, mode="0644", owner="root", group="root"))
        else:
            while (source := boot_listed(listing.files, spec.name)) is not None:
                text = _without(listing.files[source], spec.name)
                steps.append(rewrite_step(target, f"unlist:{source}", source, text.encode(), listing.files[source],
                                          phase=PHASE_MODULES))
                listing.files.pop(source)
    return steps


RESOURCE = ResourceType(KIND, KernelModuleSpec, probes, evaluate, remedy=remedy, examples=(
    {"name": "nvidia_peermem", "state": "loaded", "persistent": True, "notify": ["nvidia-persistenced"]},
))
