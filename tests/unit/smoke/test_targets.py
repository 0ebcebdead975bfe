"""Targets from the inventory and the NCCL environment the playbook renders."""

from __future__ import annotations

from pathlib import Path

from provisioner.load.hostplans import resolve
from provisioner.load.inventory import load_inventory
from provisioner.load.playbook import load_playbook
from provisioner.smoke.targets import parse_env_file, targets_from_plans, verify_spec

ROOT = Path(__file__).resolve().parents[3]


def test_parse_env_file_forms() -> None:
    text = ("# c\nexport NCCL_SOCKET_IFNAME=eth1\nNCCL_IB_HCA='mlx5_0'\nPATH=/bin\n"
            "  export GLOO_SOCKET_IFNAME=\"eth1\"\n")
    assert parse_env_file(text) == {"NCCL_SOCKET_IFNAME": "eth1", "NCCL_IB_HCA": "mlx5_0",
                                    "GLOO_SOCKET_IFNAME": "eth1"}


def test_example_inventory_with_site_playbook() -> None:
    plans = resolve(load_playbook(ROOT / "playbooks/site.yml"), load_inventory(ROOT / "inventories/example/hosts.yml"))
    targets = {t.name: t for t in targets_from_plans(plans)}
    assert "login01" not in targets
    t = targets["gpu-a01"]
    assert t.data_ifaces == ("ens1f0np0",) and t.python == "python3" and t.data_ip is None
    assert t.env["NCCL_SOCKET_IFNAME"] == "ens1f0np0" and t.env["NCCL_IB_HCA"] == "mlx5_0"
    assert verify_spec(plans) is not None  # site.yml has verify: all_reduce: {}


def test_verify_plans_is_none_without_a_verify_section(tmp_path: Path) -> None:
    from provisioner.smoke.run import verify_plans

    playbook = tmp_path / "site.yml"
    playbook.write_text("- hosts: gpu\n  resources: []\n")
    plans = resolve(load_playbook(playbook), load_inventory(ROOT / "inventories/example/hosts.yml"))
    assert plans and verify_plans(plans) is None
