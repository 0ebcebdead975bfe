"""`fabnet apply` and `rollback` against edits made by hand at the worst moments, on a lab of its own:
a file edited while a slow OFED install runs before the step that writes it, a lock aged by a clock
step while its run still works, an MTU set by hand after the run that rollback must leave (and put back
on a second rollback once the administrator restored the run's value). What the nodes hold is read with
the system ssh client."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from provisioner.lab import manager
from tests.e2e.conftest import Lab, lab_name
from tests.e2e.held import RELEASE, held_inventory, holding_the_lock

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
GUARD_LAB = lab_name("guards")
NCCL_ENV = "/etc/fabnet-guards/nccl.env"
WANTED = "NCCL_IB_HCA=mlx5_0\n"


def fabnet(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "provisioner", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    manager.down(GUARD_LAB)
    try:
        yield Lab(manager.up(GUARD_LAB, nodes=2))
    finally:
        manager.down(GUARD_LAB)


def _playbook(tmp_path: Path, *resources: dict) -> Path:
    path = tmp_path / "guards.yml"
    path.write_text(yaml.safe_dump([{"name": "guards", "hosts": "gpu", "resources": list(resources)}]))
    return path


def test_a_file_edited_while_the_ofed_install_runs_is_not_overwritten(lab: Lab, tmp_path: Path) -> None:
    node = lab.node("gpu01")
    lab.ssh(node, f"rm -f {RELEASE}; mkdir -p /etc/fabnet-guards && echo ORIGINAL=1 > {NCCL_ENV} && "
                  "sed -i 's/MLNX_OFED_LINUX-23.10-1.1.9.0/MLNX_OFED_LINUX-5.8-2.0.3.0/' /var/lib/fabnet-lab/hw.json")
    playbook = _playbook(tmp_path, {"ofed": {"version": ">=23.10"}},
                         {"file": {"path": NCCL_ENV, "content": WANTED, "mode": "0644"}})
    args = ("apply", str(held_inventory(lab.state.inventory_path, tmp_path / "slow")), "-p", str(playbook),
            "--limit", "gpu01", "--yes", "--json", "--journal", str(tmp_path / "j.jsonl"))
    with holding_the_lock(lab, node, args) as first:
        # The host's clock steps a day forward (the lock's recorded start moves a day back): the run
        # still works, so a second run must not take its lock over.
        lab.ssh(node, "sed -i \"s/^start=.*/start=$(( $(date +%s) - 86400 ))/\" /run/fabnet.lock/holder")
        # A second run that took the lock over would wait on the held install: bounded, it fails here.
        second = fabnet(*args, timeout=90)
        lab.ssh(node, f"echo 'NCCL_DEBUG=INFO  # by hand, during the install' >> {NCCL_ENV}")
        lab.ssh(node, f"touch {RELEASE}")
        out, err = first.communicate(timeout=120)
    assert second.returncode == 2, second.stdout[-2000:]
    refused = json.loads(second.stdout)["hosts"][0]
    assert refused["status"] == "failed" and "another fabnet run holds this host" in refused["error"], refused
    host = json.loads(out)["hosts"][0]
    assert first.returncode == 2 and host["status"] == "failed", out[-3000:] + err[-2000:]
    steps = {s["id"]: s["status"] for r in host["resources"] for s in r["steps"]}
    assert steps == {"ofed:install": "ok", f"file[{NCCL_ENV}]:write": "conflict"}, steps
    assert f"{NCCL_ENV} changed since it was read" in host["error"], host["error"]
    assert not host["warnings"], host["warnings"]  # no stale lock taken over by anyone
    assert lab.ssh(node, f"cat {NCCL_ENV}").stdout == "ORIGINAL=1\nNCCL_DEBUG=INFO  # by hand, during the install\n"
    assert lab.ssh(node, "ofed_info -s").stdout.startswith("MLNX_OFED_LINUX-23.10")


def test_rollback_leaves_an_mtu_set_by_hand_and_retries_once_it_is_back(lab: Lab, tmp_path: Path) -> None:
    node = lab.node("gpu02")
    lab.ssh(node, "ip link set eth1 mtu 1500")
    inventory = str(lab.state.inventory_path)
    playbook = _playbook(tmp_path, {"interface": {"name": "eth1", "mtu": 9000, "persistent": False}})
    applied = fabnet("apply", inventory, "-p", str(playbook), "--limit", "gpu02", "--yes", "--json")
    assert applied.returncode == 0, applied.stdout[-2000:] + applied.stderr[-2000:]
    lab.ssh(node, "ip link set eth1 mtu 4200")

    back = fabnet("rollback", inventory, "-p", str(playbook), "--limit", "gpu02", "--yes", "--json")
    assert back.returncode == 2, back.stdout[-2000:]
    [undo] = json.loads(back.stdout)["hosts"][0]["undone"]
    assert undo["exit_code"] == 1
    assert "the MTU of eth1 changed since this run set it: not restored (set 9000, now 4200)" in undo["output"]
    assert "mtu 4200" in lab.ssh(node, "ip -o link show dev eth1").stdout

    # The administrator puts the run's value back: the next rollback retries the undo that failed.
    lab.ssh(node, "ip link set eth1 mtu 9000")
    again = fabnet("rollback", inventory, "-p", str(playbook), "--limit", "gpu02", "--yes", "--json")
    assert again.returncode == 0, again.stdout[-2000:]
    assert [u["exit_code"] for u in json.loads(again.stdout)["hosts"][0]["undone"]] == [0]
    assert "mtu 1500" in lab.ssh(node, "ip -o link show dev eth1").stdout
    done = fabnet("rollback", inventory, "-p", str(playbook), "--limit", "gpu02", "--yes", "--json")
    assert json.loads(done.stdout)["hosts"][0]["status"] == "nothing"
