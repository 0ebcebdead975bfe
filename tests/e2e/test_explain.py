"""`fabnet explain --inventory` on logs of real torch.distributed (gloo) jobs the lab made fail.

Each rank is launched over SSH inside its node, as a launcher would, with a `gpu0N: ` label on every
line of the collected log (pdsh style). Two faults: a GLOO_SOCKET_IFNAME naming no interface, and one
node's data link down (a real `ip link set eth1 down` in its namespace). explain must name the host and
the setting, and --inventory must show the audited state that explains it.

The nodes need torch: the lab shares the host virtualenv's packages and names the interpreter in the
inventory's `fabnet_python`. Without that the test is skipped, saying so.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from provisioner.lab import manager
from tests.e2e.conftest import Lab, healthy_profile, lab_name

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "playbooks" / "site.yml"

JOB = """\
import datetime, os, socket, sys
import torch
import torch.distributed as dist
dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=12))
t = torch.ones(1024)
dist.all_reduce(t)
print(f"rank {dist.get_rank()} on {socket.gethostname()}: sum {t[0].item():.0f}", flush=True)
dist.destroy_process_group()
"""


def _python(lab: Lab) -> str | None:
    data = yaml.safe_load(lab.state.inventory_path.read_text())
    return data["all"]["vars"].get("fabnet_python")


@pytest.fixture(scope="module")
def job_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    name = lab_name("ex")
    profile = healthy_profile(tmp_path_factory.mktemp("profile"), 3)
    manager.down(name)
    try:
        lab = Lab(manager.up(name, profile_path=profile))
        python = _python(lab)
        if python is None or lab.ssh(lab.nodes[0], f"{python} -c 'import torch'", check=False).returncode:
            pytest.skip("the lab's nodes cannot import torch (no shared interpreter in fabnet_python)")
        for node in lab.nodes:
            subprocess.run([*lab.ssh_args(node), "cat > /tmp/job.py"], input=JOB, text=True, check=True,
                           timeout=30)
        yield lab
    finally:
        manager.down(name)


def run_job(lab: Lab, ifname: str) -> str:
    """Start every rank at once over SSH; return their output as one labelled log."""
    python = _python(lab)
    master = lab.nodes[0].data_ip
    world = len(lab.nodes)

    def rank(i: int) -> str:
        node = lab.nodes[i]
        env = (f"GLOO_SOCKET_IFNAME={shlex.quote(ifname)} MASTER_ADDR={master} MASTER_PORT=29511 "
               f"RANK={i} WORLD_SIZE={world}")
        proc = lab.ssh(node, f"cd /tmp && {env} timeout 60 {python} /tmp/job.py 2>&1", check=False)
        return "".join(f"{node.name}: {line}\n" for line in proc.stdout.splitlines())

    with ThreadPoolExecutor(max_workers=world) as pool:
        return "".join(pool.map(rank, range(world)))


def explain(lab: Lab, log: Path) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-m", "provisioner", "explain", str(log), "--inventory",
                           str(lab.state.inventory_path), "-p", str(SITE), "--json"],
                          capture_output=True, text=True, timeout=180, cwd=ROOT)
    return proc.returncode, json.loads(proc.stdout)


def test_wrong_gloo_socket_ifname_names_the_setting_and_hosts(job_lab: Lab, tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(run_job(job_lab, "eth9"))
    code, result = explain(job_lab, log)
    assert code == 2, log.read_text()
    first = result["causes"][0]
    assert first["id"] == "no-socket-interface"
    assert first["settings"] == ["GLOO_SOCKET_IFNAME=eth9"]
    assert set(first["hosts"]) == {node.name for node in job_lab.nodes}
    assert all(e["file"] == str(log) and "eth9" in e["text"] for e in first["evidence"])
    # The hosts were audited, are as the playbook wants, and their data interface is eth1: the job's
    # setting is wrong, not the hosts.
    audited = {a["host"]: a for a in result["audit"]}
    assert set(audited) == {node.name for node in job_lab.nodes}
    assert all(a["status"] == "in_sync" and a["data_interfaces"] == ["eth1"] for a in audited.values())


def test_data_link_down_names_the_host_and_its_link(job_lab: Lab, tmp_path: Path) -> None:
    broken = job_lab.nodes[-1]
    job_lab.ssh(broken, "ip link set eth1 down")
    try:
        assert job_lab.host(broken).check_output("cat /sys/class/net/eth1/operstate") == "down"  # oracle
        log = tmp_path / "job.log"
        log.write_text(run_job(job_lab, "eth1"))
        code, result = explain(job_lab, log)
    finally:
        job_lab.ssh(broken, "ip link set eth1 up")
    assert code == 2, log.read_text()
    first = result["causes"][0]
    assert first["id"] == "peer-unreachable", result["causes"]
    assert first["hosts"] == [broken.name]
    master = job_lab.nodes[0]
    assert first["addresses"] == [master.data_ip]
    assert result["inventory_hosts"][master.data_ip] == master.name  # the data address, mapped by data_ip
    audited = {a["host"]: a for a in result["audit"]}
    assert audited[master.name]["status"] == "in_sync"
    findings = {(f["target"], f["attribute"]): f for f in audited[broken.name]["findings"]}
    link = findings[("interface[eth1]", "link")]
    assert (link["desired"], link["actual"], link["status"]) == ("up", "down", "drift"), findings
