"""`nccl`: the installed NCCL version, from the package database or, failing that, the library's file name;
and, for a package, whether it is held and pinned as the remedy leaves it.

One probe: the package database when it knows the package (`dpkg-query` with apt, installed or left
half-done by an interrupted dpkg; `rpm -q` with dnf), else a listing of `libnccl.so.*` in the usual
library directories (a tarball or a copy). The first output line says which. With apt, the last line
carries the `Pin:` of fabnet's pin file: an install cut short after the package but before `apt-mark
hold` and the pin is drift, so the next apply completes it. With dnf, the list dnf 4's versionlock reads
(its conf's `locklist`) and the lines of the versionlock files that may lock the package follow
(nccl_dnf.py reads them, parsers/versionlock.py judges them): the hold of dnf hosts, in effect only while
the plugin runs and can open its list (nccl_dnf_lock.py).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace

from provisioner.load.specs import NcclSpec
from provisioner.parsers import versionlock
from provisioner.parsers.versions import Version, parse_constraint
from provisioner.resources import nccl_dnf, nccl_dnf_lock
from provisioner.resources.base import (
    Check,
    HostContext,
    Probe,
    ProbeFailed,
    ResourceType,
    Results,
    drift,
    errors_for,
    ok,
    sh,
    stdout_of,
)
from provisioner.resources.steps import (
    PHASE_PACKAGES,
    Step,
    backed_up,
    impossible,
    restore_file,
    write_file,
    write_file_from,
)

KIND = "nccl"

LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/lib", "/usr/lib/aarch64-linux-gnu")
_LIB_VERSION = re.compile(r"/libnccl\.so\.(?P<version>[0-9]+(?:\.[0-9]+)*)$")
PIN_DIR = "/etc/apt/preferences.d/"
# What dpkg-query's answer comes from: the status database, the journal of updates not yet folded into it,
# and dpkg's own configuration (which may move the database).
DPKG_READS = ("/var/lib/dpkg/status", "/var/lib/dpkg/updates", "/var/lib/dpkg/updates/*", "/etc/dpkg/dpkg.cfg",
              "/etc/dpkg/dpkg.cfg.d", "/etc/dpkg/dpkg.cfg.d/*")
# dpkg's package states that hold a version (an unpacked or half-configured one is an install cut short)
_DPKG_PRESENT = ("installed", "half-installed", "unpacked", "half-configured", "triggers-awaited",
                 "triggers-pending")


def pin_file(spec: NcclSpec) -> str:
    return f"{PIN_DIR}fabnet-{spec.package}"


def _probe(spec: NcclSpec, ctx: HostContext | None = None) -> Probe:
    libraries = " ".join(f"{d}/libnccl.so.*" for d in LIB_DIRS)  # fixed globs, expanded by the shell
    files = f'echo files; for f in {libraries}; do if [ -e "$f" ]; then echo "$f"; fi; done'
    if ctx is not None and ctx.package_manager == "dnf":
        return nccl_dnf.rpm_probe(spec.package, files, [*LIB_DIRS, *libraries.split()])
    query = sh("dpkg-query", "-W", "-f=${Status} ${Version}\\n", "--", spec.package)
    # `dpkg WANT FLAG STATUS VERSION`: the want is `hold` once apt-mark held it.
    present = "|".join(f'*" {state} "*' for state in _DPKG_PRESENT)
    command = f's=$({query} 2>/dev/null); case "$s" in {present}) printf \'dpkg %s\\n\' "$s";; *) {files};; esac'
    reads = [*DPKG_READS, *LIB_DIRS, *libraries.split()]
    if ctx is None or ctx.package_manager == "apt":
        pin = shlex.quote(pin_file(spec))
        # `sed -n 's/^Pin: *//p'` in the shell's own words: a process fewer on every read of a pinned node.
        value = ('while IFS= read -r p || [ -n "$p" ]; do case $p in Pin:*) p=${p#Pin:}; '
                 "while [ \"${p# }\" != \"$p\" ]; do p=${p# }; done; printf '%s\\n' \"$p\";; esac; done <" + pin)
        command += f"; if [ -e {pin} ]; then printf 'pin %s\\n' \"$({value})\"; else echo pin; fi"
        reads.append(pin)
    return Probe(command, reads=tuple(reads))


def probes(spec: NcclSpec, ctx: HostContext) -> list[Probe]:
    return [_probe(spec, ctx)]


@dataclass(frozen=True)
class Installed:
    """What the probe found: the version (None: NCCL nowhere), where from, and for a package its dpkg
    state, whether it is held, and the pin file's `Pin:` value ('' without a pin file, None unread); on dnf,
    the list dnf 4's versionlock reads (`locklist`: '' where its conf sets none, None unread: the default)
    and, for a package, what says whether its lock is in effect (`lock`)."""

    version: str | None
    source: str
    state: str = "installed"
    held: bool | None = None
    pin: str | None = None
    locklist: str | None = None
    lock: nccl_dnf_lock.LockConf | None = None


def read_installed(text: str, package: str = "libnccl2") -> Installed:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise ProbeFailed("NCCL probe printed nothing")
    if lines[0].startswith("rpm "):
        return _read_rpm(lines, package)
    listed = [line for line in lines if not nccl_dnf_lock.is_dnf_line(line)]
    if listed != lines:  # a dnf host whose package database does not know the package
        found = _read_files(listed[1:]) if listed[:1] == ["files"] else _unexpected(listed)
        return replace(found, locklist=_locklist(lines))
    pin: str | None = None
    if lines[-1] == "pin" or lines[-1].startswith("pin "):
        pin = lines.pop()[4:].strip()
    if not lines:
        raise ProbeFailed("NCCL probe: no package or library listing")
    head, _, rest = lines[0].partition(" ")
    if head == "dpkg" and rest:
        fields = rest.split()
        if len(fields) == 4:  # want flag status version
            want, _flag, state, version = fields
            return Installed(version, "package", state, want == "hold", pin)
        if len(fields) == 1:  # only a version: nothing known of the hold
            return Installed(fields[0], "package", pin=pin)
        # `want flag status` with an empty ${Version}: dpkg holds the package in a state but names no
        # version (the state is no version, and must not be read as one).
        raise ProbeFailed(f"dpkg-query printed the state {rest!r} and no version")
    if head != "files":
        return _unexpected(lines)
    return _read_files(lines[1:])


def _unexpected(lines: list[str]) -> Installed:
    raise ProbeFailed(f"NCCL probe: unexpected output {lines[0]!r}" if lines else "NCCL probe: no package or "
                      "library listing")


def _read_rpm(lines: list[str], package: str) -> Installed:
    """`rpm` lines (several when more than one version is installed), then the versionlock lines."""
    rpms = []
    for line in (line[4:] for line in lines if line.startswith("rpm ")):
        if (rpm := versionlock.parse_rpm(package, line)) is None:
            raise ProbeFailed(f"rpm -q printed {line!r}, not EPOCH:VERSION-RELEASE ARCH")
        rpms.append(rpm)
    found = max(rpms, key=lambda r: (int(r.epoch), Version(r.version + "-" + r.release)))
    listed = [line[5:] for line in lines if line.startswith("lock ")]
    toml = "\n".join(line[5:] for line in lines if line == "toml" or line.startswith("toml "))
    in_list = versionlock.list_holds(found, listed)
    in_toml = versionlock.toml_holds(found, toml) if toml else None
    lock = replace(nccl_dnf_lock.read_lock(lines), listed=in_list, toml=in_toml)
    return Installed(found.shown, "package", held=in_list or in_toml, locklist=lock.locklist, lock=lock)


def _locklist(lines: list[str]) -> str | None:
    """The probe's `locklist PATH` (stripped like every line: a path's own edge blanks are not kept)."""
    return nccl_dnf_lock.read_lock(lines).locklist


def _read_files(lines: list[str]) -> Installed:
    found = [(m["version"], line) for line in lines if (m := _LIB_VERSION.search(line))]
    if not found:
        return Installed(None, "no package, no libnccl.so.* in " + ", ".join(LIB_DIRS))
    # libnccl.so.2 is a link to libnccl.so.2.21.5: the longest, highest name says the most.
    version, path = max(found, key=lambda item: (Version(item[0]), len(item[0])))
    if "." not in version:
        # Only the soname's major (`libnccl.so.2`, as the nvidia-nccl-cu12 wheel or a copy that kept
        # only the link ships it): NCCL is there, but its name does not say which release it is.
        raise ProbeFailed(f"{path} names only NCCL's major version {version}, not its release")
    return Installed(version, path)


def upstream(version: str) -> str:
    """A package version without its epoch (`1:2.21.5-1` -> `2.21.5-1`)."""
    epoch, colon, rest = version.partition(":")
    return rest if colon and epoch.isdigit() else version


def installed_version(text: str) -> tuple[str | None, str]:
    """(version, where it came from) from the probe's output; version None when NCCL was not found."""
    found = read_installed(text)
    return found.version, found.source


def evaluate(spec: NcclSpec, results: Results, ctx: HostContext) -> list[Check]:
    try:
        found = read_installed(stdout_of(results, _probe(spec, ctx), f"NCCL version of {spec.package}"), spec.package)
    except ProbeFailed as exc:
        return errors_for([("version", spec.version)], str(exc))
    version = found.version
    if version is None:
        return [drift("version", spec.version, "not installed", found.source)]
    if found.state != "installed":
        return [drift("version", spec.version, f"{version} ({found.state})",
                      f"dpkg left {spec.package} {found.state}: an install did not finish")]
    message = "" if found.source == "package" else f"package {spec.package} not installed; from {found.source}"
    # The constraint speaks of the upstream version: an epoch (`1:2.21.5-1`) is set aside, as the remedy does.
    verdict = ok if spec.version.matches(upstream(version)) else drift
    checks = [verdict("version", spec.version, version, message)]
    if verdict is ok and found.source == "package":
        # What the remedy promised beside the version: the package held, and pinned to that version.
        if ctx.package_manager == "dnf" and found.lock is not None:
            checks.append(nccl_dnf_lock.held_check(found.lock))
        elif found.held is not None:
            checks.append((ok if found.held else drift)(
                "held", "held", "held" if found.held else "not held",
                "" if found.held else f"apt-mark showhold does not list {spec.package}: upgrades may replace it"))
        if found.pin is not None:
            want = f"version {version}"
            message = "" if found.pin == want else (
                f"{pin_file(spec)} is missing" if not found.pin else f"{pin_file(spec)} pins {found.pin}")
            checks.append((ok if found.pin == want else drift)("pin", want, found.pin or None, message))
    return checks


# ---------------------------------------------------------------------------------------------- remedy

# Version tests in the remedy's shell, with the semantics of parsers.versions: "same" means the version
# starts with the bound, segment-wise (==2.21.5 accepts 2.21.5-1+cuda12.4, not 2.21.50).
_SAME = '__fn_same() { case "$1" in "$2"|"$2"[!0-9]*) return 0;; esac; return 1; }'


_U = '"$u"'


def _clause_test(op: str, bound: str, compare: str) -> str:
    """A shell line that `continue`s the version loop when "$u" (the candidate without its epoch) fails
    the clause; `compare` is a command template comparing two versions (`dpkg --compare-versions A OP B`)."""
    b = shlex.quote(bound)
    if op == "==":
        return f'__fn_same "$u" {b} || continue'
    if op == "!=":
        return f'! __fn_same "$u" {b} || continue'
    if op == ">=":
        return f'__fn_same "$u" {b} || {compare.format(a=_U, op="gt", b=b)} || continue'
    if op == "<=":
        return f'__fn_same "$u" {b} || {compare.format(a=_U, op="lt", b=b)} || continue'
    word = "gt" if op == ">" else "lt"
    return f'{{ ! __fn_same "$u" {b} && {compare.format(a=_U, op=word, b=b)}; }} || continue'


def _pick_version(spec: NcclSpec, versions_command: str, compare: str) -> str:
    """Shell that sets "$found" to the newest available version meeting the constraint, or fails.

    The constraint speaks of the upstream version, so an epoch (`1:2.21.5-1`) is set aside for the
    clause tests; the package tool's own ordering, epoch included, picks the newest of those that
    pass (`sort -V` knows no epochs: it put `1:2.18.3-1` below `2.23.4-1`), and the full version is what
    gets installed."""
    tests = "; ".join(_clause_test(op, str(bound), compare) for op, bound in parse_constraint(spec.version.text))
    newer = compare.format(a='"$v"', op="gt", b='"$found"')
    return (
        f"{_SAME}; found=; "
        f"for v in $({versions_command}); do u=${{v#*:}}; {tests}; "
        f'if [ -z "$found" ] || {newer}; then found=$v; fi; done; '
        f'[ -n "$found" ] || {{ echo {sh(f"no version of {spec.package} matching {spec.version}",)} '
        f"'in the package sources' >&2; exit 1; }}"
    )


def madison_versions(package: str) -> str:
    """The versions `apt-cache madison` lists for `package`: its second `|` column, on the lines of
    that package (madison also lists source records, under the source package's name)."""
    return (f"apt-cache madison {shlex.quote(package)} | awk -F'|' -v p={shlex.quote(package)} "
            "'{n = $1; gsub(/ /, \"\", n); v = $2; gsub(/ /, \"\", v); if (n == p && v != \"\") print v}'")


def pin_text(spec: NcclSpec, version: str) -> str:
    return f"Package: {spec.package}\nPin: version {version}\nPin-Priority: 1001\n"


def _write_pin(spec: NcclSpec) -> str:
    """Shell writing fabnet's apt pin for version "$found", which the install picks on the host: the
    atomic, backed-up write every file gets (steps.write_file_from)."""
    content = (f"printf 'Package: %s\\nPin: version %s\\nPin-Priority: 1001\\n' {shlex.quote(spec.package)} "
               '"$found"')
    return write_file_from(pin_file(spec), content, mode="0644", record=True) + "; "


def apt_commands(spec: NcclSpec, finish_dpkg: bool = False) -> str:
    """Install the newest version meeting the constraint, pinned and held. `finish_dpkg` first lets
    dpkg finish what an interrupted run left unpacked (apt refuses to run until that is done)."""
    pkg = shlex.quote(spec.package)
    pick = _pick_version(spec, madison_versions(spec.package), "dpkg --compare-versions {a} {op} {b}")
    return (
        ("DEBIAN_FRONTEND=noninteractive dpkg --configure -a; " if finish_dpkg else "")
        # The package lists may be older than the wanted release: refresh them only when it is missing.
        + f"if ! ( {pick} ) >/dev/null 2>&1; then apt-get update -q >/dev/null; fi; {pick}; "
        + _write_pin(spec)
        + f"apt-mark unhold {pkg} >/dev/null; "
        f"DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades --allow-change-held-packages "
        f"-o Dpkg::Options::=--force-confold {pkg}=\"$found\"; "
        f"apt-mark hold {pkg}"
    )


def hold_commands(spec: NcclSpec, version: str) -> str:
    """Pin and hold the installed `version`: what an install cut short before its last steps left undone."""
    return (write_file(pin_file(spec), pin_text(spec, version).encode(), mode="0644")
            + f"; apt-mark hold {shlex.quote(spec.package)}")


def dnf_commands(spec: NcclSpec, lock: bool = True) -> str:
    """Install the newest version meeting the constraint and, with `lock`, lock it with versionlock."""
    pkg = shlex.quote(spec.package)
    compare = "{{ rpmdev-vercmp {a} {b} >/dev/null 2>&1; [ $? -eq $(__fn_code {op}) ]; }}"
    pick = _pick_version(spec, nccl_dnf.dnf_versions(spec.package), compare)
    return (
        # rpmdev-vercmp exits 11 for newer, 12 for older.
        "__fn_code() { if [ \"$1\" = gt ]; then echo 11; else echo 12; fi; }; "
        + (f"{pick}; dnf -y -q versionlock delete {pkg} >/dev/null 2>&1 || true; " if lock else f"{pick}; ")
        + f"dnf -y -q install --allowerasing {pkg}-\"$found\""
        + (f"; dnf -y -q versionlock add {pkg}-\"$found\"" if lock else "")
    )


def dnf_lock(spec: NcclSpec, version: str) -> str:
    """Lock the installed `version` (as the probe shows it: an epoch only when there is one)."""
    pkg = shlex.quote(spec.package)
    return (f"dnf -y -q versionlock delete {pkg} >/dev/null 2>&1 || true; "
            f"dnf -y -q versionlock add {shlex.quote(spec.package + '-' + version)}")


def remedy(spec: NcclSpec, results: Results, ctx: HostContext, checks: list[Check]) -> list[Step]:
    """The newest packaged version meeting the constraint, installed and held (apt pin + hold, or dnf
    versionlock) so unattended upgrades leave it alone; only the pin and hold where the version is right."""
    drifted = {c.attribute: c for c in checks if c.status == "drift"}
    if not drifted:
        return []
    target = spec.target()
    pin = pin_file(spec)
    # The package version there before, to go back to: none where NCCL was only a library file, or nowhere.
    try:
        found = read_installed(stdout_of(results, _probe(spec, ctx), spec.package), spec.package)
    except ProbeFailed:
        found = Installed(None, "unread")
    locks = nccl_dnf.lock_files(found.locklist)
    # A list the conf names but that is missing stops dnf's plugin, and with it every dnf command here.
    ensure = nccl_dnf.ensure_list(found.locklist)
    # With the plugin off, a lock holds nothing: fabnet leaves the site's plugin settings as they are.
    off = found.lock.off() if found.lock is not None and ctx.package_manager == "dnf" else None
    no_hold = [impossible(target, "hold", f"{off}: a versionlock would hold nothing", PHASE_PACKAGES)] if off else []
    # dnf edits its lock files itself: they are backed up around it, and put back by the undo unless
    # they were changed by hand since (then the undo stops before the package is touched).
    unlock = "; ".join(restore_file(path, recorded=True) for path in locks)
    if "version" not in drifted and ctx.package_manager == "dnf":  # held: the versionlock
        version = next(c.actual for c in checks if c.attribute == "version") or ""
        if no_hold:
            return no_hold
        return [Step(target, "hold", backed_up(locks, ensure + dnf_lock(spec, version)),
                     f"dnf versionlock {spec.package} {version}", undo=unlock, phase=PHASE_PACKAGES, writes=locks)]
    if "version" not in drifted:  # held / pin
        version = next(c.actual for c in checks if c.attribute == "version") or ""
        # The pin's content is known here: its undo leaves a pin changed by hand since the run.
        restore = restore_file(pin, pin_text(spec, version).encode())
        unhold = f"apt-mark unhold {shlex.quote(spec.package)} >/dev/null; " + restore if "held" in drifted else restore
        return [Step(target, "hold", hold_commands(spec, version), f"pin {spec.package} {version} + apt-mark hold",
                     undo=unhold, phase=PHASE_PACKAGES, writes=(pin,))]
    version_check = drifted["version"]
    old = found.version if found.source == "package" and found.version else ""
    if ctx.package_manager == "dnf":
        command = backed_up(locks, ensure + dnf_commands(spec, lock=not off))
        shown = f"dnf install {spec.package} ({spec.version}, newest available)" + ("" if off else " + versionlock")
        # An exact version is installed whichever is there, so this also goes down again.
        back = f"; dnf -y -q install --allowerasing {shlex.quote(spec.package + '-' + old)}" if old else ""
        return [Step(target, "install", command, shown, undo=unlock + back, phase=PHASE_PACKAGES, writes=locks),
                *no_hold]
    if ctx.package_manager == "apt":
        unfinished = bool(version_check.actual and version_check.actual.endswith(")"))  # "2.21.5 (unpacked)"
        command = apt_commands(spec, finish_dpkg=unfinished)
        shown = (("dpkg --configure -a, " if unfinished else "")
                 + f"apt-get install {spec.package} ({spec.version}, newest available) + pin + apt-mark hold")
    else:
        return [impossible(target, "install", f"unknown fabnet_package_manager {ctx.package_manager!r} "
                                              "(apt or dnf)", PHASE_PACKAGES)]
    undo = None
    if old:
        # The pin first: one changed by hand since the run (its hash differs from the one the write kept
        # on the host) stops the undo before the package is touched.
        undo = (restore_file(pin, recorded=True) + f"; apt-mark unhold {shlex.quote(spec.package)}; "
                f"DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades "
                f"{shlex.quote(spec.package + '=' + old)}")
    return [Step(target, "install", command, shown, undo=undo, phase=PHASE_PACKAGES, writes=(pin,))]


RESOURCE = ResourceType(KIND, NcclSpec, probes, evaluate, remedy=remedy,
                        examples=({"version": ">=2.19,<2.24", "package": "libnccl2"},))
