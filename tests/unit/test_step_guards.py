"""Compare-and-swap right before each step: an edit made while an earlier step ran (a package install
that takes minutes) is a conflict for the later step that would overwrite it, while a target an earlier
step of the same run changed is expected as that step left it. The change script runs for real in
/bin/sh against temporary directories; the edits "by hand" are made by a step that names no target."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from provisioner.apply import changes, rollback
from provisioner.resources.steps import Expect, Step, file_step, setting_undo
from provisioner.run.transport import framed
from tests.unit.acked import run_acked
from tests.unit.resources._recorded import IP_LINK
from tests.unit.resources._recorded import fix as fix_steps
from tests.unit.test_changes import HOLDER, run_script, step


def _journal(host_dirs: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (host_dirs / "log/journal.jsonl").read_text().splitlines()]


def _undo_recorded(host_dirs: Path, index: int) -> bool:
    return (host_dirs / "backups" / HOLDER.run_id / f"undo/{index:04d}").exists()


def test_a_file_edited_while_an_earlier_step_runs_is_not_overwritten(host_dirs: Path) -> None:
    conf = host_dirs / "nccl.conf"
    conf.write_text("OLD=1\n")
    other = host_dirs / "other"
    # Step 0 is the long install; meanwhile an administrator edits the file step 1 was planned against.
    steps = [step("ofed", "install", f"echo 'NCCL_DEBUG=INFO  # by hand' >> {conf}"),
             file_step("file[conf]", "write", str(conf), b"NEW=1\n", expect=(Expect.file(str(conf), "OLD=1\n"),)),
             step("file[conf]", "chmod", f"chmod 0600 {conf}"),
             file_step("file[other]", "write", str(other), b"x\n", expect=(Expect.file(str(other), None),))]
    proc, result = run_script(steps)
    assert proc.returncode == 0 and result.finished
    assert [r.status for r in result.steps] == ["ok", "conflict", "skipped", "ok"]
    assert result.steps[1].output == f"{conf} changed since it was read"
    assert conf.read_text() == "OLD=1\nNCCL_DEBUG=INFO  # by hand\n"  # the edit is kept
    assert other.read_text() == "x\n"
    journal = _journal(host_dirs)
    assert [j["outcome"] for j in journal] == ["ok", "conflict", "skipped", "ok"]
    assert journal[1]["conflict"] == [f"{conf} changed since it was read"]
    assert not _undo_recorded(host_dirs, 1)  # nothing for rollback to undo of a step refused


def test_a_setting_changed_while_an_earlier_step_runs_says_what_it_was_and_is(host_dirs: Path) -> None:
    value = host_dirs / "value"
    value.write_text("0\n")
    read = f"cat -- {shlex.quote(str(value))}"
    steps = [step("ofed", "install", f"echo 2 > {value}"),
             step("sysctl[b]", "set", f"echo 1 > {value}", expect=(Expect.setting("net.b", read, "0"),))]
    _, result = run_script(steps)
    assert result.steps[1] == changes.StepResult("conflict", None, "net.b changed since it was read (was 0, now 2)")
    assert value.read_text() == "2\n"
    assert _journal(host_dirs)[1]["conflict"] == ["net.b changed since it was read (was 0)"]


def test_a_file_the_run_wrote_is_expected_as_it_left_it(host_dirs: Path) -> None:
    # Two writes of one file planned against the same read (the planner merges edits; a file resource
    # and a sysctl persisted in the same file are not merged): the second expects what the first left.
    conf = host_dirs / "90-vendor.conf"
    conf.write_text("a = 0\n")
    read = Expect.file(str(conf), "a = 0\n")
    steps = [file_step("sysctl[a]", "persist", str(conf), b"a = 1\n", expect=(read,)),
             file_step("file[vendor]", "write", str(conf), b"a = 1\nb = 2\n", expect=(read,))]
    _, result = run_script(steps)
    assert [r.status for r in result.steps] == ["ok", "ok"], result.steps
    assert conf.read_text() == "a = 1\nb = 2\n"


def test_an_edit_after_an_earlier_step_wrote_the_file_is_a_conflict(host_dirs: Path) -> None:
    conf = host_dirs / "90-vendor.conf"
    conf.write_text("a = 0\n")
    read = Expect.file(str(conf), "a = 0\n")
    steps = [file_step("sysctl[a]", "persist", str(conf), b"a = 1\n", expect=(read,)),
             step("nccl", "install", f"echo 'c = 3  # by hand' >> {conf}"),
             file_step("file[vendor]", "write", str(conf), b"a = 1\nb = 2\n", expect=(read,))]
    _, result = run_script(steps)
    assert [r.status for r in result.steps] == ["ok", "ok", "conflict"]
    assert result.steps[2].output == f"{conf} changed since an earlier step of this run wrote it"
    assert conf.read_text() == "a = 1\nc = 3  # by hand\n"


def test_a_setting_the_run_set_is_expected_as_it_left_it_and_guarded_after(host_dirs: Path) -> None:
    value = host_dirs / "value"
    value.write_text("0\n")
    read = f"cat -- {shlex.quote(str(value))}"
    setting = Expect.setting("net.b", read, "0")
    steps = [step("sysctl[b]", "set", f"echo 1 > {value}", expect=(setting,)),
             step("sysctl[b]", "again", f"echo 4 > {value}", expect=(setting,))]
    _, result = run_script(steps)
    assert [r.status for r in result.steps] == ["ok", "ok"] and value.read_text() == "4\n"
    value.write_text("0\n")
    steps.insert(1, step("ofed", "install", f"echo 5 > {value}"))
    _, result = run_script(steps, nonce="n2")
    assert result.steps[2] == changes.StepResult(
        "conflict", None, "net.b changed since an earlier step of this run set it (to 1, now 5)")
    assert value.read_text() == "5\n"


def test_a_target_of_an_earlier_step_that_did_not_run_is_expected_as_the_plan_read_it(host_dirs: Path) -> None:
    conf = host_dirs / "conf"
    conf.write_text("old\n")
    steps = [file_step("file[a]", "write", str(conf), b"a\n", expect=(Expect.file(str(conf), "other\n"),)),
             step("x[b]", "set", "true", expect=(Expect.file(str(conf), "old\n"),))]
    _, result = run_script(steps)
    assert [r.status for r in result.steps] == ["conflict", "ok"]
    assert conf.read_text() == "old\n"


def test_a_conflict_already_there_is_found_before_the_first_change(host_dirs: Path) -> None:
    # Found by the first check, it stands even if the target is put back before its step's turn.
    conf = host_dirs / "conf"
    conf.write_text("edited\n")
    steps = [step("x[a]", "put-back", f"echo old > {conf}"),
             Step("x[b]", "set", "echo set >> " + str(conf), "set", expect=(Expect.file(str(conf), "old\n"),))]
    _, result = run_script(steps)
    assert [r.status for r in result.steps] == ["ok", "conflict"]
    assert conf.read_text() == "old\n"


def test_a_host_value_in_a_conflict_message_is_never_run(host_dirs: Path) -> None:
    value = host_dirs / "value"
    value.write_text("0\n")
    read = f"cat -- {shlex.quote(str(value))}"
    steps = [step("ofed", "install", f"printf '%s\\n' '$(touch {host_dirs}/owned)' > {value}"),
             step("sysctl[b]", "set", "true", expect=(Expect.setting("net.b", read, "0"),))]
    _, result = run_script(steps)
    assert result.steps[1].status == "conflict" and f"now $(touch {host_dirs}/owned))" in result.steps[1].output
    assert not (host_dirs / "owned").exists()


# ------------------------------------------------------------------- undos of settings are guarded


def _rollback(env: dict[str, str] | None = None) -> list[rollback.UndoResult]:
    holder = changes.Holder("20261123T000100Z-def", "ops@control", "2026-11-23T00:01:00Z")
    proc = subprocess.run(["sh", "-s"], input=framed(rollback.build_script(HOLDER.run_id, "rb", holder)), text=True,
                          capture_output=True, timeout=30, env={**os.environ, **(env or {})})
    _, undone, problem = rollback.parse(proc.stdout, "rb")
    assert problem is None, proc.stdout + proc.stderr
    return undone


def _sysctl_step(value: Path) -> Step:
    read = f"cat -- {shlex.quote(str(value))}"
    return step("sysctl[net.b]", "set", f"echo 1 > {value}", expect=(Expect.setting("net.b", read, "0"),),
                undo=setting_undo("net.b", read, "1", "0", f"echo 0 > {value}"))


def test_rollback_puts_a_value_back_only_while_it_is_what_the_run_set(host_dirs: Path) -> None:
    value = host_dirs / "value"
    value.write_text("0\n")
    _, result = run_script([_sysctl_step(value)])
    assert result.steps[0].status == "ok" and value.read_text() == "1\n"
    value.write_text("5\n")  # set by hand after the run
    undone = _rollback()
    assert [u.exit_code for u in undone] == [1]
    assert undone[0].output == "net.b changed since this run set it: not restored (set 1, now 5)"
    assert value.read_text() == "5\n"


@pytest.mark.parametrize("live", ["1", "0"], ids=["as-set", "step-never-took-effect"])
def test_rollback_puts_a_value_back_that_nobody_changed(host_dirs: Path, live: str) -> None:
    value = host_dirs / "value"
    value.write_text("0\n")
    run_script([_sysctl_step(value)])
    value.write_text(f"{live}\n")
    assert [u.exit_code for u in _rollback()] == [0]
    assert value.read_text() == "0\n"


def _fake_ip(host_dirs: Path, shown: str) -> dict[str, str]:
    """An `ip` that shows the line in `ip.show` and logs what it is asked to set."""
    bin_dir = host_dirs / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "ip").write_text(f"#!/bin/sh\nif [ \"$2\" = set ]; then echo \"$*\" >> {host_dirs}/ip.log; exit 0; fi\n"
                                f"cat {host_dirs}/ip.show\n")
    (bin_dir / "ip").chmod(0o755)
    (host_dirs / "ip.show").write_text(shown + "\n")
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


LINE = "3: eth1@if10: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu {mtu} qdisc noqueue state UP mode DEFAULT"


@pytest.mark.parametrize(("after", "restored"), [(9000, True), (4200, False)], ids=["as-set", "set-by-hand"])
def test_rollback_of_an_mtu_leaves_one_set_by_hand_after_the_run(host_dirs: Path, after: int, restored: bool,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    ip = IP_LINK.replace('"ifname":"eth1","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":9000',
                         '"ifname":"eth1","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":1500')
    [mtu] = fix_steps("interface", {"name": "eth1", "mtu": 9000, "persistent": False}, {"ip -j -d link show": ip})
    env = _fake_ip(host_dirs, LINE.format(mtu=1500))
    monkeypatch.setenv("PATH", env["PATH"])
    _, result = run_script([mtu])
    assert result.steps[0].status == "ok"
    (host_dirs / "ip.show").write_text(LINE.format(mtu=after) + "\n")
    (host_dirs / "ip.log").unlink()
    undone = _rollback()
    assert [u.exit_code for u in undone] == [0 if restored else 1]
    if restored:
        assert (host_dirs / "ip.log").read_text() == "link set dev eth1 mtu 1500\n"
    else:
        assert undone[0].output == "the MTU of eth1 changed since this run set it: not restored (set 9000, now 4200)"
        assert not (host_dirs / "ip.log").exists()


def test_the_undo_of_a_link_state_puts_back_the_old_state(host_dirs: Path) -> None:
    ip = IP_LINK.replace('"ifname":"eth1","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":9000',
                         '"ifname":"eth1","flags":["BROADCAST","MULTICAST"],"mtu":9000')
    [link] = fix_steps("interface", {"name": "eth1", "mtu": 9000, "state": "up", "persistent": False},
                       {"ip -j -d link show": ip})
    # Up and down are all a link can be, both what the run set or found: its guard never refuses, and
    # taking down a link already down changes nothing that was set by hand.
    env = _fake_ip(host_dirs, LINE.format(mtu=9000))
    proc = subprocess.run(["sh", "-ec", link.undo or ""], capture_output=True, text=True, timeout=30,
                          env={**os.environ, **env})
    assert proc.returncode == 0 and (host_dirs / "ip.log").read_text() == "link set dev eth1 down\n"


def test_a_refused_undo_leaves_the_revert_timer_the_others(host_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The revert timer runs every link undo of the run in one shell: one refused, the next still runs
    # and the revert is still recorded. A stand-in systemd-run keeps the command for the test to fire.
    bin_dir = host_dirs / "bin"
    bin_dir.mkdir()
    timer = host_dirs / "timer"
    (bin_dir / "systemd-run").write_text("#!/bin/sh\nwhile [ \"${1#--}\" != \"$1\" ]; do shift; done\n"
                                         f"printf '%s\\0' \"$@\" > {timer}\n")
    (bin_dir / "systemd-run").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    flag = host_dirs / "reverted"
    monkeypatch.setattr(changes, "reverted_flag", lambda run_id: str(flag))
    a, b = host_dirs / "a", host_dirs / "b"
    a.write_text("0\n")
    b.write_text("0\n")
    steps = [Step("interface[eth0]", "mtu", f"echo 1 > {a}", "mtu a", netdev="eth0", lockout=True,
                  undo=setting_undo("a", f"cat {a}", "1", "0", f"echo 0 > {a}")),
             Step("interface[eth0]", "link", f"echo 1 > {b}", "link b", netdev="eth0", lockout=True,
                  undo=setting_undo("b", f"cat {b}", "1", "0", f"echo 0 > {b}"))]
    script = changes.build_script(steps, "n0nce", HOLDER.run_id, "gpu01", HOLDER, revert_seconds=15)
    proc = run_acked(script)
    assert [r.status for r in changes.parse_output(proc.stdout, "n0nce", 2).steps] == ["ok", "ok"]
    a.write_text("7\n")  # set by hand before the timer fires
    fired = subprocess.run(timer.read_text().split("\0")[:-1], capture_output=True, text=True, timeout=30)
    assert a.read_text() == "7\n" and b.read_text() == "0\n" and flag.exists()
    assert "a changed since this run set it: not restored (set 1, now 7)" in fired.stderr
