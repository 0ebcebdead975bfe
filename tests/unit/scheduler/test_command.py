"""--drain-cmd, the command scheduler: values never become shell syntax, and what it ran is recorded as
Slurm's drains are (scheduler/drain.py). The commands here really run: a small script that writes its
argv to a file stands in for scontrol."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from provisioner.scheduler import Ran, SchedulerError
from provisioner.scheduler import command as drain
from provisioner.scheduler.command import Command
from provisioner.scheduler.drain import drain_failed, settle
from provisioner.scheduler.select import SchedulerArgs

SLURM = 'scontrol update nodename={host} state=drain reason="fabnet smoke: {reason}"'

RECORDER = """import json, os, sys
with open(os.environ.get("ARGV_LOG", sys.argv[0] + ".log"), "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
print("recorded", sys.argv[1])
sys.exit(3 if "fail" in sys.argv[1:] else 0)
"""


@pytest.fixture
def recorder(tmp_path: Path) -> tuple[str, Path]:
    """A program that appends its arguments (one JSON list a line) to a log; it exits 3 for `fail`."""
    script = tmp_path / "record"
    script.write_text(f"#!{sys.executable}\n" + RECORDER)
    script.chmod(0o755)
    return str(script), Path(str(script) + ".log")


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_slurm_template() -> None:
    argv = drain.render(SLURM, {"host": "gpu03", "reason": "slow all-reduce"})
    assert argv == ["scontrol", "update", "nodename=gpu03", "state=drain", "reason=fabnet smoke: slow all-reduce"]


def test_hostile_values_stay_one_argument() -> None:
    argv = drain.render("echo {host} {reason}", {"host": "a; rm -rf /", "reason": "$(reboot) `x` \"q\""})
    assert argv == ["echo", "a; rm -rf /", "$(reboot) `x` \"q\""]


def test_unknown_field_and_empty_template() -> None:
    with pytest.raises(ValueError, match="unknown field"):
        drain.check_template("scontrol {hostname}")
    with pytest.raises(ValueError):
        drain.check_template("   ")
    with pytest.raises(ValueError, match="unknown field"):
        Command("scontrol {nodes}")


def test_run_executes_without_a_shell() -> None:
    result = Command("printf %s|{host}|{reason}").drain({"gpu03;x": "fabnet: smoke: eth1 down"})["gpu03;x"]
    assert isinstance(result, Ran)
    assert result.exit_code == 0 and result.output == "|gpu03;x|eth1 down" and result.error is None
    missing = Command("/nonexistent/scontrol {host}").drain({"gpu03": "fabnet: smoke: r"})["gpu03"]
    assert isinstance(missing, Ran) and missing.exit_code is None and "not found" in (missing.error or "")


def test_each_host_gets_its_own_argv_with_the_cause_and_busbw(recorder: tuple[str, Path], tmp_path: Path) -> None:
    program, log = recorder
    hostile = "gpu02; touch pwned"
    backend = Command(f"{program} {{host}} state=drain 'reason=fabnet smoke: {{reason}}' bw={{busbw}}",
                      fields={"gpu03": {"busbw": "0.094"}})
    answers = backend.drain({"gpu03": "fabnet: smoke: gpu03: 0.094 GB/s, below 0.5 x median",
                             hostile: "fabnet: smoke: $(id) `x`"})
    assert _calls(log) == [
        ["gpu03", "state=drain", "reason=fabnet smoke: gpu03: 0.094 GB/s, below 0.5 x median", "bw=0.094"],
        [hostile, "state=drain", "reason=fabnet smoke: $(id) `x`", "bw="],
    ]
    assert not (tmp_path / "pwned").exists()
    assert {host: (a.exit_code, a.output) for host, a in answers.items() if isinstance(a, Ran)} == {
        "gpu03": (0, "recorded gpu03"), hostile: (0, f"recorded {hostile}")}


def test_drain_failed_records_what_ran_and_a_failing_command_as_refused(recorder: tuple[str, Path]) -> None:
    program, log = recorder
    actions = drain_failed(Command(f"{program} {{host}} {{reason}}"), "audit",
                           {"gpu01": "drifted: mtu eth1", "fail": "unreachable: timed out"}, "command")
    assert _calls(log) == [["gpu01", "drifted: mtu eth1"], ["fail", "unreachable: timed out"]]
    ok, refused = actions
    assert (ok.host, ok.action, ok.detail, ok.scheduler) == ("gpu01", "drained", "fabnet: audit: drifted: mtu eth1",
                                                             "command")
    assert ok.command == f"{program} gpu01 'drifted: mtu eth1'" and ok.exit_code == 0
    assert ok.output == "recorded gpu01"
    assert (refused.action, refused.exit_code) == ("failed", 3)
    assert refused.detail == "drain refused: exit 3: recorded fail"
    assert ok.line() == (f"command: drained gpu01: fabnet: audit: drifted: mtu eth1 [{program} gpu01 "
                         "'drifted: mtu eth1' -> exit 0: recorded gpu01]")


def test_the_command_backend_cannot_resume_or_read_states() -> None:
    backend = Command("true {host}")
    with pytest.raises(SchedulerError, match="--resume-fixed needs Slurm"):
        backend.resume(["gpu01"])
    with pytest.raises(SchedulerError):
        backend.state(["gpu01"])
    with pytest.raises(SchedulerError, match="--slurm-job needs Slurm"):
        backend.nodes_of_job("12")
    assert backend.expand("gpu[01-02]") == ["gpu01", "gpu02"]


def test_settle_with_a_drain_command_asks_no_controller(recorder: tuple[str, Path], tmp_path: Path) -> None:
    """No inventory is read and no host contacted: the drain command is the scheduler."""
    program, log = recorder
    settled = settle(SchedulerArgs(drain_cmd=f"{program} {{host}} {{busbw}}"), "smoke", ["gpu01", "gpu02"],
                     {"gpu02": "slow"}, set(), tmp_path / "absent.yml", None, None,  # type: ignore[arg-type]
                     {"gpu02": {"busbw": "1.500"}})
    assert settled.error is None and not settled.failed and settled.scheduler == "command"
    assert [(a.host, a.action) for a in settled.drains] == [("gpu02", "drained")]
    assert _calls(log) == [["gpu02", "1.500"]]


def test_a_slow_command_is_stopped() -> None:
    ran = drain.run([sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.2)
    assert ran.exit_code is None and ran.error == "did not finish in 0.2 s"


def test_cause_strips_only_fabnets_prefix() -> None:
    assert drain.cause("fabnet: smoke: gpu03: slow") == "gpu03: slow"
    assert drain.cause("maintenance") == "maintenance"
    assert drain.cause("fabnet:") == "fabnet:"
