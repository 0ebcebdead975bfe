"""Prometheus textfile: the exposition format node_exporter's textfile collector reads, checked with
prometheus_client's own parser and with Prometheus' own `promtool check metrics` where it is installed."""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from provisioner.output import prom


def _apply_outcome() -> SimpleNamespace:
    def host(name: str, status: str, changed: int, failed: int) -> SimpleNamespace:
        counts = {"changed": changed, "failed": failed, "ok": 0}
        return SimpleNamespace(name=name, status=status, execs=3, count=lambda s: counts[s])

    return SimpleNamespace(hosts=[host("gpu01", "ok", 0, 0), host('gpu"02\\', "failed", 1, 2)], seconds=1.5)


def test_apply_textfile_has_per_host_counts_and_escaped_labels() -> None:
    text = prom.apply_text(_apply_outcome(), now=1700000000)
    assert 'fabnet_apply_failed_resources{host="gpu\\"02\\\\"} 2' in text
    assert 'fabnet_apply_changed_resources{host="gpu01"} 0' in text
    assert "fabnet_apply_last_run_timestamp_seconds 1700000000\n" in text
    assert text.endswith("\n") and "# TYPE fabnet_apply_execs gauge" in text


def test_textfile_parses_with_prometheus_client() -> None:
    from prometheus_client import parser
    families = {f.name: f for f in parser.text_string_to_metric_families(prom.apply_text(_apply_outcome()))}
    failed = {s.labels["host"]: s.value for s in families["fabnet_apply_failed_resources"].samples}
    assert failed == {"gpu01": 0, 'gpu"02\\': 2}


def test_audit_textfile_counts_drift_and_errors() -> None:
    resources = [SimpleNamespace(status="drift"), SimpleNamespace(status="ok"), SimpleNamespace(status="error")]
    outcome = SimpleNamespace(hosts=[SimpleNamespace(name="gpu02", status="failed", resources=resources)], seconds=2)
    text = prom.audit_text(outcome)
    assert 'fabnet_audit_drifted_resources{host="gpu02"} 1' in text
    assert 'fabnet_audit_error_resources{host="gpu02"} 1' in text
    assert 'fabnet_audit_host_status{host="gpu02",status="failed"} 1' in text


def _audit_outcome() -> SimpleNamespace:
    resources = [SimpleNamespace(status="drift"), SimpleNamespace(status="ok")]
    return SimpleNamespace(hosts=[SimpleNamespace(name="gpu01", status="drifted", resources=resources)],
                           seconds=12.3456)


def test_values_keep_full_precision() -> None:
    """A timestamp is ten digits before the point: `%g` made 1795550000.25 into 1.79555e+09 (up to 5000 s off)."""
    from prometheus_client import parser

    for text in (prom.audit_text(_audit_outcome(), now=1795550000.25),
                 prom.apply_text(_apply_outcome(), now=1795550000.25)):
        assert "e+09" not in text and " 1795550000.25\n" in text
        values = {s.name: s.value for f in parser.text_string_to_metric_families(text) for s in f.samples}
        stamp = next(v for k, v in values.items() if k.endswith("_last_run_timestamp_seconds"))
        assert stamp == 1795550000.25
    assert "fabnet_audit_duration_seconds 12.346\n" in prom.audit_text(_audit_outcome(), now=0)
    assert "fabnet_audit_last_run_timestamp_seconds 0\n" in prom.audit_text(_audit_outcome(), now=0)


def test_special_values_are_spelled_as_prometheus_spells_them() -> None:
    assert [prom._value(v) for v in (float("nan"), float("inf"), -float("inf"), True, 3, 0.1)] == [
        "NaN", "+Inf", "-Inf", "1", "3", "0.1"]


def test_the_written_file_is_0600_and_whole(tmp_path: Path) -> None:
    target = tmp_path / "fabnet.prom"
    prom.write(target, prom.audit_text(_audit_outcome(), now=1795550000.5))
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["fabnet.prom"]


@pytest.mark.skipif(shutil.which("promtool") is None,
                    reason="promtool not installed (Debian: apt-get install prometheus)")
@pytest.mark.parametrize("kind", ["audit", "apply"])
def test_promtool_accepts_the_textfile(tmp_path: Path, kind: str) -> None:
    text = (prom.audit_text(_audit_outcome(), now=1795550000.123456) if kind == "audit"
            else prom.apply_text(_apply_outcome(), now=1795550000.123456))
    target = tmp_path / "fabnet.prom"
    prom.write(target, text)
    with target.open("rb") as handle:
        proc = subprocess.run(["promtool", "check", "metrics"], stdin=handle, capture_output=True, text=True,
                              timeout=60)
    # promtool exits 1 for lint problems as well as for unparsable text: none of either is allowed.
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "" and proc.stderr.strip() == ""


def _smoke_outcome():  # type: ignore[no-untyped-def]
    from provisioner.smoke import verdicts
    from provisioner.smoke.busbw import size_result
    from provisioner.smoke.run import SmokeOutcome
    from provisioner.smoke.settings import Settings

    hosts = ["gpu01", "gpu02", "gpu03", "gpu04"]
    rows = [size_result(1 << 20, 0.0105, 4), size_result(4 << 20, 0.067, 4)]
    pairs = {("gpu01", "gpu02"): 1.08, ("gpu03", "gpu04"): 0.094, ("gpu02", "gpu03"): 0.091, ("gpu04", "gpu01"): 1.12}
    outcome = SmokeOutcome(hosts=hosts, settings=Settings(), verdict="slow", rows=rows, avg_busbw=0.12,
                           link_mbps={"gpu01": 10000, "gpu02": 10000, "gpu03": 10000, "gpu04": None}, seconds=7.5)
    outcome.judgement = verdicts.judge(hosts, pairs, outcome.link_mbps, rows, 4, 0.12, slow_fraction=0.5,
                                       link_fraction=None, min_busbw=None, backend="gloo")
    outcome.failed_hosts = dict(outcome.judgement.slow_hosts)
    return outcome


def test_smoke_textfile_in_base_units_with_per_host_verdicts() -> None:
    from prometheus_client import parser

    text = prom.smoke_text(_smoke_outcome(), now=1795550000.5)
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in parser.text_string_to_metric_families(text) for s in f.samples}
    assert samples[("fabnet_smoke_verdict", (("verdict", "slow"),))] == 1
    assert samples[("fabnet_smoke_exit_code", ())] == 2
    assert samples[("fabnet_smoke_busbw_bytes_per_second", ())] == pytest.approx(0.12e9)
    assert samples[("fabnet_smoke_host_busbw_bytes_per_second", (("host", "gpu03"),))] == pytest.approx(0.094e9)
    assert samples[("fabnet_smoke_host_ok", (("host", "gpu03"),))] == 0
    assert samples[("fabnet_smoke_host_ok", (("host", "gpu01"),))] == 1
    assert samples[("fabnet_smoke_host_verdict", (("host", "gpu03"), ("verdict", "slow")))] == 1
    assert samples[("fabnet_smoke_size_duration_seconds", (("size_bytes", "4194304"),))] == pytest.approx(0.067)
    assert samples[("fabnet_smoke_link_speed_bytes_per_second", (("host", "gpu01"),))] == 1.25e9
    assert ("fabnet_smoke_link_speed_bytes_per_second", (("host", "gpu04"),)) not in samples  # unknown: absent
    assert samples[("fabnet_smoke_check_status", (("check", "link_rate"), ("status", "skipped")))] == 1


@pytest.mark.skipif(shutil.which("promtool") is None,
                    reason="promtool not installed (Debian: apt-get install prometheus)")
def test_promtool_accepts_the_smoke_textfile(tmp_path: Path) -> None:
    target = tmp_path / "smoke.prom"
    prom.write(target, prom.smoke_text(_smoke_outcome(), now=1795550000.123456))
    with target.open("rb") as handle:
        proc = subprocess.run(["promtool", "check", "metrics"], stdin=handle, capture_output=True, text=True,
                              timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "" and proc.stderr.strip() == ""
