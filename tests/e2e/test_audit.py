"""`fabnet audit` against the default drifted lab: the right drift, one exec per host, nothing changed,
strict host keys, unreachable hosts isolated, bad input refused before anything remote runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import Lab

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "playbooks" / "site.yml"

# What the default profile put on each node, as (resource, attribute) pairs that must drift.
EXPECTED_DRIFT = {
    "gpu01": set(),
    "gpu02": {("interface[eth1]", "mtu"), ("interface[eth1]", "mtu_persistent"), ("mtu_uniform[eth1]", "mtu"),
              ("roce_qos[eth1]", "active_mtu")},
    "gpu03": {("roce_qos[eth1]", "trust"), ("roce_qos[eth1]", "pfc"), ("roce_qos[eth1]", "dscp2prio[26]"),
              ("roce_qos[eth1]", "dscp2prio[48]")},
    "gpu04": {("ofed", "version")},
    "gpu05": {("service[rdma_cm]", "active"), ("service[rdma_cm]", "enabled")},
    "gpu06": {("file[/etc/nccl.conf]", "present")},
}


def fabnet(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "provisioner", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def drift_of(report: dict) -> dict[str, set[tuple[str, str]]]:
    return {
        host["name"]: {(res["target"], check["attribute"]) for res in host["resources"] for check in res["checks"]
                       if check["status"] != "ok"}
        for host in report["hosts"]
    }


def sessions(lab: Lab) -> dict[str, int]:
    """SSH exec sessions each node's sshd has logged (this query's own session included)."""
    counts = {}
    for node in lab.nodes:
        out = lab.ssh(node, "journalctl -u ssh --no-pager -o cat | grep -c 'Starting session: command'").stdout
        counts[node.name] = int(out.strip())
    return counts


def fingerprint(lab: Lab, node) -> str:
    """Hash of every file fabnet could touch plus live kernel/service state, read with testinfra."""
    host = lab.host(node)
    files = host.check_output(
        "find /etc /opt /usr/local /var/lib/fabnet-lab /var/lib/dpkg -xdev -type f -print0 2>/dev/null "
        "| sort -z | xargs -0 sha256sum | sha256sum")
    live = host.check_output(
        "ip -d -j link show eth1; sysctl net.ipv4.conf.all.arp_ignore; systemctl is-active rdma_cm openibd || true; "
        "systemctl is-enabled rdma_cm openibd || true; mlnx_qos -i eth1; lsmod | grep -c peermem || true")
    return files + live


@pytest.fixture(scope="module")
def audit_report(lab: Lab) -> tuple[subprocess.CompletedProcess[str], dict, dict[str, int], dict[str, int]]:
    before = sessions(lab)
    proc = fabnet("audit", str(lab.state.inventory_path), "-p", str(SITE), "--json")
    after = sessions(lab)
    return proc, json.loads(proc.stdout), before, after


def test_audit_exits_2_and_names_exactly_the_profiles_drift(audit_report) -> None:
    proc, report, _, _ = audit_report
    assert proc.returncode == 2, proc.stderr
    assert report["schema"] == "fabnet/audit/v1"
    assert drift_of(report) == EXPECTED_DRIFT
    statuses = {host["name"]: host["status"] for host in report["hosts"]}
    assert statuses == {"gpu01": "in_sync", **{f"gpu0{i}": "drifted" for i in range(2, 7)}}
    assert report["summary"] == {"hosts": 6, "in_sync": 1, "drifted": 5, "unreachable": 0, "failed": 0}


def test_drift_carries_desired_and_actual_values(audit_report) -> None:
    _, report, _, _ = audit_report
    checks = {(h["name"], r["target"], c["attribute"]): c for h in report["hosts"] for r in h["resources"]
              for c in r["checks"]}
    assert (checks[("gpu02", "interface[eth1]", "mtu")]["desired"], checks[("gpu02", "interface[eth1]", "mtu")]
            ["actual"]) == ("9000", "1500")
    assert checks[("gpu03", "roce_qos[eth1]", "trust")]["actual"] == "pcp"
    assert "5.8-2.0.3.0" in checks[("gpu04", "ofed", "version")]["actual"]
    assert "gpu02" in checks[("gpu02", "mtu_uniform[eth1]", "mtu")]["message"]


def test_the_table_output_tells_the_same_story(lab: Lab) -> None:
    proc = fabnet("audit", str(lab.state.inventory_path), "-p", str(SITE))
    assert proc.returncode == 2
    for text in ("gpu02", "1500", "gpu03", "pcp", "gpu04", "gpu05", "rdma_cm", "gpu06", "/etc/nccl.conf",
                 "in sync=1", "drifted=5"):
        assert text in proc.stdout, text


def test_facts_are_gathered_in_one_exec_per_host(audit_report) -> None:
    _, report, before, after = audit_report
    # Each count includes the counting session itself, hence the -1.
    assert {name: after[name] - before[name] - 1 for name in after} == {name: 1 for name in after}
    assert all(host["execs"] == 1 for host in report["hosts"])


def test_audit_changes_nothing_on_any_host(lab: Lab) -> None:
    before = {node.name: fingerprint(lab, node) for node in lab.nodes}
    proc = fabnet("audit", str(lab.state.inventory_path), "-p", str(SITE), "--json")
    assert proc.returncode == 2
    after = {node.name: fingerprint(lab, node) for node in lab.nodes}
    assert after == before


def test_junit_report_lists_drift_as_failures(lab: Lab, tmp_path) -> None:
    junit = tmp_path / "audit.xml"
    proc = fabnet("audit", str(lab.state.inventory_path), "-p", str(SITE), "--junit", str(junit), "--limit", "gpu04")
    assert proc.returncode == 2
    xml = junit.read_text()
    assert 'name="gpu04"' in xml and "<failure" in xml and "gpu01" not in xml


def test_limit_selects_hosts_and_in_sync_exits_0(lab: Lab) -> None:
    proc = fabnet("audit", str(lab.state.inventory_path), "-p", str(SITE), "--limit", "gpu01", "--json")
    report = json.loads(proc.stdout)
    # Alone, gpu01 is in sync (the fleet-wide MTU check sees only itself).
    assert proc.returncode == 0, proc.stdout
    assert [h["name"] for h in report["hosts"]] == ["gpu01"]


def _inventory_copy(lab: Lab, tmp_path: Path, **changes) -> Path:
    data = yaml.safe_load(lab.state.inventory_path.read_text())
    hosts = data["all"]["children"]["gpu"]["hosts"]
    for name, value in changes.items():
        if value is None:
            hosts.pop(name, None)
        else:
            hosts[name] = value
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_host_whose_key_does_not_match_is_refused_and_the_others_go_on(lab: Lab, tmp_path) -> None:
    lines = lab.state.known_hosts_path.read_text().splitlines()
    gpu01, gpu02 = lab.node("gpu01"), lab.node("gpu02")
    key_of_gpu02 = next(line.split(" ", 1)[1] for line in lines if line.startswith(gpu02.mgmt_ip + " "))
    forged = [f"{gpu01.mgmt_ip} {key_of_gpu02}" if line.startswith(gpu01.mgmt_ip + " ") else line for line in lines]
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("\n".join(forged) + "\n")
    inventory = _inventory_copy(lab, tmp_path)
    data = yaml.safe_load(inventory.read_text())
    data["all"]["vars"]["fabnet_known_hosts"] = str(known_hosts)
    inventory.write_text(yaml.safe_dump(data))
    proc = fabnet("audit", str(inventory), "-p", str(SITE), "--json")
    assert proc.returncode == 4
    report = json.loads(proc.stdout)
    hosts = {h["name"]: h for h in report["hosts"]}
    assert hosts["gpu01"]["status"] == "unreachable"
    assert "host key mismatch" in hosts["gpu01"]["error"]
    assert hosts["gpu02"]["status"] == "drifted" and hosts["gpu04"]["status"] == "drifted"
    assert report["summary"]["unreachable"] == 1


def test_an_unreachable_host_is_reported_without_stopping_the_others(lab: Lab, tmp_path) -> None:
    missing_ip = lab.state.names.mgmt_ip(200)  # on the lab's network, but no node answers there
    inventory = _inventory_copy(lab, tmp_path, gpu99={"ansible_host": missing_ip})
    proc = fabnet("audit", str(inventory), "-p", str(SITE), "--json", "--connect-timeout", "2")
    assert proc.returncode == 4
    hosts = {h["name"]: h for h in json.loads(proc.stdout)["hosts"]}
    assert hosts["gpu99"]["status"] == "unreachable" and missing_ip in hosts["gpu99"]["error"]
    assert hosts["gpu01"]["status"] == "in_sync"


@pytest.mark.parametrize(
    ("playbook_text", "expected"),
    [
        ("- hosts: gpu\n  resources:\n    - interface: {name: eth1, mtu: 9000\n", ":4: invalid YAML"),
        ("- hosts: gpu\n  resources:\n    - interface: {name: eth1, mtuu: 9000}\n", ":3: plays[0].resources[0]"),
        ("- hosts: gpu\n  resources:\n    - interface: {name: eth1, mtu: jumbo}\n", ":3: plays[0].resources[0]"),
        ("- hosts: gpu\n  resources:\n    - firewall: {}\n", ":3: plays[0].resources[0]"),
    ],
    ids=["bad-yaml", "unknown-key", "wrong-type", "unknown-kind"],
)
def test_malformed_playbooks_are_refused_with_file_and_line_before_anything_remote(
        lab: Lab, tmp_path, playbook_text: str, expected: str) -> None:
    playbook = tmp_path / "bad.yml"
    playbook.write_text(playbook_text)
    before = sessions(lab)
    proc = fabnet("audit", str(lab.state.inventory_path), "-p", str(playbook))
    after = sessions(lab)
    assert proc.returncode == 3
    assert f"{playbook}{expected}" in proc.stderr, proc.stderr
    assert proc.stdout == ""
    assert {n: after[n] - before[n] for n in after} == {n: 1 for n in after}  # only the counting sessions


def test_malformed_inventory_and_missing_files_are_clear_errors(lab: Lab, tmp_path) -> None:
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n    gpu01:\n      ansible_port: twenty-two\n")
    proc = fabnet("audit", str(inventory), "-p", str(SITE))
    assert proc.returncode == 3 and f"{inventory}:4" in proc.stderr and "ansible_port" in proc.stderr
    proc = fabnet("audit", str(tmp_path / "nope.yml"), "-p", str(SITE))
    assert proc.returncode == 3 and "nope.yml" in proc.stderr
    proc = fabnet("validate", str(lab.state.inventory_path), "-p", str(SITE))
    assert proc.returncode == 0 and "valid" in proc.stdout


def test_an_unusable_key_file_is_a_config_error_before_any_connection(lab: Lab, tmp_path) -> None:
    # Missing, a directory, the public half, garbage: each exits 3 naming the file once, and no host
    # sees a login attempt (no "unreachable" per host with an OS error and no path).
    (tmp_path / "keydir").mkdir()
    (tmp_path / "garbage").write_text("this is not a key\n")
    public = Path(f"{lab.state.key_path}.pub")
    if not public.exists():
        public = tmp_path / "id.pub"
        public.write_text(subprocess.run(["ssh-keygen", "-y", "-f", str(lab.state.key_path)], check=True,
                                         capture_output=True, text=True).stdout)
    cases = {tmp_path / "missing": "does not exist", tmp_path / "keydir": "is a directory",
             public: "is a public key", tmp_path / "garbage": "is not a private key"}
    before = sessions(lab)
    for key, words in cases.items():
        inventory = _inventory_copy(lab, tmp_path)
        data = yaml.safe_load(inventory.read_text())
        data["all"]["vars"]["ansible_ssh_private_key_file"] = str(key)
        inventory.write_text(yaml.safe_dump(data))
        proc = fabnet("audit", str(inventory), "-p", str(SITE), "--json")
        assert proc.returncode == 3, proc.stderr + proc.stdout
        assert proc.stdout == ""
        assert proc.stderr.count(str(key)) == 1 and words in proc.stderr, proc.stderr
        assert "gpu01" in proc.stderr and "unreachable" not in proc.stderr
    after = sessions(lab)
    assert {n: after[n] - before[n] for n in after} == {n: 1 for n in after}  # only the counting sessions


def test_ssh_config_is_honoured_including_proxyjump(lab: Lab, tmp_path) -> None:
    jump, target = lab.node("gpu01"), lab.node("gpu04")
    key, known_hosts = lab.state.key_path, lab.state.known_hosts_path
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host jumpbox\n  HostName {jump.mgmt_ip}\n  User root\n  IdentityFile {key}\n"
        f"Host gpu04-behind-jump\n  HostName {target.mgmt_ip}\n  User root\n  IdentityFile {key}\n"
        f"  ProxyJump jumpbox\n"
    )
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {
        "vars": {"fabnet_known_hosts": str(known_hosts), "data_iface": "eth1", "rdma_device": "mlx5_0",
                 "fabnet_sysfs_root": "/var/lib/fabnet-lab/sys"},
        "children": {"gpu": {"hosts": {"gpu04": {"ansible_host": "gpu04-behind-jump"}}}}}}))
    before = sessions(lab)
    proc = fabnet("audit", str(inventory), "-p", str(SITE), "--ssh-config", str(config), "--json")
    after = sessions(lab)
    assert proc.returncode == 2, proc.stderr + proc.stdout
    report = json.loads(proc.stdout)
    assert drift_of(report) == {"gpu04": EXPECTED_DRIFT["gpu04"]}
    # The exec ran on the target; the jump host only forwarded the connection (no session of its own).
    assert after["gpu04"] - before["gpu04"] == 2 and after["gpu01"] - before["gpu01"] == 1


def test_plan_and_rollback_honour_ssh_config_too(lab: Lab, tmp_path) -> None:
    """A host reachable only through the operator's ssh config is planned and rolled back, not only audited."""
    target = lab.node("gpu04")
    config = tmp_path / "ssh_config"
    config.write_text(f"Host gpu04-alias\n  HostName {target.mgmt_ip}\n  User root\n"
                      f"  IdentityFile {lab.state.key_path}\n")
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {
        "vars": {"fabnet_known_hosts": str(lab.state.known_hosts_path), "data_iface": "eth1",
                 "rdma_device": "mlx5_0", "fabnet_sysfs_root": "/var/lib/fabnet-lab/sys"},
        "children": {"gpu": {"hosts": {"gpu04": {"ansible_host": "gpu04-alias"}}}}}}))
    without = fabnet("plan", str(inventory), "-p", str(SITE), "-o", str(tmp_path / "none.json"))
    assert without.returncode == 4, without.stderr + without.stdout  # the alias resolves nowhere without it
    planned = fabnet("plan", str(inventory), "-p", str(SITE), "--ssh-config", str(config), "--connect-timeout", "5",
                     "--timeout", "60", "-f", "1", "-o", str(tmp_path / "plan.json"))
    assert planned.returncode == 0, planned.stderr + planned.stdout
    saved = json.loads((tmp_path / "plan.json").read_text())
    assert [h["name"] for h in saved["hosts"]] == ["gpu04"] and saved["hosts"][0]["steps"]
    # A run that never was: the host is reached and answers, and the shared lab keeps what other tests applied.
    undone = fabnet("rollback", str(inventory), "-p", str(SITE), "--limit", "gpu04", "--ssh-config", str(config),
                    "--run", "20000101T000000Z-000000", "--yes", "--json")
    hosts = json.loads(undone.stdout)["hosts"]
    assert [(h["name"], h["status"]) for h in hosts] == [("gpu04", "nothing")], undone.stdout + undone.stderr


def test_a_host_list_on_the_command_line_is_audited_with_the_playbooks_group_vars(lab: Lab, tmp_path) -> None:
    """`fabnet audit 198.18.1.1,198.18.1.2, -p PLAY`, as `ansible -i 'a,b,'`: the connection vars come from
    the group_vars beside the playbook, the list only names the hosts."""
    first, second = lab.node("gpu01"), lab.node("gpu05")
    (tmp_path / "group_vars").mkdir()
    lab_vars = yaml.safe_load(lab.state.inventory_path.read_text())["all"]["vars"]
    (tmp_path / "group_vars" / "all.yml").write_text(yaml.safe_dump(lab_vars))
    playbook = tmp_path / "mtu.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "all", "resources": [
        {"interface": {"name": "{{ data_iface }}", "mtu": 9000, "state": "up", "persistent": False}}]}]))
    hosts = f"{first.mgmt_ip}, {second.mgmt_ip},"
    proc = fabnet("audit", hosts, "-p", str(playbook), "--json")
    assert proc.returncode in (0, 2), proc.stderr + proc.stdout
    report = json.loads(proc.stdout)
    assert report["inventory"] == hosts
    assert {h["name"]: h["status"] != "unreachable" for h in report["hosts"]} == \
        {first.mgmt_ip: True, second.mgmt_ip: True}
    limited = fabnet("audit", hosts, "-p", str(playbook), "--limit", second.mgmt_ip, "--json")
    assert [h["name"] for h in json.loads(limited.stdout)["hosts"]] == [second.mgmt_ip], limited.stderr


def test_a_failing_read_affects_only_its_own_resource(lab: Lab) -> None:
    node = lab.node("gpu01")
    # Both QoS readers broken (dcb first, mlnx_qos its fallback); the system's own dcb, next in PATH, has
    # no DCB support on the lab's netdevs.
    lab.ssh(node, "chmod -x /usr/local/sbin/dcb /usr/local/sbin/mlnx_qos")
    try:
        proc = fabnet("audit", str(lab.state.inventory_path), "-p", str(SITE), "--limit", "gpu01,gpu02", "--json")
    finally:
        lab.ssh(node, "chmod +x /usr/local/sbin/dcb /usr/local/sbin/mlnx_qos")
    assert proc.returncode == 4
    hosts = {h["name"]: h for h in json.loads(proc.stdout)["hosts"]}
    assert hosts["gpu01"]["status"] == "failed" and "roce_qos[eth1]" in hosts["gpu01"]["error"]
    by_target = {r["target"]: r for r in hosts["gpu01"]["resources"]}
    qos = {c["attribute"]: c["status"] for c in by_target["roce_qos[eth1]"]["checks"]}
    assert qos["trust"] == "error" and qos["pfc"] == "error"
    assert qos["traffic_class"] == "ok" and qos["active_mtu"] == "ok"  # read by other probes
    assert all(r["status"] == "ok" for t, r in by_target.items() if t != "roce_qos[eth1]")
    assert hosts["gpu02"]["status"] == "drifted"


def test_an_unprivileged_login_with_become_reads_the_same_state(lab: Lab, tmp_path, audit_report) -> None:
    inventory = _inventory_copy(lab, tmp_path)
    data = yaml.safe_load(inventory.read_text())
    data["all"]["vars"].update({"ansible_user": "ops", "ansible_become": True})
    inventory.write_text(yaml.safe_dump(data))
    proc = fabnet("audit", str(inventory), "-p", str(SITE), "--json")
    assert proc.returncode == 2, proc.stderr
    report = json.loads(proc.stdout)
    assert drift_of(report) == EXPECTED_DRIFT
    assert all(host["execs"] == 1 for host in report["hosts"])
    log = lab.ssh(lab.node("gpu01"), "journalctl -u ssh --no-pager -o cat | grep 'Accepted publickey for ops' | wc -l")
    assert int(log.stdout) >= 1
