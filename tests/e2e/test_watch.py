"""`fabnet watch` on a 3-node lab, every 2 s: each fault is reported once, with host and port, and
nothing else; a node down or restarting its sshd does not hold up the others; the history survives.

Faults are made the way they happen, without fabnet: a sysctl changed by hand over the system ssh client,
a port counter file of the emulated RDMA device raised (a failing cable), the node's port on the lab
switch set down and up (a flap), sshd killed with its sessions, the management link cut for 10 s.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.lab import manager
from tests.e2e.conftest import Lab, lab_name

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SYSFS = "/var/lib/fabnet-lab/sys/class/infiniband/mlx5_0/ports/1/counters"
NET = "/var/lib/fabnet-lab/sys/class/net"  # the nodes' stand-in for a NIC's sysfs (fabnet_sysfs_root)
PCI = "/var/lib/fabnet-lab/sys/devices/pci0000:00/0000:99:00.0"
BUS = "/var/lib/fabnet-lab/sys/bus/pci/devices"
SYSCTL = "net.ipv4.conf.all.arp_ignore"
PLAYBOOK = f"""\
- name: watched
  hosts: all
  resources:
    - sysctl: {{name: {SYSCTL}, value: 1}}
    - sysctl: {{name: net.ipv4.conf.all.arp_announce, value: 2}}
"""


@pytest.fixture(scope="module")
def watch_lab() -> Iterator[Lab]:
    name = lab_name("wat")
    manager.down(name)
    try:
        yield Lab(manager.up(name, 3))
    finally:
        manager.down(name)


class Watch:
    """A `fabnet watch --json` process; its changes are collected, with when each arrived."""

    def __init__(self, lab: Lab, tmp: Path, *extra: str, playbook_text: str = PLAYBOOK) -> None:
        playbook = tmp / "watch.yml"
        playbook.write_text(playbook_text)
        self.history = tmp / "history.sqlite"
        self.port = _free_port()
        self.changes: list[tuple[float, dict[str, object]]] = []
        env = {**os.environ, "XDG_STATE_HOME": str(tmp / "state")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "provisioner", "watch", str(lab.state.inventory_path), "-p", str(playbook),
             "--every", "2s", "--timeout", "4", "--connect-timeout", "3", "--json", "--history", str(self.history),
             "--prom-port", str(self.port), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.changes.append((time.monotonic(), json.loads(line)))

    def wait_for(self, predicate: object, timeout: float = 20.0) -> tuple[float, dict[str, object]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for arrived, change in list(self.changes):
                if predicate(change):  # type: ignore[operator]
                    return arrived, change
            time.sleep(0.1)
        ended = "" if self.proc.poll() is None else f"; watch ended ({self.proc.returncode}): {self.proc.stderr.read()}"  # type: ignore[union-attr]
        raise AssertionError(f"not reported within {timeout} s; reported: {[c for _, c in self.changes]}{ended}")

    def kinds(self, skip: tuple[str, ...] = ("watching",)) -> list[tuple[object, object, object]]:
        return [(c["host"], c["kind"], c["subject"]) for _, c in self.changes if c["kind"] not in skip]

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        from prometheus_client.parser import text_string_to_metric_families

        text = urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5).read().decode()
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for family in text_string_to_metric_families(text) for s in family.samples}

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=20)
        self._reader.join(timeout=5)
        return code


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fabnet(*args: str, state: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(state)} if state else None
    return subprocess.run([sys.executable, "-m", "provisioner", *args], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env=env)


def test_each_fault_is_reported_once_with_host_and_port_and_nothing_else(watch_lab: Lab, tmp_path: Path) -> None:
    gpu01, gpu02, gpu03 = (watch_lab.node(n) for n in ("gpu01", "gpu02", "gpu03"))
    watch = Watch(watch_lab, tmp_path)
    try:
        for name in ("gpu01", "gpu02", "gpu03"):
            watch.wait_for(lambda c, n=name: c["host"] == n and c["kind"] == "watching")
        watch_lab.ssh(gpu03, f"sysctl -w {SYSCTL}=0")
        changed = time.monotonic()
        watch_lab.ssh(gpu02, f"echo 40 > {SYSFS}/symbol_error")
        port = watch_lab.state.names.data_port(gpu01.index)
        subprocess.run(f"ip link set {port} down && sleep 0.2 && ip link set {port} up", shell=True, check=True)
        arrived, drift = watch.wait_for(lambda c: c["kind"] == "drift_new")
        assert arrived - changed < 2 + 4  # within one interval (and that cycle's own time)
        _, counter = watch.wait_for(lambda c: c["kind"] == "counter_rose")
        _, flap = watch.wait_for(lambda c: c["kind"] in ("link_flap", "link_down"))
        time.sleep(5)  # two more cycles each: nothing is repeated, nothing else appears
        metrics = watch.metrics()
    finally:
        code = watch.stop()
        watch_lab.ssh(gpu03, f"sysctl -w {SYSCTL}=1", check=False)
        watch_lab.ssh(gpu02, f"echo 0 > {SYSFS}/symbol_error", check=False)
    assert code == 0  # SIGTERM is a clean stop
    assert drift["host"] == "gpu03" and SYSCTL in str(drift["subject"]) and "0 (want 1)" in str(drift["detail"])
    assert (counter["host"], counter["subject"], counter["delta"]) == ("gpu02", "mlx5_0/1 symbol_error", 40)
    assert isinstance(counter["rate"], float) and 40 / 8 < counter["rate"] <= 40 / 1.5
    assert (flap["host"], flap["subject"]) == ("gpu01", "eth1")
    # A cycle that read the port while it was down says so, and then that it came back: never more.
    flaps = [[("gpu01", "link_flap", "eth1")], [("gpu01", "link_down", "eth1"), ("gpu01", "link_up", "eth1")]]
    assert [k for k in watch.kinds() if k[0] == "gpu01"] in flaps
    assert [k for k in watch.kinds() if k[0] != "gpu01"] in (
        [("gpu02", "counter_rose", "mlx5_0/1 symbol_error"), ("gpu03", "drift_new", drift["subject"])],
        [("gpu03", "drift_new", drift["subject"]), ("gpu02", "counter_rose", "mlx5_0/1 symbol_error")])
    assert metrics[("fabnet_watch_drift_items", (("host", "gpu03"), ("kind", "sysctl")))] == 1
    key = (("counter", "symbol_error"), ("host", "gpu02"), ("port", "mlx5_0/1"))
    assert metrics[("fabnet_watch_port_errors_total", key)] == 40
    assert metrics[("fabnet_watch_host_up", (("host", "gpu01"),))] == 1
    shown = _fabnet("history", "gpu03", "--history", str(watch.history))
    assert shown.returncode == 0, shown.stderr
    line = next(line for line in shown.stdout.splitlines() if "DRIFT" in line)
    assert line.startswith(time.strftime("%Y-%m-%d")) and "gpu03" in line and SYSCTL in line
    assert "gpu01" not in shown.stdout


def test_a_nic_registered_again_gone_or_moved_and_counters_cleared_are_each_reported_once(
        watch_lab: Lab, tmp_path: Path) -> None:
    """A driver reload quicker than the interval (here a netdev deleted and added again under its name: the kernel
    gives it a new ifindex and starts its carrier changes from zero) is a link reset on a NIC's netdev, never
    silence; a netdev gone for a while is LINK GONE, and a link reset once it is back. The lab makes fnr0 a NIC's
    by giving it a `device` under the node's stand-in sysfs, as eth1 has; its veth peer fnr1 has none, like a
    container's, and is never reported. Error counters cleared (as perfquery -R does) are said once, as news, and
    not as a rise."""
    gpu02, gpu03 = watch_lab.node("gpu02"), watch_lab.node("gpu03")
    add = "ip link add fnr0 type veth peer name fnr1 && ip link set fnr0 up && ip link set fnr1 up"
    watch_lab.ssh(gpu02, f"ip link del fnr0 2>/dev/null; {add} && mkdir -p {NET}/fnr0/device")
    # fnm0: a NIC whose device (a stand-in PCI function, 0000:99:00.0) has a driver bound.
    watch_lab.ssh(gpu02, "ip link add fnm0 type veth peer name fnm1 && ip link set fnm0 up && ip link set fnm1 up && "
                         f"mkdir -p {PCI}/driver {NET}/fnm0 {BUS} && ln -s {PCI} {NET}/fnm0/device && "
                         f"ln -s {PCI} {BUS}/0000:99:00.0")
    watch_lab.ssh(gpu03, f"echo 7 > {SYSFS}/link_downed")
    watch = Watch(watch_lab, tmp_path)
    try:
        for name in ("gpu01", "gpu02", "gpu03"):
            watch.wait_for(lambda c, n=name: c["host"] == n and c["kind"] == "watching")
        watch_lab.ssh(gpu02, f"ip link del fnr0 && {add}")
        watch_lab.ssh(gpu03, f"echo 0 > {SYSFS}/link_downed")
        _, reset = watch.wait_for(lambda c: c["kind"] == "link_reset")
        _, cleared = watch.wait_for(lambda c: c["kind"] == "counters_reset")
        time.sleep(5)  # two more cycles each: nothing is repeated, nothing else appears
        quick = [k for k in watch.kinds() if k[0] == "gpu02"]
        mark = len(watch.changes)
        watch_lab.ssh(gpu02, "ip link del fnr0")

        def later(kind: str) -> object:
            return lambda c: c["kind"] == kind and any(c is x for _, x in watch.changes[mark:])

        _, gone = watch.wait_for(later("link_gone"))
        watch_lab.ssh(gpu02, add)
        _, back = watch.wait_for(later("link_reset"))
        # fnm0's device keeps its driver when the netdev leaves under that name (renamed here, as a host-device
        # CNI's move into a pod looks from the host): news, and news again when it is back.
        mark = len(watch.changes)
        watch_lab.ssh(gpu02, "ip link set fnm0 down && ip link set fnm0 name fnm9")
        _, moved = watch.wait_for(later("link_moved"))
        watch_lab.ssh(gpu02, "ip link set fnm9 name fnm0 && ip link set fnm0 up")
        _, returned = watch.wait_for(later("link_back"))
        time.sleep(5)
    finally:
        watch.stop()
        watch_lab.ssh(gpu02, f"ip link del fnr0; ip link del fnm0; ip link del fnm9; rm -rf {NET}/fnr0 {NET}/fnm0 "
                             f"{PCI}", check=False)
        watch_lab.ssh(gpu03, f"echo 0 > {SYSFS}/link_downed", check=False)
    assert (reset["host"], reset["subject"]) == ("gpu02", "fnr0")
    assert "ifindex" in str(reset["detail"]) and "it is up now" in str(reset["detail"])
    # A cycle that read gpu02 between the deletion and the new netdev says it was gone first: never more.
    reload = [("gpu02", "link_reset", "fnr0")]
    assert quick in (reload, [("gpu02", "link_gone", "fnr0"), *reload]), quick
    assert (gone["host"], gone["subject"]) == ("gpu02", "fnr0") and "it was up" in str(gone["detail"])
    assert (back["host"], back["subject"]) == ("gpu02", "fnr0") and "since it was last seen" in str(back["detail"])
    assert moved["subject"] == "fnm0" and "device 0000:99:00.0 keeps its driver" in str(moved["detail"])
    assert returned["subject"] == "fnm0"
    assert [k for k in watch.kinds() if k[0] == "gpu02" and k[2] not in ("fnm0", "fnm1")] == [
        *quick, ("gpu02", "link_gone", "fnr0"), *reload]
    # A rename needs the link down (its veth peer fnm1 loses its carrier with it): a cycle may find them down just
    # before, or back but not yet up.
    assert [k[1] for k in watch.kinds() if k[2] == "fnm0" and k[1] not in ("link_down", "link_up")] == [
        "link_moved", "link_back"]
    assert {k[1] for k in watch.kinds() if k[2] == "fnm1"} <= {"link_down", "link_up", "link_flap"}
    assert (cleared["host"], cleared["subject"]) == ("gpu03", "mlx5_0/1")
    assert "link_downed 7 -> 0" in str(cleared["detail"])
    assert [k for k in watch.kinds() if k[0] != "gpu02"] == [("gpu03", "counters_reset", "mlx5_0/1")]


def test_a_file_rewritten_keeping_its_size_and_mtime_is_reported_and_quiet_cycles_do_not_read_it(
        watch_lab: Lab, tmp_path: Path) -> None:
    """Watch runs a probe that only reads files again only when their status changed (facts/fingerprint.py):
    quiet cycles leave the file unread (the node's base64, counted by a wrapper, is not started), and a
    rewrite that keeps the size and the mtime, as `cp -p` or a package's unpack leaves a file, is still
    reported within an interval."""
    nodes = [watch_lab.node(n) for n in ("gpu01", "gpu02", "gpu03")]
    gpu02 = nodes[1]
    path, counter, wrapper = "/etc/fabnet-watch-fp.conf", "/root/base64-calls", "/usr/local/bin/base64"
    for node in nodes:
        watch_lab.ssh(node, f"printf 'A=1\\n' > {path}")
    watch_lab.ssh(gpu02, f"printf '#!/bin/sh\\necho x >> {counter}\\nexec /usr/bin/base64 \"$@\"\\n' > {wrapper} "
                         f"&& chmod 755 {wrapper} && : > {counter}")

    def calls() -> int:
        return int(watch_lab.ssh(gpu02, f"wc -l < {counter}").stdout)

    watch = Watch(watch_lab, tmp_path, playbook_text=PLAYBOOK + f'    - file: {{path: {path}, content: "A=1\\n"}}\n')
    try:
        watch.wait_for(lambda c: c["host"] == "gpu02" and c["kind"] == "watching")
        assert calls() >= 1  # the first cycle read it
        time.sleep(7)  # the file's ctime leaves the 2 s racy window; a reading after that is kept
        quiet = calls()
        time.sleep(5)  # two more cycles
        assert calls() == quiet
        watch_lab.ssh(gpu02, f"cp -p {path} /root/ref && printf 'A=2\\n' > {path} && touch -r /root/ref {path}")
        changed = time.monotonic()
        arrived, drift = watch.wait_for(lambda c: c["kind"] == "drift_new")
        assert arrived - changed < 2 + 4  # within one interval (and that cycle's own time)
        assert calls() > quiet
        time.sleep(3)
    finally:
        code = watch.stop()
        for node in nodes:
            watch_lab.ssh(node, f"rm -f {path} {wrapper} {counter} /root/ref", check=False)
    assert code == 0
    assert drift["host"] == "gpu02" and path in str(drift["subject"])
    assert watch.kinds() == [("gpu02", "drift_new", drift["subject"])]


def test_a_host_whose_mtu_leaves_the_fleets_is_reported_by_the_fleet_check(watch_lab: Lab, tmp_path: Path) -> None:
    """mtu_uniform compares hosts with each other: each cycle judges its host against the others' last
    readings, as audit judges the hosts it read together."""
    gpu02, gpu03 = watch_lab.node("gpu02"), watch_lab.node("gpu03")
    watch_lab.ssh(gpu02, "ip link set eth1 mtu 9000")  # the default profile's gpu02 has 1500: one fleet first
    watch = Watch(watch_lab, tmp_path, playbook_text=PLAYBOOK + "    - mtu_uniform: {interface: eth1}\n")
    try:
        for name in ("gpu01", "gpu02", "gpu03"):
            watch.wait_for(lambda c, n=name: c["host"] == n and c["kind"] == "watching")
        time.sleep(2.5)  # every host has read the others once
        watch_lab.ssh(gpu03, "ip link set eth1 mtu 1500")
        _, drift = watch.wait_for(lambda c: c["kind"] == "drift_new")
        time.sleep(4.5)  # two more cycles each: the other hosts stay in the fleet
    finally:
        code = watch.stop()
        watch_lab.ssh(gpu03, "ip link set eth1 mtu 9000", check=False)
        watch_lab.ssh(gpu02, "ip link set eth1 mtu 1500", check=False)
    assert code == 0
    assert drift["host"] == "gpu03" and "mtu_uniform[eth1]" in str(drift["subject"]), drift
    assert "1500" in str(drift["detail"]) and "9000" in str(drift["detail"]), drift
    assert watch.kinds() == [("gpu03", "drift_new", drift["subject"])]


def test_hosts_down_or_restarting_sshd_are_reported_and_never_hold_up_the_others(watch_lab: Lab,
                                                                                  tmp_path: Path) -> None:
    gpu02, gpu03 = watch_lab.node("gpu02"), watch_lab.node("gpu03")
    watch = Watch(watch_lab, tmp_path)
    mgmt = watch_lab.state.names.mgmt_port(gpu03.index)
    try:
        for name in ("gpu01", "gpu02", "gpu03"):
            watch.wait_for(lambda c, n=name: c["host"] == n and c["kind"] == "watching")
        second = _fabnet("watch", str(watch_lab.state.inventory_path), "--every", "2s", "--for", "1s",
                         "--history", str(tmp_path / "other.sqlite"), state=tmp_path / "state")
        # sshd and every session it holds killed, then started again, outside its own cgroup.
        watch_lab.ssh(gpu02, "systemd-run --no-block --collect sh -c "
                             "'sleep 0.5; systemctl kill -s KILL ssh.service; systemctl restart ssh.service'")
        subprocess.run(["ip", "link", "set", mgmt, "down"], check=True)
        cut = time.time()
        # Found after at most a round's wait, the cycle's budget and one login (2 + 4 + 5 + 3 s): 25 s leaves
        # room for a machine busy with other labs. The link stays down 20 s, as an operator's cut would.
        watch.wait_for(lambda c: c["host"] == "gpu03" and c["kind"] == "host_down", timeout=25)
        time.sleep(max(0.0, 20 - (time.time() - cut)))
        subprocess.run(["ip", "link", "set", mgmt, "up"], check=True)
        watch.wait_for(lambda c: c["host"] == "gpu03" and c["kind"] == "host_back", timeout=40)
        watch.wait_for(lambda c: c["host"] == "gpu02" and c["kind"] in ("reconnected", "host_back"))
        time.sleep(3)
    finally:
        subprocess.run(["ip", "link", "set", mgmt, "up"], check=False)
        code = watch.stop(signal.SIGKILL)
    assert code == -9
    assert second.returncode == 1 and f"(pid {watch.proc.pid})" in second.stderr, second.stderr
    others = [k for k in watch.kinds() if k[1] not in ("host_down", "host_back", "reconnected")]
    assert others == [("gpu03", "link_flap", "eth0")]  # its management link did go down and up; nothing else
    assert [k for k in watch.kinds() if k[0] == "gpu01"] == []
    with sqlite3.connect(watch.history) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        ats = [row[0] for row in db.execute("SELECT at FROM results WHERE host = 'gpu01' ORDER BY at")]
        assert db.execute("SELECT finished FROM runs").fetchall() == [(None,)]  # killed: never finished
    gaps = [b - a for a, b in itertools.pairwise(ats)]
    # gpu01 kept its 2 s schedule throughout: from before the cut to after gpu03 came back.
    assert ats[0] < cut and ats[-1] > cut + 10 and max(gaps) < 2 + 1.5, (cut, ats, gaps)
    assert time.time() - ats[-1] < 2 + 3  # the history holds the cycles up to the kill
    shown = _fabnet("history", "gpu03", "--history", str(watch.history), "--json")
    kinds = [c["kind"] for c in json.loads(shown.stdout)["changes"]]
    assert kinds[:1] == ["watching"] and "host_down" in kinds and "host_back" in kinds


@pytest.mark.parametrize("keep_shell", [False, True], ids=["exec", "kept-shell"])
def test_a_kept_session_whose_path_died_is_found_within_the_login_timeout(watch_lab: Lab, keep_shell: bool) -> None:
    """A kept-open session (watch's, or any command's second exec) whose management path died since its
    last use: the next exec waits for its channel (or watch's kept shell for its acknowledgment) only as
    long as a login may take, then tries one new login, and the host is reported down after those two
    waits, not at the end of the command's timeout (here 30 s)."""
    from provisioner.load.loading import load_hosts
    from provisioner.run import transport
    from provisioner.run.session import HostSession, Options

    plans, _ = load_hosts(watch_lab.state.inventory_path, "gpu03")
    session = HostSession(plans[0].host, Options(connect_timeout=2, command_timeout=30), keep_shell=keep_shell)
    mgmt = watch_lab.state.names.mgmt_port(watch_lab.node("gpu03").index)
    try:
        assert session.exec("true").exit_code == 0
        subprocess.run(["ip", "link", "set", mgmt, "down"], check=True)
        started = time.monotonic()
        with pytest.raises(transport.HostUnreachable, match="timed out"):
            session.exec("true")
        took = time.monotonic() - started
    finally:
        subprocess.run(["ip", "link", "set", mgmt, "up"], check=False)
        session.close()
    assert 2 * 2 - 0.5 < took < 2 * 2 + 2, took  # the channel's wait, then the new login's


def test_drain_failed_drains_the_host_whose_link_counter_rose_and_no_other(tmp_path: Path) -> None:
    name = lab_name("wsl")
    manager.down(name)
    try:
        lab = Lab(manager.up(name, 3, with_slurm=True))
        controller = lab.node("gpu01")
        watch = Watch(lab, tmp_path, "--drain-failed")
        try:
            for host in ("gpu01", "gpu02", "gpu03"):
                watch.wait_for(lambda c, n=host: c["host"] == n and c["kind"] == "watching")
            lab.ssh(lab.node("gpu03"), f"echo 7 > {SYSFS}/link_downed")
            watch.wait_for(lambda c: c["kind"] == "counter_rose")
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:  # the oracle: Slurm itself, over the system ssh client
                states = dict(line.split(" ", 1) for line in lab.ssh(
                    controller, "sinfo -N -h -o '%N %T %E'").stdout.strip().splitlines())
                if states["gpu03"].startswith("drained"):
                    break
                time.sleep(0.5)
        finally:
            assert watch.stop() == 0
        assert states["gpu03"].startswith("drained fabnet: watch: counter rose mlx5_0/1 link_downed: +7 in ")
        assert states["gpu01"].split()[0] == "idle" and states["gpu02"].split()[0] == "idle"
    finally:
        manager.down(name)
