"""nccl on dnf hosts where dnf 4's versionlock plugin is off or its list is missing: a lock line then
holds nothing, and the remedy neither runs a `dnf versionlock` that cannot work nor leaves dnf stopped.

The conf texts are the files as shipped: versionlock.conf from dnf-plugins-core
(etc/dnf/plugins/versionlock.conf) and dnf.conf from dnf (etc/dnf/dnf.conf), with the one line a site
changes. They are read by the probe in a real `sh`; the verdicts come from its output alone."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from provisioner.load.specs import NcclSpec
from provisioner.resources import nccl, nccl_dnf
from provisioner.resources.base import Check, HostContext, ProbeResult

from ._recorded import fix, run

DNF = HostContext("gpu01", package_manager="dnf")
SPEC = {"version": "2.21.5", "package": "libnccl"}
V = "2.21.5-1+cuda12.4"
LOCK_LINE = f"libnccl-0:{V}.*"
# dnf-plugins-core's etc/dnf/plugins/versionlock.conf, with `enabled` as the site sets it.
VERSIONLOCK_CONF = "[main]\nenabled = {enabled}\nlocklist = {locklist}\n"
# dnf's etc/dnf/dnf.conf, with a site's line added at the end of `[main]`.
DNF_CONF = ("# see `man dnf.conf` for defaults and possible options\n\n[main]\ngpgcheck=True\ninstallonly_limit=3\n"
            "clean_requirements_on_remove=True\nbest=False\nskip_if_unavailable=True\n{extra}")


def probe_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, enabled: str = "1", extra: str = "",
                 conf_dir: Path | None = None, list_there: bool = True) -> str:
    """The probe's output on a host laid out in tmp_path, with a stand-in `rpm`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "rpm").write_text(f"#!/bin/sh\nprintf '0:{V} x86_64\\n'\n")
    (bin_dir / "rpm").chmod(0o755)
    lock_list = tmp_path / "locks" / "versionlock.list"
    if list_there:
        lock_list.parent.mkdir()
        lock_list.write_text(f"\n# Added lock on Tue Mar  4 10:00:00 2025\n{LOCK_LINE}\n")
    conf_dir = conf_dir or tmp_path / "plugins"
    conf_dir.mkdir(exist_ok=True)
    (conf_dir / "versionlock.conf").write_text(VERSIONLOCK_CONF.format(enabled=enabled, locklist=lock_list))
    (tmp_path / "dnf.conf").write_text(DNF_CONF.format(extra=extra))
    for name, path in (("DNF_CONF", "dnf.conf"), ("LOCK_CONF", "plugins/versionlock.conf"),
                       ("DEFAULT_LIST", "default.list"), ("YUM_LIST", "yum.list"), ("LOCK_TOML", "none.toml")):
        monkeypatch.setattr(nccl_dnf, name, str(tmp_path / path))
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    (probe,) = nccl.probes(NcclSpec(**SPEC), DNF)
    done = subprocess.run(["sh", "-ec", probe.command], capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def held(output: str) -> Check:
    checks = run("nccl", SPEC, {"rpm -q": output}, DNF).checks
    assert (checks[0].attribute, checks[0].status) == ("version", "ok")
    return checks[1]


@pytest.mark.parametrize("enabled", ["0", "False", "no", "OFF"])
def test_a_lock_holds_nothing_while_the_plugin_is_disabled_in_its_conf(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, enabled: str) -> None:
    check = held(probe_output(tmp_path, monkeypatch, enabled=enabled))
    assert (check.status, check.actual) == ("drift", "not in effect")
    assert f"disabled in {tmp_path}/plugins/versionlock.conf (enabled = {enabled})" in check.message


def test_the_same_list_holds_with_the_plugin_enabled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check = held(probe_output(tmp_path, monkeypatch, enabled="1"))
    assert (check.status, check.actual) == ("ok", "held")


def test_plugins_off_in_dnf_conf_turns_every_plugin_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check = held(probe_output(tmp_path, monkeypatch, extra="plugins=0\n"))
    assert (check.status, check.actual) == ("drift", "not in effect")
    assert "plugins = 0 in dnf.conf" in check.message


def test_a_plugins_value_dnf_cannot_read_keeps_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # dnf logs "Invalid configuration value" and keeps plugins on.
    check = held(probe_output(tmp_path, monkeypatch, extra="plugins=maybe\n"))
    assert (check.status, check.actual) == ("ok", "held")


def test_an_enabled_value_dnf_cannot_read_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check = held(probe_output(tmp_path, monkeypatch, enabled="sometimes"))
    assert check.status == "error" and "does not read as a boolean" in check.message


def test_pluginconfpath_moves_the_conf_the_probe_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The default folder holds no conf: only the moved one says the plugin is off.
    moved = tmp_path / "site-plugins"
    output = probe_output(tmp_path, monkeypatch, enabled="0", extra=f"pluginconfpath={moved}\n", conf_dir=moved)
    assert f"lockconf {moved}/versionlock.conf\n" in output
    check = held(output)
    assert (check.status, check.actual) == ("drift", "not in effect") and str(moved) in check.message


@pytest.mark.parametrize("value", ["/etc/dnf/plugins, /srv/plugins", "/etc/dnf/plugins /srv/plugins", "plugins"])
def test_a_pluginconfpath_not_followed_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  value: str) -> None:
    check = held(probe_output(tmp_path, monkeypatch, extra=f"pluginconfpath = {value}\n"))
    assert check.status == "error" and "pluginconfpath" in check.message


def test_a_missing_list_is_said_and_is_no_hold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    output = probe_output(tmp_path, monkeypatch, list_there=False)
    assert "nolist\n" in output
    check = held(output)
    assert (check.status, check.actual) == ("drift", "not held")
    assert f"{tmp_path}/locks/versionlock.list, the lock list" in check.message and "is missing" in check.message


# ------------------------------------------------------------------------------------------- remedy

RPM = f"rpm 0:{V} x86_64\n"


def test_with_the_plugin_off_the_hold_cannot_be_fixed_and_says_why() -> None:
    output = f"{RPM}lockconf /etc/dnf/plugins/versionlock.conf\nenabled 0\nlocklist /l.list\nlock {LOCK_LINE}\n"
    (step,) = fix("nccl", SPEC, {"rpm -q": ProbeResult(output, "", 0)}, DNF)
    assert not step.possible and "disabled in /etc/dnf/plugins/versionlock.conf" in step.shown


def test_with_the_plugin_off_an_install_runs_no_versionlock() -> None:
    output = "rpm 0:2.18.3-1+cuda12.2 x86_64\nplugins 0\nlocklist /l.list\n"
    install, hold = fix("nccl", SPEC, {"rpm -q": ProbeResult(output, "", 0)}, DNF)
    assert "dnf -y -q install" in install.command and "dnf -y -q versionlock" not in install.command
    assert install.possible and not hold.possible and "plugins = 0" in hold.shown


def test_the_remedy_creates_a_missing_list_before_dnf_runs(tmp_path: Path) -> None:
    lock_list = tmp_path / "new dir" / "versionlock.list"
    output = f"{RPM}locklist {lock_list}\nnolist\n"
    (step,) = fix("nccl", SPEC, {"rpm -q": ProbeResult(output, "", 0)}, DNF)
    assert step.command.index("mkdir -p") < step.command.index("versionlock add")
    create = nccl_dnf.ensure_list(str(lock_list))
    for _ in range(2):  # again: the list is there, and left as it is
        assert subprocess.run(["sh", "-ec", create], timeout=30, check=False).returncode == 0
        assert lock_list.read_text() == "" and oct(lock_list.stat().st_mode & 0o777) == "0o644"
    assert nccl_dnf.ensure_list("") == "" and nccl_dnf.ensure_list(None) == ""
