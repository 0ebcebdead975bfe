"""Reading back what a change script did after its exec ended early: the host's journal, merged with
what the exec's own output had already told; the script run for real in a shell against a temp tree."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from provisioner.apply import changes, recovery

RUN = "20261125T160000Z-abcdef"
NONCE = "n0nce"


def _output(started: list[int], journal: list[dict], running: bool = False) -> str:
    tag = f"@@fabnet:{NONCE}"
    lines = [f"{tag}:running@@"] if running else []
    lines += [f"{tag}:started@@", *[f"{i:04d}" for i in started], f"{tag}:journal@@"]
    lines += [json.dumps({"run": RUN, "step": r["step"], "outcome": r["outcome"], "rc": r.get("rc")}) for r in journal]
    return "\n".join([*lines, f"{tag}:end@@"]) + "\n"


def test_the_hosts_journal_fills_in_what_the_cut_output_did_not_say() -> None:
    known = [changes.StepResult("ok", 0, "wrote"), changes.StepResult("not_run"), changes.StepResult("not_run")]
    out = _output([0, 1, 2], [{"step": 0, "outcome": "ok", "rc": 0}, {"step": 1, "outcome": "ok", "rc": 0},
                              {"step": 2, "outcome": "failed", "rc": 3}])
    read = recovery.parse(out, NONCE, 3, known)
    assert read is not None and not read.running
    assert [r.status for r in read.steps] == ["ok", "ok", "failed"]
    assert read.steps[0].output == "wrote"  # what the exec itself reported is kept
    assert read.steps[2].exit_code == 3


def test_a_step_started_without_an_outcome_is_unknown_and_later_ones_not_run() -> None:
    # A kill mid-step 1: its undo was written (started), no outcome; step 2 never began.
    out = _output([0, 1], [{"step": 0, "outcome": "ok", "rc": 0}])
    read = recovery.parse(out, NONCE, 3, [changes.StepResult("not_run")] * 3)
    assert read is not None
    assert [r.status for r in read.steps] == ["ok", "unknown", "not_run"]


def test_a_script_still_running_leaves_every_unrecorded_step_unknown() -> None:
    out = _output([0], [{"step": 0, "outcome": "ok", "rc": 0}], running=True)
    read = recovery.parse(out, NONCE, 3, [changes.StepResult("not_run")] * 3)
    assert read is not None and read.running
    assert [r.status for r in read.steps] == ["ok", "unknown", "unknown"]


def test_an_incomplete_read_is_no_answer_and_a_cut_journal_line_is_no_outcome() -> None:
    assert recovery.parse(f"@@fabnet:{NONCE}:started@@\n", NONCE, 1, [changes.StepResult("not_run")]) is None
    out = _output([0], []).replace(f"@@fabnet:{NONCE}:end@@", '{"run":"' + RUN + '","step":0,"outc\n'
                                   + f"@@fabnet:{NONCE}:end@@")
    read = recovery.parse(out, NONCE, 1, [changes.StepResult("not_run")])
    assert read is not None and [r.status for r in read.steps] == ["unknown"]


def test_the_read_script_runs_in_a_shell_and_finds_only_its_own_run(tmp_path: Path, monkeypatch) -> None:
    journal = tmp_path / "journal.jsonl"
    backups = tmp_path / "backups"
    (backups / RUN / "undo").mkdir(parents=True)
    (backups / RUN / "undo" / "0000").write_text("# undo\n")
    other = "20261125T150000Z-000000"
    journal.write_text("\n".join([
        json.dumps({"run": other, "step": 0, "outcome": "failed", "rc": 1}, separators=(",", ":")),
        json.dumps({"run": RUN, "step": 0, "host": "gpu01", "outcome": "ok", "rc": 0}, separators=(",", ":")),
    ]) + "\n")
    monkeypatch.setattr(changes, "JOURNAL", str(journal))
    monkeypatch.setattr(changes, "BACKUP_ROOT", str(backups))
    monkeypatch.setattr(changes, "LOCK_DIR", str(tmp_path / "lock"))
    out = subprocess.run(["sh", "-c", recovery.script(RUN, NONCE, wait=1)], capture_output=True, text=True,
                         timeout=30).stdout
    read = recovery.parse(out, NONCE, 2, [changes.StepResult("not_run")] * 2)
    assert read is not None and not read.running
    assert [r.status for r in read.steps] == ["ok", "not_run"]


def test_the_change_script_journals_each_step_with_its_number() -> None:
    from provisioner.resources.steps import command_step

    steps = [command_step("sysctl[a]", "set", ["true"], phase=1), command_step("sysctl[b]", "set", ["true"], phase=1)]
    script = changes.build_script(steps, NONCE, RUN, "gpu01", changes.Holder(RUN, "me@here", "now"))
    assert '"step":0' in script and '"step":1' in script
