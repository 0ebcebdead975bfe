"""The built-in lab profile: healthy defaults that match the shipped playbook, and one drift per node."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from provisioner.errors import ConfigError
from provisioner.lab.manager import LAB_PLAYBOOK_VARS
from provisioner.lab.node import hw_json
from provisioner.lab.profile import load_profile
from provisioner.load.hostplans import resolve
from provisioner.load.inventory import load_inventory
from provisioner.load.playbook import load_playbook

ROOT = Path(__file__).resolve().parents[3]


def test_default_nodes_hold_exactly_what_site_yml_renders_for_a_lab_node(tmp_path) -> None:
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"vars": LAB_PLAYBOOK_VARS, "children": {"gpu": {"hosts": {
        "gpu01": {"ansible_host": "198.18.1.1"}}}}}}))
    plans = resolve(load_playbook(ROOT / "playbooks/site.yml"), load_inventory(inventory))
    rendered = {r.spec.path: r.spec.content for r in plans[0].resources if r.kind == "file"}
    defaults = load_profile().defaults
    assert rendered == defaults.files


def test_each_drifted_node_differs_from_the_defaults_in_one_place() -> None:
    profile = load_profile()
    healthy = profile.node_state("gpu01").model_dump()
    diffs = {}
    for node in ("gpu02", "gpu03", "gpu04", "gpu05", "gpu06"):
        state = profile.node_state(node).model_dump()
        diffs[node] = sorted(key for key in state if state[key] != healthy[key])
    assert diffs == {
        "gpu02": ["data_mtu", "mtu_persistent"],
        "gpu03": ["qos"],
        "gpu04": ["ofed"],
        "gpu05": ["services"],
        "gpu06": ["files"],
    }
    assert profile.node_state("gpu05").services == {"rdma_cm": False, "openibd": True}
    assert profile.node_state("gpu06").files["/etc/nccl.conf"] is None


def test_hw_json_carries_the_nodes_qos_and_modules() -> None:
    profile = load_profile()
    drifted = hw_json(profile.node_state("gpu03"), 3)
    assert drifted["qos"]["eth1"] == {"trust": "pcp", "pfc": [0] * 8}
    healthy = hw_json(profile.node_state("gpu01"), 1)
    assert healthy["qos"]["eth1"]["pfc"] == [0, 0, 0, 1, 0, 0, 0, 0]
    assert healthy["ecn"]["eth1"]["np"][3] == 1 and healthy["traffic_class"] == {"mlx5_0": 106}
    assert healthy["modules"]["nvidia_peermem"] is True


def test_a_bad_profile_names_the_file_and_key(tmp_path) -> None:
    bad = tmp_path / "profile.yml"
    bad.write_text("defaults:\n  data_mtu: jumbo\n")
    with pytest.raises(ConfigError) as info:
        load_profile(bad)
    assert str(bad) in str(info.value) and "defaults.data_mtu" in str(info.value)
