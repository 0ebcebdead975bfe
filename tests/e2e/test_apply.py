"""`fabnet apply` against a drifted lab of its own: every node converged (checked with testinfra over
the system ssh client, not fabnet's probes), one change exec and one re-check exec per drifted host,
nothing run on a second apply, backups and journals, the per-host lock, rolling batches."""

from __future__ import annotations

import json
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
import yaml

from provisioner.apply import guard_shell
from provisioner.apply.converge import new_run_id
from provisioner.cli import main
from provisioner.lab import manager
from provisioner.lab.emulation.ofed_install import INSTALL_COMMAND
from provisioner.lab.state import NodeRecord
from provisioner.resources.interface_fix import link_read
from provisioner.resources.steps import Expect, Step, setting_undo
from tests.e2e.conftest import Lab, lab_name
from tests.e2e.held import RELEASE, held_inventory, holding_the_lock
from tests.e2e.terminal import at_prompt

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "playbooks" / "site.yml"
APPLY_LAB = lab_name("apply")
OLD_NCCL = "2.18.3-1+cuda12.2"
NCCL_CONF = (ROOT / "provisioner/lab/profiles/default.yml")


def fabnet(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "provisioner", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def sessions(lab: Lab) -> dict[str, int]:
    """SSH exec sessions each node's sshd has logged (the counting session included)."""
    counts = {}
    for node in lab.nodes:
        out = lab.ssh(node, "journalctl -u ssh --no-pager -o cat | grep -c 'Starting session: command'").stdout
        counts[node.name] = int(out.strip())
    return counts


def logins(lab: Lab) -> dict[str, int]:
    """SSH logins each node's sshd has accepted (the counting login included)."""
    return {node.name: int(lab.ssh(node, "journalctl -u ssh --no-pager -o cat | grep -c '^Accepted publickey '")
                           .stdout.strip()) for node in lab.nodes}


def execs_between(lab: Lab, before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {name: after[name] - before[name] - 1 for name in after}


@pytest.fixture(scope="module")
def alab() -> Iterator[Lab]:
    """The default drifted lab, plus libnccl2 downgraded on gpu06 so NCCL drifts too."""
    manager.down(APPLY_LAB)
    try:
        lab = Lab(manager.up(APPLY_LAB))
        lab.ssh(lab.node("gpu06"), f"DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades "
                                   f"--allow-change-held-packages libnccl2={OLD_NCCL} >/dev/null")
        yield lab
    finally:
        manager.down(APPLY_LAB)


@pytest.fixture(scope="module")
def inventory(alab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The lab's inventory with the site's OFED installer set (here, the lab's stand-in)."""
    directory = tmp_path_factory.mktemp("inventory")
    (directory / "group_vars").mkdir()
    (directory / "group_vars" / "all.yml").write_text(yaml.safe_dump({"fabnet_ofed_install_command": INSTALL_COMMAND}))
    path = directory / "hosts.yml"
    path.write_text(alab.state.inventory_path.read_text())
    return path


@pytest.fixture(scope="module")
def first_apply(alab: Lab, inventory: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    journal = tmp_path_factory.mktemp("journal") / "journal.jsonl"
    logged_in = logins(alab)
    before = sessions(alab)
    proc = fabnet("apply", str(inventory), "-p", str(SITE), "--yes", "--json", "--journal", str(journal))
    after = sessions(alab)
    logged_in_after = logins(alab)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # Between the two login counts: the two exec counts' logins, fabnet's, and the second count's own.
    return {"report": json.loads(proc.stdout), "execs": execs_between(alab, before, after), "journal": journal,
            "logins": {name: logged_in_after[name] - logged_in[name] - 3 for name in logged_in}}


def test_apply_converges_every_host_and_reports_what_changed(first_apply: dict) -> None:
    report = first_apply["report"]
    assert report["schema"] == "fabnet/apply/v1" and report["exit_code"] == 0
    statuses = {h["name"]: h["status"] for h in report["hosts"]}
    assert statuses == {"gpu01": "ok", **{f"gpu0{i}": "changed" for i in range(2, 7)}}
    changed = {h["name"]: {r["target"] for r in h["resources"] if r["status"] == "changed"} for h in report["hosts"]}
    assert changed["gpu02"] >= {"interface[eth1]", "mtu_uniform[eth1]", "roce_qos[eth1]"}
    assert changed["gpu03"] == {"roce_qos[eth1]"}
    assert changed["gpu04"] == {"ofed"}
    assert changed["gpu05"] == {"service[rdma_cm]"}
    assert changed["gpu06"] == {"file[/etc/nccl.conf]", "nccl[libnccl2]"}


def test_a_drifted_host_costs_one_change_exec_and_one_recheck(first_apply: dict) -> None:
    # gather + change + re-check for drifted hosts; gather only for the host in sync.
    assert first_apply["execs"] == {"gpu01": 1, **{f"gpu0{i}": 3 for i in range(2, 7)}}
    assert {h["name"]: h["execs"] for h in first_apply["report"]["hosts"]} == first_apply["execs"]


def test_one_login_per_host_carries_gather_change_and_recheck(first_apply: dict) -> None:
    # One session per host per command: the change and the re-check reuse the gathering's login.
    assert first_apply["logins"] == {f"gpu0{i}": 1 for i in range(1, 7)}


def test_testinfra_sees_every_node_converged(alab: Lab, first_apply: dict) -> None:
    wanted_conf = yaml.safe_load(NCCL_CONF.read_text())["defaults"]["files"]["/etc/nccl.conf"]
    ecn = "/var/lib/fabnet-lab/sys/class/net/eth1/ecn"
    for node in alab.nodes:
        host = alab.host(node)
        link = json.loads(host.check_output("ip -j link show eth1"))[0]
        assert link["mtu"] == 9000 and "UP" in link["flags"], node.name
        network = host.file("/etc/systemd/network/10-data.network").content_string
        assert "MTUBytes=9000" in network and f"Address={node.data_ip}/24" in network, node.name
        qos = host.check_output("mlnx_qos -i eth1")
        assert "Priority trust state: dscp" in qos, node.name
        assert next(line.split()[1:] for line in qos.splitlines() if line.strip().startswith("enabled")) == \
            ["0", "0", "0", "1", "0", "0", "0", "0"], node.name
        for point in ("roce_np", "roce_rp"):
            assert host.file(f"{ecn}/{point}/enable/3").content_string.strip() == "1", node.name
        assert host.file(f"{ecn}/roce_np/cnp_dscp").content_string.strip() == "48"
        tclass = host.file("/var/lib/fabnet-lab/sys/class/infiniband/mlx5_0/tc/1/traffic_class").content_string
        assert "106" in tclass, node.name
        assert host.package("libnccl2").version.startswith("2.21.5"), node.name
        assert host.check_output("ofed_info -s").startswith("MLNX_OFED_LINUX-23.10"), node.name
        for unit in ("rdma_cm", "openibd"):
            assert host.service(unit).is_running and host.service(unit).is_enabled, (node.name, unit)
        assert "nvidia_peermem" in host.check_output("lsmod"), node.name
        assert host.sysctl("net.ipv4.conf.all.arp_ignore") == 1 and host.sysctl("net.ipv4.conf.all.arp_announce") == 2
        conf = host.file("/etc/nccl.conf")
        assert conf.content_string == wanted_conf and conf.mode == 0o644 and conf.user == "root", node.name
    gpu06 = alab.host(alab.node("gpu06"))
    assert "libnccl2" in gpu06.check_output("apt-mark showhold").split()
    assert "2.21.5" in gpu06.file("/etc/apt/preferences.d/fabnet-libnccl2").content_string
    gpu03 = alab.host(alab.node("gpu03"))
    assert gpu03.service("fabnet-roce-qos").is_enabled  # the QoS settings are replayed at boot


def test_backups_and_journals_say_what_happened(alab: Lab, first_apply: dict) -> None:
    run_id = first_apply["report"]["run_id"]
    gpu02 = alab.host(alab.node("gpu02"))
    backup = gpu02.file(f"/var/backups/fabnet/{run_id}/etc/systemd/network/10-data.network")
    assert backup.exists and "MTUBytes" not in backup.content_string  # the file as it was before
    gpu06 = alab.host(alab.node("gpu06"))
    assert gpu06.file(f"/var/backups/fabnet/{run_id}/etc/nccl.conf.absent").exists  # rollback removes it
    host_journal = [json.loads(line)
                    for line in gpu06.file("/var/log/fabnet/journal.jsonl").content_string.splitlines()]
    assert {(j["run"], j["resource"], j["outcome"]) for j in host_journal} >= {
        (run_id, "file[/etc/nccl.conf]", "ok"), (run_id, "nccl[libnccl2]", "ok")}
    wanted = yaml.safe_load(NCCL_CONF.read_text())["defaults"]["files"]["/etc/nccl.conf"]
    for line in wanted.splitlines():  # no file content in any journal
        assert line not in gpu06.file("/var/log/fabnet/journal.jsonl").content_string
        assert line not in first_apply["journal"].read_text()
    local = [json.loads(line) for line in first_apply["journal"].read_text().splitlines()]
    assert {(j["host"], j["resource"], j["outcome"]) for j in local} >= {
        ("gpu05", "service[rdma_cm]", "started"), ("gpu05", "service[rdma_cm]", "ok")}


def test_audit_after_apply_exits_0(alab: Lab, inventory: Path, first_apply: dict) -> None:
    proc = fabnet("audit", str(inventory), "-p", str(SITE))
    assert proc.returncode == 0, proc.stdout[-2000:]


def test_second_apply_changes_nothing_in_one_exec_per_host(alab: Lab, inventory: Path, first_apply: dict) -> None:
    journal_lines = {n.name: alab.ssh(n, "wc -l < /var/log/fabnet/journal.jsonl 2>/dev/null || echo 0").stdout
                     for n in alab.nodes}
    before = sessions(alab)
    proc = fabnet("apply", str(inventory), "-p", str(SITE), "--yes", "--json",
                  "--journal", str(first_apply["journal"]))
    after = sessions(alab)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["summary"]["resources_changed"] == 0 and report["summary"]["changed"] == 0
    assert all(not host["steps"] for host in report["plan"])
    assert execs_between(alab, before, after) == {n.name: 1 for n in alab.nodes}
    # No remedy command ran: the hosts' journals did not grow.
    assert {n.name: alab.ssh(n, "wc -l < /var/log/fabnet/journal.jsonl 2>/dev/null || echo 0").stdout
            for n in alab.nodes} == journal_lines


def test_a_second_concurrent_apply_refuses_and_names_the_holder(alab: Lab, inventory: Path,
                                                                first_apply: dict, tmp_path: Path) -> None:
    node = alab.node("gpu04")
    alab.ssh(node, "sed -i 's/MLNX_OFED_LINUX-23.10-1.1.9.0/MLNX_OFED_LINUX-5.8-2.0.3.0/' /var/lib/fabnet-lab/hw.json")
    args = ("apply", str(held_inventory(inventory, tmp_path / "slow")), "-p", str(SITE), "--limit", "gpu04",
            "--yes", "--json", "--journal", str(tmp_path / "j.jsonl"))
    with holding_the_lock(alab, node, args, timeout=30) as first:
        second = fabnet(*args)
        alab.ssh(node, f"touch {RELEASE}")
        out, _ = first.communicate(timeout=120)
    first_report = json.loads(out)
    assert first.returncode == 0 and first_report["hosts"][0]["status"] == "changed"
    assert second.returncode == 2
    refused = json.loads(second.stdout)["hosts"][0]
    assert refused["status"] == "failed"
    assert f"run={first_report['run_id']}" in refused["error"] and "control=" in refused["error"]
    assert "since=" in refused["error"]
    assert alab.host(node).check_output("ofed_info -s").startswith("MLNX_OFED_LINUX-23.10")


# An mlnx_qos that reads as usual but refuses to set the trust mode, as a NIC in a bad state does.
FAILING_MLNX_QOS = """#!/bin/sh
case "$*" in *--trust*) echo "Netlink error: Device or resource busy" >&2; exit 1;; esac
exec /usr/local/sbin/mlnx_qos.real "$@"
"""


def test_serial_batches_stop_past_max_fail_percent(alab: Lab, inventory: Path,
                                                   first_apply: dict, tmp_path: Path) -> None:
    # gpu01, gpu03 and gpu05 drift; gpu01's mlnx_qos refuses to set anything, so gpu01 fails.
    for name in ("gpu01", "gpu03", "gpu05"):
        alab.ssh(alab.node(name), "mlnx_qos -i eth1 --trust pcp >/dev/null")
    alab.ssh(alab.node("gpu01"), "cp /usr/local/sbin/mlnx_qos /usr/local/sbin/mlnx_qos.real && printf %s "
             + shlex.quote(FAILING_MLNX_QOS) + " > /usr/local/sbin/mlnx_qos")
    try:
        proc = fabnet("apply", str(inventory), "-p", str(SITE), "--yes", "--json", "--serial", "2",
                      "--max-fail-percent", "25", "--journal", str(tmp_path / "j.jsonl"))
        report = json.loads(proc.stdout)
        assert proc.returncode == 2
        assert report["batches"] == [["gpu01", "gpu02"]]
        assert "max-fail-percent" in report["stopped"]
        statuses = {h["name"]: h["status"] for h in report["hosts"]}
        assert statuses == {"gpu01": "failed", "gpu02": "ok", "gpu03": "skipped", "gpu04": "skipped",
                            "gpu05": "skipped", "gpu06": "skipped"}
        assert "trust state: pcp" in alab.host(alab.node("gpu03")).check_output("mlnx_qos -i eth1")
        # A canary first: one host, then all the others in one batch.
        alab.ssh(alab.node("gpu01"), "mv /usr/local/sbin/mlnx_qos.real /usr/local/sbin/mlnx_qos")
        proc = fabnet("apply", str(inventory), "-p", str(SITE), "--yes", "--json", "--serial", "1,100%",
                      "--journal", str(tmp_path / "j.jsonl"))
        report = json.loads(proc.stdout)
        assert proc.returncode == 0, proc.stdout[-2000:]
        assert report["batches"] == [["gpu01"], ["gpu02", "gpu03", "gpu04", "gpu05", "gpu06"]]
        assert {h["name"] for h in report["hosts"] if h["status"] == "changed"} == {"gpu01", "gpu03", "gpu05"}
    finally:
        alab.ssh(alab.node("gpu01"), "if [ -e /usr/local/sbin/mlnx_qos.real ]; then "
                 "mv /usr/local/sbin/mlnx_qos.real /usr/local/sbin/mlnx_qos; fi", check=False)


MGMT_DOWN = """\
- name: take the management interface down
  hosts: gpu
  resources:
    - interface: {name: eth0, state: down, persistent: false}
"""


def test_a_change_that_cuts_the_management_path_is_reverted_by_the_node(alab: Lab, inventory: Path, first_apply: dict,
                                                                        tmp_path: Path) -> None:
    playbook = tmp_path / "mgmt.yml"
    playbook.write_text(MGMT_DOWN)
    node = alab.node("gpu02")
    started = time.monotonic()
    proc = fabnet("apply", str(inventory), "-p", str(playbook), "--limit", "gpu02", "--yes", "--json",
                  "--revert-after", "10", "--journal", str(tmp_path / "j.jsonl"))
    report = json.loads(proc.stdout)
    host = report["hosts"][0]
    assert proc.returncode == 2 and host["status"] == "failed"
    assert "management path was lost" in host["error"] and "reverted the change on its own" in host["error"]
    assert time.monotonic() - started < 45  # the revert time, the margin, reconnecting and the re-check
    # The node's journal: the timer fired on time (1 s accuracy, not systemd's default minute), and the
    # report gives that real time.
    records = [json.loads(line) for line in alab.host(node).file("/var/log/fabnet/journal.jsonl")
               .content_string.splitlines()]
    revert = next(r for r in records if r.get("action") == "revert" and r["run"] == report["run_id"])
    assert 10 <= revert["after_s"] <= 10 + 3 and revert["host"] == "gpu02"
    assert f"on its own after {revert['after_s']} s" in host["error"]
    # The node is reachable again, its management interface up, and it says it reverted.
    link = json.loads(alab.host(node).check_output("ip -j link show eth0"))[0]
    assert "UP" in link["flags"]
    assert alab.host(node).file(f"/run/fabnet-reverted-{report['run_id']}").exists
    local = [json.loads(line) for line in (tmp_path / "j.jsonl").read_text().splitlines()]
    assert {"action": "confirm", "outcome": "reverted"}.items() <= next(
        j for j in local if j.get("action") == "confirm").items()


def test_an_install_cut_short_before_its_hold_and_pin_is_drift_and_apply_completes_it(
        alab: Lab, inventory: Path, first_apply: dict, tmp_path: Path) -> None:
    # As an NCCL install interrupted after dpkg but before `apt-mark hold` and the pin leaves a node.
    node = alab.node("gpu05")
    alab.ssh(node, "apt-mark unhold libnccl2 >/dev/null && rm -f /etc/apt/preferences.d/fabnet-libnccl2")
    assert alab.host(node).check_output("apt-mark showhold") == ""
    audit = fabnet("audit", str(inventory), "-p", str(SITE), "--limit", "gpu05", "--json")
    assert audit.returncode == 2, audit.stdout[-2000:] + audit.stderr[-2000:]
    (host,) = json.loads(audit.stdout)["hosts"]
    nccl = next(r for r in host["resources"] if r["target"].startswith("nccl"))
    assert {c["attribute"]: c["status"] for c in nccl["checks"]} == {"version": "ok", "held": "drift",
                                                                     "pin": "drift"}
    proc = fabnet("apply", str(inventory), "-p", str(SITE), "--limit", "gpu05", "--yes", "--json",
                  "--journal", str(tmp_path / "j.jsonl"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert alab.host(node).check_output("apt-mark showhold") == "libnccl2"
    pin = alab.host(node).file("/etc/apt/preferences.d/fabnet-libnccl2").content_string
    assert "Pin: version 2.21.5-1+cuda12.4" in pin
    assert alab.host(node).check_output("dpkg-query -W -f '${Version}' libnccl2") == "2.21.5-1+cuda12.4"


def test_a_management_path_change_that_keeps_the_session_is_confirmed(alab: Lab, inventory: Path, first_apply: dict,
                                                                      tmp_path: Path) -> None:
    # An MTU change on eth0 keeps the path: armed, confirmed over a fresh connection, disarmed.
    playbook = tmp_path / "mtu.yml"
    playbook.write_text(MGMT_DOWN.replace("state: down, persistent: false", "mtu: 1500, persistent: false")
                        .replace("{name: eth0,", "{name: eth0, state: up,"))
    node = alab.node("gpu03")
    alab.ssh(node, "ip link set dev eth0 mtu 1400")
    proc = fabnet("apply", str(inventory), "-p", str(playbook), "--limit", "gpu03", "--yes", "--json",
                  "--revert-after", "10", "--journal", str(tmp_path / "j.jsonl"))
    report = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert report["hosts"][0]["status"] == "changed" and report["hosts"][0]["execs"] == 4  # + the confirmation
    time.sleep(11)  # past the revert time: the disarmed timer must not have fired
    assert json.loads(alab.host(node).check_output("ip -j link show eth0"))[0]["mtu"] == 1500
    assert not alab.host(node).file(f"/run/fabnet-reverted-{report['run_id']}").exists


MGMT_MTU = MGMT_DOWN.replace("state: down, persistent: false", "mtu: 1500, persistent: false") \
    .replace("{name: eth0,", "{name: eth0, state: up,")


def test_a_rollback_of_a_management_mtu_change_is_armed_and_confirmed(alab: Lab, inventory: Path, first_apply: dict,
                                                                      tmp_path: Path) -> None:
    # The MTU apply changed on eth0 (the session kept, confirmed) goes back the same way: the undo of the
    # management interface is armed, the rollback confirmed over a fresh connection, the timer disarmed.
    playbook = tmp_path / "mtu.yml"
    playbook.write_text(MGMT_MTU)
    node = alab.node("gpu03")
    alab.ssh(node, "ip link set dev eth0 mtu 1400")
    try:
        applied = fabnet("apply", str(inventory), "-p", str(playbook), "--limit", "gpu03", "--yes", "--json",
                         "--revert-after", "10", "--journal", str(tmp_path / "j.jsonl"))
        assert applied.returncode == 0, applied.stdout[-2000:]
        run_id = json.loads(applied.stdout)["run_id"]
        assert json.loads(alab.host(node).check_output("ip -j link show eth0"))[0]["mtu"] == 1500
        proc = fabnet("rollback", str(inventory), "-p", str(playbook), "--limit", "gpu03", "--run", run_id,
                      "--revert-after", "10", "--yes", "--json")
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        host = json.loads(proc.stdout)["hosts"][0]
        assert host["status"] == "rolled_back" and host["armed"] and host["confirmation"] == "confirmed"
        assert [(u["step"], u["exit_code"]) for u in host["undone"]] == [("0000", 0)]
        time.sleep(11)  # past the revert time: the disarmed timer must not have fired
        assert json.loads(alab.host(node).check_output("ip -j link show eth0"))[0]["mtu"] == 1400
        assert not alab.host(node).file(f"/run/fabnet-reverted-{host['rollback_id']}").exists
        assert not alab.host(node).file(f"/var/backups/fabnet/{run_id}/undo").exists  # rolled back
    finally:
        alab.ssh(node, "ip link set dev eth0 mtu 1500")


def _recorded_run(alab: Lab, node: NodeRecord, step: Step) -> str:
    """A run on `node` that made `step`, as apply records it: its undo (with its record line), its re-do."""
    run_id = new_run_id()
    where = shlex.quote(f"/var/backups/fabnet/{run_id}")
    alab.ssh(node, f"FABNET_BACKUP_DIR={where}; export FABNET_BACKUP_DIR; mkdir -p \"$FABNET_BACKUP_DIR\" && "
                   f"{guard_shell.undo_record(step, 0)} && echo ok > \"$FABNET_BACKUP_DIR/state/0000\"")
    return run_id


def test_a_rollback_whose_undo_takes_the_management_path_down_is_reverted_by_the_node(
        alab: Lab, inventory: Path, first_apply: dict, tmp_path: Path) -> None:
    # A run that brought eth0 up (as interface_fix makes the step): its undo takes the path down.
    playbook = tmp_path / "mgmt.yml"
    playbook.write_text(MGMT_DOWN)
    node = alab.node("gpu02")
    name, read = "the link of eth0", link_read("eth0")
    up = Step("interface[eth0]", "link", "ip link set dev eth0 up", "ip link set dev eth0 up", netdev="eth0",
              undo=setting_undo(name, read, "up", "down", "ip link set dev eth0 down"),
              expect=(Expect.setting(name, read, "down"),))
    run_id = _recorded_run(alab, node, up)
    started = time.monotonic()
    try:
        proc = fabnet("rollback", str(inventory), "-p", str(playbook), "--limit", "gpu02", "--run", run_id,
                      "--revert-after", "10", "--yes", "--json")
        assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
        host = json.loads(proc.stdout)["hosts"][0]
        assert host["status"] == "failed" and host["armed"] and host["confirmation"] == "reverted"
        assert "management path was lost" in host["error"] and "reverted the rollback on its own" in host["error"]
        assert time.monotonic() - started < 45  # the revert time, the margin and reconnecting
        # The node re-did the change on its own, on time, and kept the undo for a later rollback.
        link = json.loads(alab.host(node).check_output("ip -j link show eth0"))[0]
        assert "UP" in link["flags"]
        records = [json.loads(line) for line in alab.host(node).file("/var/log/fabnet/journal.jsonl")
                   .content_string.splitlines()]
        revert = next(r for r in records if r.get("action") == "revert" and r["run"] == host["rollback_id"])
        assert 10 <= revert["after_s"] <= 10 + 3 and revert["host"] == "gpu02"
        assert f"on its own after {revert['after_s']} s" in host["error"]
        assert alab.host(node).file(f"/var/backups/fabnet/{run_id}/undo/0000").exists
    finally:
        alab.ssh(node, f"rm -rf /var/backups/fabnet/{run_id}", check=False)


def test_sigkill_mid_apply_leaves_files_whole_and_the_next_apply_finishes(alab: Lab, inventory: Path, first_apply: dict,
                                                                           tmp_path: Path) -> None:
    # gpu04 gets a slow OFED install (its change exec takes several seconds), gpu06 loses /etc/nccl.conf.
    gpu04, gpu06 = alab.node("gpu04"), alab.node("gpu06")
    alab.ssh(gpu04, "sed -i 's/MLNX_OFED_LINUX-23.10-1.1.9.0/MLNX_OFED_LINUX-5.8-2.0.3.0/' /var/lib/fabnet-lab/hw.json")
    alab.ssh(gpu04, "rm -f /etc/nccl.conf")
    alab.ssh(gpu06, "rm -f /etc/nccl.conf")
    slow = tmp_path / "slow"
    (slow / "group_vars").mkdir(parents=True)
    (slow / "group_vars" / "all.yml").write_text(
        yaml.safe_dump({"fabnet_ofed_install_command": "sleep 5; " + INSTALL_COMMAND}))
    (slow / "hosts.yml").write_text(inventory.read_text())
    journal = tmp_path / "j.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "provisioner", "apply", str(slow / "hosts.yml"), "-p", str(SITE),
                             "--yes", "--journal", str(journal)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=ROOT)
    deadline = time.monotonic() + 60
    while alab.ssh(gpu04, "test -d /run/fabnet.lock", check=False).returncode != 0:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    proc.kill()  # SIGKILL: no cleanup of any kind on the control machine
    proc.wait()
    wanted = yaml.safe_load(NCCL_CONF.read_text())["defaults"]["files"]["/etc/nccl.conf"]
    for node in (gpu04, gpu06):
        host = alab.host(node)
        conf = host.file("/etc/nccl.conf")
        assert not conf.exists or conf.content_string == wanted  # old (absent) or new, never a part
    # The host finishes its steps on its own (the kill only closed the session), and says so.
    while alab.ssh(gpu04, "test -d /run/fabnet.lock", check=False).returncode == 0:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    for node in (gpu04, gpu06):
        assert alab.host(node).file("/etc/nccl.conf").content_string == wanted
        assert alab.host(node).run("ls -a /etc | grep -c '^[.]fabnet[.]'").stdout.strip() == "0"  # no temporary left
    entries = [json.loads(line) for line in
               alab.host(gpu04).file("/var/log/fabnet/journal.jsonl").content_string.splitlines()]
    run_id = entries[-1]["run"]
    assert {(e["resource"], e["outcome"]) for e in entries if e["run"] == run_id} >= {
        ("ofed", "ok"), ("file[/etc/nccl.conf]", "ok")}
    assert alab.host(gpu04).file(f"/var/backups/fabnet/{run_id}/etc/nccl.conf.absent").exists
    local = [json.loads(line) for line in journal.read_text().splitlines()]
    assert {(e["host"], e["outcome"]) for e in local} >= {("gpu04", "started")}  # it was recorded before the kill
    proc2 = fabnet("apply", str(inventory), "-p", str(SITE), "--yes", "--journal", str(journal))
    assert proc2.returncode == 0, proc2.stdout[-2000:]
    assert fabnet("audit", str(inventory), "-p", str(SITE)).returncode == 0


def test_rollback_restores_the_before_state_of_a_run(alab: Lab, inventory: Path, first_apply: dict) -> None:
    run_id = first_apply["report"]["run_id"]
    proc = fabnet("rollback", str(inventory), "-p", str(SITE), "--limit", "gpu02,gpu06", "--run", run_id,
                  "--yes", "--json")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert {h["name"]: h["status"] for h in report["hosts"]} == {"gpu02": "rolled_back", "gpu06": "rolled_back"}
    gpu02, gpu06 = alab.host(alab.node("gpu02")), alab.host(alab.node("gpu06"))
    assert json.loads(gpu02.check_output("ip -j link show eth1"))[0]["mtu"] == 1500
    assert "MTUBytes" not in gpu02.file("/etc/systemd/network/10-data.network").content_string
    assert not gpu06.file("/etc/nccl.conf").exists
    assert gpu06.package("libnccl2").version == OLD_NCCL
    # Rolled back once: a second rollback of the same run finds nothing left to undo.
    again = fabnet("rollback", str(inventory), "-p", str(SITE), "--limit", "gpu02", "--run", run_id, "--yes", "--json")
    assert again.returncode == 2 and json.loads(again.stdout)["hosts"][0]["status"] == "nothing"


# Shell metacharacters in every string field a playbook or an inventory can set. Each either fails
# validation or arrives at the host as data: no `touch` below may ever run, on a node or here.
PAYLOADS = ["; touch /tmp/pwned-semi", "$(touch /tmp/pwned-dollar)", "`touch /tmp/pwned-tick`",
            "x\ntouch /tmp/pwned-newline", "-rf --no-preserve-root"]
SHORT = [";touch${IFS}pw1", "$(touch${IFS}pw)", "`touch${IFS}pw3`", "-x", "a&&touch${IFS}p"]  # netdev names: <=15


def _fields() -> list[tuple[str, dict]]:
    cases: list[tuple[str, dict]] = []
    for i, payload in enumerate(PAYLOADS):
        cases += [
            ("file", {"path": f"/tmp/fabnet-inj-{i}{payload}", "content": payload + "\n"}),
            ("file", {"path": f"/tmp/fabnet-inj-content-{i}", "content": payload + "\n"}),
            ("file", {"path": f"/tmp/fabnet-inj-owner-{i}", "content": "x\n", "owner": payload}),
            ("file", {"path": f"/tmp/fabnet-inj-mode-{i}", "content": "x\n", "mode": payload}),
            ("file", {"path": f"/tmp/fabnet-inj-notify-{i}", "content": "x\n", "notify": [payload]}),
            ("sysctl", {"name": "net.ipv4.conf.all.arp_ignore", "value": payload, "persistent": False}),
            ("sysctl", {"name": payload, "value": "1"}),
            ("service", {"name": payload}),
            ("kernel_module", {"name": payload}),
            ("nccl", {"version": "==2.21.5", "package": payload}),
            ("nccl", {"version": payload}),
            ("roce_qos", {"rdma_device": payload, "trust": "dscp"}),
        ]
    for name in SHORT:
        cases += [("interface", {"name": name, "mtu": 9000}), ("roce_qos", {"interface": name, "ecn": [3],
                                                                            "roce_tos": 106, "trust": "dscp"})]
    return cases


def test_metacharacters_fail_validation_or_arrive_quoted(alab: Lab, inventory: Path, first_apply: dict,
                                                         tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    accepted = []
    for kind, spec in _fields():
        single = tmp_path / "one.yml"
        single.write_text(yaml.safe_dump([{"name": "inj", "hosts": "gpu01", "resources": [{kind: spec}]}]))
        # validate contacts no host: the command's own entry point, in this process (seventy interpreters
        # started for it cost more than the rest of the test).
        with pytest.raises(SystemExit) as done:
            main(["validate", str(inventory), "-p", str(single)])
        if not done.value.code:
            accepted.append({kind: spec})
        else:
            assert done.value.code == 3, capsys.readouterr().err
    # Names that could be read as shell syntax or options are refused at validate time; data such as file
    # contents and one-line sysctl values is accepted and must reach the host quoted.
    content_specs = [r for r in accepted if "file" in r and r["file"]["path"].startswith("/tmp/fabnet-inj-content-")]
    assert len(content_specs) == len(PAYLOADS)
    assert [next(iter(r)) for r in accepted].count("sysctl") >= 3
    playbook = tmp_path / "inj.yml"
    playbook.write_text(yaml.safe_dump([{"name": "inj", "hosts": "gpu01", "resources": accepted}]))
    # A sysfs root or management interface that is not a plain path or interface name is refused when the
    # inventory loads (exit 3, the key named), before any host is contacted.
    for key, value in (("fabnet_sysfs_root", "/var/lib/fabnet-lab/sys; touch /tmp/pwned-sysfs"),
                       ("fabnet_management_interfaces", ["$(touch /tmp/pwned-mgmt)"])):
        refused = tmp_path / f"refused-{key}"
        (refused / "host_vars").mkdir(parents=True)
        (refused / "host_vars" / "gpu01.yml").write_text(yaml.safe_dump({key: value}))
        (refused / "hosts.yml").write_text(inventory.read_text())
        proc = fabnet("apply", str(refused / "hosts.yml"), "-p", str(playbook), "--limit", "gpu01", "--yes",
                      "--journal", str(tmp_path / "j.jsonl"))
        assert proc.returncode == 3 and key in proc.stderr, (proc.returncode, proc.stderr[-2000:])
    evil = tmp_path / "evil"
    (evil / "host_vars").mkdir(parents=True)
    (evil / "host_vars" / "gpu01.yml").write_text(yaml.safe_dump({"fabnet_ofed_install_command": INSTALL_COMMAND}))
    (evil / "hosts.yml").write_text(inventory.read_text())
    for args in (("--check",), ("--yes",)):
        fabnet("apply", str(evil / "hosts.yml"), "-p", str(playbook), "--limit", "gpu01", "--json",
               "--journal", str(tmp_path / "j.jsonl"), *args)
    node = alab.host(alab.node("gpu01"))
    canaries = [f"/tmp/pwned-{n}" for n in ("semi", "dollar", "tick", "newline", "sysfs", "mgmt")]
    canaries += [f"{d}/{n}" for d in ("/root", "/") for n in ("pw1", "pw", "pw3", "p")]
    for canary in canaries:
        assert not node.file(canary).exists, canary
        assert not Path(canary).exists(), canary
    assert not any((ROOT / n).exists() for n in ("pw1", "pw", "pw3", "p"))
    # The files whose contents carried metacharacters hold exactly that text.
    for i, payload in enumerate(PAYLOADS):
        assert node.file(f"/tmp/fabnet-inj-content-{i}").content_string == payload + "\n"


def test_a_saved_plan_applies_exactly_and_refuses_hosts_changed_since(alab: Lab, inventory: Path, first_apply: dict,
                                                                      tmp_path: Path) -> None:
    # From a converged fleet (earlier tests rolled some hosts back), gpu03 and gpu05 drift.
    assert fabnet("apply", str(inventory), "-p", str(SITE), "--yes", "--journal", str(tmp_path / "j")).returncode == 0
    for name in ("gpu03", "gpu05"):
        alab.ssh(alab.node(name), "mlnx_qos -i eth1 --trust pcp >/dev/null")
    plan = tmp_path / "plan.json"
    proc = fabnet("plan", str(inventory), "-p", str(SITE), "-o", str(plan), "--detailed-exitcode")
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert plan.stat().st_mode & 0o077 == 0  # it holds file contents: owner only
    saved = json.loads(plan.read_text())
    planned = {h["name"]: [s["resource"] + ":" + s["action"] for s in h["steps"]] for h in saved["hosts"]}
    assert {n for n, steps in planned.items() if steps} == {"gpu03", "gpu05"}
    # Someone changes gpu05 by hand after the plan was made.
    alab.ssh(alab.node("gpu05"), "mlnx_qos -i eth1 --pfc 0,0,0,0,0,0,0,0 >/dev/null")
    proc = fabnet("apply", str(inventory), "--plan", str(plan), "--yes", "--json", "--journal", str(tmp_path / "j"))
    assert proc.returncode == 2
    report = json.loads(proc.stdout)
    hosts = {h["name"]: h for h in report["hosts"]}
    assert hosts["gpu03"]["status"] == "changed"
    assert [s["id"] for r in hosts["gpu03"]["resources"] for s in r["steps"]] == planned["gpu03"]
    assert hosts["gpu05"]["status"] == "failed" and "changed since the plan" in hosts["gpu05"]["error"]
    assert "trust state: pcp" in alab.host(alab.node("gpu05")).check_output("mlnx_qos -i eth1")  # untouched
    assert fabnet("apply", str(inventory), "-p", str(SITE), "--yes", "--journal", str(tmp_path / "j")).returncode == 0


def test_the_plan_help_example_applies_with_group_vars_beside_the_playbook(alab: Lab, inventory: Path,
                                                                          first_apply: dict, tmp_path: Path) -> None:
    # A playbook whose MTU comes from group_vars beside it: validate, audit and apply always read those;
    # plan and rollback now load through the same path.
    books = tmp_path / "books"
    (books / "group_vars").mkdir(parents=True)
    (books / "group_vars" / "gpu.yml").write_text("site_mtu: 9000\n")
    text = SITE.read_text()
    assert "        mtu: 9000\n" in text
    (books / "site.yml").write_text(text.replace("        mtu: 9000\n", '        mtu: "{{ site_mtu }}"\n', 1))
    shutil.copytree(ROOT / "templates", books / "templates")
    alab.ssh(alab.node("gpu03"), "mlnx_qos -i eth1 --trust pcp >/dev/null")
    plan = tmp_path / "plan.json"
    journal = str(tmp_path / "j")
    # The example from `fabnet plan --help`, verbatim in shape: plan exits 0 once a plan is written.
    proc = subprocess.run(
        f"{sys.executable} -m provisioner plan {inventory} -p {books / 'site.yml'} -o {plan} && "
        f"{sys.executable} -m provisioner apply {inventory} --plan {plan} --yes --journal {journal}",
        shell=True, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "trust state: dscp" in alab.host(alab.node("gpu03")).check_output("mlnx_qos -i eth1")
    assert fabnet("audit", str(inventory), "-p", str(books / "site.yml")).returncode == 0
    undo = fabnet("rollback", str(inventory), "-p", str(books / "site.yml"), "--limit", "gpu03", "--yes", "--json")
    assert undo.returncode == 0, undo.stdout[-2000:] + undo.stderr[-2000:]
    assert "trust state: pcp" in alab.host(alab.node("gpu03")).check_output("mlnx_qos -i eth1")
    assert fabnet("apply", str(inventory), "-p", str(SITE), "--yes", "--journal", journal).returncode == 0


TWO_SYSCTLS = """\
- name: two sysctls persisted in one file
  hosts: gpu
  resources:
    - sysctl: {name: net.ipv4.conf.all.arp_ignore, value: 1}
    - sysctl: {name: net.ipv4.conf.all.arp_announce, value: 2}
"""
VENDOR_SYSCTLS = "/etc/sysctl.d/90-fabnet-lab.conf"


def _vendor_sysctls(alab: Lab, node: NodeRecord, tmp_path: Path) -> Path:
    """Vendor defaults on `node`: both keys wrong, live and in the one sysctl.d file that sets them at
    boot; returns the playbook that wants them right."""
    alab.ssh(node, f"rm -f /etc/sysctl.d/99-fabnet-net.ipv4.conf.all.arp_*; printf '%s\\n' '# vendor' "
                   f"'net.ipv4.conf.all.arp_ignore = 0' 'net.ipv4.conf.all.arp_announce = 0' > {VENDOR_SYSCTLS}; "
                   "sysctl -q -w net.ipv4.conf.all.arp_ignore=0 net.ipv4.conf.all.arp_announce=0")
    playbook = tmp_path / "sysctls.yml"
    playbook.write_text(TWO_SYSCTLS)
    return playbook


def test_two_sysctls_in_one_file_converge_in_one_apply(alab: Lab, inventory: Path, first_apply: dict,
                                                       tmp_path: Path) -> None:
    node = alab.node("gpu03")
    playbook = _vendor_sysctls(alab, node, tmp_path)
    proc = fabnet("apply", str(inventory), "-p", str(playbook), "--limit", "gpu03", "--yes", "--json",
                  "--journal", str(tmp_path / "j.jsonl"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["hosts"][0]["status"] == "changed"
    writes = [s for s in report["plan"][0]["steps"] if VENDOR_SYSCTLS in s["writes"]]
    assert len(writes) == 1  # one write carrying both edits
    text = alab.ssh(node, f"cat {VENDOR_SYSCTLS}").stdout
    assert text == "# vendor\nnet.ipv4.conf.all.arp_ignore = 1\nnet.ipv4.conf.all.arp_announce = 2\n"
    assert alab.ssh(node, "sysctl -n net.ipv4.conf.all.arp_ignore net.ipv4.conf.all.arp_announce").stdout.split() == \
        ["1", "2"]


SLOW_UNIT = """[Unit]
Description=a service whose start takes minutes
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sleep 300
"""
KILLED = """\
- name: a file, then a service whose start hangs
  hosts: gpu
  resources:
    - file: {path: /etc/fabnet-kill-test.conf, content: "new\\n"}
    - service: {name: fabnet-slow, state: started, enabled: null}
"""


def test_rollback_takes_over_the_lock_of_a_killed_run_and_undoes_its_steps(alab: Lab, inventory: Path,
                                                                           first_apply: dict, tmp_path: Path) -> None:
    node = alab.node("gpu05")
    alab.ssh(node, "printf 'old\\n' > /etc/fabnet-kill-test.conf && printf %s "
             + shlex.quote(SLOW_UNIT) + " > /etc/systemd/system/fabnet-slow.service && systemctl daemon-reload")
    playbook = tmp_path / "killed.yml"
    playbook.write_text(KILLED)
    apply = subprocess.Popen([sys.executable, "-m", "provisioner", "apply", str(inventory), "-p", str(playbook),
                              "--limit", "gpu05", "--yes", "--json", "--journal", str(tmp_path / "j.jsonl")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        # The file is written, and the service's start hangs: kill the node's change script there.
        while alab.ssh(node, "systemctl is-active fabnet-slow", check=False).stdout.strip() != "activating":
            assert time.monotonic() < deadline and apply.poll() is None, "the service start never began"
            time.sleep(0.2)
        assert alab.ssh(node, "cat /etc/fabnet-kill-test.conf").stdout == "new\n"
        alab.ssh(node, "kill -9 $(sed -n 's/^pid=//p' /run/fabnet.lock/holder)")
        out, _ = apply.communicate(timeout=120)
    finally:
        if apply.poll() is None:
            apply.kill()
        alab.ssh(node, "systemctl kill fabnet-slow; systemctl stop fabnet-slow", check=False)
    assert apply.returncode != 0 and json.loads(out)["hosts"][0]["status"] != "changed"
    assert alab.ssh(node, "test -d /run/fabnet.lock", check=False).returncode == 0  # left behind by the kill
    proc = fabnet("rollback", str(inventory), "-p", str(playbook), "--limit", "gpu05", "--yes", "--json")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    host = json.loads(proc.stdout)["hosts"][0]
    assert host["status"] == "rolled_back"
    assert any("took over a stale lock" in w and "is gone" in w for w in host["warnings"]), host["warnings"]
    undone = {u["undoes"].split()[0]: u["state"] for u in host["undone"]}
    # The start the kill cut off is undone too: its undo was recorded before it ran.
    assert undone == {"service[fabnet-slow]:start": "started", "file[/etc/fabnet-kill-test.conf]:write": "ok"}
    assert alab.ssh(node, "cat /etc/fabnet-kill-test.conf").stdout == "old\n"
    assert alab.ssh(node, "test -d /run/fabnet.lock", check=False).returncode != 0
    journal = alab.ssh(node, "cat /var/log/fabnet/journal.jsonl").stdout
    assert '"action":"take-over-lock"' in journal


BRIEF_UNIT = """[Unit]
Description=a service whose start takes a few seconds
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sleep 10
"""
BRIEF = """\
- name: a file, then a service whose start takes a few seconds
  hosts: gpu
  resources:
    - file: {path: /etc/fabnet-cut-test.conf, content: "new\\n"}
    - service: {name: fabnet-brief, state: started, enabled: null}
"""


def _start_brief_apply(alab: Lab, inventory: Path, tmp_path: Path) -> tuple[subprocess.Popen[str], NodeRecord]:
    """An apply of BRIEF on gpu04, returned once the node's change script is inside the service's start
    (10 s long: on a machine busy with other labs, each poll here may take seconds)."""
    node = alab.node("gpu04")
    alab.ssh(node, "systemctl stop fabnet-brief 2>/dev/null; printf 'old\\n' > /etc/fabnet-cut-test.conf && "
             "printf %s " + shlex.quote(BRIEF_UNIT) + " > /etc/systemd/system/fabnet-brief.service && "
             "systemctl daemon-reload")
    playbook = tmp_path / "brief.yml"
    playbook.write_text(BRIEF)
    # SIGINT at its default in the apply, whatever the suite's own launcher left it at: a suite started in
    # the background of a non-interactive shell ignores SIGINT, the apply would inherit that, and Python
    # then installs no KeyboardInterrupt handler (as shells intend for background jobs).
    apply = subprocess.Popen([sys.executable, "-m", "provisioner", "apply", str(inventory), "-p", str(playbook),
                              "--limit", "gpu04", "--yes", "--json", "--journal", str(tmp_path / "j.jsonl")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while alab.ssh(node, "systemctl is-active fabnet-brief", check=False).stdout.strip() != "activating":
        assert time.monotonic() < deadline and apply.poll() is None, "the service start never began"
        time.sleep(0.1)
    return apply, node


def test_a_connection_cut_mid_change_reports_what_the_host_really_ran(alab: Lab, inventory: Path,
                                                                     first_apply: dict, tmp_path: Path) -> None:
    apply, node = _start_brief_apply(alab, inventory, tmp_path)
    try:
        # Kill the sshd session process that carries the change exec: the connection drops, the script
        # (which ignores SIGHUP) finishes on the node.
        alab.ssh(node, "p=$(sed -n 's/^pid=//p' /run/fabnet.lock/holder); "
                       "while [ -n \"$p\" ] && [ \"$p\" != 1 ]; do "
                       "  case $(cat /proc/$p/comm) in sshd) kill -9 $p; break;; esac; "
                       "  p=$(awk '{print $4}' /proc/$p/stat); done")
        out, err = apply.communicate(timeout=120)
    finally:
        if apply.poll() is None:
            apply.kill()
    report = json.loads(out)
    host = report["hosts"][0]
    steps = {s["id"]: s["status"] for r in host["resources"] for s in r["steps"]}
    # The node ran both steps; the report says so (from the host's journal), never not_run.
    assert steps == {"file[/etc/fabnet-cut-test.conf]:write": "ok", "service[fabnet-brief]:start": "ok"}, err
    assert host["status"] == "changed" and apply.returncode == 0, (host, err[-2000:])
    assert any("read back from the host's journal" in w for w in host["warnings"]), host["warnings"]
    local = [json.loads(line) for line in (tmp_path / "j.jsonl").read_text().splitlines()]
    outcomes = [r["outcome"] for r in local if r.get("run") == report["run_id"] and r["outcome"] != "started"]
    assert outcomes == ["ok", "ok"]
    assert alab.ssh(node, "cat /etc/fabnet-cut-test.conf").stdout == "new\n"
    assert alab.ssh(node, "systemctl is-active fabnet-brief").stdout.strip() == "active"


def test_sigint_mid_change_names_what_changed_and_exits_130(alab: Lab, inventory: Path, first_apply: dict,
                                                           tmp_path: Path) -> None:
    apply, node = _start_brief_apply(alab, inventory, tmp_path)
    try:
        apply.send_signal(signal.SIGINT)
        _, err = apply.communicate(timeout=60)
    finally:
        if apply.poll() is None:
            apply.kill()
    assert apply.returncode == 130, err[-2000:]
    assert "interrupted (SIGINT)" in err
    assert "gpu04: changed: file[/etc/fabnet-cut-test.conf]; unknown: service[fabnet-brief]" in err, err[-2000:]
    local = [json.loads(line) for line in (tmp_path / "j.jsonl").read_text().splitlines()]
    assert [r["outcome"] for r in local if r["outcome"] != "started"] == ["ok", "unknown"]
    assert alab.ssh(node, "cat /etc/fabnet-cut-test.conf").stdout == "new\n"


# What a host may print: clear screen, an OSC window title ended by BEL, a bidi override, colour.
HOSTILE = "before\x1b[2J\x1b]0;owned\x07\u202egnp.exe\x1b[31m after [/x]\n"
RAW = ("\x1b", "\x07", "\u202e")


def test_a_hosts_terminal_escapes_reach_no_output_raw(alab: Lab, inventory: Path, tmp_path: Path) -> None:
    """A host file's escapes in `--diff`, a failed step's output in the results, `--json` and `--junit`
    are all shown escaped (`\\x1b]0;owned\\x07`), as audit shows them; the JUnit file stays well-formed."""
    node = alab.node("gpu02")
    for path in ("/tmp/fabnet-hostile.txt", "/root/fabnet-hostile-tool.txt"):
        subprocess.run([*alab.ssh_args(node), f"cat > {path}"], input=HOSTILE, text=True, check=True, timeout=30)
    playbook = tmp_path / "hostile.yml"
    playbook.write_text(yaml.safe_dump([{"name": "hostile", "hosts": "gpu02", "resources": [
        {"file": {"path": "/tmp/fabnet-hostile.txt", "content": "clean\n"}},
        {"ofed": {"version": ">=99.0"}},  # never met: its installer runs, prints the host's text and fails
    ]}]))
    evil = tmp_path / "evil"
    (evil / "host_vars").mkdir(parents=True)
    (evil / "host_vars" / "gpu02.yml").write_text(yaml.safe_dump(
        {"fabnet_ofed_install_command": "cat /root/fabnet-hostile-tool.txt; exit 1"}))
    (evil / "hosts.yml").write_text(inventory.read_text())
    common = (str(evil / "hosts.yml"), "-p", str(playbook), "--limit", "gpu02", "--journal", str(tmp_path / "j"))

    check = fabnet("apply", *common, "--check", "--diff")
    assert check.returncode == 2, check.stdout[-2000:] + check.stderr[-2000:]
    assert "-before\\x1b[2J\\x1b]0;owned\\x07\\u202egnp.exe\\x1b[31m after [/x]" in check.stdout
    text = fabnet("apply", *common, "--yes")
    assert text.returncode == 2 and "\\x1b]0;owned\\x07" in text.stdout, text.stdout[-2000:] + text.stderr[-2000:]
    junit = tmp_path / "apply.xml"
    as_json = fabnet("apply", *common, "--yes", "--json", "--junit", str(junit))
    assert as_json.returncode == 2
    for proc in (check, text, as_json):
        assert not any(raw in proc.stdout + proc.stderr for raw in RAW)
    [host] = json.loads(as_json.stdout)["hosts"]
    [ofed] = [r for r in host["resources"] if r["kind"] == "ofed"]
    assert ofed["steps"][0]["status"] == "failed"
    assert "before\\x1b[2J\\x1b]0;owned\\x07\\u202egnp.exe" in ofed["steps"][0]["output"]
    xml = junit.read_text()
    assert not any(raw in xml for raw in RAW) and junit.stat().st_mode & 0o777 == 0o600
    failure = ET.parse(junit).getroot().find(".//testcase[@name='ofed']/failure")
    assert failure is not None and "\\x1b]0;owned\\x07" in (failure.text or "")


def test_an_edit_made_while_apply_waits_at_its_prompt_is_never_overwritten(alab: Lab, inventory: Path,
                                                                          first_apply: dict,
                                                                          tmp_path: Path) -> None:
    node = alab.node("gpu02")
    playbook = _vendor_sysctls(alab, node, tmp_path)
    args = [sys.executable, "-m", "provisioner", "apply", str(inventory), "-p", str(playbook), "--limit", "gpu02",
            "--json", "--journal", str(tmp_path / "j.jsonl")]
    with at_prompt(args, ROOT) as waiting:
        # Meanwhile another apply converges the host, and an administrator adds a line by hand.
        other = fabnet("apply", str(inventory), "-p", str(playbook), "--limit", "gpu02", "--yes",
                       "--journal", str(tmp_path / "other.jsonl"))
        assert other.returncode == 0, other.stdout[-2000:]
        alab.ssh(node, f"printf '%s\\n' 'net.ipv4.conf.all.rp_filter = 2  # by hand' >> {VENDOR_SYSCTLS}")
        out = waiting.answer("y")
    report = json.loads(out)
    host = report["hosts"][0]
    assert waiting.proc.returncode == 2 and host["status"] == "failed", host
    steps = {s["id"]: s["status"] for r in host["resources"] for s in r["steps"]}
    assert "conflict" in steps.values(), steps
    assert "ok" not in steps.values(), steps  # nothing that depends on the changed file ran
    assert "changed since it was read" in host["error"] or "conflict" in host["error"], host["error"]
    text = alab.ssh(node, f"cat {VENDOR_SYSCTLS}").stdout
    assert "net.ipv4.conf.all.rp_filter = 2  # by hand" in text  # the hand-made line is still there
    assert "net.ipv4.conf.all.arp_ignore = 1" in text and "net.ipv4.conf.all.arp_announce = 2" in text
