"""The shipped playbook and example inventory stay valid together, and render what they promise."""

from __future__ import annotations

from pathlib import Path

from provisioner.load.hostplans import resolve, validate
from provisioner.load.inventory import load_inventory
from provisioner.load.playbook import load_playbook

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = ROOT / "inventories/example/hosts.yml"
SITE = ROOT / "playbooks/site.yml"


def test_example_inventory_and_site_playbook_validate() -> None:
    assert validate(INVENTORY, SITE) == []


def test_group_and_host_vars_reach_the_rendered_resources() -> None:
    plans = {plan.host.name: plan for plan in resolve(load_playbook(SITE), load_inventory(INVENTORY))}
    assert sorted(plans) == ["gpu-a01", "gpu-a02", "gpu-a03", "gpu-a04", "gpu-b01", "gpu-b02"]  # not login01
    interface = {name: next(r.spec for r in plan.resources if r.kind == "interface") for name, plan in plans.items()}
    assert interface["gpu-a01"].name == "ens1f0np0"
    assert interface["gpu-b02"].name == "ens2f0np0"
    nccl_conf = next(r.spec.content for r in plans["gpu-b02"].resources if r.kind == "file"
                     and r.spec.path == "/etc/nccl.conf")
    assert "NCCL_SOCKET_IFNAME=ens2f0np0\n" in nccl_conf and "NCCL_IB_HCA=mlx5_0\n" in nccl_conf
    host = plans["gpu-b01"].host
    assert (host.address, host.user, host.become) == ("10.20.1.11", "ops", True)
    assert host.known_hosts == INVENTORY.parent / "known_hosts"
