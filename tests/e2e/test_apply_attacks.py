"""`fabnet apply` and `rollback` against a hostile node state on a lab of their own: a managed file's
path is a directory or a symlink, the backup filesystem is full, an MTU or a file is changed by hand
between the read and the change. What the nodes hold is read with the system ssh client."""

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
from tests.e2e.terminal import at_prompt

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ATTACK_LAB = lab_name("attack")
NCCL_ENV = "/etc/fabnet-attack/nccl.env"
WANTED = "NCCL_IB_HCA=mlx5_0\nNCCL_IB_GID_INDEX=3\n"


def fabnet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "provisioner", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    manager.down(ATTACK_LAB)
    try:
        yield Lab(manager.up(ATTACK_LAB, nodes=3))
    finally:
        manager.down(ATTACK_LAB)


@pytest.fixture()
def playbook(tmp_path: Path) -> Path:
    path = tmp_path / "files.yml"
    path.write_text(yaml.safe_dump([{"name": "attack", "hosts": "gpu", "resources": [
        {"file": {"path": NCCL_ENV, "content": WANTED, "mode": "0644"}},
        {"interface": {"name": "eth1", "mtu": 9000, "persistent": False}}]}]))
    return path


def _host(report: dict, name: str) -> dict:
    return next(h for h in report["hosts"] if h["name"] == name)


def test_directory_symlink_and_full_backup_disk(lab: Lab, playbook: Path) -> None:
    inventory = str(lab.state.inventory_path)
    directory, linked, full = (lab.node(n) for n in ("gpu01", "gpu02", "gpu03"))
    lab.ssh(directory, f"mkdir -p {NCCL_ENV} && echo keep > {NCCL_ENV}/admin")
    lab.ssh(linked, f"mkdir -p /etc/fabnet-attack /usr/lib/attack && echo OLD=1 > /usr/lib/attack/nccl.env "
                    f"&& ln -sfn /usr/lib/attack/nccl.env {NCCL_ENV}")
    lab.ssh(full, f"mkdir -p /etc/fabnet-attack /var/backups/fabnet && head -c 200000 /dev/zero | tr '\\0' '#' "
                  f"> {NCCL_ENV} && mount -t tmpfs -o size=64k tmpfs /var/backups/fabnet")
    try:
        proc = fabnet("apply", inventory, "-p", str(playbook), "--yes", "--json")
        report = json.loads(proc.stdout)
    finally:
        lab.ssh(full, "umount /var/backups/fabnet", check=False)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]

    # A directory at the path: refused, nothing moved into it.
    assert _host(report, "gpu01")["status"] == "failed"
    assert lab.ssh(directory, f"ls -A {NCCL_ENV}").stdout.split() == ["admin"]
    # A symlink: written through, the link kept; rollback puts the old content back behind it.
    assert _host(report, "gpu02")["status"] == "changed"
    assert lab.ssh(linked, f"readlink {NCCL_ENV}; cat /usr/lib/attack/nccl.env").stdout == \
        "/usr/lib/attack/nccl.env\n" + WANTED
    # No room for the backup: the file is not touched.
    assert _host(report, "gpu03")["status"] == "failed"
    assert lab.ssh(full, f"wc -c < {NCCL_ENV}").stdout.strip() == "200000"

    back = fabnet("rollback", inventory, "-p", str(playbook), "--limit", "gpu02", "--yes", "--json")
    assert back.returncode == 0, back.stdout[-2000:]
    assert lab.ssh(linked, f"readlink {NCCL_ENV}; cat {NCCL_ENV}").stdout == "/usr/lib/attack/nccl.env\nOLD=1\n"


def test_rollback_keeps_a_file_edited_by_hand_after_the_run(lab: Lab, playbook: Path) -> None:
    node = lab.node("gpu01")
    lab.ssh(node, f"rm -rf {NCCL_ENV} && echo ORIGINAL=1 > {NCCL_ENV}")
    inventory = str(lab.state.inventory_path)
    assert fabnet("apply", inventory, "-p", str(playbook), "--limit", "gpu01", "--yes").returncode == 0
    lab.ssh(node, f"echo 'NCCL_DEBUG=INFO  # by hand' >> {NCCL_ENV}")
    back = fabnet("rollback", inventory, "-p", str(playbook), "--limit", "gpu01", "--yes", "--json")
    assert back.returncode == 2
    undone = json.loads(back.stdout)["hosts"][0]["undone"]
    assert any("changed since this run wrote it" in u["output"] for u in undone), undone
    assert lab.ssh(node, f"cat {NCCL_ENV}").stdout == WANTED + "NCCL_DEBUG=INFO  # by hand\n"


def test_an_mtu_set_by_hand_while_apply_waits_at_its_prompt_is_left(lab: Lab, playbook: Path,
                                                                    tmp_path: Path) -> None:
    node = lab.node("gpu03")
    lab.ssh(node, "ip link set eth1 mtu 1500")
    args = [sys.executable, "-m", "provisioner", "apply", str(lab.state.inventory_path), "-p", str(playbook),
            "--limit", "gpu03", "--json", "--journal", str(tmp_path / "j.jsonl")]
    with at_prompt(args, ROOT) as waiting:
        lab.ssh(node, "ip link set eth1 mtu 4200")
        out = waiting.answer("y")
    host = json.loads(out)["hosts"][0]
    assert waiting.proc.returncode == 2 and host["status"] == "failed", host
    assert "the MTU of eth1 changed since it was read (was 1500, now 4200)" in host["error"], host["error"]
    assert "mtu 4200" in lab.ssh(node, "ip -o link show dev eth1").stdout
