"""Prometheus metrics of `fabnet watch`: served over HTTP (--prom-port) and written as a node_exporter
textfile (--prom), both from one registry whose collector reads the watch's latest state at scrape time.

Names follow Prometheus' conventions: base units (seconds, bytes per second), `_total` for counters (the
ports' own error counters are counters: they only grow until a reset), gauges for the rest.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from provisioner.output.files import write_report


@dataclass
class HostMetrics:
    up: bool = False
    drift_by_kind: dict[str, int] = field(default_factory=dict)
    counters: dict[tuple[str, str], int] = field(default_factory=dict)  # (DEVICE/PORT, counter) -> value
    rates: dict[tuple[str, str], float] = field(default_factory=dict)  # per second, over the last cycle
    carrier_changes: dict[str, int] = field(default_factory=dict)
    last_success: float | None = None  # seconds since the epoch
    cycle_seconds: float = 0.0
    busbw: float | None = None  # GB/s, the last smoke's
    changes: dict[str, int] = field(default_factory=dict)  # change kind -> how many reported
    # Every RDMA device ("mlx5_0") and port ("mlx5_0/1") listed on the host since the watch began -> 1 while it is
    # listed, 0 once it is gone: a gone device's counter series just stop, and a 0 is what an alert can match.
    present: dict[str, int] = field(default_factory=dict)


class WatchState(Collector):
    """Every host's latest metrics; updated by the hosts' cycles, read by scrapes (both under a lock)."""

    def __init__(self) -> None:
        self._hosts: dict[str, HostMetrics] = {}
        self._lock = threading.Lock()

    def update(self, host: str, metrics: HostMetrics) -> None:
        with self._lock:
            self._hosts[host] = metrics

    def get(self, host: str) -> HostMetrics:
        with self._lock:
            return self._hosts.get(host) or HostMetrics()

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        with self._lock:
            hosts = dict(self._hosts)
        yield from families(hosts)


def families(hosts: Mapping[str, HostMetrics]) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    up = GaugeMetricFamily("fabnet_watch_host_up", "1 when the host's last cycle reached it.", labels=["host"])
    drift = GaugeMetricFamily("fabnet_watch_drift_items", "Checks not in sync with the playbook (drift or "
                              "unreadable), per host and resource kind.", labels=["host", "kind"])
    errors = CounterMetricFamily("fabnet_watch_port_errors", "RDMA port error counters as the port reports them.",
                                 labels=["host", "port", "counter"])
    rates = GaugeMetricFamily("fabnet_watch_port_errors_per_second", "Rise of each port error counter per "
                              "second over the host's last cycle.", labels=["host", "port", "counter"])
    carrier = CounterMetricFamily("fabnet_watch_carrier_changes", "Times each netdev's link lost or regained "
                                  "its carrier (since the host booted).", labels=["host", "interface"])
    success = GaugeMetricFamily("fabnet_watch_last_success_timestamp_seconds", "When the host's last "
                                "successful cycle ended.", labels=["host"])
    duration = GaugeMetricFamily("fabnet_watch_cycle_duration_seconds", "How long the host's last cycle took.",
                                 labels=["host"])
    busbw = GaugeMetricFamily("fabnet_smoke_busbw_bytes_per_second", "Average bus bandwidth of the last smoke "
                              "test the host took part in.", labels=["host"])
    changes = CounterMetricFamily("fabnet_watch_changes", "Changes watch reported, per host and kind.",
                                  labels=["host", "kind"])
    devices = GaugeMetricFamily("fabnet_watch_rdma_device_present", "1 while the RDMA device is listed under "
                                "class/infiniband, 0 once it is gone (unbound, off the bus, driver unloaded).",
                                labels=["host", "device"])
    ports = GaugeMetricFamily("fabnet_watch_rdma_port_present", "1 while the RDMA port is listed, 0 once it is "
                              "gone.", labels=["host", "port"])
    for host, m in sorted(hosts.items()):
        up.add_metric([host], 1 if m.up else 0)
        for kind, count in sorted(m.drift_by_kind.items()):
            drift.add_metric([host, kind], count)
        for (port, counter), value in sorted(m.counters.items()):
            errors.add_metric([host, port, counter], value)
            rates.add_metric([host, port, counter], m.rates.get((port, counter), 0.0))
        for iface, value in sorted(m.carrier_changes.items()):
            carrier.add_metric([host, iface], value)
        if m.last_success is not None:
            success.add_metric([host], m.last_success)
        duration.add_metric([host], m.cycle_seconds)
        if m.busbw is not None:
            busbw.add_metric([host], m.busbw * 1e9)
        for kind, count in sorted(m.changes.items()):
            changes.add_metric([host, kind], count)
        for name, listed in sorted(m.present.items()):
            (ports if "/" in name else devices).add_metric([host, name], listed)
    yield from (up, drift, errors, rates, carrier, success, duration, busbw, changes, devices, ports)


def registry(state: WatchState) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(state)
    return reg


def serve(reg: CollectorRegistry, port: int, addr: str) -> None:
    """Serve /metrics in prometheus_client's own daemon thread, for as long as the process runs."""
    start_http_server(port, addr=addr, registry=reg)


def text(reg: CollectorRegistry) -> str:
    return generate_latest(reg).decode()


def write_textfile(path: Path, reg: CollectorRegistry) -> None:
    write_report(path, text(reg))
