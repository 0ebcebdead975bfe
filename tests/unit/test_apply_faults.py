"""Apply under faults, with the change and rollback scripts run for real by /bin/sh against temporary
directories: a target changed since the plan read it (compare-and-swap under the lock), edits of one
file composed into one write, undo recorded before a step runs, and the lock policy both share."""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import subprocess
import time
from pathlib import Path

from provisioner.apply import changes, rollback
from provisioner.evaluate.engine import ResourceOutcome
from provisioner.plan import planner as plan
from provisioner.resources.steps import Expect, Step, file_step
from provisioner.run.transport import framed
from tests.unit.resources._recorded import fix, listing
from tests.unit.test_changes import HOLDER, run_script, step

# ------------------------------------------------------------------------------- compare-and-swap


def test_a_file_changed_since_the_plan_is_a_conflict_and_its_dependents_skip(host_dirs: Path) -> None:
    conf = host_dirs / "etc/90 fabnet's.conf"  # a path the shell must get quoted
    conf.parent.mkdir()
    conf.write_text("a = 1\n")
    other = host_dirs / "other"
    write = file_step("sysctl[a]", "persist", str(conf), b"a = 2\n", expect=(Expect.file(str(conf), "a = 0\n"),))
    steps = [write, step("sysctl[a]", "after", f"touch {other}.dep"),
             file_step("file[o]", "write", str(other), b"x\n", expect=(Expect.file(str(other), None),))]
    proc, result = run_script(steps)
    assert proc.returncode == 0 and result.finished
    assert [r.status for r in result.steps] == ["conflict", "skipped", "ok"]
    assert result.steps[0].output == f"{conf} changed since it was read"
    assert conf.read_text() == "a = 1\n"  # not written over the change
    assert not Path(f"{other}.dep").exists() and other.read_text() == "x\n"
    journal = [json.loads(line) for line in (host_dirs / "log/journal.jsonl").read_text().splitlines()]
    assert journal[0]["outcome"] == "conflict" and journal[0]["conflict"] == [f"{conf} changed since it was read"]
    assert "conflict" not in journal[2]
    # Nothing of a step that did not run is left for rollback to undo.
    assert not (host_dirs / "backups" / HOLDER.run_id / "undo/0000").exists()


def test_targets_still_as_read_are_changed(host_dirs: Path) -> None:
    conf = host_dirs / "a.conf"
    conf.write_text("a = 0\n")
    value = host_dirs / "value"
    value.write_text("4096\t87380   6291456\n")
    steps = [file_step("sysctl[a]", "persist", str(conf), b"a = 2\n", expect=(Expect.file(str(conf), "a = 0\n"),)),
             step("sysctl[b]", "set", f"echo 1 > {value}",
                  expect=(Expect.setting("net.b", f"cat -- {shlex.quote(str(value))}", "4096 87380 6291456"),))]
    _, result = run_script(steps)
    assert [r.status for r in result.steps] == ["ok", "ok"], result.steps
    assert conf.read_text() == "a = 2\n" and value.read_text() == "1\n"


def test_a_setting_changed_since_the_plan_says_what_it_was_and_is(host_dirs: Path) -> None:
    value = host_dirs / "value"
    value.write_text("2\n")
    steps = [step("sysctl[b]", "set", f"echo 1 > {value}",
                  expect=(Expect.setting("net.b", f"cat -- {shlex.quote(str(value))}", "0"),))]
    _, result = run_script(steps)
    assert result.steps[0] == changes.StepResult("conflict", None,
                                                 "net.b changed since it was read (was 0, now 2)")
    assert value.read_text() == "2\n"


def test_conflicts_are_checked_before_the_first_change(host_dirs: Path) -> None:
    # Step 0 writes what step 1 was planned against: at the first check (under the lock, before any
    # change) the file holds what the plan read; right before step 1 it holds what step 0 left.
    conf = host_dirs / "shared"
    conf.write_text("old\n")
    steps = [step("x[a]", "touch", f"echo new > {conf}", writes=(str(conf),)),
             step("x[b]", "set", "true", expect=(Expect.file(str(conf), "old\n"),))]
    _, result = run_script(steps)
    assert [r.status for r in result.steps] == ["ok", "ok"]


def test_a_saved_plan_keeps_its_preconditions() -> None:
    from dataclasses import asdict

    original = file_step("sysctl[a]", "persist", "/etc/x", b"y\n", expect=(Expect.file("/etc/x", None),))
    assert Step.from_dict(json.loads(json.dumps(asdict(original)))) == original


# ----------------------------------------------------------------------------- edits compose

LIVE, BOOT = "/proc/sys/", "/etc/sysctl.d/"
VENDOR = "/etc/sysctl.d/90-vendor.conf"


def _written(step: Step) -> str:
    data = re.search(r"printf %s (\S+) \| base64 -d", step.command)
    assert data, step.command
    return base64.b64decode(shlex.split(data[1])[0]).decode()


def test_two_sysctls_in_one_file_become_one_write_holding_both() -> None:
    text = "# vendor\nnet.ipv4.conf.all.arp_ignore = 0\nnet.core.rmem_max = 5\nnet.ipv4.conf.all.arp_announce = 0\n"
    outputs = {LIVE: "0\n", BOOT: listing({VENDOR: text})}
    resources = []
    for name, value in (("net.ipv4.conf.all.arp_ignore", 1), ("net.ipv4.conf.all.arp_announce", 2)):
        steps = fix("sysctl", {"name": name, "value": value}, outputs)
        outcome = ResourceOutcome("sysctl", f"sysctl[{name}]", "site.yml:1", "play")
        resources.append(plan.ResourcePlan(outcome, steps))
    # Apart, each write would drop the other's edit.
    assert "arp_announce = 0" in _written(resources[0].steps[1])
    plan.merge_writes(resources)
    ordered = changes.order([(rp.outcome.kind, rp.outcome.target, plan.owned_steps(rp)) for rp in resources])
    writes = [s for s in ordered if s.writes == (VENDOR,)]
    assert len(writes) == 1
    assert _written(writes[0]) == ("# vendor\nnet.ipv4.conf.all.arp_ignore = 1\nnet.core.rmem_max = 5\n"
                                   "net.ipv4.conf.all.arp_announce = 2\n")
    assert writes[0].expect == (Expect.file(VENDOR, text),)  # guarded by the content both edits read
    assert resources[1].steps[-1] is resources[0].steps[-1]  # both resources report the shared write
    assert [s.action for s in ordered] == ["set", "persist", "set"]
    assert all(s.expect[0].read for s in ordered if s.action == "set")  # runtime values are guarded too


def test_a_single_edit_is_left_as_it_is() -> None:
    outputs = {LIVE: "0\n", BOOT: listing({VENDOR: "net.ipv4.conf.all.arp_ignore = 0\n"})}
    steps = fix("sysctl", {"name": "net.ipv4.conf.all.arp_ignore", "value": 1}, outputs)
    resources = [plan.ResourcePlan(ResourceOutcome("sysctl", "sysctl[x]", "s:1", "p"), list(steps))]
    plan.merge_writes(resources)
    assert resources[0].steps == steps


# ------------------------------------------------------------------------ undo before the step


def _kill_script_step(resource: str) -> Step:
    """A step that kills its own change script, as a lost node or an OOM kill would, mid-step."""
    return step(resource, "hang", f'kill -9 $(sed -n "s/^pid=//p" {shlex.quote(changes.LOCK_DIR)}/holder); sleep 5')


def _rollback(nonce: str = "rb", **kw: object) -> tuple[subprocess.CompletedProcess[str], tuple]:
    holder = changes.Holder("20261123T000100Z-def", "ops@control", "2026-11-23T00:01:00Z")
    script = rollback.build_script(HOLDER.run_id, nonce, holder, **kw)  # type: ignore[arg-type]
    proc = subprocess.run(["sh", "-s"], input=framed(script), capture_output=True, text=True, timeout=30)
    return proc, rollback.parse(proc.stdout, nonce)


def test_a_step_cut_off_by_a_kill_is_undone_by_rollback_through_the_stale_lock(host_dirs: Path) -> None:
    conf = host_dirs / "etc/app.conf"
    conf.parent.mkdir()
    conf.write_text("old\n")
    value = host_dirs / "value"
    value.write_text("0\n")
    steps = [file_step("file[app]", "write", str(conf), b"new\n"),
             Step("sysctl[v]", "set", f"echo 1 > {value}", "sysctl -w v=1", undo=f"echo 0 > {value}"),
             _kill_script_step("sysctl[v]")]
    steps[2] = Step(**{**steps[2].__dict__, "undo": f"echo undone-hang >> {host_dirs}/hang-undo"})
    proc, result = run_script(steps)
    assert proc.returncode == -9 or proc.returncode == 137 or not result.finished
    assert conf.read_text() == "new\n" and value.read_text() == "1\n"
    lock = Path(changes.LOCK_DIR)
    assert lock.exists()  # the killed run could not release it
    rb, (run, undone, problem) = _rollback()
    assert problem is None, rb.stdout + rb.stderr
    assert run == HOLDER.run_id
    assert conf.read_text() == "old\n" and value.read_text() == "0\n"
    assert [(u.step, u.state, u.exit_code) for u in undone] == [("0002", "started", 0), ("0001", "ok", 0),
                                                                ("0000", "ok", 0)]
    assert undone[2].what.startswith("file[app]:write write ")
    assert (host_dirs / "hang-undo").read_text() == "undone-hang\n"
    _, took_over, _ = changes.lock_markers(rb.stdout, "rb")
    assert took_over is not None and "is gone" in took_over and f"run={HOLDER.run_id}" in took_over
    assert not lock.exists()
    journal = (host_dirs / "log/journal.jsonl").read_text()
    assert '"action":"take-over-lock"' in journal


def test_an_undo_of_a_write_that_never_happened_changes_nothing(host_dirs: Path) -> None:
    # The undo is recorded, then the kill comes before the write took its backup: nothing to restore.
    conf = host_dirs / "app.conf"
    conf.write_text("old\n")
    write = file_step("file[app]", "write", str(conf), b"new\n")
    killed = Step(**{**write.__dict__, "command": _kill_script_step("x").command + "; " + write.command})
    run_script([killed])
    assert conf.read_text() == "old\n"
    _, (_, undone, problem) = _rollback()
    assert problem is None and [(u.state, u.exit_code) for u in undone] == [("started", 0)]
    assert conf.read_text() == "old\n"


# --------------------------------------------------------------------------------- lock policy


def _lock(holder: str | None, age: float = 0) -> Path:
    lock = Path(changes.LOCK_DIR)
    lock.mkdir()
    if holder is not None:
        (lock / "holder").write_text(holder)
    if age:
        then = time.time() - age
        os.utime(lock, (then, then))
    return lock


def test_a_lock_without_holder_is_taken_over_once_old_enough(host_dirs: Path) -> None:
    lock = _lock(None)
    proc, result = run_script([step("x[a]", "a", "true")])
    assert proc.returncode == changes.LOCKED_EXIT
    assert re.fullmatch(r"unknown age=[01]s pid=unknown", result.locked_by or "")
    os.rmdir(lock)
    _lock(None, age=changes.ORPHAN_SECONDS + 5)
    _, result = run_script([step("x[a]", "a", "true")])
    assert result.steps[0].status == "ok"
    assert result.took_over is not None and "has no holder" in result.took_over


def test_a_live_pid_older_than_its_run_could_last_is_another_process(host_dirs: Path) -> None:
    alive = subprocess.Popen(["sleep", "30"])
    try:
        start = int(time.time()) - 100
        _lock(f"run=old control=x since=y\npid={alive.pid}\nstart={start}\nmax=50\n")
        _, result = run_script([step("x[a]", "a", "true")])
        assert result.steps[0].status == "ok"
        assert result.took_over and "longer than its run could last (50 s)" in result.took_over
        assert "run=old" in result.took_over
        # Within its time, the same live holder keeps the lock, and the refusal says its age.
        os.rmdir(Path(changes.LOCK_DIR)) if Path(changes.LOCK_DIR).exists() else None
        _lock(f"run=old control=x since=y\npid={alive.pid}\nstart={int(time.time()) - 20}\nmax=500\n")
        proc, result = run_script([step("x[a]", "a", "true")])
        assert proc.returncode == changes.LOCKED_EXIT
        assert re.fullmatch(rf"run=old control=x since=y age=2[01]s pid={alive.pid}", result.locked_by or "")
    finally:
        alive.kill()
        alive.wait()


def test_break_lock_removes_a_live_holders_lock_and_journals_it(host_dirs: Path) -> None:
    alive = subprocess.Popen(["sleep", "30"])
    try:
        _lock(f"run=stuck control=x since=y\npid={alive.pid}\n")
        script = changes.build_script([step("x[a]", "a", "true")], "n", HOLDER.run_id, "gpu01", HOLDER,
                                      break_lock=True)
        proc = subprocess.run(["sh", "-s"], input=framed(script), capture_output=True, text=True, timeout=30)
        result = changes.parse_output(proc.stdout, "n", 1)
        assert result.broke == "run=stuck control=x since=y" and result.steps[0].status == "ok"
        records = [json.loads(line) for line in (host_dirs / "log/journal.jsonl").read_text().splitlines()]
        assert {"action": "break-lock", "holder": "run=stuck control=x since=y"}.items() <= records[0].items()
    finally:
        alive.kill()
        alive.wait()


def test_rollback_refuses_a_live_lock_and_says_how_to_break_it(host_dirs: Path) -> None:
    alive = subprocess.Popen(["sleep", "30"])
    try:
        _lock(f"run=busy control=x since=y\npid={alive.pid}\n")
        proc, (_, _, problem) = _rollback()
        assert proc.returncode == changes.LOCKED_EXIT
        assert problem and "run=busy" in problem and "--break-lock" in problem
        proc, (_, _, problem) = _rollback(break_lock=True)
        assert proc.returncode == 3 and problem and "no run" in problem  # past the lock: nothing to undo
    finally:
        alive.kill()
        alive.wait()


def _pstart(pid: int) -> str:
    """The process's start in clock ticks since boot, as the lock records it."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


BOOT_ID = Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def test_a_live_holder_keeps_its_lock_however_old_the_clock_makes_it(host_dirs: Path) -> None:
    # The host's clock jumped forward by more than the run's longest time: its holder still runs.
    alive = subprocess.Popen(["sleep", "30"])
    try:
        _lock(f"run=old control=x since=y\npid={alive.pid}\nstart={int(time.time()) - 100000}\nmax=50\n"
              f"pstart={_pstart(alive.pid)}\nboot={BOOT_ID}\n")
        proc, result = run_script([step("x[a]", "a", "true")])
        assert proc.returncode == changes.LOCKED_EXIT and result.took_over is None
        assert re.fullmatch(rf"run=old control=x since=y age=10000[01]s pid={alive.pid}", result.locked_by or "")
    finally:
        alive.kill()
        alive.wait()


def test_a_pid_now_held_by_another_process_or_a_lock_from_another_boot_is_stale(host_dirs: Path) -> None:
    alive = subprocess.Popen(["sleep", "30"])
    try:
        reused = f"pstart={int(_pstart(alive.pid)) - 1}\nboot={BOOT_ID}\n"
        other_boot = f"pstart={_pstart(alive.pid)}\nboot=00000000-0000-0000-0000-000000000000\n"
        for record, why in ((reused, "that pid is now another process"),
                            (other_boot, "it was taken before the host last booted")):
            _lock(f"run=old control=x since=y\npid={alive.pid}\nstart={int(time.time())}\nmax=500\n{record}")
            _, result = run_script([step("x[a]", "a", "true")])
            assert result.steps[0].status == "ok" and result.took_over and why in result.took_over, result
    finally:
        alive.kill()
        alive.wait()


def test_a_run_whose_clock_jumps_mid_run_keeps_its_lock(host_dirs: Path) -> None:
    # Mid-run, the lock's recorded start is moved a day back (as a clock stepped forward would age it),
    # and a second run tries the host: it is refused, not handed the lock of a run that still works.
    lock = Path(changes.LOCK_DIR)
    second = changes.build_script([step("y[b]", "b", f"touch {host_dirs}/second-ran")], "n2", "second-run",
                                  "gpu01", changes.Holder("second-run", "bob@ctl", "z"))
    (host_dirs / "second.sh").write_text(second)
    jump = (f"sed -i \"s/^start=.*/start=$(( $(date +%s) - 86400 ))/\" {lock}/holder; "
            f"rc=0; sh {host_dirs}/second.sh > {host_dirs}/second.out || rc=$?; echo rc=$rc")
    _, result = run_script([step("x[a]", "jump", jump)])
    assert result.steps[0].status == "ok" and result.steps[0].output == f"rc={changes.LOCKED_EXIT}"
    assert changes.parse_output((host_dirs / "second.out").read_text(), "n2", 1).locked_by
    assert not (host_dirs / "second-ran").exists()
    holder = (host_dirs / "second.out").read_text()
    assert f"run={HOLDER.run_id}" in holder and not lock.exists()  # released at the end of the first run
