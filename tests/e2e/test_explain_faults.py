"""`fabnet explain --inventory` on what `fabnet smoke` kept of a failed all-reduce on the lab.

Three real faults, each made on one node while the smoke test runs: its switch port drops to MTU 1500
after the pre-flight (the all-reduce hangs), its data interface is renamed after the pre-flight (the
job's GLOO_SOCKET_IFNAME names no interface there), and one rank's python is killed with SIGKILL. For
each, explain reads the smoke JSON and, apart, the ranks' output as a launcher collects it (each line
labelled with its host, pdsh style): exit 2, the cause named, and the faulty node named as its inventory
host. For the MTU hang the log alone names the node only as far as it can: when gloo's own timeout
fires first every rank just times out, naming no peer (the cause is named, no node); when TCP gives up
first (a real job's 30-minute timeout outlasts TCP's retries; the lab shortens those) the first rank to
fail names the peer it lost, and that pair holds the node. A healthy run's JSON and log: exit 0 and no
cause.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from provisioner.lab import manager
from provisioner.lab.profile import DEFAULT_PROFILE
from provisioner.lab.state import NodeRecord
from tests.e2e.conftest import Lab, lab_name

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "playbooks" / "site.yml"
TIMEOUT = 40


@pytest.fixture(scope="module")
def lab4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """Four healthy nodes: the default profile without its drifts."""
    name = lab_name("exf")
    profile = yaml.safe_load(DEFAULT_PROFILE.read_text())
    profile.pop("nodes", None)
    profile["nodes_default"] = 4
    path = tmp_path_factory.mktemp("explain-faults") / "healthy.yml"
    path.write_text(yaml.safe_dump(profile))
    manager.down(name)
    try:
        yield Lab(manager.up(name, 4, path))
    finally:
        manager.down(name)


def smoke(lab: Lab, tmp_path: Path, *, after_preflight: Callable[[], None] | None = None,
          poll: Callable[[], bool] | None = None, iters: int = 3, extra: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """Run `fabnet smoke --json` as a user would, making a fault after its pre-flight (`after_preflight`)
    or while it runs (`poll`, called until it returns True); keep its JSON and its ranks' output as a
    launcher would collect it, each line labelled with its host. Returns (JSON file, log file)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "provisioner", "smoke", str(lab.state.inventory_path), "-p", str(PLAYBOOK),
         "--json", "--sizes", "1M:2M", "--iters", str(iters), "--timeout", str(TIMEOUT), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    stderr: list[str] = []

    def watch() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            stderr.append(line)
            if after_preflight is not None and "pre-flight passed" in line:
                after_preflight()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    guard = threading.Timer(TIMEOUT + 90, proc.kill)  # the test's own safety net
    guard.start()
    try:
        if poll is not None:
            while proc.poll() is None and not poll():
                time.sleep(0.3)
        assert proc.stdout is not None
        out = proc.stdout.read()
        proc.wait()
        watcher.join(timeout=5)
    finally:
        guard.cancel()
        proc.kill()
    try:
        data = json.loads(out)
    except ValueError:
        raise AssertionError(f"no JSON (exit {proc.returncode}): {out[-2000:]}\n{''.join(stderr)[-2000:]}") from None
    report = tmp_path / "smoke.json"
    report.write_text(out)
    host_of = {str(p["rank"]): p["host"] for p in data["progress"]}
    log = tmp_path / "job.log"
    log.write_text("".join(f"{host_of[rank]}: {line}\n" for rank, text in sorted(data["rank_output"].items())
                           for line in text.splitlines()))
    return report, log


def explain(lab: Lab, path: Path) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-m", "provisioner", "explain", str(path), "--inventory",
                           str(lab.state.inventory_path), "-p", str(PLAYBOOK), "--json"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    try:
        return proc.returncode, json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(f"explain exit {proc.returncode}: {proc.stdout[-1000:]}{proc.stderr[-1000:]}") from None


def named(result: dict, cause_id: str) -> set[str]:
    """The inventory hosts the first cause with this id names (its hosts and addresses, mapped)."""
    ids = [c["id"] for c in result["causes"]]
    assert cause_id in ids, ids
    cause = next(c for c in result["causes"] if c["id"] == cause_id)
    mapping = result["inventory_hosts"]
    return {mapping[h] for h in cause["hosts"] + cause["addresses"] if h in mapping}


def assert_explained(lab: Lab, report: Path, log: Path, ids: tuple[str, str], victim: NodeRecord) -> None:
    """The smoke JSON names the host by its own verdict (ids[0]) and, from the rank output it carries,
    by the log's cause (ids[1]); the collected log names it by the log's cause alone."""
    for path, cause_ids in ((report, ids), (log, ids[1:])):
        code, result = explain(lab, path)
        assert code == 2, (path.name, result["causes"], path.read_text()[-3000:])
        for cause_id in cause_ids:
            assert named(result, cause_id) == {victim.name}, (path.name, result["causes"], result["inventory_hosts"])


def test_healthy_run_explains_to_nothing(lab4: Lab, tmp_path: Path) -> None:
    # No comparison with the fleet: beside a second group of lab tests on 2 cores one host's pairs can
    # measure at half the others' (test_smoke.py checks that comparison, ten runs in a row).
    report, log = smoke(lab4, tmp_path, extra=("--slow-fraction", "0"))
    assert json.loads(report.read_text())["verdict"] == "pass"
    for path in (report, log):
        code, result = explain(lab4, path)
        assert (code, result["causes"]) == (0, []), path.name


def test_mtu_blackhole_on_one_node(lab4: Lab, tmp_path: Path) -> None:
    victim = lab4.nodes[2]
    port = lab4.state.names.data_port(victim.index)
    try:
        report, log = smoke(lab4, tmp_path, after_preflight=lambda: subprocess.run(
            ["ip", "link", "set", port, "mtu", "1500"], check=True))
    finally:
        subprocess.run(["ip", "link", "set", port, "mtu", "9216"], check=True)
    assert json.loads(report.read_text())["verdict"] == "failed"
    code, result = explain(lab4, report)
    assert code == 2 and named(result, "smoke-preflight-path_mtu") == {victim.name}, result["causes"]
    code, result = explain(lab4, log)
    text = log.read_text()
    # Which ranks gave up waiting (gloo's own timeout, or on a loaded machine the smoke rank's deadline first),
    # and whether every connection that closed was closed by one of them (a rank past its own deadline exits,
    # closing its connections): only then is the log a stall alone.
    lines = text.splitlines()
    stalled = {line.split(":", 1)[0] for line in lines
               if "Timed out waiting" in line or re.search(r"own deadline of [0-9.]+ s reached", line)}
    by_address = {node.data_ip: node.name for node in lab4.nodes}
    gone = [line for line in lines if re.search(r"Connection (?:closed|reset) by (?:remote )?peer|Broken pipe", line)]
    echoes = all((m := re.search(r"\[([0-9a-fA-F.:]+)\]:[0-9]+", line)) and by_address.get(m.group(1)) in stalled
                 for line in gone)
    if stalled and echoes:
        # The ranks' own lines: transfers timed out after the rendezvous, no peer named. The MTU cause is
        # named first; which node's path drops full-size frames takes the fabric check the smoke JSON
        # carries, and the log's cause names none rather than guess.
        assert code == 2 and result["causes"][0]["id"] == "mtu-blackhole", (result["causes"], text)
        assert named(result, "mtu-blackhole") == set(), result["causes"]
    else:
        # About one run in five on a loaded machine, the victim's rank (and another) end before any rank's
        # own timeout with no line of their own: the others only saw their connections closed or reset, by
        # the victim among others, some of them perhaps after timing out themselves. The log then says no
        # more than that, and explain says exactly that.
        first = result["causes"][0]
        assert code == 2 and first["id"] == "connection-lost" and victim.data_ip in first["detail"], (
            result["causes"], text)


def test_mtu_blackhole_found_by_tcp_names_the_pair_with_the_node(lab4: Lab, tmp_path: Path) -> None:
    """The same fault with TCP's retries (net.ipv4.tcp_retries2) cut so TCP gives up before gloo's timeout,
    as it does in a job with gloo's default 30 minutes: the first rank to fail says which peer it lost
    (`Read error [ADDR]:PORT: Connection timed out`). Smoke stops the other ranks then, so the log holds
    one pair, the victim and a neighbour: both are named, as the log cannot say which end drops."""
    victim = lab4.nodes[2]
    port = lab4.state.names.data_port(victim.index)
    before = {node.name: lab4.ssh(node, "sysctl -n net.ipv4.tcp_retries2").stdout.strip() for node in lab4.nodes}
    try:
        for node in lab4.nodes:
            lab4.ssh(node, "sysctl -qw net.ipv4.tcp_retries2=5")
        report, log = smoke(lab4, tmp_path, after_preflight=lambda: subprocess.run(
            ["ip", "link", "set", port, "mtu", "1500"], check=True))
    finally:
        subprocess.run(["ip", "link", "set", port, "mtu", "9216"], check=True)
        for node in lab4.nodes:
            lab4.ssh(node, f"sysctl -qw net.ipv4.tcp_retries2={int(before[node.name])}")
    assert json.loads(report.read_text())["verdict"] == "failed"
    text = log.read_text()
    code, result = explain(lab4, log)
    assert code == 2, (result["causes"], text)
    if "Connection timed out" in text:  # a neighbour's TCP gave up first and said on which peer
        assert result["causes"][0]["id"] == "mtu-blackhole", (result["causes"], text)
        pair = named(result, "mtu-blackhole")
        assert victim.name in pair and len(pair) == 2, (pair, text)
    else:
        # The victim's own TCP gave up first and smoke stopped it before it printed: its neighbours saw
        # only their connections to it reset or closed, as after a crash; the peers named hold the victim.
        first = result["causes"][0]["id"]
        assert victim.name in named(result, first), (result["causes"], text)


def test_wrong_socket_ifname_on_one_node(lab4: Lab, tmp_path: Path) -> None:
    """The node's data interface is renamed after the pre-flight: the job's GLOO_SOCKET_IFNAME=eth1
    names no interface there."""
    victim = lab4.nodes[1]
    rename = "ip link set {0} down && ip link set {0} name {1} && ip link set {1} up"
    try:
        report, log = smoke(lab4, tmp_path, after_preflight=lambda: lab4.ssh(victim, rename.format("eth1", "eth9")))
    finally:
        lab4.ssh(victim, f"ip link show eth9 >/dev/null 2>&1 && {rename.format('eth9', 'eth1')}; true", check=False)
    assert lab4.ssh(victim, "cat /sys/class/net/eth1/operstate").stdout.strip() == "up"
    assert json.loads(report.read_text())["verdict"] == "failed"
    assert_explained(lab4, report, log, ("smoke-host-failed", "no-socket-interface"), victim)


def test_killed_rank(lab4: Lab, tmp_path: Path) -> None:
    victim = lab4.nodes[1]
    # The rank's python (not its shell wrapper): its command line names the job's node.py.
    find = ("ps -eo pid=,comm=,args= | awk '$2 ~ /^python/ && /fabnet-smoke-[0-9a-f]+\\/node\\.py/ "
            "&& /--rank 1 / {print $1}'")
    killed: list[str] = []

    def kill() -> bool:
        pid = lab4.ssh(victim, find, check=False).stdout.strip()
        if pid:
            lab4.ssh(victim, f"kill -9 {pid}")
            killed.append(pid)
        return bool(pid)

    # Enough iterations that the rank is still running when it is found.
    report, log = smoke(lab4, tmp_path, poll=kill, iters=400)
    assert killed, "the rank's process was never found"
    data = json.loads(report.read_text())
    assert data["verdict"] == "failed" and "signal 9" in data["reason"], data["reason"]
    assert_explained(lab4, report, log, ("smoke-host-failed", "process-crashed"), victim)
