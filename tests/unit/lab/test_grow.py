"""`lab add`'s pure parts: the vendor-default profile and the inventory it appends new nodes to."""

from __future__ import annotations

from pathlib import Path

from provisioner.lab.grow import VENDOR_PROFILE, with_new_hosts
from provisioner.lab.profile import load_profile
from provisioner.lab.state import NodeRecord
from provisioner.load.inventory import load_inventory

LAB_INVENTORY = """\
# Inventory of fabnet lab 'x' (written by `fabnet lab up`; removed by `lab down`).
# Profile: default.yml
all:
  vars:
    ansible_user: root
  children:
    gpu:
      hosts:
        gpu01: {ansible_host: 198.18.1.1, data_ip: 198.19.1.1}
        gpu02: {ansible_host: 198.18.1.2, data_ip: 198.19.1.2}
"""


def _record(index: int) -> NodeRecord:
    return NodeRecord(index, f"gpu{index:02d}", f"fabnet-x-gpu{index:02d}", f"198.18.1.{index}", f"198.19.1.{index}")


def test_new_nodes_join_the_fleet_group_and_the_new_group(tmp_path: Path) -> None:
    text = with_new_hosts(LAB_INVENTORY, [_record(3), _record(4)])
    assert text.startswith("# Inventory of fabnet lab 'x'")
    path = tmp_path / "inventory.yml"
    path.write_text(text)
    inventory = load_inventory(path)
    assert list(inventory.hosts) == ["gpu01", "gpu02", "gpu03", "gpu04"]
    assert inventory.groups["new"] == {"gpu03", "gpu04"}
    assert inventory.groups["gpu"] == {"gpu01", "gpu02", "gpu03", "gpu04"}
    assert inventory.hosts["gpu04"].address == "198.18.1.4"
    assert inventory.hosts["gpu04"].vars["data_ip"] == "198.19.1.4"


def test_a_second_add_keeps_the_first_new_nodes(tmp_path: Path) -> None:
    text = with_new_hosts(with_new_hosts(LAB_INVENTORY, [_record(3)]), [_record(4)])
    path = tmp_path / "inventory.yml"
    path.write_text(text)
    assert load_inventory(path).groups["new"] == {"gpu03", "gpu04"}


def test_vendor_default_node_has_none_of_the_fleets_settings() -> None:
    state = load_profile(VENDOR_PROFILE).node_state("gpu07")
    assert state.data_mtu == 1500 and not state.mtu_persistent
    assert state.nccl is None and state.files == {} and state.sysctls == {}
    assert state.qos.trust == "pcp" and state.qos.pfc == [] and state.qos.traffic_class is None
    assert state.services["rdma_cm"] is False
