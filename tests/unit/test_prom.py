"""Prometheus textfile: the exposition format node_exporter's textfile collector reads, checked with
prometheus_client's own parser where it is installed."""

from __future__ import annotations

from types import SimpleNamespace

from provisioner import prom


def _apply_outcome() -> SimpleNamespace:
    def host(name: str, status: str, changed: int, failed: int) -> SimpleNamespace:
        counts = {"changed": changed, "failed": failed, "ok": 0}
        return SimpleNamespace(name=name, status=status, execs=3, count=lambda s: counts[s])

    return SimpleNamespace(hosts=[host("gpu01", "ok", 0, 0), host('gpu"02\\', "failed", 1, 2)], seconds=1.5)


def test_apply_textfile_has_per_host_counts_and_escaped_labels() -> None:
    text = prom.apply_text(_apply_outcome(), now=1700000000)
    assert 'fabnet_apply_failed_resources{host="gpu\\"02\\\\"} 2' in text
    assert 'fabnet_apply_changed_resources{host="gpu01"} 0' in text
    assert "fabnet_apply_last_run_timestamp_seconds 1.7e+09" in text
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
