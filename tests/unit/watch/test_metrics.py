"""Watch's Prometheus metrics: served over loopback and parsed with prometheus_client's parser; the
textfile passes `promtool check metrics` where promtool is installed."""

from __future__ import annotations

import shutil
import socket
import stat
import subprocess
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from provisioner.output import watch_metrics
from provisioner.watch import loop


def _state() -> watch_metrics.WatchState:
    state = watch_metrics.WatchState()
    state.update('gpu"01', watch_metrics.HostMetrics(
        up=True, drift_by_kind={"sysctl": 2}, counters={("mlx5_0/1", "symbol_error"): 40},
        rates={("mlx5_0/1", "symbol_error"): 20.0}, carrier_changes={"eth1": 4}, last_success=1795550000.25,
        cycle_seconds=0.125, busbw=12.5, changes={"drift_new": 1},
        present={"mlx5_0": 1, "mlx5_0/1": 1, "mlx5_1": 0, "mlx5_1/1": 0}))
    state.update("gpu02", watch_metrics.HostMetrics(up=False))
    return state


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_served_metrics_parse_with_base_units_and_total_counters() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    watch_metrics.serve(watch_metrics.registry(_state()), port, "127.0.0.1")
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    samples = _samples(text)
    host = ("host", 'gpu"01')
    assert samples[("fabnet_watch_drift_items", (host, ("kind", "sysctl")))] == 2
    assert samples[("fabnet_watch_port_errors_total", (("counter", "symbol_error"), host, ("port", "mlx5_0/1")))] == 40
    assert samples[("fabnet_watch_port_errors_per_second",
                    (("counter", "symbol_error"), host, ("port", "mlx5_0/1")))] == 20.0
    assert samples[("fabnet_smoke_busbw_bytes_per_second", (host,))] == 12.5e9
    assert samples[("fabnet_watch_last_success_timestamp_seconds", (host,))] == 1795550000.25
    assert samples[("fabnet_watch_host_up", (("host", "gpu02"),))] == 0
    assert ("fabnet_watch_last_success_timestamp_seconds", (("host", "gpu02"),)) not in samples
    assert "# TYPE fabnet_watch_carrier_changes_total counter" in text
    assert samples[("fabnet_watch_rdma_device_present", (("device", "mlx5_1"), host))] == 0
    assert samples[("fabnet_watch_rdma_port_present", (host, ("port", "mlx5_0/1")))] == 1


def test_a_device_gone_stays_as_a_zero_and_an_untrusted_listing_changes_nothing() -> None:
    first = loop._present({}, frozenset({"mlx5_0", "mlx5_0/1", "mlx5_1", "mlx5_1/1"}))
    assert first == {"mlx5_0": 1, "mlx5_0/1": 1, "mlx5_1": 1, "mlx5_1/1": 1}
    gone = loop._present(first, frozenset({"mlx5_0", "mlx5_0/1"}))
    assert gone == {"mlx5_0": 1, "mlx5_0/1": 1, "mlx5_1": 0, "mlx5_1/1": 0}
    assert loop._present(gone, None) == gone  # an output cut short says nothing of what is absent
    assert loop._present(gone, frozenset({"mlx5_0", "mlx5_0/1", "mlx5_1", "mlx5_1/1"})) == first


def test_textfile_is_0600_and_passes_promtool(tmp_path: Path) -> None:
    target = tmp_path / "fabnet.prom"
    watch_metrics.write_textfile(target, watch_metrics.registry(_state()))
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    changes = ("fabnet_watch_changes_total", (("host", 'gpu"01'), ("kind", "drift_new")))
    assert _samples(target.read_text())[changes] == 1
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed")
    check = subprocess.run([promtool, "check", "metrics"], input=target.read_text(), capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
