"""`sysctl`: a kernel parameter's live value (from /proc/sys) and the value it gets at boot.

The boot value is the last assignment in the order `sysctl --system` applies files: `*.conf` from
/etc, /run, /usr/local/lib and /usr/lib `sysctl.d` sorted by file name (a file in /etc hides one of
the same name further down), then /etc/sysctl.conf; an explicit key beats any glob key. Values compare
with runs of whitespace as one space (multi-value parameters print tabs).
"""

from __future__ import annotations

import dataclasses
import fnmatch

from provisioner.load.specs import SysctlSpec
from provisioner.resources.base import (
    Check,
    HostContext,
    Probe,
    ProbeFailed,
    ResourceType,
    Results,
    drift,
    error,
    errors_for,
    files_probe,
    ok,
    parse_file_listing,
    read_value_command,
    sh,
    stdout_of,
)
from provisioner.resources.steps import (
    EDITS,
    PHASE_SYSCTL,
    Expect,
    FileEdit,
    Step,
    command_step,
    edit_step,
    setting_undo,
)

KIND = "sysctl"

CONF_DIRS = ("/etc/sysctl.d/", "/run/sysctl.d/", "/usr/local/lib/sysctl.d/", "/usr/lib/sysctl.d/")
SYSCTL_CONF = "/etc/sysctl.conf"
BOOT_FILES = files_probe(*(d + "*.conf" for d in CONF_DIRS), SYSCTL_CONF)


def canonical(name: str) -> str:
    """The dotted form: when the first separator is `/`, slashes and dots swap (sysctl.d(5))."""
    first = next((c for c in name if c in "./"), ".")
    return name.translate(str.maketrans("./", "/.")) if first == "/" else name


def proc_path(name: str) -> str | None:
    """/proc/sys path of a parameter, or None for a name that would leave /proc/sys."""
    components = [part.replace("/", ".") for part in canonical(name).split(".")]
    if any(component in ("", ".", "..") for component in components):
        return None
    return "/proc/sys/" + "/".join(components)


def normalise(value: str) -> str:
    return " ".join(value.split())


def _value_probe(spec: SysctlSpec) -> Probe | None:
    path = proc_path(spec.name)
    return None if path is None else Probe(read_value_command(sh(path)))


def probes(spec: SysctlSpec, ctx: HostContext) -> list[Probe]:
    found = [p for p in (_value_probe(spec),) if p is not None]
    if spec.persistent:
        found.append(BOOT_FILES)
    return found


def boot_value(files: dict[str, str], name: str) -> tuple[str | None, str | None]:
    """(value, file) that `name` gets at boot; (None, None) when no file sets it.

    The last explicit assignment wins. Glob keys (`net.ipv4.conf.*.rp_filter`) count only where no
    explicit assignment exists and no `-key` line (without a value) excludes the name from globs, as in
    systemd-sysctl. A leading `-` on an assignment only means "ignore errors".
    """
    wanted = canonical(name)
    chosen: dict[str, str] = {}
    for directory in CONF_DIRS:  # highest precedence first
        for path in (p for p in files if p.startswith(directory)):
            chosen.setdefault(path[len(directory):], path)
    ordered = [chosen[base] for base in sorted(chosen)]
    if SYSCTL_CONF in files:
        ordered.append(SYSCTL_CONF)
    explicit: tuple[str, str] | None = None
    globbed: tuple[str, str] | None = None
    excluded = False
    for path in ordered:
        for raw in files[path].splitlines():
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            key, sep, assigned = line.partition("=")
            key = key.strip()
            if not sep:
                excluded = excluded or (key.startswith("-") and canonical(key[1:].strip()) == wanted)
                continue
            key = canonical(key.lstrip("-").strip())
            if key == wanted:
                explicit = (assigned.strip(), path)
            elif any(c in key for c in "*?[") and fnmatch.fnmatchcase(wanted, key):
                globbed = (assigned.strip(), path)
    found = explicit or (None if excluded else globbed)
    return found if found else (None, None)


def evaluate(spec: SysctlSpec, results: Results, ctx: HostContext) -> list[Check]:
    desired = normalise(spec.value)
    checks: list[Check] = []
    probe = _value_probe(spec)
    if probe is None:
        attributes = [("value", desired)] + ([("persistent", desired)] if spec.persistent else [])
        return errors_for(attributes, f"{spec.name!r} is not a sysctl name")
    try:
        live = normalise(stdout_of(results, probe, f"reading {proc_path(spec.name)}"))
    except ProbeFailed as exc:
        message = str(exc)
        if "No such file" in message:
            message = f"no sysctl {spec.name} on this host (is its module loaded?)"
        checks.append(error("value", desired, message))
    else:
        checks.append((ok if live == desired else drift)("value", desired, live))
    if not spec.persistent:
        return checks
    try:
        listing = parse_file_listing(stdout_of(results, BOOT_FILES, "reading sysctl.d"))
    except ProbeFailed as exc:
        return [*checks, error("persistent", desired, str(exc))]
    value, source = boot_value(listing.files, spec.name)
    if value is None:
        if listing.unreadable:
            return [*checks, error("persistent", desired, f"cannot read {', '.join(listing.unreadable)}")]
        return [*checks, drift("persistent", desired, "not set at boot", f"no sysctl.d file sets {spec.name}")]
    verdict = ok if normalise(value) == desired else drift
    return [*checks, verdict("persistent", desired, f"{normalise(value)} in {source}")]


# ---------------------------------------------------------------------------------------------- remedy


def set_in_text(text: str, name: str, value: str) -> str:
    """`text` of a sysctl file with every explicit assignment of `name` set to `value` (or one appended)."""
    wanted = canonical(name)
    lines = text.splitlines(keepends=True)
    found = False
    for index, raw in enumerate(lines):
        line = raw.strip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        key = line.partition("=")[0].strip()
        if canonical(key.lstrip("-").strip()) == wanted:
            lines[index] = f"{key} = {value}\n"
            found = True
    if not found:
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        lines.append(f"{name} = {value}\n")
    return "".join(lines)


EDITS["sysctl.set"] = set_in_text  # several sysctls persisted in one file become one write of it


def remedy(spec: SysctlSpec, results: Results, ctx: HostContext, checks: list[Check]) -> list[Step]:
    """`sysctl -w` now; at boot, the file that sets it edited, or a sysctl.d file of fabnet's own.

    A file in /etc is edited in place; a packaged one (/usr/lib, /run) is never touched: an /etc file
    named after the key, sorted last, wins over it. Both steps run only if the value, or the file's
    content, is still what was read (`Expect`); the file write is an edit that composes with other
    sysctls' edits of the same file (plan.merge_writes). The undo of `sysctl -w` puts the old value back
    only while the parameter still holds the value set (or the old one): a later change is left.
    """
    target = spec.target()
    drifted = {c.attribute: c for c in checks if c.status == "drift"}
    steps: list[Step] = []
    if "value" in drifted:
        old = drifted["value"].actual
        name = canonical(spec.name)
        step = command_step(target, "set", ("sysctl", "-w", f"{name}={spec.value}"),
                            undo=["sysctl", "-w", f"{name}={old}"] if old is not None else None,
                            phase=PHASE_SYSCTL)
        probe = _value_probe(spec)
        if old is not None and probe is not None:
            # Set only while it holds what was read; put back only while it holds what was set.
            step = dataclasses.replace(step, expect=(Expect.setting(name, probe.command, old),),
                                       undo=setting_undo(name, probe.command, spec.value, old, step.undo or ""))
        steps.append(step)
    if "persistent" in drifted:
        listing = parse_file_listing(stdout_of(results, BOOT_FILES, "reading sysctl.d"))
        _, source = boot_value(listing.files, spec.name)
        if source is not None and (source == SYSCTL_CONF or source.startswith("/etc/")):
            path, name = source, spec.name
        else:
            path = f"/etc/sysctl.d/99-fabnet-{canonical(spec.name).replace('/', '_')}.conf"
            name = canonical(spec.name)
        edit = FileEdit("sysctl.set", (name, spec.value), listing.files.get(path))
        steps.append(edit_step(target, "persist", path, edit, phase=PHASE_SYSCTL))
    return steps


RESOURCE = ResourceType(KIND, SysctlSpec, probes, evaluate, remedy=remedy,
                        examples=({"name": "net.ipv4.conf.all.arp_ignore", "value": 1, "persistent": True},))
