"""Hostile nodes and secrets, against the real lab: a node tool that ignores SIGTERM, daemonizes, floods
stderr or prints terminal escapes costs only its own probe and leaves nothing running (checked with the
system ssh client); a private key that differs is reported by hashes only; known_hosts is read as
OpenSSH reads it; Ctrl-C stops at once."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from xml.etree import ElementTree as ET

import yaml

from tests.e2e.conftest import Lab
from tests.e2e.test_audit import ROOT, SITE, _inventory_copy, fabnet

MLNX_QOS = "/usr/local/sbin/mlnx_qos"
DCB = "/usr/local/sbin/dcb"
SMALL = """\
- hosts: gpu
  resources:
    - roce_qos: {interface: "{{ data_iface }}", trust: dscp}
    - sysctl: {name: net.ipv4.conf.all.arp_ignore, value: 1}
"""


def small_playbook(tmp_path: Path) -> Path:
    path = tmp_path / "small.yml"
    path.write_text(SMALL)
    return path


@contextmanager
def misbehaving(lab: Lab, node, prelude: str, tool: str = MLNX_QOS) -> Iterator[None]:
    """`tool` on `node` runs `prelude` first (then the real tool), until the block ends."""
    wrapper = f"#!/bin/sh\n{prelude}\nexec {tool}.real \"$@\"\n"
    proc = subprocess.run([*lab.ssh_args(node), f"mv {tool} {tool}.real && cat > {tool} && chmod 755 {tool}"],
                          input=wrapper, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    try:
        yield
    finally:
        lab.ssh(node, f"mv -f {tool}.real {tool}")


@contextmanager
def misbehaving_mlnx_qos(lab: Lab, node, prelude: str) -> Iterator[None]:
    """mlnx_qos misbehaving, with `dcb` refused first: the QoS read then falls back to mlnx_qos, whose
    output and errors (unlike dcb's) reach the report."""
    with misbehaving(lab, node, "exit 1", tool=DCB), misbehaving(lab, node, prelude):
        yield


def leftovers(lab: Lab, node, pattern: str) -> str:
    """Processes on `node` matching `pattern`, or carrying fabnet's probe marker, seen by the system ssh
    client. The bracket trick keeps the search from finding its own command line."""
    bracketed = f"[{pattern[0]}]{pattern[1:]}"
    return lab.ssh(node, f"pgrep -fa '{bracketed}'; grep -lsa FABNET_PROBE= /proc/[0-9]*/environ; true").stdout


def audit_json(*args: str, timeout: float = 180) -> tuple[subprocess.CompletedProcess[str], dict, float]:
    started = time.monotonic()
    proc = fabnet("audit", *args, "--json", timeout=timeout)
    return proc, json.loads(proc.stdout), time.monotonic() - started


def checks_of(report: dict, host: str) -> dict[tuple[str, str], dict]:
    found = next(h for h in report["hosts"] if h["name"] == host)
    return {(r["target"], c["attribute"]): c for r in found["resources"] for c in r["checks"]}


def test_a_probe_that_ignores_sigterm_is_killed_with_its_group_at_the_timeout(lab: Lab, tmp_path) -> None:
    node = lab.node("gpu01")
    with misbehaving_mlnx_qos(lab, node, "trap '' TERM; sleep 307 & sleep 307"):
        proc, report, seconds = audit_json(str(lab.state.inventory_path), "-p", str(small_playbook(tmp_path)),
                                           "--limit", "gpu01", "--timeout", "6")
        left = leftovers(lab, node, "sleep 307")
    assert proc.returncode == 4, proc.stderr
    assert seconds < 6 + 5 + 10  # the stated timeout, its margin, and the tool's own start-up
    trust = checks_of(report, "gpu01")[("roce_qos[eth1]", "trust")]
    assert trust["status"] == "error" and "timed out" in trust["message"]
    assert len(trust["message"]) < 300
    assert left == ""


def test_a_daemonized_child_does_not_stall_the_audit_or_survive_it(lab: Lab, tmp_path) -> None:
    node = lab.node("gpu01")
    # Both kinds: one that keeps the probe's stdout open, one that leaves the session entirely.
    prelude = "sleep 308 &\n( setsid sleep 308 </dev/null >/dev/null 2>&1 & )"
    with misbehaving_mlnx_qos(lab, node, prelude):
        proc, report, seconds = audit_json(str(lab.state.inventory_path), "-p", str(small_playbook(tmp_path)),
                                           "--limit", "gpu01")
        left = leftovers(lab, node, "sleep 308")
    assert proc.returncode == 0, proc.stdout
    assert seconds < 30
    assert checks_of(report, "gpu01")[("roce_qos[eth1]", "trust")]["status"] == "ok"
    assert left == ""


def test_a_stderr_flood_is_capped_on_the_node_and_the_timeout_holds(lab: Lab, tmp_path) -> None:
    node = lab.node("gpu01")
    with misbehaving_mlnx_qos(lab, node, "yes 'flood flood flood flood' | head -c 200000000 >&2"):
        proc, report, seconds = audit_json(str(lab.state.inventory_path), "-p", str(small_playbook(tmp_path)),
                                           "--limit", "gpu01", "--timeout", "120")
        left = leftovers(lab, node, "yes flood")
    # The outcome, not a tight time: the report is small, the flood cost only its own probe (cut on
    # the node, one clear reason), the run took nowhere near the --timeout, nothing is left running.
    assert len(proc.stdout) < 64 * 1024
    assert seconds < 60
    checks = checks_of(report, "gpu01")
    assert checks[("roce_qos[eth1]", "trust")]["status"] == "error"
    assert "its stderr passed 16 KiB and was cut" in checks[("roce_qos[eth1]", "trust")]["message"]
    assert checks[("sysctl[net.ipv4.conf.all.arp_ignore]", "value")]["status"] == "ok"
    assert left == ""


def test_terminal_escapes_from_a_node_are_escaped_in_every_output(lab: Lab, tmp_path) -> None:
    node = lab.node("gpu01")
    prelude = r"printf '\033]0;owned\007\033[2J\033[31mevil\r\n' >&2; exit 1"
    junit = tmp_path / "audit.xml"
    args = (str(lab.state.inventory_path), "-p", str(small_playbook(tmp_path)), "--limit", "gpu01")
    with misbehaving_mlnx_qos(lab, node, prelude):
        as_json = fabnet("audit", *args, "--json", "--junit", str(junit))
        table = fabnet("audit", *args)
    assert as_json.returncode == table.returncode == 4
    message = checks_of(json.loads(as_json.stdout), "gpu01")[("roce_qos[eth1]", "trust")]["message"]
    assert "\\x1b]0;owned\\x07\\x1b[2J" in message
    for output in (as_json.stdout, table.stdout, junit.read_text()):
        assert "\x1b" not in output and "\x07" not in output and "\r" not in output
    assert "\\x1b]0;owned" in table.stdout
    ET.fromstring(junit.read_bytes())  # well-formed


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)], check=True)
    return path.read_text()


def test_a_private_key_that_differs_is_reported_by_hashes_only(lab: Lab, tmp_path) -> None:
    node = lab.node("gpu01")
    on_host, desired = _keygen(tmp_path / "host_key"), _keygen(tmp_path / "desired_key")
    target = "/root/.ssh/id_fabnet_e2e"
    proc = subprocess.run([*lab.ssh_args(node), f"umask 077; cat > {target}"], input=on_host, text=True,
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    playbook = tmp_path / "keys.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "gpu01", "resources": [
        {"file": {"path": target, "content": desired, "mode": "0600"}}]}]))
    junit = tmp_path / "audit.xml"
    args = (str(lab.state.inventory_path), "-p", str(playbook), "--limit", "gpu01")
    try:
        as_json = fabnet("audit", *args, "--json", "--junit", str(junit))
        # Wide enough that rich never folds a hash across two lines.
        table = subprocess.run([sys.executable, "-m", "provisioner", "audit", *args], capture_output=True, text=True,
                               timeout=120, cwd=ROOT, env={**os.environ, "COLUMNS": "250"})
    finally:
        lab.ssh(node, f"rm -f {target}")
    assert as_json.returncode == table.returncode == 2, as_json.stderr
    content = checks_of(json.loads(as_json.stdout), "gpu01")[(f"file[{target}]", "content")]
    want = "sha256:" + hashlib.sha256(desired.encode()).hexdigest()[:12]
    have = "sha256:" + hashlib.sha256(on_host.encode()).hexdigest()[:12]
    assert (content["status"], content["desired"].split()[0], content["actual"].split()[0]) == ("drift", want, have)
    assert "differs" in content["message"]
    xml = junit.read_text()
    assert all("differs" in output for output in (as_json.stdout, table.stdout, xml))
    for output in (as_json.stdout, as_json.stderr, table.stdout, table.stderr, xml):
        for key_text in (on_host, desired):
            for line in key_text.splitlines()[1:-1]:
                assert line not in output
    assert want in table.stdout and have in table.stdout and want in xml and have in xml
    assert stat.S_IMODE(junit.stat().st_mode) == 0o600


def test_known_hosts_lines_are_read_like_openssh(lab: Lab, tmp_path) -> None:
    gpu01, gpu02 = lab.node("gpu01"), lab.node("gpu02")
    lines = lab.state.known_hosts_path.read_text().splitlines()
    key_of_gpu02 = next(line.split(" ", 1)[1] for line in lines if line.startswith(gpu02.mgmt_ip + " "))
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("\n".join([
        "this line is garbage", f"@cert-authority *.example.org {key_of_gpu02}",
        f"{gpu01.mgmt_ip} ssh-ed25519 AAAA%%%not-base64", *lines, f"@revoked * {key_of_gpu02}"]) + "\n")
    inventory = _inventory_copy(lab, tmp_path)
    data = yaml.safe_load(inventory.read_text())
    data["all"]["vars"]["fabnet_known_hosts"] = str(known_hosts)
    inventory.write_text(yaml.safe_dump(data))
    proc, report, _ = audit_json(str(inventory), "-p", str(small_playbook(tmp_path)), "--limit", "gpu01,gpu02")
    hosts = {h["name"]: h for h in report["hosts"]}
    assert hosts["gpu01"]["status"] == "in_sync", hosts["gpu01"]
    assert hosts["gpu02"]["status"] == "unreachable" and "@revoked" in hosts["gpu02"]["error"]
    assert proc.returncode == 4
    for number in (1, 2, 3):
        assert f"{known_hosts}:{number}: " in proc.stderr
    assert "Incorrect padding" not in proc.stdout  # what one bad line used to make of every host


def test_an_unknown_jump_host_key_is_blamed_on_the_jump_host(lab: Lab, tmp_path) -> None:
    jump, target = lab.node("gpu01"), lab.node("gpu04")
    lines = lab.state.known_hosts_path.read_text().splitlines()
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("\n".join(line for line in lines if not line.startswith(jump.mgmt_ip + " ")) + "\n")
    config = tmp_path / "ssh_config"
    key = lab.state.key_path
    config.write_text(
        f"Host jumpbox\n  HostName {jump.mgmt_ip}\n  User root\n  IdentityFile {key}\n"
        f"  UserKnownHostsFile {known_hosts}\n"
        f"Host {target.mgmt_ip}\n  User root\n  IdentityFile {key}\n  ProxyJump jumpbox\n"
        f"  UserKnownHostsFile {known_hosts}\n")
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {
        "vars": {"data_iface": "eth1", "fabnet_known_hosts": str(known_hosts)},
        "children": {"gpu": {"hosts": {"gpu04": {"ansible_host": target.mgmt_ip}}}}}}))
    env = {**os.environ, "HOME": str(tmp_path)}  # no ~/.ssh/known_hosts of this machine's root
    proc = subprocess.run([sys.executable, "-m", "provisioner", "audit", str(inventory), "-p",
                           str(small_playbook(tmp_path)), "--ssh-config", str(config), "--json"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    error = json.loads(proc.stdout)["hosts"][0]["error"]
    assert proc.returncode == 4
    assert error.startswith(f"jump host {jump.mgmt_ip}: host key of {jump.mgmt_ip}") and "not in known_hosts" in error


def test_first_ctrl_c_stops_promptly_without_a_traceback_and_leaves_nothing(lab: Lab, tmp_path) -> None:
    node = lab.node("gpu01")
    with misbehaving_mlnx_qos(lab, node, "sleep 309"):
        proc = subprocess.Popen([sys.executable, "-m", "provisioner", "audit", str(lab.state.inventory_path),
                                 "-p", str(SITE), "--timeout", "300"],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                # as from a terminal, even when this test runs in a background job
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            deadline = time.monotonic() + 60
            while "sleep 309" not in lab.ssh(node, "pgrep -fa '[s]leep 309'; true").stdout:
                assert time.monotonic() < deadline, "the probe never started"
                time.sleep(0.3)
            proc.send_signal(signal.SIGINT)
            sent = time.monotonic()
            _, err = proc.communicate(timeout=30)
            stopped = time.monotonic() - sent
        finally:
            proc.kill()
        time.sleep(2)  # the node notices the closed channel within about a second
        left = leftovers(lab, node, "sleep 309")
    assert stopped < 5, stopped
    assert proc.returncode == 130
    assert "Traceback" not in err and "aborted" in err
    assert left == ""


def test_a_connection_lost_mid_run_keeps_what_arrived_and_says_connection_lost(lab: Lab, tmp_path) -> None:
    node = lab.node("gpu01")
    lsmod = lab.ssh(node, "command -v lsmod").stdout.strip()
    # The QoS read is slow (the host sends what finished once its clock has ticked); then lsmod kills the
    # sshd process serving this very connection: the network side of a crash.
    killer = ('p=$$; while [ "$p" -gt 1 ]; do case "$(cat /proc/$p/comm)" in sshd*) kill -9 "$p"; break;; esac; '
              "p=$(cut -d' ' -f4 /proc/$p/stat); done; sleep 5")
    playbook = tmp_path / "ordered.yml"
    playbook.write_text("- hosts: gpu\n  resources:\n"
                        "    - roce_qos: {interface: \"{{ data_iface }}\", trust: dscp}\n"
                        "    - kernel_module: {name: nvidia_peermem, state: loaded}\n")
    with misbehaving_mlnx_qos(lab, node, "sleep 1.5"), misbehaving(lab, node, killer, tool=lsmod):
        proc, report, seconds = audit_json(str(lab.state.inventory_path), "-p", str(playbook),
                                           "--limit", "gpu01,gpu02")
        time.sleep(2)
        left = leftovers(lab, node, "sleep 5")
    checks = checks_of(report, "gpu01")
    assert checks[("roce_qos[eth1]", "trust")]["status"] == "ok"  # arrived before the connection went
    lost = [c["message"] for (target, _), c in checks.items() if target.startswith("kernel_module")]
    assert lost and all(m.endswith("connection lost before its result arrived") for m in lost)
    assert proc.returncode == 4 and seconds < 30
    assert {h["name"]: h["status"] for h in report["hosts"]}["gpu02"] != "failed"
    assert left == ""
