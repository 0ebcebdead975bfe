"""Whether dnf's versionlock keeps an installed RPM at its version.

Two formats, as the lock commands write them:
- dnf 4's plugin (and yum's before it): a list file (the one its conf's `locklist` names), one NEVRA
  pattern per line (`name-[epoch:]version-release.*`, as `dnf versionlock add` writes it;
  `epoch:name-version-release.arch` in yum's), `#` comments, and `!pattern` for an exclude, which keeps
  nothing;
- dnf 5: `versionlock.toml` (in a fixed place: no setting moves it), `[[packages]]` entries with a name
  (a glob) and conditions on `evr`, `epoch` or `arch`, all of which a version must meet to stay available.

"Held" is the promise fabnet's remedy makes: upgrades cannot replace the installed version. So a dnf 5
entry holds only with an `evr = ` condition naming that version; a range (`>= 3:570`, `< 3:571`) lets
upgrades inside it through, and is not a hold at this version.
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Rpm:
    """One installed package, as `rpm -q --qf` gives it."""

    name: str
    epoch: str
    version: str
    release: str
    arch: str

    @property
    def evr(self) -> str:
        return f"{self.epoch}:{self.version}-{self.release}"

    @property
    def shown(self) -> str:
        """The version as an operator writes it: the epoch only when there is one."""
        vr = f"{self.version}-{self.release}"
        return vr if self.epoch == "0" else f"{self.epoch}:{vr}"

    def names(self) -> tuple[str, ...]:
        """The forms a lock pattern may take for this package, from the bare name to the full NEVRA."""
        n, e, v, r, a = self.name, self.epoch, self.version, self.release, self.arch
        return (n, f"{n}.{a}", f"{n}-{v}", f"{n}-{v}-{r}", f"{n}-{e}:{v}", f"{n}-{v}-{r}.{a}", f"{n}-{e}:{v}-{r}",
                f"{e}:{n}-{v}-{r}.{a}", f"{n}-{e}:{v}-{r}.{a}")


def parse_rpm(name: str, line: str) -> Rpm | None:
    """`EPOCH:VERSION-RELEASE ARCH` (the probe's query format) -> Rpm; None for anything else."""
    evr, _, arch = line.strip().partition(" ")
    epoch, colon, vr = evr.partition(":")
    version, dash, release = vr.rpartition("-")
    if not colon or not dash or not epoch.isdigit() or not version or not release or not arch or " " in arch:
        return None
    return Rpm(name, epoch, version, release, arch)


def list_holds(rpm: Rpm, lines: Iterable[str]) -> bool:
    """Whether a line of a dnf 4 / yum lock list keeps `rpm` at its version. A pattern that names no
    version (`libnccl`, `libnccl.x86_64`) keeps no version, so it is no hold."""
    versioned = rpm.names()[2:]
    for line in lines:
        pattern = line.strip()
        if not pattern or pattern.startswith(("#", "!")):
            continue
        if any(fnmatch.fnmatchcase(form, pattern) for form in versioned):
            return True
    return False


def locklist_problem(locklist: str | None) -> str | None:
    """Why dnf 4's lock list cannot be judged, from the `locklist` its conf sets (None: the conf was not
    read, the default list stands); None where it can. The plugin opens the value as given: an empty one
    stops dnf ("Locklist not set"), and a relative one is opened from whatever directory dnf runs in."""
    if locklist is None or locklist.startswith("/"):
        return None
    if not locklist:
        return "versionlock.conf sets no locklist: dnf's versionlock plugin has no list to lock it in"
    return (f"versionlock.conf's locklist {locklist!r} is a relative path: dnf reads it from whatever "
            "directory it runs in, so which list locks the package is not known")


def _epoch(evr: str) -> str:
    return evr if ":" in evr else f"0:{evr}"


def toml_holds(rpm: Rpm, text: str) -> bool | None:
    """Whether dnf 5's versionlock.toml keeps `rpm` at its version; None when the file cannot be read."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    packages = data.get("packages", [])
    if not isinstance(packages, list):
        return None
    for entry in packages:
        if not isinstance(entry, dict) or not fnmatch.fnmatchcase(rpm.name, str(entry.get("name", ""))):
            continue
        conditions = [c for c in entry.get("conditions", []) if isinstance(c, dict)]
        pinned = any(c.get("key") == "evr" and c.get("comparator") == "=" and _epoch(str(c.get("value"))) == rpm.evr
                     for c in conditions)
        # Every condition must hold for the installed package; the others (arch, epoch) only narrow it.
        others = all(_meets(rpm, c) for c in conditions)
        if pinned and others:
            return True
    return False


def _meets(rpm: Rpm, condition: dict[str, object]) -> bool:
    key, op, value = condition.get("key"), condition.get("comparator"), str(condition.get("value"))
    if key == "arch":
        return (rpm.arch == value) == (op != "!=")
    if key == "epoch":
        return (rpm.epoch == value) == (op != "!=") if op in ("=", "!=") else True
    if key == "evr" and op == "=":
        return _epoch(value) == rpm.evr
    return True  # a range or an exclusion: it narrows what is available, it does not unseat the pin
