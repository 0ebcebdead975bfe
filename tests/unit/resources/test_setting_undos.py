"""The undos of kernel_module and service steps, run in sh against stand-in tools printing what the real
ones print: each puts its setting back only while it still reads as the run left it (or as it was), and
otherwise leaves it and says what it is now (steps.setting_undo)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from provisioner.resources.steps import restore_file, write_file_from

from ._recorded import LSMOD, fix

STOPPED = "LoadState=loaded\nActiveState=inactive\nSubState=dead\nUnitFileState=disabled\n"


def _tool(bin_dir: Path, name: str, read: str) -> None:
    """A stand-in `name`: run with `read`'s arguments it prints the file `state`, otherwise it logs them."""
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\nd=$(dirname \"$0\")/..\nif [ \"$*\" = {read!r} ]; then cat \"$d/state\"; "
                    "exit 0; fi\necho \"$*\" >> \"$d/log\"\n")
    path.chmod(0o755)


def _run(host: Path, undo: str, state: str) -> subprocess.CompletedProcess[str]:
    (host / "state").write_text(state)
    env = {**os.environ, "PATH": f"{host}/bin:{os.environ['PATH']}"}
    return subprocess.run(["sh", "-ec", undo], capture_output=True, text=True, env=env, timeout=30, check=False)


@pytest.fixture
def host(tmp_path: Path) -> Path:
    (tmp_path / "bin").mkdir()
    _tool(tmp_path / "bin", "lsmod", "")
    _tool(tmp_path / "bin", "modprobe", "never")
    return tmp_path


PEERMEM = "nvidia_peermem         16384  0\n"


@pytest.mark.parametrize(("state", "lsmod", "undone"), [
    ("loaded", LSMOD + PEERMEM, "-r -- nvidia-peermem"),  # still loaded: unloaded again
    ("loaded", LSMOD, None),  # unloaded since: nothing to do (modprobe -r would fail)
    ("absent", LSMOD, "-- nvidia-peermem"),
    ("absent", LSMOD + PEERMEM, None),
])
def test_a_module_is_put_back_only_where_it_is_as_the_run_left_it(host: Path, state: str, lsmod: str,
                                                                  undone: str | None) -> None:
    before = LSMOD if state == "loaded" else LSMOD + PEERMEM
    step = fix("kernel_module", {"name": "nvidia-peermem", "state": state, "persistent": False}, {"lsmod": before})[0]
    proc = _run(host, step.undo or "", lsmod)
    assert proc.returncode == 0, proc.stderr
    assert ((host / "log").read_text() if (host / "log").exists() else None) == (undone and undone + "\n")


@pytest.mark.parametrize(("spec", "now", "undone"), [
    ({"state": "started"}, "ActiveState=active\n", "stop -- openibd.service"),
    ({"state": "started"}, "ActiveState=inactive\n", None),  # stopped since (or never started): as it was
    ({"state": "started"}, "ActiveState=failed\n", None),
    ({"state": "stopped"}, "ActiveState=inactive\n", "start -- openibd.service"),
    ({"state": "started", "enabled": True}, "UnitFileState=enabled\n", "disable -- openibd.service"),
])
def test_a_unit_is_put_back_only_where_it_is_as_the_run_left_it(host: Path, spec: dict[str, object], now: str,
                                                                  undone: str | None) -> None:
    _tool(host / "bin", "systemctl", "show --property=" + now.partition("=")[0] + " -- openibd.service")
    before = STOPPED if spec["state"] == "started" else STOPPED.replace("=inactive", "=active")
    prop = now.partition("=")[0]
    steps = fix("service", {"name": "openibd", **spec}, {"systemctl show": before})
    step = next(s for s in steps if prop in (s.undo or ""))
    proc = _run(host, step.undo or "", now)
    assert proc.returncode == 0, proc.stderr
    assert ((host / "log").read_text() if (host / "log").exists() else None) == (undone and undone + "\n")


@pytest.mark.parametrize(("spec", "now", "message"), [
    ({"state": "started", "enabled": True}, "UnitFileState=masked\n",
     "the UnitFileState of openibd.service changed since this run set it: not restored (set enabled, now masked)"),
])
def test_a_unit_changed_since_the_run_is_left_and_the_undo_says_so(host: Path, spec: dict[str, object], now: str,
                                                                  message: str) -> None:
    _tool(host / "bin", "systemctl", "show --property=" + now.partition("=")[0] + " -- openibd.service")
    prop = now.partition("=")[0]
    steps = fix("service", {"name": "openibd", **spec}, {"systemctl show": STOPPED})
    step = next(s for s in steps if prop in (s.undo or ""))
    proc = _run(host, step.undo or "", now)
    assert proc.returncode != 0 and proc.stderr.strip() == message
    assert not (host / "log").exists()


@pytest.mark.parametrize(("edit", "restored"), [(None, True), ("Pin: version 2.23.4-1\n", False)])
def test_a_file_written_from_host_content_is_restored_only_as_the_run_left_it(tmp_path: Path, edit: str | None,
                                                                              restored: bool) -> None:
    pin = tmp_path / "preferences.d/fabnet-libnccl2"
    pin.parent.mkdir()
    pin.write_text("Pin: version 2.18.3-1\n")
    env = {**os.environ, "FABNET_BACKUP_DIR": str(tmp_path / "backup")}
    found = "found=2.21.5-1; " + write_file_from(str(pin), "printf 'Pin: version %s\\n' \"$found\"", record=True)
    assert subprocess.run(["sh", "-ec", found], env=env, timeout=30, check=False).returncode == 0
    assert pin.read_text() == "Pin: version 2.21.5-1\n"
    if edit is not None:
        pin.write_text(edit)
    proc = subprocess.run(["sh", "-ec", restore_file(str(pin), recorded=True)], capture_output=True, text=True,
                          env=env, timeout=30, check=False)
    assert (proc.returncode == 0) == restored
    assert pin.read_text() == ("Pin: version 2.18.3-1\n" if restored else edit)
    if not restored:
        assert proc.stderr.strip() == f"{pin} changed since this run wrote it: not restored (its edit is kept)"


def test_the_nccl_install_undo_puts_back_the_pin_first_and_only_as_the_run_left_it() -> None:
    step = fix("nccl", {"version": "==2.21.5"}, {"dpkg-query": "dpkg 2.18.3-1+cuda12.2\n"})[0]
    assert '$b.written' in step.command and '"$(cat -- "$b.written" 2>/dev/null)"' in (step.undo or "")
    assert (step.undo or "").index("changed since this run wrote it") < (step.undo or "").index("apt-get install")
