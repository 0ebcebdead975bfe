"""Host lists on the command line (`fabnet audit gpu01,gpu02, ...`), against the real Ansible: the hosts,
ports, groups and graph `ansible-inventory -i LIST` gives, alone and beside an inventory file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.errors import ConfigError
from provisioner.load.inventory import load_inventory, magic_vars
from provisioner.load.invsources import HostList, source_of
from provisioner.load.loading import default_playbooks
from tests.unit.ansible_oracle import Ansible, available

EXAMPLE = Path(__file__).resolve().parents[2] / "inventories" / "example" / "hosts.yml"
LISTS = {
    "two": "gpu01,gpu02",
    "trailing comma": "gpu01,",
    "spaces and empty words": " gpu01 ,, gpu02 , ",
    "ports and addresses": "gpu01:2222,10.0.0.7,[fd00::7]:2200,fd00::8,gpu02",
    "first declaration's port wins": "gpu01,gpu01:2200,gpu02:2201,gpu02:2202",
}


@pytest.fixture(scope="module")
def ansible(tmp_path_factory: pytest.TempPathFactory) -> Ansible:
    return Ansible(tmp_path_factory.mktemp("ansible"))


def _ours(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit) as done:
        main(["inventory", *args])
    assert done.value.code == 0
    return capsys.readouterr().out


@pytest.mark.skipif(not available(), reason="ansible-core (a test extra) is not installed")
@pytest.mark.parametrize("case", sorted(LISTS))
def test_a_host_list_reads_as_ansible_reads_it(case: str, ansible: Ansible,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    text = LISTS[case]
    ours = json.loads(_ours(capsys, text, "--list"))
    assert ours == ansible.inventory_list([Path(text)])
    assert ours["ungrouped"]["hosts"]
    graph = ansible.run("ansible-inventory", "-i", text, "--graph")
    assert _ours(capsys, text, "--graph").strip() == graph.stdout.strip()


@pytest.mark.skipif(not available(), reason="ansible-core (a test extra) is not installed")
def test_a_host_list_beside_an_inventory_file_and_a_limit(ansible: Ansible,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    sources = [Path("extra01,gpu-a01:2222,"), EXAMPLE]
    ours = json.loads(_ours(capsys, *map(str, sources), "--list"))
    assert ours == ansible.inventory_list(sources)
    assert "extra01" in ours["ungrouped"]["hosts"]
    limited = json.loads(_ours(capsys, *map(str, sources), "--list", "--limit", "ungrouped:rack_b"))
    assert limited == ansible.inventory_list(sources, "--limit", "ungrouped:rack_b")


def test_a_host_list_has_no_folder_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    inventory = load_inventory("gpu01,gpu02", playbook_dir=tmp_path)
    assert sorted(inventory.hosts) == ["gpu01", "gpu02"]
    assert inventory.hosts["gpu01"].groups == ("ungrouped",)
    magic = magic_vars(inventory, inventory.hosts["gpu01"])
    assert (magic["inventory_file"], magic["inventory_dir"]) == ("gpu01,gpu02", None)  # as Ansible sets them
    # The default playbook is looked for in the working directory only, never "beside" the list.
    assert default_playbooks(Path("gpu01,gpu02")) == [Path("playbooks/site.yml")]


def test_group_vars_beside_the_playbook_apply_to_a_host_list(tmp_path: Path) -> None:
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("data_iface: eth7\n")
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "gpu02.yml").write_text("ansible_port: 2022\n")
    inventory = load_inventory("gpu01,gpu02,", playbook_dir=tmp_path)
    assert {name: (h.vars.get("data_iface"), h.port) for name, h in inventory.hosts.items()} == \
        {"gpu01": ("eth7", 22), "gpu02": ("eth7", 2022)}


def test_a_comma_in_an_existing_path_is_a_file_not_a_host_list(tmp_path: Path) -> None:
    odd = tmp_path / "prod,old.yml"
    odd.write_text("all:\n  hosts:\n    gpu09:\n")
    assert source_of(odd) == odd and source_of(str(odd)) == odd
    assert isinstance(source_of("gpu01,gpu02"), HostList)
    assert sorted(load_inventory(odd).hosts) == ["gpu09"]


def test_a_range_in_a_host_list_is_refused_saying_why() -> None:
    # Ansible takes `gpu[01:03]` there as one host of that name, and then fails to reach it.
    with pytest.raises(ConfigError) as error:
        load_inventory("gpu01,gpu[02:03],")
    assert "'gpu[02:03]' is a host range" in str(error.value) and "gpu01,gpu[02:03]," in str(error.value)


def test_a_control_character_in_a_host_list_is_refused() -> None:
    with pytest.raises(ConfigError) as error:
        load_inventory("gpu01,\x1b]0;owned\x07gpu02,")
    assert "U+001B" in str(error.value) and "inventories are plain text" in str(error.value)
