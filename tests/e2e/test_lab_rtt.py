"""`fabnet lab up --rtt`: ping and SSH from this machine see the round-trip time, per node where the
profile says so; the data network between nodes does not; `lab down` leaves no delay line behind."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.lab import manager
from provisioner.lab.state import LabState
from tests.e2e.conftest import Lab, lab_name
from tests.e2e.test_lab_lifecycle import _traces

NAME = lab_name("rtt")


@pytest.fixture(scope="module")
def rtt_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    profile = tmp_path_factory.mktemp("rtt") / "profile.yml"
    profile.write_text("nodes_default: 2\nnodes:\n  gpu02:\n    mgmt_rtt_ms: 60\n")
    manager.down(NAME)
    proc = subprocess.run([sys.executable, "-m", "provisioner", "lab", "up", "--name", NAME, "--nodes", "2",
                           "--profile", str(profile), "--rtt", "20ms"], capture_output=True, text=True, timeout=300)
    try:
        assert proc.returncode == 0, proc.stderr
        state = LabState.load(NAME)
        assert state is not None and state.rtt_ms == 20.0
        yield Lab(state)
    finally:
        manager.down(NAME)


def _ping_min_ms(args: list[str]) -> float:
    out = subprocess.run([*args, "-c", "5", "-i", "0.2", "-W", "2"], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    match = re.search(r"= ([\d.]+)/", out)
    assert match, out
    return float(match.group(1))


def _connect_ms(ip: str) -> float:
    best = 1e9
    for _ in range(5):
        started = time.perf_counter()
        with socket.create_connection((ip, 22), timeout=5):
            best = min(best, (time.perf_counter() - started) * 1000)
    return best


@pytest.mark.skipif(shutil.which("ping") is None, reason="needs ping (iputils-ping, scripts/bootstrap.sh)")
def test_ping_from_this_machine_sees_each_nodes_round_trip_time(rtt_lab: Lab) -> None:
    first, second = rtt_lab.nodes
    assert 19.5 <= _ping_min_ms(["ping", first.mgmt_ip]) < 40
    assert 59.5 <= _ping_min_ms(["ping", second.mgmt_ip]) < 90


def test_tcp_and_ssh_see_it(rtt_lab: Lab) -> None:
    first, second = rtt_lab.nodes
    assert 19.5 <= _connect_ms(first.mgmt_ip) < 40
    assert 59.5 <= _connect_ms(second.mgmt_ip) < 90
    started = time.perf_counter()
    assert rtt_lab.ssh(first, "true").returncode == 0
    # TCP handshake, SSH version exchange, key exchange, auth, channel, exec, close: several round trips.
    assert time.perf_counter() - started > 0.1


@pytest.mark.skipif(shutil.which("ping") is None, reason="needs ping (iputils-ping, scripts/bootstrap.sh)")
def test_the_data_network_is_not_delayed(rtt_lab: Lab) -> None:
    first, second = rtt_lab.nodes
    assert _ping_min_ms(["ip", "netns", "exec", first.netns, "ping", second.data_ip]) < 5


def test_down_removes_the_delay_line(rtt_lab: Lab) -> None:
    state = rtt_lab.state
    assert state.delay_pid is not None and Path(f"/proc/{state.delay_pid}").exists()
    manager.down(NAME)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _traces(NAME, state.names):
        time.sleep(0.1)
    assert _traces(NAME, state.names) == []
