"""`port_counters` end to end: a lab node whose profile sets symbol errors drifts, naming port and counter;
a counter that grows during the audit's own interval fails the rate limit; the other nodes are in sync.

The counter files are what the lab wrote into each node's emulated sysfs; testinfra reads them back as the
oracle, and a second SSH session bumps one of them while fabnet's single exec is between its readings.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.lab import manager
from tests.e2e.conftest import Lab, lab_name

ROOT = Path(__file__).resolve().parents[2]
COUNTER = "/var/lib/fabnet-lab/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error"

PLAYBOOK = """\
- name: RDMA port health
  hosts: all
  resources:
    - port_counters:
        device: mlx5_0
        max: {symbol_error: 0, link_downed: 0, out_of_buffer: 1000}
"""
ETHTOOL_PLAYBOOK = """\
- name: RoCE lossless health
  hosts: all
  resources:
    - port_counters:
        source: ethtool
        interface: eth1
        max: {rx_discards_phy: 0, tx_pause_storm_error_events: 0}
        max_rate: {rx_prio3_pause: 0}
        interval: 3
"""
NIC_STATS = "/var/lib/fabnet-lab/sys/class/net/eth1/ethtool_stats"
RATE_PLAYBOOK = """\
- name: RDMA port health over time
  hosts: all
  resources:
    - port_counters:
        device: mlx5_0
        port: 1
        max_rate: {link_error_recovery: 0}
        interval: 3
"""


@pytest.fixture(scope="module")
def counters_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    name = lab_name("pc")
    profile = tmp_path_factory.mktemp("profile") / "profile.yml"
    profile.write_text("nodes_default: 3\nnodes: {gpu02: {port_counters: {symbol_error: 12, out_of_buffer: 7}},\n"
                       "  gpu03: {nic_stats: {rx_discards_phy: 40}}}\n")
    manager.down(name)
    try:
        yield Lab(manager.up(name, profile_path=profile))
    finally:
        manager.down(name)


def audit(lab: Lab, playbook: Path) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-m", "provisioner", "audit", str(lab.state.inventory_path),
                           "-p", str(playbook), "--json"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    return proc.returncode, json.loads(proc.stdout)


def checks_of(report: dict) -> dict[str, list[tuple[str, str, str | None]]]:
    return {host["name"]: [(c["attribute"], c["status"], c["actual"]) for r in host["resources"]
                           for c in r["checks"]] for host in report["hosts"]}


def test_symbol_errors_drift_naming_port_and_counter(counters_lab: Lab, tmp_path: Path) -> None:
    playbook = tmp_path / "ports.yml"
    playbook.write_text(PLAYBOOK)
    # Oracle: the file on the node, read over the system ssh client.
    assert counters_lab.host(counters_lab.node("gpu02")).check_output(f"cat {COUNTER}") == "12"
    assert counters_lab.host(counters_lab.node("gpu01")).check_output(f"cat {COUNTER}") == "0"
    code, report = audit(counters_lab, playbook)
    assert code == 2
    checks = checks_of(report)
    assert checks["gpu02"] == [("mlx5_0/1 symbol_error", "drift", "12"), ("mlx5_0/1 link_downed", "ok", "0"),
                               ("mlx5_0/1 out_of_buffer", "ok", "7")]
    for name in ("gpu01", "gpu03"):
        assert all(status == "ok" for _, status, _ in checks[name]), checks[name]
    assert {h["name"]: h["status"] for h in report["hosts"]} == {
        "gpu01": "in_sync", "gpu02": "drifted", "gpu03": "in_sync"}
    assert all(h["execs"] == 1 for h in report["hosts"])


def _bump_between_readings(lab: Lab, node: str, path: str, value: int) -> threading.Thread:
    """Set a counter file once fabnet's exec is in its `sleep 3` between the two readings, not before."""
    record = lab.node(node)

    def bump() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if lab.ssh(record, "pgrep -x -f 'sleep 3'", check=False).returncode == 0:
                lab.ssh(record, f"echo {value} > {path}")
                return
            time.sleep(0.05)

    bumper = threading.Thread(target=bump)
    bumper.start()
    return bumper


def test_counter_growing_during_the_interval_fails_the_rate(counters_lab: Lab, tmp_path: Path) -> None:
    playbook = tmp_path / "rate.yml"
    playbook.write_text(RATE_PLAYBOOK)
    bumper = _bump_between_readings(counters_lab, "gpu03", COUNTER.replace("symbol_error", "link_error_recovery"), 9)
    try:
        code, report = audit(counters_lab, playbook)
    finally:
        bumper.join()
    checks = checks_of(report)
    assert checks["gpu03"] == [("mlx5_0/1 link_error_recovery rate", "drift", "3/s")]
    assert checks["gpu01"] == [("mlx5_0/1 link_error_recovery rate", "ok", "0/s")]
    assert code == 2
    # Old damage that no longer grows passes a rate limit: the same audit again is in sync on gpu03.
    code, report = audit(counters_lab, playbook)
    assert checks_of(report)["gpu03"] == [("mlx5_0/1 link_error_recovery rate", "ok", "0/s")]
    assert code == 0


def test_nic_driver_statistics_catch_buffer_drops_and_pause_frames_still_coming(counters_lab: Lab,
                                                                                 tmp_path: Path) -> None:
    playbook = tmp_path / "ethtool.yml"
    playbook.write_text(ETHTOOL_PLAYBOOK)
    # Oracle: the node's own `ethtool -S` (the lab's emulation of the driver), over the system ssh client.
    assert "     rx_discards_phy: 40" in counters_lab.host(counters_lab.node("gpu03")).check_output("ethtool -S eth1")
    bumper = _bump_between_readings(counters_lab, "gpu01", f"{NIC_STATS}/rx_prio3_pause", 30)
    try:
        code, report = audit(counters_lab, playbook)
    finally:
        bumper.join()
        counters_lab.ssh(counters_lab.node("gpu01"), f"echo 0 > {NIC_STATS}/rx_prio3_pause", check=False)
    checks = checks_of(report)
    assert checks["gpu03"] == [("eth1 rx_discards_phy", "drift", "40"), ("eth1 tx_pause_storm_error_events", "ok", "0"),
                               ("eth1 rx_prio3_pause rate", "ok", "0/s")], checks["gpu03"]
    assert checks["gpu01"][-1] == ("eth1 rx_prio3_pause rate", "drift", "10/s"), checks["gpu01"]
    assert all(status == "ok" for _, status, _ in checks["gpu02"]), checks["gpu02"]
    assert code == 2 and all(h["execs"] == 1 for h in report["hosts"])
