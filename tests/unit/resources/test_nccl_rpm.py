"""nccl on dnf hosts: the version from `rpm -q`, the hold from dnf's versionlock files, and a remedy whose
undo puts the lock files back. The probe and the remedy run in a real `sh` with stand-in `rpm` and `dnf`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from provisioner.load.specs import NcclSpec
from provisioner.parsers import versionlock
from provisioner.resources import nccl, nccl_dnf
from provisioner.resources.base import HostContext, ProbeResult

from ._recorded import fix, run

DNF = HostContext("gpu01", package_manager="dnf")
RPM = "rpm -q"
V = "2.21.5-1+cuda12.4"
# What `dnf versionlock add` (dnf 4) writes, and a yum-era line (epoch first, arch named).
DNF4_LOCK = f"lock libnccl-0:{V}.*"
YUM_LOCK = f"lock 0:libnccl-{V}.x86_64"
# dnf 5's versionlock.toml, in the shape its manual gives.
TOML = f"""toml version = "1.0"
toml [[packages]]
toml name = "libnccl"
toml [[packages.conditions]]
toml key = "evr"
toml comparator = "="
toml value = "0:{V}"
"""
RANGE_TOML = """toml version = "1.0"
toml [[packages]]
toml name = "libnccl*"
toml [[packages.conditions]]
toml key = "evr"
toml comparator = ">="
toml value = "2.21"
"""


def audit(output: str, version: str = "2.21.5") -> list[tuple[str, str, str, str | None]]:
    return run("nccl", {"version": version, "package": "libnccl"}, {RPM: output}, DNF).summary()


@pytest.mark.parametrize(("output", "held"), [
    pytest.param(f"rpm 0:{V} x86_64\n{DNF4_LOCK}\n", "held", id="dnf4-lock"),
    pytest.param(f"rpm 0:{V} x86_64\n{YUM_LOCK}\n", "held", id="yum-lock"),
    pytest.param(f"rpm 0:{V} x86_64\nlock libnccl-2.21.5\n", "held", id="version-only-lock"),
    pytest.param(f"rpm 0:{V} x86_64\n{TOML}", "held", id="dnf5-toml"),
    pytest.param(f"rpm 0:{V} x86_64\n", "not held", id="no-lock"),
    pytest.param(f"rpm 0:{V} x86_64\nlock libnccl-0:2.18.3-1+cuda12.2.*\n", "not held", id="locked-elsewhere"),
    pytest.param(f"rpm 0:{V} x86_64\nlock !libnccl-0:{V}.*\n", "not held", id="an-exclude-holds-nothing"),
    pytest.param(f"rpm 0:{V} x86_64\nlock libnccl\n", "not held", id="a-bare-name-holds-no-version"),
    pytest.param(f"rpm 0:{V} x86_64\nlock libnccl-devel-0:{V}.*\n", "not held", id="another-package"),
    pytest.param(f"rpm 0:{V} x86_64\n{RANGE_TOML}", "not held", id="dnf5-range-is-no-hold"),
])
def test_the_version_comes_from_rpm_and_the_hold_from_versionlock(output: str, held: str) -> None:
    assert audit(output) == [("version", "ok", "2.21.5", V), ("held", "drift" if held == "not held" else "ok",
                                                            "held", held)]


def test_a_version_with_an_epoch_meets_its_upstream_constraint() -> None:
    assert audit("rpm 1:2.21.5-1 x86_64\nlock libnccl-1:2.21.5-1.*\n") == [
        ("version", "ok", "2.21.5", "1:2.21.5-1"), ("held", "ok", "held", "held")]


def test_of_two_installed_versions_the_newest_is_judged() -> None:
    assert audit(f"rpm 0:2.18.3-1+cuda12.2 x86_64\nrpm 0:{V} x86_64\n")[0] == ("version", "ok", "2.21.5", V)


def test_without_the_package_the_library_files_say_it_and_no_hold_is_judged() -> None:
    assert audit("files\n/usr/lib64/libnccl.so.2.21.5\nlock libnccl-0:2.18.3-1.*\n") == [
        ("version", "ok", "2.21.5", "2.21.5")]


def test_unreadable_rpm_output_is_an_error_naming_it() -> None:
    ((attribute, status, _, _),) = audit("rpm package libnccl is not installed\n")
    assert (attribute, status) == ("version", "error")


def test_a_not_held_message_names_dnfs_versionlock() -> None:
    checks = run("nccl", {"version": "2.21.5", "package": "libnccl"}, {RPM: f"rpm 0:{V} x86_64\n"}, DNF).checks
    assert checks[1].message == "dnf's versionlock does not lock it at this version: upgrades may replace it"


def test_an_unreadable_toml_judges_no_hold() -> None:
    rpm = versionlock.Rpm("libnccl", "0", "2.21.5", "1", "x86_64")
    assert versionlock.toml_holds(rpm, "[[packages]\nname =") is None
    assert versionlock.toml_holds(rpm, 'version = "1.0"\n') is False


# ------------------------------------------------------------------------------------- in a real shell

def stand_ins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rpm: str) -> dict[str, str]:
    """A bin folder with `rpm` (prints `rpm`'s text, fails when it says "not installed") and a `dnf` that
    records its arguments and, for `versionlock add`, appends a line to the lock list as dnf 4 does; the
    lock files and the plugin's conf (none written: the default list) moved into tmp_path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    lists = (str(tmp_path / "dnf.list"), str(tmp_path / "yum.list"))
    monkeypatch.setattr(nccl_dnf, "DNF_CONF", str(tmp_path / "dnf.conf"))
    monkeypatch.setattr(nccl_dnf, "LOCK_CONF", str(tmp_path / "versionlock.conf"))
    monkeypatch.setattr(nccl_dnf, "DEFAULT_LIST", lists[0])
    monkeypatch.setattr(nccl_dnf, "YUM_LIST", lists[1])
    monkeypatch.setattr(nccl_dnf, "LOCK_TOML", str(tmp_path / "versionlock.toml"))
    (bin_dir / "rpm").write_text(f"#!/bin/sh\nprintf '{rpm}'\ncase '{rpm}' in *'not installed'*) exit 1;; esac\n")
    (bin_dir / "dnf").write_text(
        "#!/bin/sh\n"
        f"echo \"$*\" >> {tmp_path}/dnf.calls\n"
        f'case "$*" in *"versionlock add "*) for a; do last=$a; done; echo "$last.*" >> {lists[0]};; esac\n')
    for tool in ("rpm", "dnf"):
        (bin_dir / tool).chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FABNET_BACKUP_DIR": str(tmp_path / "backup")}


def sh(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-ec", command], capture_output=True, text=True, env=env, timeout=30, check=False)


def test_the_probe_reads_rpm_and_the_lock_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = stand_ins(tmp_path, monkeypatch, f"0:{V} x86_64\\n")
    (tmp_path / "dnf.list").write_text(f"# Added lock on Tue\nlibnccl-0:{V}.*\nbash-0:5.1-1.*\n")
    (tmp_path / "versionlock.toml").write_text('version = "1.0"\n\n[[packages]]\nname = "libnccl"')  # no last \n
    (probe,) = nccl.probes(NcclSpec(version="2.21.5", package="libnccl"), DNF)
    done = sh(probe.command, env)
    assert done.stdout == (f"rpm 0:{V} x86_64\nlockconf {tmp_path}/versionlock.conf\nlocklist {tmp_path}/dnf.list\n"
                           f"lock libnccl-0:{V}.*\n"
                           'toml version = "1.0"\ntoml \ntoml [[packages]]\ntoml name = "libnccl"\n'), done.stderr
    assert {str(tmp_path / "versionlock.conf"), "/var/lib/rpm/*"} <= set(probe.reads)


def test_the_probe_lists_library_files_when_rpm_does_not_know_the_package(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = stand_ins(tmp_path, monkeypatch, "package libnccl is not installed\\n")
    (probe,) = nccl.probes(NcclSpec(version="2.21.5", package="libnccl"), DNF)
    assert sh(probe.command, env).stdout.splitlines()[0] == "files"


def test_holding_on_dnf_is_undone_unless_the_lock_list_was_edited_since(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = stand_ins(tmp_path, monkeypatch, "")
    lock_list = tmp_path / "dnf.list"
    lock_list.write_text("libnccl-0:2.18.3-1+cuda12.2.*\n")
    (step,) = fix("nccl", {"version": "2.21.5", "package": "libnccl"},
                  {RPM: ProbeResult(f"rpm 0:{V} x86_64\nlock libnccl-0:2.18.3-1+cuda12.2.*\n", "", 0)}, DNF)
    assert step.action == "hold" and set(step.writes) == set(nccl_dnf.lock_files(None))
    done = sh(step.command, env)
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "dnf.calls").read_text()
    assert calls == f"-y -q versionlock delete libnccl\n-y -q versionlock add libnccl-{V}\n"
    assert lock_list.read_text().endswith(f"libnccl-{V}.*\n")
    # The undo puts the list back as it was, and leaves the files dnf never had alone.
    undone = sh(step.undo or "", env)
    assert undone.returncode == 0, undone.stderr
    assert lock_list.read_text() == "libnccl-0:2.18.3-1+cuda12.2.*\n"
    assert not (tmp_path / "yum.list").exists() and not (tmp_path / "versionlock.toml").exists()
    # Done again and then edited by hand: the undo keeps the edit and says so.
    (tmp_path / "backup").rename(tmp_path / "backup.1")
    assert sh(step.command, env).returncode == 0
    lock_list.write_text("edited by hand\n")
    undone = sh(step.undo or "", env)
    assert undone.returncode != 0 and "changed since this run wrote it" in undone.stderr
    assert lock_list.read_text() == "edited by hand\n"


def test_an_install_on_dnf_goes_back_to_the_version_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stand_ins(tmp_path, monkeypatch, "")
    (step,) = fix("nccl", {"version": ">=2.21", "package": "libnccl"},
                  {RPM: ProbeResult("rpm 0:2.18.3-1+cuda12.2 x86_64\n", "", 0)}, DNF)
    assert step.action == "install" and step.undo is not None
    assert step.undo.endswith("; dnf -y -q install --allowerasing libnccl-2.18.3-1+cuda12.2")
    # Where NCCL was only a library file, there is no package to go back to: only the locks are restored.
    (step,) = fix("nccl", {"version": ">=2.21", "package": "libnccl"},
                  {RPM: ProbeResult("files\n/usr/lib64/libnccl.so.2.18.3\n", "", 0)}, DNF)
    assert step.undo is not None and "dnf -y" not in step.undo
