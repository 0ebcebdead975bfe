"""What smoke drained is one record whichever backend did it: --drain-cmd (a local command) and
--drain-failed (Slurm on the controller) give the same JSON fields and the same kind of stderr line.

The Slurm side runs its real script in a local bash against stand-ins for scontrol (test_slurm's
LocalSession); the command side runs a real local program."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from provisioner.commands import scheduling
from provisioner.scheduler.command import Command
from provisioner.scheduler.drain import drain_failed, smoke_causes
from provisioner.scheduler.select import SchedulerArgs
from provisioner.scheduler.slurm import Slurm
from provisioner.smoke import output
from provisioner.smoke.run import SmokeOutcome
from provisioner.smoke.settings import Settings
from provisioner.smoke.verdicts import FleetCheck, HostFigure, Judgement
from tests.unit.scheduler.test_slurm import LocalSession

CAUSE = "gpu03: 0.094 GB/s with its best partner gpu04, fleet median 1.100 GB/s, below 0.5 x median"


def slow_gpu03() -> SmokeOutcome:
    outcome = SmokeOutcome(hosts=["gpu01", "gpu02", "gpu03"], settings=Settings(min_busbw=0.5),
                           verdict="slow", reason=CAUSE, backend="gloo")
    outcome.failed_hosts = {"gpu03": CAUSE}
    return outcome


def with_figure(outcome: SmokeOutcome) -> SmokeOutcome:
    figure = HostFigure("gpu03", 0.094, "gpu04", True, CAUSE)
    outcome.judgement = Judgement([figure], [FleetCheck("per_host", "slow", CAUSE)])
    return outcome


def _json(outcome: SmokeOutcome) -> list[dict[str, object]]:
    return output.to_json(outcome, inventory="inv.yml", playbook=None, limit=None)["drained"]  # type: ignore[no-any-return]


def test_drain_cmd_goes_through_the_scheduler_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "argv"
    program = tmp_path / "drain"
    program.write_text(f"#!{sys.executable}\nimport sys\nopen({str(log)!r}, 'a').write(repr(sys.argv[1:]) + '\\n')\n"
                       "print('drained', sys.argv[1])\n")
    program.chmod(0o755)
    outcome = with_figure(slow_gpu03())
    code = scheduling.settle(SchedulerArgs(drain_cmd=f"{program} {{host}} {{reason}} {{busbw}}"), "smoke", outcome,
                             tmp_path / "absent.yml", None, None, outcome.exit_code)  # type: ignore[arg-type]
    assert code == 2  # the smoke's own code: the drain went through
    assert log.read_text() == repr(["gpu03", CAUSE, "0.094"]) + "\n"
    [record] = _json(outcome)
    assert record["host"] == "gpu03" and record["action"] == "drained" and record["scheduler"] == "command"
    assert record["exit_code"] == 0 and record["output"] == "drained gpu03"
    assert record["detail"] == f"fabnet: smoke: {CAUSE}"
    err = capsys.readouterr().err
    assert err.startswith(f"command: drained gpu03: fabnet: smoke: {CAUSE} [")


def test_a_failing_drain_cmd_exits_as_a_refused_slurm_drain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outcome = slow_gpu03()
    code = scheduling.settle(SchedulerArgs(drain_cmd="false {host}"), "smoke", outcome, tmp_path / "absent.yml",
                             None, None, outcome.exit_code)  # type: ignore[arg-type]
    assert code == scheduling.EXIT_SCHEDULER
    [record] = _json(outcome)
    assert record["action"] == "failed" and record["exit_code"] == 1
    assert "command: failed gpu03: drain refused: exit 1" in capsys.readouterr().err


def test_drain_cmd_and_drain_failed_give_the_same_record(tmp_path: Path) -> None:
    by_command, by_slurm = slow_gpu03(), slow_gpu03()
    by_command.drained = drain_failed(Command("true {host}"), "smoke", smoke_causes(by_command), "command")
    by_slurm.drained = drain_failed(Slurm(LocalSession(tmp_path)), "smoke", smoke_causes(by_slurm), "slurm")
    command_json, slurm_json = _json(by_command), _json(by_slurm)
    assert [set(r) for r in command_json] == [set(r) for r in slurm_json]
    assert {"host", "command", "exit_code", "output"} <= set(command_json[0])  # the fields --drain-cmd had
    for record, scheduler in ((command_json[0], "command"), (slurm_json[0], "slurm")):
        assert (record["host"], record["action"], record["detail"], record["scheduler"]) == (
            "gpu03", "drained", f"fabnet: smoke: {CAUSE}", scheduler)
        # one stderr line each, the same words; the command backend adds what it ran
        [action] = by_command.drained if scheduler == "command" else by_slurm.drained
        assert action.line().startswith(f"{scheduler}: drained gpu03: fabnet: smoke: {CAUSE}")


def test_hosts_the_post_mortem_finds_unreachable_are_unreachable_to_a_drain(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run failed on every host alike and the re-check could not reach gpu02: the drain reads it as
    unreachable (so a node power saving has off is left), as when the pre-flight could not reach it."""
    from provisioner.smoke import run

    def preflight_again(targets: object, settings: object, session_of: object, again: SmokeOutcome) -> dict:
        again.unreachable["gpu02"] = "ssh: connect to host 198.18.1.2 port 22: Connection timed out"
        return {}

    monkeypatch.setattr(run, "run_preflight", preflight_again)
    outcome = SmokeOutcome(hosts=["gpu01", "gpu02"], settings=Settings(), verdict="failed", reason="all hung")
    run._post_mortem([], Settings(), lambda name: None, outcome, lambda message: None)  # type: ignore[arg-type]
    assert smoke_causes(outcome) == {"gpu02": "unreachable: ssh: connect to host 198.18.1.2 port 22: Connection "
                                              "timed out"}
