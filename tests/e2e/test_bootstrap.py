"""`fabnet lab add` + `fabnet bootstrap` against a lab of its own: a vendor-default node with an unknown
host key is refused without a terminal or with a wrong fingerprint (nothing changed, checked over the
system ssh client), pinned and converged with the right one (checked with testinfra), proven with an
all-reduce alongside the fleet, and left alone by a second run. `lab down` removes the added node."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import testinfra
import yaml

from provisioner.lab import grow, manager
from provisioner.lab.state import NodeRecord
from tests.e2e.conftest import Lab, healthy_profile, lab_name

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
BOOT_LAB = lab_name("boot")


@pytest.fixture(scope="module")
def blab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """Three healthy nodes (the default profile without its drifted nodes) and one added by `lab add`."""
    path = healthy_profile(tmp_path_factory.mktemp("profile"), 3)
    manager.down(BOOT_LAB)
    try:
        lab = Lab(manager.up(BOOT_LAB, 3, path))
        grow.add(BOOT_LAB, 1)
        lab.state = manager.status(BOOT_LAB)[0]
        yield lab
    finally:
        manager.down(BOOT_LAB)


@pytest.fixture(scope="module")
def new_node(blab: Lab) -> NodeRecord:
    return blab.node("gpu04")


@pytest.fixture(scope="module")
def oracle_known_hosts(new_node: NodeRecord, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The new node's key as ssh-keyscan reads it (a file for the oracle's strict ssh) and its fingerprint
    as ssh-keygen computes it: neither shares code with fabnet."""
    scanned = subprocess.run(["ssh-keyscan", "-t", "ed25519", new_node.mgmt_ip], capture_output=True, text=True,
                             timeout=30, check=True).stdout
    listed = subprocess.run(["ssh-keygen", "-lf", "-"], input=scanned, capture_output=True, text=True,
                            check=True).stdout.split()
    path = tmp_path_factory.mktemp("oracle") / "known_hosts"
    path.write_text(scanned)
    return path, listed[1]


def oracle_ssh(blab: Lab, node: NodeRecord, known: Path, command: str) -> str:
    args = ["ssh", "-i", str(blab.state.key_path), "-o", f"UserKnownHostsFile={known}",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
            f"root@{node.mgmt_ip}", command]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=True).stdout


def bootstrap(blab: Lab, *args: str) -> subprocess.CompletedProcess[str]:
    """`fabnet bootstrap` with no terminal: standard input from /dev/null, in a session of its own."""
    return subprocess.run([sys.executable, "-m", "provisioner", "bootstrap", str(blab.state.inventory_path),
                           "--limit", "new", *args], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=300, cwd=ROOT, start_new_session=True)


def assert_untouched(blab: Lab, node: NodeRecord, known: Path) -> None:
    lab_known = blab.state.known_hosts_path.read_text()
    assert node.mgmt_ip not in lab_known and node.name not in lab_known
    assert "mtu 1500 " in oracle_ssh(blab, node, known, "ip -o link show eth1")
    assert oracle_ssh(blab, node, known, "test -e /etc/nccl.conf && echo yes || echo no").strip() == "no"


def test_lab_add_gives_a_vendor_default_node_in_the_new_group(
        blab: Lab, new_node: NodeRecord, oracle_known_hosts: tuple[Path, str]) -> None:
    inventory = yaml.safe_load(blab.state.inventory_path.read_text())
    groups = inventory["all"]["children"]
    assert list(groups["new"]["hosts"]) == ["gpu04"]
    assert list(groups["gpu"]["hosts"]) == ["gpu01", "gpu02", "gpu03", "gpu04"]
    _, nodes = manager.status(BOOT_LAB)
    assert [(n.name, n.running, n.ssh_ready) for n in nodes][-1] == ("gpu04", True, True)
    known, _ = oracle_known_hosts
    assert_untouched(blab, new_node, known)
    # On the fleet's data network: the new node reaches gpu01's data address over its eth1.
    gpu01 = blab.node("gpu01")
    oracle_ssh(blab, new_node, known, f"ping -c1 -W2 -I eth1 {gpu01.data_ip}")


def test_without_a_terminal_or_option_it_refuses_and_changes_nothing(
        blab: Lab, new_node: NodeRecord, oracle_known_hosts: tuple[Path, str]) -> None:
    known, fingerprint = oracle_known_hosts
    proc = bootstrap(blab, "--yes")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert fingerprint in proc.stdout and "REFUSED" in proc.stdout
    assert_untouched(blab, new_node, known)


def test_a_wrong_fingerprint_is_refused_and_changes_nothing(
        blab: Lab, new_node: NodeRecord, oracle_known_hosts: tuple[Path, str]) -> None:
    known, fingerprint = oracle_known_hosts
    wrong = "SHA256:" + ("A" if fingerprint[7] != "A" else "B") + fingerprint[8:]
    proc = bootstrap(blab, "--fingerprint", wrong, "--yes", "--json")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    host = report["hosts"][0]
    assert report["schema"] == "fabnet/bootstrap/v1"
    assert host["key"]["fingerprint"] == fingerprint and host["key"]["refused"] and not host["key"]["pinned"]
    assert host["apply"] is None and report["smoke"] is None
    assert_untouched(blab, new_node, known)


def test_behind_a_jump_host_the_key_is_read_through_it(
        blab: Lab, new_node: NodeRecord, oracle_known_hosts: tuple[Path, str], tmp_path: Path) -> None:
    """A new node reached only through a bastion (ProxyJump in the ssh config): its key is read over the
    jump host's connection, shown, and refused without a terminal; the node's own sshd saw the exchange
    come from the jump host's address."""
    known, fingerprint = oracle_known_hosts
    jump = blab.node("gpu01")
    key = blab.state.key_path
    config = tmp_path / "ssh_config"
    config.write_text(f"Host jumpbox\n  HostName {jump.mgmt_ip}\n  User root\n  IdentityFile {key}\n"
                      f"Host new-behind-jump\n  HostName {new_node.mgmt_ip}\n  User root\n  IdentityFile {key}\n"
                      "  ProxyJump jumpbox\n")
    data = yaml.safe_load(blab.state.inventory_path.read_text())
    for group in data["all"]["children"].values():  # wherever the lab gave gpu04 its address
        entry = (group.get("hosts") or {}).get("gpu04")
        if isinstance(entry, dict) and "ansible_host" in entry:
            entry["ansible_host"] = "new-behind-jump"
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump(data))
    since = oracle_ssh(blab, new_node, known, "date +%s").strip()
    proc = subprocess.run([sys.executable, "-m", "provisioner", "bootstrap", str(inventory), "--limit", "new",
                           "--ssh-config", str(config), "--yes"], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=300, cwd=ROOT, start_new_session=True)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert fingerprint in proc.stdout and "REFUSED" in proc.stdout, proc.stdout
    sshd = oracle_ssh(blab, new_node, known, f"journalctl -q -u ssh --since @{since} --no-pager")
    assert f"from {jump.mgmt_ip} " in sshd or f"by {jump.mgmt_ip} " in sshd, sshd
    assert_untouched(blab, new_node, known)


def test_the_right_fingerprint_pins_converges_and_proves_the_node(
        blab: Lab, new_node: NodeRecord, oracle_known_hosts: tuple[Path, str]) -> None:
    _, fingerprint = oracle_known_hosts
    proc = bootstrap(blab, "--fingerprint", fingerprint, "--yes", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    host = report["hosts"][0]
    assert host["key"] | {"known_hosts": None} == {
        "state": "unknown", "type": "ssh-ed25519", "fingerprint": fingerprint, "trust": "fingerprint",
        "trust_means": "matches the --fingerprint given", "pinned": True, "known_hosts": None, "refused": None}
    assert host["apply"]["status"] == "changed" and len(host["apply"]["changes"]) >= 5
    assert host["audit"]["status"] == "in_sync" and host["smoke"]["verdict"] == "pass"
    # Pinned in the lab's own known_hosts, under the node's name and address.
    pinned = [line for line in blab.state.known_hosts_path.read_text().splitlines() if new_node.mgmt_ip in line]
    assert len(pinned) == 1 and pinned[0].startswith(f"gpu04,{new_node.mgmt_ip} ssh-ed25519 ")
    # Proven together with at least two existing nodes, and the fleet measured alone beside it.
    smoke = report["smoke"]
    assert smoke["verdict"] == "pass" and "gpu04" in smoke["hosts"] and len(smoke["hosts"]) >= 3
    assert report["fleet_smoke"]["verdict"] == "pass" and "gpu04" not in report["fleet_smoke"]["hosts"]
    assert smoke["avg_busbw"] > 0 and report["fleet_smoke"]["avg_busbw"] > 0
    # The oracle: testinfra over the system ssh client, with the key fabnet pinned.
    node = testinfra.get_host(f"ssh://root@{new_node.mgmt_ip}", ssh_identity_file=str(blab.state.key_path),
                              ssh_extra_args=f"-o UserKnownHostsFile={blab.state.known_hosts_path} "
                                             "-o StrictHostKeyChecking=yes -o BatchMode=yes")
    assert "mtu 9000 " in node.check_output("ip -o link show eth1")
    assert "Priority trust state: dscp" in node.check_output("mlnx_qos -i eth1")
    assert node.package("libnccl2").version.startswith("2.21.5")
    assert node.file("/etc/nccl.conf").exists
    assert node.service("rdma_cm").is_running


def test_a_second_bootstrap_changes_nothing(blab: Lab) -> None:
    before = blab.state.known_hosts_path.read_text()
    proc = bootstrap(blab, "--json")  # no --yes, no terminal: it would refuse if anything were to change
    assert proc.returncode == 0, proc.stdout + proc.stderr
    host = json.loads(proc.stdout)["hosts"][0]
    assert host["key"]["state"] == "known" and not host["key"]["pinned"]
    assert host["apply"] == {"status": "ok", "error": None, "changes": []}
    assert blab.state.known_hosts_path.read_text() == before


def test_lab_down_removes_the_added_node(blab: Lab, new_node: NodeRecord) -> None:
    assert manager.down(BOOT_LAB)
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert blab.state.names.mgmt_port(new_node.index) + ":" not in links
    assert blab.state.names.data_port(new_node.index) + ":" not in links
    assert new_node.netns not in netns
