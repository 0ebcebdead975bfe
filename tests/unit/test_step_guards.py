"""Compare-and-swap right before each step: an edit made while an earlier step ran (a package install
that takes minutes) is a conflict for the later step that would overwrite it, while a target an earlier
step of the same run changed is expected as that step left it. The change script runs for real in
/bin/sh against temporary directories; the edits "by hand" are made by a step that names no target."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from provisioner.apply import changes
from provisioner.resources.steps import Expect, Step, file_step
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
