"""nccl on dnf hosts: whether dnf 4's versionlock plugin is in effect, from the probe's lines (nccl_dnf.py
prints them), and the `held` check that follows.

What dnf 4 does, from its sources (dnf/plugin.py, libdnf's OptionBool, dnf-plugins-core's versionlock.py):
- `plugins` in dnf.conf's `[main]` (on by default) loads no plugin when false; a value that is no boolean
  is logged and the default kept;
- `enabled` in the plugin conf's `[main]` removes the plugin when false (getboolean: 1/0, yes/no,
  true/false, on/off, any case); a value that is none of those stops dnf;
- the plugin opens its list before resolving anything: a missing list stops `dnf install` and `dnf
  upgrade` ("Unable to read version lock configuration") and `dnf versionlock add` alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from provisioner.parsers import versionlock
from provisioner.resources.base import Check, drift, error, ok
from provisioner.resources.nccl_dnf import LOCK_CONF

_TRUE = ("1", "yes", "true", "on")
_FALSE = ("0", "no", "false", "off")
# The words of the probe's lines beside `rpm`, `lock` and `toml`.
WORDS = ("plugins", "pluginconfpath", "lockconf", "enabled", "locklist", "nolist")


def is_dnf_line(line: str) -> bool:
    """A line of the probe's about dnf's versionlock (`lock`, `toml` or one of WORDS), not of the package."""
    return line.startswith(("lock ", "toml ")) or any(line == word or line.startswith(word + " ") for word in WORDS)


def _value(lines: Sequence[str], word: str) -> str | None:
    return next((line[len(word) + 1:] for line in lines if line == word or line.startswith(word + " ")), None)


@dataclass(frozen=True)
class LockConf:
    """What the probe read of dnf 4's versionlock: dnf.conf's `plugins` and `pluginconfpath` (None: unset),
    the plugin conf read (None: not said, the default; '': `pluginconfpath` not followed), its `enabled`,
    its `locklist` (as nccl.Installed keeps it), whether that list is missing; and, for the package, whether
    the lists (dnf 4's, yum's) lock it and whether dnf 5's versionlock.toml does (None: not read)."""

    plugins: str | None = None
    pluginconfpath: str | None = None
    conf: str | None = None
    enabled: str | None = None
    locklist: str | None = None
    missing: bool = False
    listed: bool = False
    toml: bool | None = None

    @property
    def conf_path(self) -> str:
        return LOCK_CONF if self.conf is None else self.conf

    def off(self) -> str | None:
        """Why the plugin does not run; None where it does (or where that is not known)."""
        if self.plugins is not None and self.plugins.lower() in _FALSE:
            return f"dnf loads no plugins (plugins = {self.plugins} in dnf.conf)"
        if self.enabled is not None and self.enabled.lower() in _FALSE:
            return f"dnf's versionlock plugin is disabled in {self.conf_path} (enabled = {self.enabled})"
        return None

    def problem(self) -> str | None:
        """Why whether the plugin locks the package cannot be judged; None where it can."""
        if self.conf == "":
            return (f"dnf.conf's pluginconfpath {self.pluginconfpath or ''!r} is not one absolute folder: which "
                    "versionlock.conf dnf reads is not known")
        if self.enabled is not None and self.enabled.lower() not in _TRUE + _FALSE:
            return (f"{self.conf_path} sets enabled = {self.enabled!r}, which dnf does not read as a boolean "
                    "(1/0, yes/no, true/false, on/off)")
        return versionlock.locklist_problem(self.locklist)


def read_lock(lines: Sequence[str]) -> LockConf:
    """The probe's lines (stripped, as nccl.read_installed strips them) -> LockConf, the package's locks aside."""
    return LockConf(_value(lines, "plugins"), _value(lines, "pluginconfpath"), _value(lines, "lockconf"),
                    _value(lines, "enabled"), _value(lines, "locklist"), "nolist" in lines)


def held_check(lock: LockConf) -> Check:
    """`held` on a dnf host: dnf 5's versionlock.toml holds on its own (it is no plugin); a line of the
    lists holds only while dnf 4's plugin runs and can open its list."""
    if lock.toml:
        return ok("held", "held", "held")
    off = lock.off()
    if off:
        actual = "not in effect" if lock.listed else "not held"
        said = "its lock holds nothing" if lock.listed else "nothing is locked"
        return drift("held", "held", actual, f"{off}: {said}; upgrades may replace it")
    problem = lock.problem()
    if problem:
        return error("held", "held", problem)
    if lock.missing:
        return drift("held", "held", "not held",
                     f"{lock.locklist}, the lock list {lock.conf_path} names, is missing: dnf stops every install "
                     "and upgrade (\"Unable to read version lock configuration\") and `dnf versionlock add` fails "
                     "until it exists")
    if lock.listed:
        return ok("held", "held", "held")
    return drift("held", "held", "not held",
                 "dnf's versionlock does not lock it at this version: upgrades may replace it")
