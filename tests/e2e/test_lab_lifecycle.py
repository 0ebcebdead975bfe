"""`lab down` leaves nothing behind: after a normal run, and after `lab up` is killed half-way."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from provisioner.lab import manager
from provisioner.lab.naming import LabNames
from provisioner.lab.state import LabState, labs_root
from tests.e2e.conftest import Lab, lab_name


def _traces(name: str, names: LabNames) -> list[str]:
    """Everything of lab `name` visible on the host: namespaces, links, mounts, processes."""
    found = []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    found += [f"netns {line.split()[0]}" for line in netns.splitlines() if f"fabnet-{name}-" in line]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    found += [f"link {line.split(':')[1].strip()}" for line in links.splitlines() if f" {names.prefix}-" in line]
    with open("/proc/self/mounts") as handle:
        found += [f"mount {line.split()[1]}" for line in handle if f"/{name}/" in line.split()[1] or
                  line.split()[1].endswith(f"/{name}")]
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if f"fabnet-{name}-" in cmdline or f"/labs/{name}/" in cmdline:
                found.append(f"process {pid}: {cmdline[:80]}")
    if (labs_root() / name).exists():
        found.append(f"directory {labs_root() / name}")
    return found


def test_down_removes_everything_and_two_labs_coexist(lab, tmp_path) -> None:
    name = lab_name("t-down")
    profile = tmp_path / "profile.yml"
    profile.write_text(
        "nodes_default: 2\n"
        "defaults: {data_mtu: 4200, ofed: DOCA-HOST-2.9.1, nccl: 2.23.4-1+cuda12.6}\n"
        "nodes: {gpu02: {data_link_up: false}}\n"
    )
    manager.down(name)
    state = manager.up(name, profile_path=profile)
    try:
        assert state.slot != lab.state.slot
        assert [r.name for r in state.nodes] == ["gpu01", "gpu02"]
        assert _traces(name, state.names), "the lab should be visible before down"
        other = Lab(state)
        host = other.host(state.nodes[0])
        assert host.check_output("cat /sys/class/net/eth1/mtu") == "4200"
        assert host.check_output("ofed_info -s") == "DOCA-HOST-2.9.1"
        assert host.check_output("dpkg-query -W -f '${Version}' libnccl2") == "2.23.4-1+cuda12.6"
        assert "PORT_DOWN" in other.host(state.nodes[1]).check_output("ibv_devinfo")
        # The other lab is unaffected by this one.
        assert lab.ssh(lab.nodes[0], "true").returncode == 0
    finally:
        assert manager.down(name) is True
    assert _traces(name, state.names) == []
    assert manager.down(name) is False  # idempotent
    assert lab.ssh(lab.nodes[0], "true").returncode == 0


def test_down_cleans_up_after_lab_up_is_killed_half_way() -> None:
    name = lab_name("t-kill")
    manager.down(name)
    proc = subprocess.Popen([sys.executable, "-m", "provisioner", "lab", "up", "--name", name, "--nodes", "3"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Wait until it has created containers (or at least namespaces), then kill it without warning.
    deadline = time.monotonic() + 60
    state = None
    while time.monotonic() < deadline:
        state = LabState.load(name)
        if state is not None and any(r.pid for r in state.nodes):
            break
        time.sleep(0.05)
    assert state is not None, "lab up never recorded its state"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert _traces(name, state.names), "the killed lab should have left something to clean"
    assert manager.down(name) is True
    assert _traces(name, state.names) == []
