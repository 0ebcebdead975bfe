"""The command line as a user meets it: `fabnet parse` on every real sample, exit codes, help text."""

from __future__ import annotations

import json

import pytest

from provisioner import parsers
from provisioner.cli import main
from tests.unit.parsers._samples import SAMPLE_KINDS, SAMPLES, read


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


@pytest.mark.parametrize("sample", sorted(SAMPLE_KINDS))
def test_parse_prints_what_the_parser_understands_of_every_sample(sample: str, capsys) -> None:
    code, out, _ = run_cli(["parse", SAMPLE_KINDS[sample], str(SAMPLES / sample)], capsys)
    assert code == 0
    assert json.loads(out) == parsers.parse(SAMPLE_KINDS[sample], read(sample))


def test_parse_pins_the_values_operators_look_for(capsys) -> None:
    _, out, _ = run_cli(["parse", "ofed_info", str(SAMPLES / "ofed_info-s-1.txt")], capsys)
    assert json.loads(out)["version"] == "23.07-0.5.1.2"
    assert json.loads(out)["flavor"] == "MLNX_OFED_LINUX"
    _, out, _ = run_cli(["parse", "mlnx_qos", str(SAMPLES / "mlnx_qos-1.txt")], capsys)
    qos = json.loads(out)
    assert (qos["trust"], qos["pfc_enabled"], qos["dscp2prio"]["26"]) == ("dscp", [3], 3)
    _, out, _ = run_cli(["parse", "nccl_tests", str(SAMPLES / "all_reduce_perf-1.txt")], capsys)
    assert json.loads(out)["avg_busbw"] == pytest.approx(53.7098)


def test_parse_reads_standard_input(capsys, monkeypatch) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"OFED-internal-4.7-3.2.9\n")))
    code, out, _ = run_cli(["parse", "ofed_info", "-"], capsys)
    assert code == 0 and json.loads(out)["flavor"] == "OFED-internal"


def test_unparseable_output_is_exit_3_naming_the_line(tmp_path, capsys) -> None:
    bad = tmp_path / "qos.txt"
    bad.write_text("DCBX mode: OS controlled\nthis is not mlnx_qos output\n")
    code, out, err = run_cli(["parse", "mlnx_qos", str(bad)], capsys)
    assert code == 3 and out == ""
    assert "line 2" in err


def test_unknown_kind_lists_the_known_ones(tmp_path, capsys) -> None:
    code, _, err = run_cli(["parse", "ethtool", str(SAMPLES / "mlnx_qos-1.txt")], capsys)
    assert code == 3 and "mlnx_qos" in err


def test_usage_errors_exit_64(capsys) -> None:
    code, _, err = run_cli(["audit"], capsys)
    assert code == 64 and "INVENTORY" in err


def test_help_teaches_exit_codes(capsys) -> None:
    code, out, _ = run_cli(["audit", "--help"], capsys)
    assert code == 0
    for text in ("Exit codes", "drift found", "unreachable", "--json", "--junit", "--limit", "--forks"):
        assert text in out


def test_parse_of_a_truncated_sample_returns_the_complete_part(tmp_path, capsys) -> None:
    lines = read("nvidia-smi-topo-4.txt").splitlines(keepends=True)
    cut = tmp_path / "topo.txt"
    cut.write_text("".join(lines[:6]))  # the paste stops after NIC0's row
    code, out, _ = run_cli(["parse", "nvidia_smi_topo", str(cut)], capsys)
    data = json.loads(out)
    assert code == 0
    assert (data["complete"], data["missing"]) == (False, ["rows for NIC1..NIC3"])
    assert list(data["matrix"]) == ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0"]


@pytest.mark.parametrize("kind", ["nccl_tests", "nvidia_smi_topo", "ibstat", "perfquery", "nccl_debug"])
def test_parse_of_text_that_is_not_the_tool_is_exit_3_naming_the_line(kind: str, tmp_path, capsys) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("\nSee the runbook for this cluster.\nNothing else here.\n")
    code, out, err = run_cli(["parse", kind, str(other)], capsys)
    assert code == 3 and out == ""
    assert "at line 2" in err
