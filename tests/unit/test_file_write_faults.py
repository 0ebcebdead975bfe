"""A file write under faults, run for real with /bin/sh against temporary directories: the target is a
symlink or a directory, the backup cannot be taken (a full disk). What the host holds after the apply
and after the rollback is checked on the files themselves."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from provisioner.apply import changes, rollback
from provisioner.resources import nccl
from provisioner.resources.base import HostContext
from provisioner.resources.steps import Step, file_step
from provisioner.run.transport import framed
from tests.unit.resources._recorded import fix

HOLDER = changes.Holder("20261123T000000Z-abc", "ops@control", "2026-11-23T00:00:00Z")


def apply_write(target: Path, data: bytes, env: dict[str, str] | None = None) -> changes.StepResult:
    step = file_step(f"file[{target}]", "write", str(target), data)
    script = changes.build_script([step], "n0nce", HOLDER.run_id, "gpu01", HOLDER)
    proc = subprocess.run(["sh", "-s"], input=framed(script), capture_output=True, text=True, timeout=30,
                          env={**os.environ, **(env or {})})
    return changes.parse_output(proc.stdout, "n0nce", 1).steps[0]


def roll_back() -> list[rollback.UndoResult]:
    holder = changes.Holder("20261123T000001Z-def", "ops@control", "2026-11-23T00:00:01Z")
    proc = subprocess.run(["sh", "-s"], input=framed(rollback.build_script(HOLDER.run_id, "r0nce", holder)),
                          capture_output=True, text=True, timeout=30)
    _, undone, problem = rollback.parse(proc.stdout, "r0nce")
    assert problem is None, proc.stdout + proc.stderr
    return undone


def test_a_symlink_is_written_through_and_kept_and_rollback_restores_the_file_it_points_to(
        host_dirs: Path) -> None:
    real = host_dirs / "usr/lib/nccl.env"
    real.parent.mkdir(parents=True)
    real.write_text("OLD=1\n")
    link = host_dirs / "etc/nccl.env"
    link.parent.mkdir()
    link.symlink_to(real)

    result = apply_write(link, b"NEW=1\n")
    assert result.status == "ok", result.output
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "NEW=1\n"

    assert [u.exit_code for u in roll_back()] == [0]
    assert link.is_symlink() and real.read_text() == "OLD=1\n"
    assert sorted(p.name for p in link.parent.iterdir()) == ["nccl.env"]


def test_a_directory_at_the_path_is_refused_and_left_as_it_was(host_dirs: Path) -> None:
    target = host_dirs / "etc/nccl.env"
    target.mkdir(parents=True)
    (target / "admin").write_text("keep\n")

    result = apply_write(target, b"NEW=1\n")
    assert result.status == "failed"
    assert "is a directory: not replaced" in result.output
    assert sorted(p.name for p in target.iterdir()) == ["admin"]  # no new file moved into it

    assert [u.exit_code for u in roll_back()] == [0]  # nothing to undo, and nothing undone
    assert sorted(p.name for p in target.iterdir()) == ["admin"]


def test_a_backup_that_fails_stops_the_write_so_rollback_can_still_restore(host_dirs: Path) -> None:
    target = host_dirs / "etc/nccl.env"
    target.parent.mkdir()
    target.write_text("ADMIN=1\n" * 1000)
    # A `cp` that fails as on a full disk, after writing part of the copy.
    shims = host_dirs / "shims"
    shims.mkdir()
    (shims / "cp").write_text('#!/bin/sh\nfor a; do last=$a; done\necho part > "$last"\n'
                              'echo "cp: error writing \'$last\': No space left on device" >&2\nexit 1\n')
    (shims / "cp").chmod(0o755)

    result = apply_write(target, b"NEW=1\n", env={"PATH": f"{shims}:{os.environ['PATH']}"})
    assert result.status == "failed"
    assert "could not be backed up: not written" in result.output
    assert target.read_text() == "ADMIN=1\n" * 1000
    backups = host_dirs / "backups" / HOLDER.run_id
    assert not [p for p in backups.rglob("*.part")]  # no partial copy left on the full disk

    assert [u.exit_code for u in roll_back()] == [0]
    assert target.read_text() == "ADMIN=1\n" * 1000


def test_rollback_leaves_a_file_edited_by_hand_after_the_run_and_says_so(host_dirs: Path) -> None:
    target = host_dirs / "etc/nccl.env"
    target.parent.mkdir()
    target.write_text("OLD=1\n")
    assert apply_write(target, b"NEW=1\n").status == "ok"
    target.write_text("NEW=1\nNCCL_DEBUG=INFO  # by hand, after the run\n")

    undone = roll_back()
    assert [u.exit_code for u in undone] == [1]
    assert "changed since this run wrote it: not restored" in undone[0].output
    assert target.read_text() == "NEW=1\nNCCL_DEBUG=INFO  # by hand, after the run\n"


def test_rollback_removes_a_file_the_run_created_and_nobody_changed_since(host_dirs: Path) -> None:
    target = host_dirs / "etc/nccl.env"
    target.parent.mkdir()
    assert apply_write(target, b"NEW=1\n").status == "ok"
    assert [u.exit_code for u in roll_back()] == [0]
    assert not target.exists()


def test_a_failed_undo_is_kept_and_a_second_rollback_retries_only_it(host_dirs: Path) -> None:
    kept, other = host_dirs / "etc/nccl.env", host_dirs / "etc/other.env"
    kept.parent.mkdir()
    kept.write_text("OLD=1\n")
    other.write_text("OTHER=1\n")
    steps = [file_step("file[kept]", "write", str(kept), b"NEW=1\n"),
             file_step("file[other]", "write", str(other), b"OTHER=2\n")]
    script = changes.build_script(steps, "n1", HOLDER.run_id, "gpu01", HOLDER)
    subprocess.run(["sh", "-s"], input=framed(script), capture_output=True, text=True, timeout=30, check=True)
    assert kept.read_text() == "NEW=1\n" and other.read_text() == "OTHER=2\n"
    kept.write_text("NEW=1\nBY_HAND=1\n")

    first = roll_back()
    assert [(u.step, u.exit_code) for u in first] == [("0001", 0), ("0000", 1)]
    assert other.read_text() == "OTHER=1\n" and kept.read_text() == "NEW=1\nBY_HAND=1\n"
    run_dir = host_dirs / "backups" / HOLDER.run_id
    assert sorted(p.name for p in (run_dir / "undo").iterdir()) == ["0000"]  # the failed one, kept
    # The administrator sorts the file out; the next rollback retries the failed undo, and only it.
    other.write_text("OTHER=3  # by hand, after the first rollback\n")
    kept.write_text("NEW=1\n")
    second = roll_back()
    assert [(u.step, u.exit_code) for u in second] == [("0000", 0)]
    assert kept.read_text() == "OLD=1\n" and other.read_text() == "OTHER=3  # by hand, after the first rollback\n"
    assert not (run_dir / "undo").exists()
    holder = changes.Holder("20261123T000002Z-fed", "ops@control", "2026-11-23T00:00:02Z")
    proc = subprocess.run(["sh", "-s"], input=framed(rollback.build_script(HOLDER.run_id, "r1", holder)),
                          capture_output=True, text=True, timeout=30)
    assert rollback.parse(proc.stdout, "r1")[2] == "no run with something to undo on this host"


# ---------------------------------------------------------------------------- the NCCL apt pin

MADISON = ("  libnccl2 | 2.23.4-1+cuda12.6 | file:/repo ./ Packages\n"
           "  libnccl2 | 2.21.5-1+cuda12.4 | file:/repo ./ Packages\n")


def _apt_shims(host_dirs: Path) -> dict[str, str]:
    """apt-cache, apt-get and apt-mark that answer as a node's would and log what they are asked."""
    shims = host_dirs / "apt-shims"
    shims.mkdir(exist_ok=True)
    log = host_dirs / "apt.log"
    (shims / "apt-cache").write_text(f"#!/bin/sh\nprintf '%s' {shlex.quote(MADISON)}\n")
    for name in ("apt-get", "apt-mark"):
        (shims / name).write_text(f"#!/bin/sh\necho {name} \"$*\" >> {log}\n")
    for shim in shims.iterdir():
        shim.chmod(0o755)
    return {"PATH": f"{shims}:{os.environ['PATH']}"}


def _nccl_step(monkeypatch: pytest.MonkeyPatch, pins: Path, probe: str) -> Step:
    monkeypatch.setattr(nccl, "PIN_DIR", f"{pins}/")
    [step] = fix("nccl", {"version": "==2.21.5"}, {"dpkg-query": probe}, HostContext("gpu01", package_manager="apt"))
    return step


def _run(step: Step, env: dict[str, str]) -> changes.StepResult:
    script = changes.build_script([step], "n0nce", HOLDER.run_id, "gpu01", HOLDER)
    proc = subprocess.run(["sh", "-s"], input=framed(script), capture_output=True, text=True, timeout=30,
                          env={**os.environ, **env})
    return changes.parse_output(proc.stdout, "n0nce", 1).steps[0]


def test_the_nccl_install_writes_its_pin_atomically_after_a_backup(host_dirs: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    pins = host_dirs / "preferences.d"
    pins.mkdir()
    pin = pins / "fabnet-libnccl2"
    pin.write_text("Package: libnccl2\nPin: version 2.18.3-1+cuda12.2\nPin-Priority: 1001\n")
    pin.chmod(0o600)
    step = _nccl_step(monkeypatch, pins, "dpkg install ok installed 2.18.3-1+cuda12.2\npin version 2.18.3\n")
    assert step.action == "install"
    result = _run(step, _apt_shims(host_dirs))
    assert result.status == "ok", result.output
    assert pin.read_text() == "Package: libnccl2\nPin: version 2.21.5-1+cuda12.4\nPin-Priority: 1001\n"
    assert pin.stat().st_mode & 0o777 == 0o644 and not list(pins.glob(".fabnet.*"))
    backup = host_dirs / "backups" / HOLDER.run_id / str(pin).lstrip("/")
    assert backup.read_text() == "Package: libnccl2\nPin: version 2.18.3-1+cuda12.2\nPin-Priority: 1001\n"
    assert "apt-get install -y -q --allow-downgrades --allow-change-held-packages -o " \
           "Dpkg::Options::=--force-confold libnccl2=2.21.5-1+cuda12.4" in (host_dirs / "apt.log").read_text()


def test_a_pin_that_cannot_be_backed_up_is_not_written_and_nothing_is_installed(
        host_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pins = host_dirs / "preferences.d"
    pins.mkdir()
    pin = pins / "fabnet-libnccl2"
    pin.write_text("Pin: by hand\n")
    env = _apt_shims(host_dirs)
    (host_dirs / "apt-shims/cp").write_text("#!/bin/sh\necho 'cp: No space left on device' >&2\nexit 1\n")
    (host_dirs / "apt-shims/cp").chmod(0o755)
    step = _nccl_step(monkeypatch, pins, "dpkg install ok installed 2.18.3-1+cuda12.2\npin version 2.18.3\n")
    result = _run(step, env)
    assert result.status == "failed" and "could not be backed up: not written" in result.output
    assert pin.read_text() == "Pin: by hand\n"
    assert not (host_dirs / "apt.log").exists()  # neither apt-get nor apt-mark ran


def test_the_pin_and_hold_of_an_installed_version_is_undone_only_while_the_pin_is_as_written(
        host_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pins = host_dirs / "preferences.d"
    pins.mkdir()
    pin = pins / "fabnet-libnccl2"
    step = _nccl_step(monkeypatch, pins, "dpkg hold ok installed 2.21.5-1+cuda12.4\npin\n")
    assert step.action == "hold"
    assert _run(step, _apt_shims(host_dirs)).status == "ok"
    assert pin.read_text() == "Package: libnccl2\nPin: version 2.21.5-1+cuda12.4\nPin-Priority: 1001\n"
    pin.write_text(pin.read_text() + "# by hand\n")
    undone = roll_back()
    assert [u.exit_code for u in undone] == [1] and "changed since this run wrote it" in undone[0].output
    pin.write_text("Package: libnccl2\nPin: version 2.21.5-1+cuda12.4\nPin-Priority: 1001\n")
    assert [u.exit_code for u in roll_back()] == [0] and not pin.exists()  # the run created it
