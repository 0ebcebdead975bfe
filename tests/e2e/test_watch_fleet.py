"""`fabnet watch --every 5s --for 80s` on 8 healthy nodes, with the faults an operator meets, in one run:
a sysctl changed by hand, a port counter raised (a failing cable), a switch port flapped, sshd killed
and restarted with its sessions, a management link cut for 20 s. Each fault is reported once with its
host (and port); nothing else is reported about any node; the other nodes keep their 5 s schedule
throughout; the watch ends by itself after its 80 s, cleanly. The faults are over within its first 45 s;
the rest shows the schedule held after them.

Faults are made without fabnet, as in test_watch.py. test_watch.py checks each behaviour apart, on 3
nodes at 2 s; this is the scale an operator runs it at.
"""

from __future__ import annotations

import itertools
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.lab import manager
from tests.e2e.conftest import Lab, healthy_profile, lab_name
from tests.e2e.test_watch import PLAYBOOK, SYSCTL, SYSFS, Watch

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

EVERY = 5.0
RUN_FOR = 80.0
NODES = [f"gpu0{i}" for i in range(1, 9)]
FLAPPED, COUNTED, DRIFTED, RESTARTED, CUT = "gpu01", "gpu02", "gpu03", "gpu04", "gpu05"
QUIET = ["gpu06", "gpu07", "gpu08"]


@pytest.fixture(scope="module")
def lab8(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    name = lab_name("wfl")
    manager.down(name)
    try:
        yield Lab(manager.up(name, 8, healthy_profile(tmp_path_factory.mktemp("profile"), 8)))
    finally:
        manager.down(name)


def test_eight_nodes_for_80_seconds_each_fault_once_and_nothing_else(lab8: Lab, tmp_path: Path) -> None:
    node = {name: lab8.node(name) for name in NODES}
    mgmt = lab8.state.names.mgmt_port(node[CUT].index)
    data = lab8.state.names.data_port(node[FLAPPED].index)
    watch = Watch(lab8, tmp_path, "--every", f"{EVERY:g}s", "--for", f"{RUN_FOR:g}s",
                  playbook_text=PLAYBOOK + "    - mtu_uniform: {interface: eth1}\n")
    started = time.monotonic()
    try:
        for name in NODES:
            watch.wait_for(lambda c, n=name: c["host"] == n and c["kind"] == "watching")
        time.sleep(EVERY)  # a whole cycle of every host before the first fault

        lab8.ssh(node[DRIFTED], f"sysctl -w {SYSCTL}=0")
        changed = time.monotonic()
        lab8.ssh(node[COUNTED], f"echo 40 > {SYSFS}/symbol_error")
        subprocess.run(f"ip link set {data} down && sleep 0.2 && ip link set {data} up", shell=True, check=True)
        arrived, drift = watch.wait_for(lambda c: c["kind"] == "drift_new")
        assert arrived - changed < EVERY + 4  # within one interval (and that cycle's own time)

        # sshd and every session it holds killed, then started again, outside its own cgroup.
        lab8.ssh(node[RESTARTED], "systemd-run --no-block --collect sh -c "
                                  "'sleep 0.5; systemctl kill -s KILL ssh.service; systemctl restart ssh.service'")
        subprocess.run(["ip", "link", "set", mgmt, "down"], check=True)
        cut = time.monotonic()
        watch.wait_for(lambda c: c["host"] == CUT and c["kind"] == "host_down", timeout=EVERY + 10)
        time.sleep(max(0.0, 20 - (time.monotonic() - cut)))
        subprocess.run(["ip", "link", "set", mgmt, "up"], check=True)
        watch.wait_for(lambda c: c["host"] == CUT and c["kind"] == "host_back", timeout=60)
        # The watch ends by itself when its time is up.
        code = watch.proc.wait(timeout=max(5.0, RUN_FOR - (time.monotonic() - started) + 30))
        watch._reader.join(timeout=5)
    finally:
        subprocess.run(["ip", "link", "set", mgmt, "up"], check=False)
        if watch.proc.poll() is None:
            watch.stop()
        lab8.ssh(node[DRIFTED], f"sysctl -w {SYSCTL}=1", check=False)
        lab8.ssh(node[COUNTED], f"echo 0 > {SYSFS}/symbol_error", check=False)
    assert code == 0

    by_host = {name: [(k[1], k[2]) for k in watch.kinds() if k[0] == name] for name in NODES}
    assert by_host[DRIFTED] == [("drift_new", f"sysctl sysctl[{SYSCTL}]: value")], by_host
    assert drift["host"] == DRIFTED and "0 (want 1)" in str(drift["detail"])
    assert by_host[COUNTED] == [("counter_rose", "mlx5_0/1 symbol_error")], by_host
    assert by_host[FLAPPED] in ([("link_flap", "eth1")], [("link_down", "eth1"), ("link_up", "eth1")]), by_host
    restarted = [kind for kind, _ in by_host[RESTARTED]]
    assert restarted in (["reconnected"], ["host_down", "host_back"]), by_host
    # Its management link did go down and up (the node counts it), and it was unreachable meanwhile.
    assert sorted(by_host[CUT]) == [("host_back", ""), ("host_down", ""), ("link_flap", "eth0")], by_host
    assert all(by_host[name] == [] for name in QUIET), by_host

    with sqlite3.connect(watch.history) as db:
        assert db.execute("SELECT finished IS NOT NULL FROM runs").fetchall() == [(1,)]
        for name in [FLAPPED, COUNTED, DRIFTED, *QUIET]:  # the faults elsewhere held up no one's schedule
            ats = [row[0] for row in db.execute("SELECT at FROM results WHERE host = ? ORDER BY at", (name,))]
            gaps = [b - a for a, b in itertools.pairwise(ats)]
            assert len(ats) >= RUN_FOR / EVERY - 3 and max(gaps) < EVERY + 1.5, (name, gaps)
