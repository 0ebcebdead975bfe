"""`fabnet smoke` argument handling: bad input is refused before anything is contacted."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.cli import main

ROOT = Path(__file__).resolve().parents[3]
INVENTORY = ROOT / "inventories/example/hosts.yml"


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


@pytest.mark.parametrize(("args", "message"), [
    (["--sizes", "lots"], "not a size"),
    (["--sizes", "8M:1M"], "maximum is below the minimum"),
    (["--drain-cmd", "scontrol {nodes}"], "unknown field {nodes}"),
    (["--drain-cmd", "true {host}", "--drain-failed"], "cannot go with --drain-failed"),
    (["--drain-cmd", "true {host}", "--resume-fixed"], "cannot go with --resume-fixed"),
    (["--backend", "mpi"], "mpi"),
    (["--launch", "mpirun {gpus} {binary}"], "unknown field {gpus}"),
    (["--launch", "mpirun -x{forward} {binary}"], "must be a word of its own"),
    (["--launch", "mpirun '{binary}"], "launch"),
])
def test_bad_options_are_usage_errors(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(["smoke", str(INVENTORY), *args], capsys)
    assert code == 64 and message in err


@pytest.mark.parametrize("command", ["audit", "apply"])
def test_audit_and_apply_check_drain_cmd_as_smoke_does(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli([command, str(INVENTORY), "--drain-cmd", "scontrol {nodes}"], capsys)
    assert code == 64 and "unknown field {nodes}" in err


def test_a_bad_launch_template_in_the_playbook_is_invalid_input_with_its_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    playbook = tmp_path / "site.yml"
    playbook.write_text("- hosts: gpu\n  verify:\n    all_reduce:\n      runner: nccl-tests\n"
                        "      launch: mpirun {ranks} {binary}\n")
    code, _out, err = run_cli(["smoke", str(INVENTORY), "-p", str(playbook)], capsys)
    assert code == 3 and "site.yml:5" in err and "plays[0].verify.all_reduce.launch" in err
    assert "unknown field {ranks}" in err


def test_bad_verify_section_is_invalid_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    playbook = tmp_path / "site.yml"
    playbook.write_text("- hosts: gpu\n  verify:\n    all_reduce:\n      runner: mpi\n")
    code, _out, err = run_cli(["smoke", str(INVENTORY), "-p", str(playbook)], capsys)
    assert code == 3 and "site.yml:4" in err and "plays[0].verify.all_reduce.runner" in err


def test_limit_selecting_nothing_is_invalid_input(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(["smoke", str(INVENTORY), "-p", str(ROOT / "playbooks/site.yml"), "--limit",
                               "login01"], capsys)
    assert code == 3 and "no host selected" in err


def test_help_documents_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run_cli(["smoke", "--help"], capsys)
    assert code == 0
    for line in ("0  the all-reduce passed", "1  the test could not run", "2  slow (a host below the fleet",
                 "4  a host unreachable", "--slow-fraction", "--link-fraction", "--prom"):
        assert line in out


def test_json_names_the_playbook_found_by_default_and_not_run_exits_1(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """No -p: the playbook audit would find (./playbooks/site.yml) is the one used, and the JSON says so.
    The run itself is a recorded outcome: torch missing on every host, so the test never ran (exit 1)."""
    import json

    from provisioner.smoke import preflight, run
    from provisioner.smoke.settings import Settings

    seen: dict = {}

    def fake_smoke(targets, settings, options, log):  # type: ignore[no-untyped-def]
        seen["hosts"] = [t.name for t in targets]
        outcome = run.SmokeOutcome(hosts=seen["hosts"], settings=Settings(), verdict="not_run",
                                   reason="torch is not importable on every host")
        outcome.findings = [preflight.Finding("python", tuple(seen["hosts"]), "torch is not importable", "install")]
        return outcome

    monkeypatch.setattr(run, "smoke", fake_smoke)
    monkeypatch.chdir(ROOT)
    prom_file = tmp_path / "smoke.prom"
    code, out, _err = run_cli(["smoke", str(INVENTORY), "--json", "--prom", str(prom_file)], capsys)
    data = json.loads(out)
    assert code == 1 and data["exit_code"] == 1 and data["verdict"] == "not_run"
    assert data["playbook"] == "playbooks/site.yml"
    assert {h["verdict"] for h in data["hosts"]} == {"not_run"} and seen["hosts"]
    assert 'fabnet_smoke_verdict{verdict="not_run"} 1' in prom_file.read_text()
