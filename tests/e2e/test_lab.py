"""The lab is real: strict-host-key SSH, isolated kernel state and files, real systemd and dpkg,
emulated RDMA tools whose state persists and follows the real MTU."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.e2e.conftest import Lab


def test_every_node_answers_strict_host_key_ssh_with_the_lab_key(lab: Lab) -> None:
    status = json.loads(subprocess.run(
        [sys.executable, "-m", "provisioner", "lab", "status", "--name", lab.state.name, "--json"],
        capture_output=True, text=True, check=True).stdout)
    assert [n["name"] for n in status["nodes"]] == [r.name for r in lab.nodes]
    for node in status["nodes"]:
        proc = subprocess.run(
            ["ssh", "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={node['known_hosts']}",
             "-o", "BatchMode=yes", "-i", node["private_key"], f"root@{node['mgmt_ip']}",
             "ip", "-j", "link", "show"],
            capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
        links = {link["ifname"]: link for link in json.loads(proc.stdout)}
        assert set(links) >= {"lo", "eth0", "eth1"}
        assert node["data_interfaces"][0]["name"] == "eth1"


def test_a_wrong_host_key_is_refused(lab: Lab, tmp_path) -> None:
    first, second = lab.nodes[0], lab.nodes[1]
    # Pretend node 2's key belongs to node 1's address: strict checking must refuse the login.
    lines = lab.state.known_hosts_path.read_text().splitlines()
    key_of_second = next(line.split(" ", 1)[1] for line in lines if line.startswith(second.mgmt_ip + " "))
    forged = tmp_path / "known_hosts"
    forged.write_text(f"{first.mgmt_ip} {key_of_second}\n")
    args = [a if not a.startswith("UserKnownHostsFile=") else f"UserKnownHostsFile={forged}"
            for a in lab.ssh_args(first)]
    proc = subprocess.run([*args, "true"], capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0
    assert "HOST IDENTIFICATION HAS CHANGED" in proc.stderr or "Host key verification failed" in proc.stderr


def test_mtu_change_is_visible_on_that_node_only(lab: Lab) -> None:
    node, other = lab.node("gpu01"), lab.node("gpu03")
    before_other = lab.host(other).check_output("cat /sys/class/net/eth1/mtu")
    lab.ssh(node, "ip link set eth1 mtu 4200")
    try:
        assert lab.host(node).check_output("cat /sys/class/net/eth1/mtu") == "4200"
        assert lab.host(other).check_output("cat /sys/class/net/eth1/mtu") == before_other
    finally:
        lab.ssh(node, "ip link set eth1 mtu 9000")


@pytest.mark.parametrize("directory", ["/etc", "/var", "/opt", "/usr/local"])
def test_a_file_written_on_one_node_is_absent_on_another(lab: Lab, directory: str) -> None:
    path = f"{directory}/fabnet-e2e-marker"
    lab.ssh(lab.node("gpu01"), f"echo hello > {path}")
    try:
        assert lab.host(lab.node("gpu01")).file(path).content_string == "hello\n"
        assert not lab.host(lab.node("gpu02")).file(path).exists
    finally:
        lab.ssh(lab.node("gpu01"), f"rm -f {path}")


def test_systemd_units_start_stop_enable_and_report(lab: Lab) -> None:
    node = lab.node("gpu01")
    host = lab.host(node)
    assert host.check_output("cat /proc/1/comm") == "systemd"
    service = host.service("rdma_cm")
    assert service.is_running and service.is_enabled
    lab.ssh(node, "systemctl stop rdma_cm && systemctl disable rdma_cm")
    try:
        assert not host.service("rdma_cm").is_running
        assert not host.service("rdma_cm").is_enabled
        assert host.run("systemctl is-active rdma_cm").stdout.strip() == "inactive"
    finally:
        lab.ssh(node, "systemctl enable --now rdma_cm")
    assert host.service("rdma_cm").is_running and host.service("rdma_cm").is_enabled
    # The drifted node from the default profile has it stopped and disabled from the start.
    drifted = lab.host(lab.node("gpu05")).service("rdma_cm")
    assert not drifted.is_running and not drifted.is_enabled


def test_mlnx_qos_state_persists_and_has_the_real_structure(lab: Lab, samples_dir) -> None:
    from provisioner.parsers import parse

    node = lab.node("gpu03")  # profile: trust pcp, PFC off
    host = lab.host(node)
    before = parse("mlnx_qos", host.check_output("mlnx_qos -i eth1"))
    assert before["trust"] == "pcp" and before["pfc_enabled"] == []
    assert before["dscp2prio"] == {}
    lab.ssh(node, "mlnx_qos -i eth1 --trust dscp --pfc 0,0,0,1,0,0,0,0")
    try:
        text = host.check_output("mlnx_qos -i eth1")
        after = parse("mlnx_qos", text)
        assert after["trust"] == "dscp" and after["pfc_enabled"] == [3]
        assert after["dscp2prio"]["26"] == 3 or after["dscp2prio"].get(26) == 3
        # Same line structure as the real ConnectX output after `--trust dscp`.
        sample = (samples_dir / "mlnx_qos-3.txt").read_text().replace("\r", "").splitlines()
        def shape(lines: list[str]) -> list[str]:
            return [re.sub(r"[0-9]+", "N", line).strip() for line in lines]

        assert [line.split(":")[0] for line in shape(text.splitlines())] == [
            line.split(":")[0] for line in shape(sample)
        ]
        # Other nodes are untouched.
        other = parse("mlnx_qos", lab.host(lab.node("gpu04")).check_output("mlnx_qos -i eth1"))
        assert other["pfc_enabled"] == [3] and other["trust"] == "dscp"
    finally:
        lab.ssh(node, "mlnx_qos -i eth1 --trust pcp --pfc 0,0,0,0,0,0,0,0")


def _active_mtu(lab: Lab, name: str) -> int:
    out = lab.host(lab.node(name)).check_output("ibv_devinfo")
    return int(re.search(r"active_mtu:\s+(\d+)", out).group(1))


def test_active_mtu_follows_the_data_interface_mtu(lab: Lab) -> None:
    node = lab.node("gpu01")
    assert _active_mtu(lab, "gpu02") == 1024  # profile: MTU 1500
    try:
        for mtu, expected in ((1500, 1024), (4200, 4096), (9000, 4096)):
            lab.ssh(node, f"ip link set eth1 mtu {mtu}")
            assert _active_mtu(lab, "gpu01") == expected
    finally:
        lab.ssh(node, "ip link set eth1 mtu 9000")


def test_pinned_libnccl2_install_is_real_dpkg_on_that_node_only(lab: Lab) -> None:
    node, other = lab.node("gpu01"), lab.node("gpu02")
    query = "dpkg-query -W -f '${Version}' libnccl2"
    assert lab.host(node).check_output(query) == "2.21.5-1+cuda12.4"
    lab.ssh(node, "apt-get install -y -qq --allow-downgrades --allow-change-held-packages libnccl2=2.18.3-1+cuda12.2")
    try:
        assert lab.host(node).check_output(query) == "2.18.3-1+cuda12.2"
        assert lab.host(node).file("/usr/lib/x86_64-linux-gnu/libnccl.so.2.18.3").exists
        assert lab.host(other).check_output(query) == "2.21.5-1+cuda12.4"
    finally:
        lab.ssh(node, "apt-get install -y -qq --allow-change-held-packages libnccl2=2.21.5-1+cuda12.4")


def test_a_1500_switch_port_breaks_jumbo_frames_between_nodes(lab: Lab) -> None:
    names = lab.state.names
    a, b = lab.node("gpu01"), lab.node("gpu03")
    ping = f"ping -c1 -W1 -M do -s 8972 {b.data_ip}"
    assert lab.ssh(a, ping, check=False).returncode == 0
    subprocess.run(["ip", "link", "set", names.data_port(b.index), "mtu", "1500"], check=True)
    try:
        assert lab.ssh(a, ping, check=False).returncode != 0
    finally:
        subprocess.run(["ip", "link", "set", names.data_port(b.index), "mtu", "9216"], check=True)
    assert lab.ssh(a, ping, check=False).returncode == 0
