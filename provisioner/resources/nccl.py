"""`nccl`: the installed NCCL version, from the package database or, failing that, the library's file name.

One probe: `dpkg-query` when it knows the package as installed, else a listing of `libnccl.so.*` in
the usual library directories (for tarball or RPM installs). The first output line says which.
"""

from __future__ import annotations

import re

from provisioner.parsers.versions import Version
from provisioner.resources.base import (
    Check,
    HostContext,
    Probe,
    ProbeFailed,
    Results,
    drift,
    errors_for,
    ok,
    sh,
    stdout_of,
)
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
