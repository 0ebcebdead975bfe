"""The change script: order, dependencies, handlers, lock and journal, run for real with /bin/sh
against temporary directories (the lock, journal and backup locations are pointed there)."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from provisioner.apply import changes, guard_shell
from provisioner.resources.steps import PHASE_FILES, PHASE_MODULES, PHASE_SERVICES, Step, file_step
from provisioner.run.transport import framed

HOLDER = changes.Holder("20261123T000000Z-abc", "ops@control", "2026-11-23T00:00:00Z")


def run_script(steps: list[Step], nonce: str = "n0nce"
               ) -> tuple[subprocess.CompletedProcess[str], changes.ScriptResult]:
    script = changes.build_script(steps, nonce, HOLDER.run_id, "gpu01", HOLDER)
    proc = subprocess.run(["sh", "-s"], input=framed(script), capture_output=True, text=True, timeout=30)
    return proc, changes.parse_output(proc.stdout, nonce, len(steps))


def step(resource: str, action: str, command: str, **kw: object) -> Step:
    return Step(resource, action, command, command, **kw)  # type: ignore[arg-type]


def test_order_by_phase_keeps_playbook_order_and_adds_one_handler_per_unit() -> None:
    ordered = changes.order([
        ("service", "service[rdma_cm]", [step("service[rdma_cm]", "start", "true", phase=PHASE_SERVICES)]),
        ("file", "file[/etc/a]", [step("file[/etc/a]", "write", "true", phase=PHASE_FILES, notify=("rdma_cm",))]),
        ("kernel_module", "kernel_module[x]", [step("kernel_module[x]", "load", "true", phase=PHASE_MODULES,
                                                    notify=("rdma_cm.service",))]),
        ("file", "file[/etc/b]", [step("file[/etc/b]", "write", "true", phase=PHASE_FILES, notify=("rdma_cm",))]),
    ])
    assert [s.id for s in ordered] == ["kernel_module[x]:load", "file[/etc/a]:write", "file[/etc/b]:write",
                                       "service[rdma_cm]:start", "handler[rdma_cm.service]:restart"]
    assert set(ordered[3].needs) == {"file[/etc/a]", "kernel_module[x]", "file[/etc/b]"}


def test_roce_qos_needs_ofed() -> None:
    ordered = changes.order([("ofed", "ofed", [step("ofed", "install", "true", phase=10)]),
                             ("roce_qos", "roce_qos[eth1]", [step("roce_qos[eth1]", "ecn", "true", phase=40)])])
    assert ordered[1].needs == ("ofed",)


def test_failure_stops_dependents_only_and_handler_runs_once(host_dirs: Path) -> None:
    marker = host_dirs / "restarts"
    steps = changes.order([
        ("file", "file[/a]", [step("file[/a]", "write", "echo wrote-a", phase=PHASE_FILES, notify=("svc",)),
                              step("file[/a]", "chmod", "echo broken >&2; exit 7", phase=PHASE_FILES)]),
        ("file", "file[/b]", [step("file[/b]", "write", "true", phase=PHASE_FILES, notify=("svc",))]),
        ("service", "service[svc]", [step("service[svc]", "start", "true", phase=PHASE_SERVICES)]),
        ("sysctl", "sysctl[x]", [step("sysctl[x]", "set", "true", phase=50)]),
    ])
    # The handler's real command would call systemctl: count its runs instead.
    steps[-1] = Step(**{**steps[-1].__dict__, "command": f"echo x >> {marker}"})
    proc, result = run_script(steps)
    by_id = {s.id: r for s, r in zip(steps, result.steps, strict=True)}
    assert proc.returncode == 0 and result.finished
    assert by_id["file[/a]:write"] == changes.StepResult("ok", 0, "wrote-a")
    assert by_id["file[/a]:chmod"].status == "failed" and by_id["file[/a]:chmod"].exit_code == 7
    assert "broken" in by_id["file[/a]:chmod"].output
    assert by_id["file[/b]:write"].status == "ok" and by_id["sysctl[x]:set"].status == "ok"
    assert by_id["service[svc]:start"].status == "skipped"  # a file it reads failed
    assert by_id["handler[svc.service]:restart"].status == "ok"
    assert marker.read_text() == "x\n"  # once, though two files notified
    journal = [json.loads(line) for line in (host_dirs / "log/journal.jsonl").read_text().splitlines()]
    assert len(journal) == len(steps)  # one line per step, whatever its outcome
    assert {(j["resource"], j["outcome"]) for j in journal} >= {("file[/a]", "failed"), ("service[svc]", "skipped")}
    assert all(j["run"] == HOLDER.run_id and j["host"] == "gpu01" and j["time"] for j in journal)
    assert not (host_dirs / "run/fabnet.lock").exists()  # released


def test_handler_does_not_run_when_nothing_notified(host_dirs: Path) -> None:
    steps = changes.order([("file", "file[/a]", [step("file[/a]", "write", "exit 1", notify=("svc",))])])
    steps[-1] = Step(**{**steps[-1].__dict__, "command": "echo should-not-run"})
    _, result = run_script(steps)
    assert [r.status for r in result.steps] == ["failed", "skipped"]


def test_a_held_lock_refuses_and_names_the_holder(host_dirs: Path) -> None:
    lock = host_dirs / "run/fabnet.lock"
    lock.mkdir()
    holder = subprocess.Popen(["sleep", "30"])
    try:
        (lock / "holder").write_text(f"run=other-run control=alice@ctl since=2026-11-23T01:00:00Z\npid={holder.pid}\n")
        target = host_dirs / "f"
        proc, result = run_script([step("file[/f]", "write", f"touch {target}")])
        assert proc.returncode == changes.LOCKED_EXIT
        assert re.fullmatch(rf"run=other-run control=alice@ctl since=2026-11-23T01:00:00Z age=[01]s pid={holder.pid}",
                            result.locked_by or "")
        assert not target.exists() and lock.exists()
    finally:
        holder.kill()
        holder.wait()


def test_a_stale_lock_is_taken_over(host_dirs: Path) -> None:
    lock = host_dirs / "run/fabnet.lock"
    lock.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    (lock / "holder").write_text(f"run=old control=x since=y\npid={dead.pid}\n")
    _, result = run_script([step("file[/f]", "write", "true")])
    assert result.locked_by is None and result.steps[0].status == "ok"


def test_file_step_inside_the_script_backs_up_under_the_run(host_dirs: Path) -> None:
    target = host_dirs / "etc/nccl.conf"
    target.parent.mkdir()
    target.write_text("old\n")
    _, result = run_script([file_step("file[x]", "write", str(target), b"new\n", mode="0640")])
    assert result.steps[0].status == "ok", result.steps[0].output
    assert target.read_text() == "new\n" and (target.stat().st_mode & 0o777) == 0o640
    backup = host_dirs / "backups" / HOLDER.run_id / str(target).lstrip("/")
    assert backup.read_text() == "old\n"


def test_markers_cannot_be_forged_and_partial_output_is_not_run() -> None:
    out = "@@fabnet:n0nce:begin:0@@\nhello\n@@fabnet:n0nce:rc:0:0@@\n@@fabnet:n0nce:begin:1@@\nhalf"
    result = changes.parse_output(out, "n0nce", 3)
    assert [r.status for r in result.steps] == ["ok", "not_run", "not_run"] and not result.finished
    forged = "@@fabnet:other:begin:0@@\n\n@@fabnet:other:rc:0:0@@\n"
    assert changes.parse_output(forged, "n0nce", 1).steps[0].status == "not_run"


def test_backups_of_a_run_are_under_its_own_directory() -> None:
    script = changes.build_script([], "n", "run-1", "gpu01", HOLDER)
    assert "FABNET_BACKUP_DIR=/var/backups/fabnet/run-1" in script


def test_the_revert_timer_is_accurate_to_a_second_and_the_revert_journals_itself(
        host_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A stand-in systemd-run records its arguments and fires at once: the revert's own shell runs.
    bin_dir = host_dirs / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "systemd-run"
    fake.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {host_dirs}/args\n"
                    "while [ \"${1#--}\" != \"$1\" ]; do shift; done\n\"$@\"\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    flag = host_dirs / "reverted"
    monkeypatch.setattr(changes, "reverted_flag", lambda run_id: str(flag))
    undone = host_dirs / "undone"
    cut = Step("interface[eth0]", "down", "true", "ip link set eth0 down", undo=f": > {undone}", netdev="eth0",
               lockout=True)
    script = changes.build_script([cut], "n0nce", HOLDER.run_id, "gpu01", HOLDER, revert_seconds=15)
    proc = subprocess.run(["sh", "-s"], input=framed(script), capture_output=True, text=True, timeout=30)
    assert changes.parse_output(proc.stdout, "n0nce", 1).armed, proc.stdout + proc.stderr
    args = (host_dirs / "args").read_text().splitlines()
    assert "--on-active=15s" in args and "--timer-property=AccuracySec=1s" in args
    assert undone.exists()
    armed, fired = (int(word) for word in flag.read_text().split())
    assert 0 <= fired - armed <= 2
    records = [json.loads(line) for line in (host_dirs / "log/journal.jsonl").read_text().splitlines()]
    revert = next(r for r in records if r["action"] == "revert")
    assert revert["run"] == HOLDER.run_id and revert["host"] == "gpu01" and revert["armed"] == armed
    assert revert["after_s"] == fired - armed and revert["command"] == f": > {undone}"


def _stand_ins(host_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """systemd-run that arms (records its arguments, never fires) and systemctl that records its own."""
    bin_dir = host_dirs / "bin"
    bin_dir.mkdir()
    for name in ("systemd-run", "systemctl"):
        tool = bin_dir / name
        tool.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> {host_dirs}/{name}.calls\n")
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return host_dirs


def _cuts(host_dirs: Path) -> list[Step]:
    return [Step(f"link[{n}]", "down", f": > {host_dirs}/cut-{n}", f"ip link set eth0 mtu {n}",
                 undo="true", netdev="eth0", lockout=True) for n in (1, 2)]


def test_an_armed_change_runs_only_once_fabnet_acknowledged_the_marker(
        host_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The marker goes out, then the script waits on its standard input: a change that cuts the path at
    once can no longer hold the marker back from fabnet."""
    _stand_ins(host_dirs, monkeypatch)
    script = changes.build_script(_cuts(host_dirs), "n0nce", HOLDER.run_id, "gpu01", HOLDER, revert_seconds=30)
    proc = subprocess.Popen(["sh", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(framed(script))
    proc.stdin.flush()
    seen = []
    while not (line := proc.stdout.readline()).startswith("@@fabnet:n0nce:armed:"):
        assert line, "".join(seen)
        seen.append(line)
    time.sleep(0.5)
    assert not (host_dirs / "cut-1").exists()  # armed and waiting: nothing changed yet
    proc.stdin.write("\n")
    proc.stdin.close()
    out = "".join(seen) + line + proc.stdout.read()
    assert proc.wait(timeout=30) == 0
    result = changes.parse_output(out, "n0nce", 2)
    assert result.armed and [s.status for s in result.steps] == ["ok", "ok"], out
    assert (host_dirs / "cut-1").exists() and (host_dirs / "cut-2").exists()
    assert not (host_dirs / "systemctl.calls").exists()  # the revert stays armed for the confirmation


def test_no_acknowledgement_disarms_and_refuses_every_change_to_the_path(
        host_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _stand_ins(host_dirs, monkeypatch)
    script = changes.build_script(_cuts(host_dirs), "n0nce", HOLDER.run_id, "gpu01", HOLDER, revert_seconds=10)
    started = time.monotonic()
    # The input ends with the script, as when fabnet's side of the channel is gone: no line ever comes.
    proc = subprocess.run(["sh", "-s"], input=framed(script), capture_output=True, text=True, timeout=30)
    result = changes.parse_output(proc.stdout, "n0nce", 2)
    assert result.armed and [(s.status, s.exit_code) for s in result.steps] == [("failed", 92), ("failed", 92)]
    assert "did not acknowledge the armed revert within 3 s" in result.steps[0].output
    assert not (host_dirs / "cut-1").exists() and not (host_dirs / "cut-2").exists()
    stopped = (host_dirs / "systemctl.calls").read_text().split()
    assert stopped == ["stop", f"{changes.revert_unit(HOLDER.run_id)}.timer"]
    assert time.monotonic() - started < 10  # an input at its end answers at once, without the wait
    assert [guard_shell.ack_seconds(s) for s in (10, 60, 3600)] == [3, 10, 10]
