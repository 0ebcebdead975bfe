"""`nccl`: the installed NCCL version, from the package database or, failing that, the library's file name.

One probe: `dpkg-query` when it knows the package as installed, else a listing of `libnccl.so.*` in
the usual library directories (for tarball or RPM installs). The first output line says which.
"""

from __future__ import annotations

import re
import shlex

from provisioner.parsers.versions import Version, parse_constraint
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
from provisioner.resources.steps import PHASE_PACKAGES, Step, backup_path, impossible, restore_file
from provisioner.specs import NcclSpec

KIND = "nccl"

LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/lib", "/usr/lib/aarch64-linux-gnu")
_LIB_VERSION = re.compile(r"/libnccl\.so\.(?P<version>[0-9]+(?:\.[0-9]+)*)$")


def _probe(spec: NcclSpec) -> Probe:
    query = sh("dpkg-query", "-W", "-f=${Status} ${Version}\\n", "--", spec.package)
    libraries = " ".join(f"{d}/libnccl.so.*" for d in LIB_DIRS)  # fixed globs, expanded by the shell
    return Probe(
        f"s=$({query} 2>/dev/null); "
        'case "$s" in *" ok installed "*) printf \'dpkg %s\\n\' "${s##* }";; '
        f'*) echo files; for f in {libraries}; do if [ -e "$f" ]; then echo "$f"; fi; done;; esac'
    )


def probes(spec: NcclSpec, ctx: HostContext) -> list[Probe]:
    return [_probe(spec)]


def installed_version(text: str) -> tuple[str | None, str]:
    """(version, where it came from) from the probe's output; version None when NCCL was not found."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise ProbeFailed("NCCL probe printed nothing")
    head, _, rest = lines[0].partition(" ")
    if head == "dpkg" and rest:
        return rest, "package"
    if head != "files":
        raise ProbeFailed(f"NCCL probe: unexpected output {lines[0]!r}")
    found = [(m["version"], line) for line in lines[1:] if (m := _LIB_VERSION.search(line))]
    if not found:
        return None, "no package, no libnccl.so.* in " + ", ".join(LIB_DIRS)
    # libnccl.so.2 is a link to libnccl.so.2.21.5: the longest, highest name says the most.
    version, path = max(found, key=lambda item: (Version(item[0]), len(item[0])))
    return version, path


def evaluate(spec: NcclSpec, results: Results, ctx: HostContext) -> list[Check]:
    try:
        version, source = installed_version(stdout_of(results, _probe(spec), f"NCCL version of {spec.package}"))
    except ProbeFailed as exc:
        return errors_for([("version", spec.version)], str(exc))
    if version is None:
        return [drift("version", spec.version, "not installed", source)]
    message = "" if source == "package" else f"package {spec.package} not installed; from {source}"
    verdict = ok if spec.version.matches(version) else drift
    return [verdict("version", spec.version, version, message)]


# ---------------------------------------------------------------------------------------------- remedy

PIN_DIR = "/etc/apt/preferences.d/"

# Version tests in the remedy's shell, with the semantics of parsers.versions: "same" means the version
# starts with the bound, segment-wise (==2.21.5 accepts 2.21.5-1+cuda12.4, not 2.21.50).
_SAME = '__fn_same() { case "$1" in "$2"|"$2"[!0-9]*) return 0;; esac; return 1; }'


def _clause_test(op: str, bound: str, compare: str) -> str:
    """A shell line that `continue`s the version loop when "$v" fails the clause; `compare` is a
    command template comparing two versions (`dpkg --compare-versions A OP B` style)."""
    b = shlex.quote(bound)
    if op == "==":
        return f'__fn_same "$v" {b} || continue'
    if op == "!=":
        return f'! __fn_same "$v" {b} || continue'
    if op == ">=":
        return f'__fn_same "$v" {b} || {compare.format(op="gt", bound=b)} || continue'
    if op == "<=":
        return f'__fn_same "$v" {b} || {compare.format(op="lt", bound=b)} || continue'
    word = "gt" if op == ">" else "lt"
    return f'{{ ! __fn_same "$v" {b} && {compare.format(op=word, bound=b)}; }} || continue'


def _pick_version(spec: NcclSpec, versions_command: str, compare: str) -> str:
    """Shell that sets "$found" to the newest available version meeting the constraint, or fails."""
    tests = "; ".join(_clause_test(op, str(bound), compare) for op, bound in parse_constraint(spec.version.text))
    return (
        f"{_SAME}; found=; "
        f"for v in $({versions_command} | sort -r -V); do {tests}; found=$v; break; done; "
        f'[ -n "$found" ] || {{ echo {sh(f"no version of {spec.package} matching {spec.version}",)} '
        f"'in the package sources' >&2; exit 1; }}"
    )


def apt_commands(spec: NcclSpec) -> str:
    pkg = shlex.quote(spec.package)
    pin = shlex.quote(f"{PIN_DIR}fabnet-{spec.package}")
    madison = f"apt-cache madison {pkg} | awk -F'|' '{{gsub(/ /, \"\", $2); print $2}}'"
    pick = _pick_version(spec, madison, 'dpkg --compare-versions "$v" {op} {bound}')
    return (
        # The package lists may be older than the wanted release: refresh them only when it is missing.
        f"if ! ( {pick} ) >/dev/null 2>&1; then apt-get update -q >/dev/null; fi; {pick}; "
        f"b={backup_path(PIN_DIR + 'fabnet-' + spec.package)}; mkdir -p -- \"$(dirname -- \"$b\")\" {PIN_DIR}; "
        f"if [ -e {pin} ]; then cp -p -- {pin} \"$b\"; else : > \"$b.absent\"; fi; "
        f"t=$(mktemp {PIN_DIR}.fabnet.XXXXXXXX); "
        f"printf 'Package: %s\\nPin: version %s\\nPin-Priority: 1001\\n' {pkg} \"$found\" > \"$t\"; "
        f"chmod 0644 \"$t\"; sync -- \"$t\"; mv -f -- \"$t\" {pin}; "
        f"apt-mark unhold {pkg} >/dev/null; "
        f"DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades --allow-change-held-packages "
        f"-o Dpkg::Options::=--force-confold {pkg}=\"$found\"; "
        f"apt-mark hold {pkg}"
    )


def dnf_commands(spec: NcclSpec) -> str:
    pkg = shlex.quote(spec.package)
    listing = (f"dnf -q list --showduplicates --available {pkg} 2>/dev/null "
               f"| awk 'NF == 3 && $1 ~ /^[^ ]+\\./ {{print $2}}'")
    compare = '{{ rpmdev-vercmp "$v" {bound} >/dev/null 2>&1; [ $? -eq $(__fn_code {op}) ]; }}'
    pick = _pick_version(spec, listing, compare)
    return (
        # rpmdev-vercmp exits 11 for newer, 12 for older.
        "__fn_code() { if [ \"$1\" = gt ]; then echo 11; else echo 12; fi; }; "
        f"{pick}; dnf -y -q versionlock delete {pkg} >/dev/null 2>&1 || true; "
        f"dnf -y -q install --allowerasing {pkg}-\"$found\"; "
        f"dnf -y -q versionlock add {pkg}-\"$found\""
    )


def remedy(spec: NcclSpec, results: Results, ctx: HostContext, checks: list[Check]) -> list[Step]:
    """The newest packaged version meeting the constraint, installed and held (apt pin + hold, or dnf
    versionlock) so unattended upgrades leave it alone."""
    drifted = [c for c in checks if c.status == "drift"]
    if not drifted:
        return []
    target = spec.target()
    if ctx.package_manager == "dnf":
        command = dnf_commands(spec)
        shown = f"dnf install {spec.package} ({spec.version}, newest available) + versionlock"
    elif ctx.package_manager == "apt":
        command = apt_commands(spec)
        shown = f"apt-get install {spec.package} ({spec.version}, newest available) + pin + apt-mark hold"
    else:
        return [impossible(target, "install", f"unknown fabnet_package_manager {ctx.package_manager!r} "
                                              "(apt or dnf)", PHASE_PACKAGES)]
    old = drifted[0].actual
    undo = None
    if ctx.package_manager == "apt" and old and old != "not installed":
        undo = (f"apt-mark unhold {shlex.quote(spec.package)}; DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                f"--allow-downgrades {shlex.quote(spec.package + '=' + old)}; "
                + restore_file(PIN_DIR + "fabnet-" + spec.package))
    return [Step(target, "install", command, shown, undo=undo, phase=PHASE_PACKAGES,
                 writes=(PIN_DIR + "fabnet-" + spec.package,))]


RESOURCE = ResourceType(KIND, NcclSpec, probes, evaluate, remedy=remedy,
                        examples=({"version": ">=2.19,<2.24", "package": "libnccl2"},))
