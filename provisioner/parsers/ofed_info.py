"""Parse the installed OFED / DOCA driver stack version (`ofed_info -s` and the forms other tools print).

Accepted lines (one per output; prompt lines and `ofed_info` itself, prompt or not, are skipped):

    MLNX_OFED_LINUX-23.07-0.5.1.2:                                  ofed_info -s
    OFED-internal-4.7-3.2.9                                         internal / DOCA-host builds
    Host Driver Version: MLNX_OFED_LINUX-23.10-1.1.9.0 (OFED-23.10-1.1.9): 6.5.0-1007-nvidia
    DOCA-HOST-2.9.1  /  doca-host 2.9.1-012000-24.10-ubuntu2204     DOCA host packages

For DOCA, `version` is the DOCA release (2.9.1) and `ofed_version` the bundled driver release (24.10)
when the line names it. `driver_version` is the driver release a playbook's `ofed: {version: ">=23.10"}`
is compared with: the bundled release for DOCA, `version` otherwise (OFED-internal-24.07-0.3.5.0.110,
which DOCA-host installs print, is already the driver's), None for a DOCA line that names no driver.
"""

from __future__ import annotations

import re

from provisioner.errors import ParseError
from provisioner.parsers._shell import is_shell
from provisioner.parsers._text import Line, Parsed, Unplaced, content_lines, fail
from provisioner.parsers.versions import Version

KIND = "ofed_info"

_HOST_DRIVER = re.compile(
    r"^Host Driver Version:\s*(?P<package>\S+?)\s*(?:\((?P<build>[^)]*)\))?\s*(?::\s*(?P<kernel>\S+))?$",
    re.ASCII,
)
_VERSION_TEXT = r"[0-9]+(?:\.[0-9]+)*(?:-[0-9]+(?:\.[0-9]+)*)*"
_PACKAGE = re.compile(
    r"^(?P<flavor>[A-Za-z][A-Za-z0-9_]*(?:-[A-Za-z][A-Za-z0-9_]*)*)-(?P<version>" + _VERSION_TEXT + r")"
    r"(?:-(?P<suffix>[A-Za-z][A-Za-z0-9_.]*))?:?$",
    re.ASCII,
)
# DOCA host packages: release, optional build number, optional bundled driver release, optional distro.
_DOCA = re.compile(
    r"^(?P<flavor>doca(?:[-_](?:host|ofed|all|networking|roce))?)[-_\s]+v?(?P<version>[0-9]+(?:\.[0-9]+)+)"
    r"(?:[-_](?P<build>[0-9]+))?(?:[-_](?P<ofed>[0-9]+\.[0-9]+(?:-[0-9]+(?:\.[0-9]+)*)?))?"
    r"(?:[-_](?P<distro>[A-Za-z][A-Za-z0-9_.]*))?:?$",
    re.ASCII | re.IGNORECASE,
)
_DRIVER_NAMES = re.compile(r"ofed|doca|mlnx|mlx", re.IGNORECASE)


class OfedInfo(Parsed):
    """The driver stack: `flavor` (MLNX_OFED_LINUX, OFED-internal, DOCA, ...) and its `version`."""

    flavor: str
    version: str
    package: str
    ofed_version: str | None = None
    build: str | None = None
    kernel: str | None = None
    suffix: str | None = None

    @property
    def driver_version(self) -> str | None:
        # A DOCA release (2.x, 3.x) is not on the driver's scale (23.10, 24.07): never compare the two.
        if self.flavor == "DOCA":
            return self.ofed_version
        return self.version


def _from_package(package: str, line: Line) -> OfedInfo | None:
    doca = _DOCA.fullmatch(package)
    if doca:
        return OfedInfo(
            flavor="DOCA",
            version=doca.group("version"),
            package=package.rstrip(":"),
            ofed_version=doca.group("ofed"),
            build=doca.group("build"),
            suffix=doca.group("distro"),
        )
    match = _PACKAGE.fullmatch(package)
    if not match or not _DRIVER_NAMES.search(match.group("flavor")):
        return None
    flavor = match.group("flavor")
    Version(match.group("version"))  # the pattern guarantees this parses; keep the two in step
    return OfedInfo(
        flavor="DOCA" if flavor.upper().startswith("DOCA") else flavor,
        version=match.group("version"),
        package=package.rstrip(":"),
        suffix=match.group("suffix"),
    )


def parse_ofed_info(text: str) -> OfedInfo:
    lines = [line for line in content_lines(text) if not is_shell(line, KIND)]
    if not lines:
        fail(KIND, "no version line (ofed_info -s prints one, e.g. MLNX_OFED_LINUX-23.10-1.1.9.0:)")
    # The version is one line; whatever else was captured (a banner, a second tool) is listed, not read.
    first_error: ParseError | None = None
    for candidate in lines:
        try:
            info = _parse_line(candidate)
        except ParseError as err:
            first_error = first_error or err
            continue
        others = [Unplaced(line=o.number, text=o.text, reason="not a version line")
                  for o in lines if o is not candidate]
        return info.model_copy(update={"unplaced": others})
    assert first_error is not None
    raise first_error


def _parse_line(line: Line) -> OfedInfo:
    body = line.stripped
    host = _HOST_DRIVER.fullmatch(body)
    if host:
        info = _from_package(host.group("package"), line)
        if info is None:
            fail(KIND, "unrecognised driver package in Host Driver Version line", line)
        build = host.group("build") or info.build
        return info.model_copy(update={"build": build, "kernel": host.group("kernel")})
    info = _from_package(body, line)
    if info is None:
        fail(KIND, "not an OFED/DOCA version line (expected e.g. MLNX_OFED_LINUX-23.10-1.1.9.0:)", line)
    return info
