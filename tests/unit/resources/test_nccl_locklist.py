"""nccl on dnf hosts whose versionlock conf points the lock list elsewhere (`locklist = PATH` in
/etc/dnf/plugins/versionlock.conf): the hold is judged from that list alone, and the remedy backs it up.
The conf is read as libdnf's IniParser reads it; that part runs in a real `sh` against a temporary tree."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from provisioner.load.specs import NcclSpec
from provisioner.parsers import versionlock
from provisioner.resources import nccl, nccl_dnf
from provisioner.resources.base import HostContext, ProbeResult

from ._recorded import fix, run

DNF = HostContext("gpu01", package_manager="dnf")
SPEC = {"version": "2.21.5", "package": "libnccl"}
V = "2.21.5-1+cuda12.4"
RPM = f"rpm 0:{V} x86_64\n"
LOCK = f"lock libnccl-0:{V}.*\n"


def audit(output: str) -> list[tuple[str, str, str, str | None]]:
    return run("nccl", SPEC, {"rpm -q": output}, DNF).summary()


@pytest.mark.parametrize(("output", "held"), [
    pytest.param(f"{RPM}locklist /srv/locks/versionlock.list\n{LOCK}", ("ok", "held"), id="custom-list-locks"),
    pytest.param(f"{RPM}locklist /srv/locks/versionlock.list\n", ("drift", "not held"), id="custom-list-empty"),
    pytest.param(f"{RPM}{LOCK}", ("ok", "held"), id="no-locklist-line-is-the-default"),
])
def test_the_hold_comes_from_the_list_the_conf_names(output: str, held: tuple[str, str]) -> None:
    assert audit(output) == [("version", "ok", "2.21.5", V), ("held", held[0], "held", held[1])]


@pytest.mark.parametrize(("locklist", "says"), [
    pytest.param("", "sets no locklist", id="unset"),
    pytest.param("locks/versionlock.list", "is a relative path", id="relative"),
])
def test_a_list_that_cannot_be_known_is_an_error_not_a_verdict(locklist: str, says: str) -> None:
    checks = run("nccl", SPEC, {"rpm -q": f"{RPM}locklist {locklist}\n{LOCK}"}, DNF).checks
    assert [(c.attribute, c.status) for c in checks] == [("version", "ok"), ("held", "error")]
    assert says in checks[1].message
    assert versionlock.locklist_problem(None) is None and versionlock.locklist_problem("/x.list") is None


def test_the_library_listing_keeps_the_locklist_for_the_remedy() -> None:
    found = nccl.read_installed("files\n/usr/lib64/libnccl.so.2.21.5\nlocklist /srv/l.list\n", "libnccl")
    assert (found.version, found.locklist) == ("2.21.5", "/srv/l.list")


def test_the_hold_backs_up_the_named_list_and_adds_the_lock_as_before() -> None:
    (step,) = fix("nccl", SPEC, {"rpm -q": ProbeResult(f"{RPM}locklist /srv/my locks.list\n", "", 0)}, DNF)
    assert step.writes == ("/srv/my locks.list", nccl_dnf.YUM_LIST, nccl_dnf.LOCK_TOML)
    assert step.command.count("'/srv/my locks.list'") >= 2 and "'/srv/my locks.list'" in (step.undo or "")
    assert f"dnf -y -q versionlock add libnccl-{V}" in step.command


# ------------------------------------------------------------------------------------- in a real shell

def sh(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-ec", command], capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.parametrize(("conf", "locklist"), [
    pytest.param("[main]\nenabled = 1\nlocklist = /etc/dnf/plugins/versionlock.list\n",
                 "/etc/dnf/plugins/versionlock.list", id="as-packaged"),
    pytest.param("[main]\nlocklist=/srv/l.list", "/srv/l.list", id="no-blanks-no-last-newline"),
    pytest.param("[main]\r\nlocklist =\t /srv/l.list \t\r\n", "/srv/l.list", id="blanks-and-crlf"),
    pytest.param('[main]\nlocklist = "/srv/my locks.list"\n', "/srv/my locks.list", id="double-quotes"),
    pytest.param("[main]\nlocklist = '/srv/l.list'\n", "/srv/l.list", id="single-quotes"),
    pytest.param("[main]\nlocklist = /srv/l.list # note\n", "/srv/l.list # note", id="no-comment-after-a-value"),
    pytest.param("[main] # the plugin\n#locklist = /a\n; locklist = /b\nlocklist = /c\n", "/c", id="comments"),
    pytest.param("[main]\nlocklist = /a\nlocklist = /b\n", "/b", id="the-last-wins"),
    pytest.param("[main]\nlocklist = /a\n\n[other]\nlocklist = /b\n", "/a", id="only-main"),
    pytest.param("[main]\nLocklist = /a\n", "", id="keys-are-case-sensitive"),
    pytest.param("[main]\nenabled = 1\n", "", id="unset"),
    pytest.param("[main]\nlocklist = locks.list\n", "locks.list", id="relative-as-written"),
    pytest.param("[main]\nlocklist = /a\n  /b\n\n", "/a\n/b", id="an-indented-line-continues-it"),
])
def test_the_conf_is_read_as_dnf_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, conf: str,
                                          locklist: str) -> None:
    monkeypatch.setattr(nccl_dnf, "DNF_CONF", str(tmp_path / "dnf.conf"))
    monkeypatch.setattr(nccl_dnf, "LOCK_CONF", str(tmp_path / "versionlock.conf"))
    (tmp_path / "versionlock.conf").write_bytes(conf.encode())
    done = sh(nccl_dnf.locklist_command())
    assert done.stdout == (locklist + "\n" if locklist else ""), done.stderr


def test_without_a_readable_conf_the_default_list_stands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nccl_dnf, "DNF_CONF", str(tmp_path / "dnf.conf"))
    monkeypatch.setattr(nccl_dnf, "LOCK_CONF", str(tmp_path / "absent.conf"))
    assert sh(nccl_dnf.locklist_command()).stdout == nccl_dnf.DEFAULT_LIST + "\n"


def test_the_probe_reads_the_named_list_and_not_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "rpm").write_text(f"#!/bin/sh\nprintf '0:{V} x86_64\\n'\n")
    (bin_dir / "rpm").chmod(0o755)
    custom, default = tmp_path / "site locks" / "nccl.list", tmp_path / "versionlock.list"
    custom.parent.mkdir()
    custom.write_text(f"# Added lock on Tue\nlibnccl-0:{V}.*\n")
    default.write_text("libnccl-0:2.18.3-1+cuda12.2.*\n")  # stale: dnf no longer reads it
    (tmp_path / "versionlock.conf").write_text(f"[main]\nenabled = 1\nlocklist = {custom}\n")
    for name, path in (("DNF_CONF", "dnf.conf"), ("LOCK_CONF", "versionlock.conf"),
                       ("DEFAULT_LIST", "versionlock.list"),
                       ("YUM_LIST", "yum.list"), ("LOCK_TOML", "versionlock.toml")):
        monkeypatch.setattr(nccl_dnf, name, str(tmp_path / path))
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    (probe,) = nccl.probes(NcclSpec(**SPEC), DNF)
    done = sh(probe.command)
    assert done.stdout == (f"rpm 0:{V} x86_64\nlockconf {tmp_path}/versionlock.conf\nenabled 1\nlocklist {custom}\n"
                           f"lock libnccl-0:{V}.*\n"), done.stderr
    # The watch's file status names the list the conf points to, looked up on the host as the probe does.
    conf, word = [w for w in probe.reads if w.startswith('"$(')]
    assert sh(f"printf '%s\\n' {word}").stdout == f"{custom}\n"
    assert sh(f"printf '%s\\n' {conf}").stdout == f"{tmp_path}/versionlock.conf\n"
