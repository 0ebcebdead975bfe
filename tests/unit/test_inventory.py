"""Ansible YAML inventories: nesting, variable precedence, connection vars, host patterns, errors."""

from __future__ import annotations

import getpass
import textwrap
from pathlib import Path

import pytest

from provisioner.errors import ConfigError, ConfigErrors
from provisioner.load.hostpatterns import split_pattern
from provisioner.load.inventory import Inventory, expand_host_range, load_inventory


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


FLEET = """\
all:
  hosts:
    mgmt01:
  children:
    gpu:
      hosts:
        gpu[01:04]:
      children:
        rack_a:
          hosts:
            gpu01:
            gpu02:
        rack_b:
          hosts:
            gpu03:
            gpu04:
    storage:
      hosts:
        gpu04:
        nfs01:
"""


@pytest.fixture
def fleet(tmp_path: Path) -> Inventory:
    return load_inventory(write(tmp_path, "hosts.yml", FLEET))


# ------------------------------------------------------------------------------------------ structure


def test_hosts_in_definition_order_with_ranges_expanded(fleet: Inventory) -> None:
    assert list(fleet.hosts) == ["mgmt01", "gpu01", "gpu02", "gpu03", "gpu04", "nfs01"]


def test_children_nesting_gives_transitive_membership(fleet: Inventory) -> None:
    assert fleet.groups["gpu"] == {"gpu01", "gpu02", "gpu03", "gpu04"}
    assert fleet.groups["rack_a"] == {"gpu01", "gpu02"}
    assert fleet.groups["all"] == set(fleet.hosts)
    assert fleet.children["gpu"] == ["rack_a", "rack_b"]


def test_host_in_several_groups_lists_them_sorted(fleet: Inventory) -> None:
    assert fleet.hosts["gpu04"].groups == ("gpu", "rack_b", "storage")
    assert fleet.hosts["gpu01"].groups == ("gpu", "rack_a")


def test_hosts_only_under_all_are_ungrouped(fleet: Inventory) -> None:
    assert fleet.groups["ungrouped"] == {"mgmt01"}
    assert fleet.hosts["mgmt01"].groups == ("ungrouped",)


def test_top_level_groups_hang_under_all(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, "hosts.yml", "gpu:\n  hosts:\n    a:\nmgmt:\n  hosts:\n    m:\n"))
    assert inv.groups["all"] == {"a", "m"}
    assert inv.hosts["a"].groups == ("gpu",)


def test_host_range_forms() -> None:
    assert expand_host_range("gpu[01:03]") == ["gpu01", "gpu02", "gpu03"]
    assert expand_host_range("n[1:10:4]") == ["n1", "n5", "n9"]
    assert expand_host_range("r[a:b]-[1:2]") == ["ra-1", "ra-2", "rb-1", "rb-2"]
    with pytest.raises(ValueError, match="backwards"):
        expand_host_range("gpu[3:1]")


def test_host_name_with_port(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, "hosts.yml", "all:\n  hosts:\n    node1:2222:\n    '[fe80::1]:2200':\n"))
    assert inv.hosts["node1"].port == 2222
    assert "port" in inv.hosts["node1"].explicit
    assert inv.hosts["fe80::1"].port == 2200


# ----------------------------------------------------------------------------------------- precedence

# One host in `child` (under `parent`). Layer k defines every variable up_to_j with j >= k, so
# `up_to_j` must come out as the name of layer j: each layer beats all layers before it.
LAYERS = [
    "all_inline",
    "parent_inline",
    "child_inline",
    "all_file",
    "parent_file",
    "child_file",
    "host_inline",
    "host_file",
]


def _layer_vars(k: int, indent: int) -> str:
    pad = " " * indent
    return "".join(f"{pad}up_to_{j}: {LAYERS[k]}\n" for j in range(k, len(LAYERS)))


@pytest.fixture
def layered(tmp_path: Path) -> Inventory:
    text = (
        "all:\n  vars:\n"
        + _layer_vars(0, 4)
        + "  children:\n    parent:\n      vars:\n"
        + _layer_vars(1, 8)
        + "      children:\n        child:\n          vars:\n"
        + _layer_vars(2, 12)
        + "          hosts:\n            h1:\n"
        + _layer_vars(6, 14)
    )
    write(tmp_path, "hosts.yml", text)
    write(tmp_path, "group_vars/all.yml", _layer_vars(3, 0))
    write(tmp_path, "group_vars/parent.yaml", _layer_vars(4, 0))
    write(tmp_path, "group_vars/child/main.yml", _layer_vars(5, 0))
    write(tmp_path, "host_vars/h1.yml", _layer_vars(7, 0))
    return load_inventory(tmp_path / "hosts.yml")


@pytest.mark.parametrize("j", range(len(LAYERS)))
def test_variable_precedence_follows_ansible(layered: Inventory, j: int) -> None:
    assert layered.hosts["h1"].vars[f"up_to_{j}"] == LAYERS[j]


def test_inline_child_group_vars_lose_to_group_vars_all_file(layered: Inventory) -> None:
    # Ansible's documented order: all inventory-file group vars rank below group_vars/all.
    assert layered.hosts["h1"].vars["up_to_3"] == "all_file"
    assert layered.hosts["h1"].vars["up_to_2"] == "child_inline"


def test_variable_origins_point_at_the_winning_file(layered: Inventory, tmp_path: Path) -> None:
    origin = layered.hosts["h1"].var_origins["up_to_7"]
    assert origin.file == str(tmp_path / "host_vars/h1.yml")
    assert origin.line == 1


def test_group_vars_directory_files_load_in_name_order(tmp_path: Path) -> None:
    write(tmp_path, "hosts.yml", "all:\n  children:\n    gpu:\n      hosts:\n        g1:\n")
    write(tmp_path, "group_vars/gpu/10-base.yml", "mtu: 1500\nrail: 1\n")
    write(tmp_path, "group_vars/gpu/20-site.yml", "mtu: 9000\n")
    write(tmp_path, "group_vars/gpu/notes.txt", "mtu: 1\n")  # not a vars file: ignored, as in Ansible
    host = load_inventory(tmp_path / "hosts.yml").hosts["g1"]
    assert host.vars["mtu"] == 9000
    assert host.vars["rail"] == 1


def test_deeper_group_wins_over_shallower_sibling_branch(tmp_path: Path) -> None:
    write(
        tmp_path,
        "hosts.yml",
        """\
        all:
          children:
            gpu:
              vars: {mtu: 1500}
              children:
                h100:
                  vars: {mtu: 9000}
                  hosts: {g1: }
            zz_flat:
              vars: {mtu: 4200}
              hosts: {g1: }
        """,
    )
    # h100 (depth 2) beats zz_flat (depth 1) although zz_flat sorts later by name.
    assert load_inventory(tmp_path / "hosts.yml").hosts["g1"].vars["mtu"] == 9000


def test_group_priority_breaks_ties_between_same_depth_groups(tmp_path: Path) -> None:
    write(
        tmp_path,
        "hosts.yml",
        """\
        all:
          children:
            aaa:
              vars: {mtu: 9000, ansible_group_priority: 10}
              hosts: {g1: }
            zzz:
              vars: {mtu: 1500}
              hosts: {g1: }
        """,
    )
    assert load_inventory(tmp_path / "hosts.yml").hosts["g1"].vars["mtu"] == 9000


def test_vars_file_for_unknown_group_is_a_warning(tmp_path: Path) -> None:
    write(tmp_path, "hosts.yml", "all:\n  children:\n    gpu:\n      hosts:\n        g1:\n")
    write(tmp_path, "group_vars/gpus.yml", "mtu: 9000\n")
    inv = load_inventory(tmp_path / "hosts.yml")
    assert "mtu" not in inv.hosts["g1"].vars
    assert any("gpus.yml: no group named 'gpus'" in w and "did you mean 'gpu'" in w for w in inv.warnings)


# ---------------------------------------------------------------------------------- connection vars


def test_connection_vars(tmp_path: Path) -> None:
    write(
        tmp_path,
        "inv/hosts.yml",
        """\
        all:
          vars:
            ansible_user: root
            ansible_ssh_private_key_file: keys/lab_ed25519
            fabnet_known_hosts: known_hosts
            ansible_ssh_common_args: -o StrictHostKeyChecking=no
          hosts:
            gpu01:
              ansible_host: 10.0.0.11
              ansible_port: "2222"
              ansible_become: "yes"
              ansible_become_user: admin
        """,
    )
    inv = load_inventory(tmp_path / "inv/hosts.yml")
    host = inv.hosts["gpu01"]
    assert (host.address, host.port, host.user) == ("10.0.0.11", 2222, "root")
    assert host.ssh_config_host == "10.0.0.11"
    assert host.key_file == tmp_path / "inv/keys/lab_ed25519"
    assert host.known_hosts == tmp_path / "inv/known_hosts"
    assert (host.become, host.become_user) == (True, "admin")
    assert host.explicit == {"address", "port", "user", "key_file"}
    assert host.ignored_vars == ("ansible_ssh_common_args",)
    assert any("ansible_ssh_common_args is ignored" in w for w in inv.warnings)


def test_connection_defaults(fleet: Inventory) -> None:
    host = fleet.hosts["gpu01"]
    assert (host.address, host.port, host.user, host.key_file) == ("gpu01", 22, getpass.getuser(), None)
    assert (host.become, host.become_user, host.known_hosts) == (False, "root", None)
    assert host.explicit == frozenset()


def test_templated_ansible_host_is_rendered(tmp_path: Path) -> None:
    write(
        tmp_path,
        "hosts.yml",
        """\
        all:
          vars:
            mgmt_net: 10.1.0
          hosts:
            gpu07:
              idx: 7
              ansible_host: "{{ mgmt_net }}.{{ idx + 10 }}"
        """,
    )
    host = load_inventory(tmp_path / "hosts.yml").hosts["gpu07"]
    assert host.address == "10.1.0.17"
    assert host.vars["ansible_host"] == "{{ mgmt_net }}.{{ idx + 10 }}"  # vars stay as written


# --------------------------------------------------------------------------------------------- errors


def test_port_that_is_not_a_number(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.yml", "all:\n  hosts:\n    gpu01:\n      ansible_port: twenty\n")
    with pytest.raises(ConfigError) as info:
        load_inventory(path)
    err = info.value
    assert (err.file, err.line, err.key) == (str(path), 4, "all.hosts.gpu01.ansible_port")
    assert "expected a port number 1..65535, got 'twenty'" in err.message


def test_every_bad_host_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.yml", "all:\n  hosts:\n    a: {ansible_port: x}\n    b: {ansible_port: 70000}\n")
    with pytest.raises(ConfigErrors) as info:
        load_inventory(path)
    assert [e.line for e in info.value.errors] == [3, 4]


def test_hosts_must_be_a_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.yml", "all:\n  children:\n    gpu:\n      hosts: [gpu01, gpu02]\n")
    with pytest.raises(ConfigError) as info:
        load_inventory(path)
    assert (info.value.line, info.value.key) == (4, "all.children.gpu.hosts")
    assert "must be a mapping" in info.value.message


def test_host_entry_must_be_mapping_or_nothing(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.yml", "all:\n  hosts:\n    gpu01: 10.0.0.1\n")
    with pytest.raises(ConfigError, match="a host entry is a mapping of its vars") as info:
        load_inventory(path)
    assert info.value.line == 3


def test_unknown_group_key_is_skipped_with_a_warning_as_ansible_does(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.yml", "all:\n  children:\n    gpu:\n      host:\n        gpu01:\n")
    inv = load_inventory(path)
    assert inv.hosts == {}
    assert any(w.startswith(f"{path}:4: all.children.gpu.host: unknown key") for w in inv.warnings), inv.warnings


def test_vars_must_be_a_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.yml", "all:\n  vars:\n    - mtu\n")
    with pytest.raises(ConfigError, match="must be a mapping") as info:
        load_inventory(path)
    assert info.value.key == "all.vars"


def test_group_loop(tmp_path: Path) -> None:
    text = "all:\n  children:\n    a:\n      children:\n        b:\n          children:\n            a:\n"
    path = write(tmp_path, "hosts.yml", text)
    with pytest.raises(ConfigError, match="contain each other in a loop"):
        load_inventory(path)


def test_ini_inventory_is_recognised_by_content(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.yml", "[gpu]\ngpu01\ngpu02\n")
    assert load_inventory(path).group_order["gpu"] == ["gpu01", "gpu02"]


def test_bad_yaml_in_group_vars_names_that_file(tmp_path: Path) -> None:
    write(tmp_path, "hosts.yml", "all:\n  hosts:\n    a:\n")
    bad = write(tmp_path, "group_vars/all.yml", "mtu: [9000\n")
    with pytest.raises(ConfigError) as info:
        load_inventory(tmp_path / "hosts.yml")
    assert info.value.file == str(bad)


def test_missing_inventory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_inventory(tmp_path / "nope.yml")


# ------------------------------------------------------------------------------------------- patterns


def test_split_pattern() -> None:
    assert split_pattern("gpu:!gpu03:&rack_a") == ["gpu", "!gpu03", "&rack_a"]
    assert split_pattern("gpu, storage") == ["gpu", "storage"]
    assert split_pattern("gpu[1:3]:mgmt") == ["gpu[1:3]", "mgmt"]
    assert split_pattern("fe80::1") == ["fe80::1"]
    assert split_pattern(["gpu", "storage:!nfs01"]) == ["gpu", "storage", "!nfs01"]


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("all", ["mgmt01", "gpu01", "gpu02", "gpu03", "gpu04", "nfs01"]),
        ("gpu", ["gpu01", "gpu02", "gpu03", "gpu04"]),
        ("gpu0[12]", None),  # Ansible: subscript 12 of 'gpu0', which matches nothing
        ("~gpu0[12]", ["gpu01", "gpu02"]),
        ("gpu-*,nfs*", ["nfs01"]),  # gpu-* matches nothing: a warning
        ("*01", ["mgmt01", "gpu01", "nfs01"]),
        ("gpu:!rack_a", ["gpu03", "gpu04"]),
        ("gpu:&storage", ["gpu04"]),
        ("!gpu", ["mgmt01", "nfs01"]),
        ("rack_a,nfs01", ["gpu01", "gpu02", "nfs01"]),
        ("rack_*", ["gpu01", "gpu02", "gpu03", "gpu04"]),
        ("~gpu0[34]", ["gpu03", "gpu04"]),
        ("storage:!gpu*", ["nfs01"]),
    ],
)
def test_limit_patterns(fleet: Inventory, pattern: str, expected: list[str] | None) -> None:
    if expected is None:
        with pytest.raises(ConfigError):
            fleet.select(pattern)
    else:
        assert fleet.select(pattern) == expected


def test_unknown_term_warns_and_a_pattern_matching_nothing_is_an_error(fleet: Inventory) -> None:
    warnings: list[str] = []
    assert fleet.select("gpu:!gpu99", warnings=warnings) == ["gpu01", "gpu02", "gpu03", "gpu04"]
    assert len(warnings) == 1
    assert warnings[0].startswith("--limit: could not match host pattern 'gpu99', ignored as Ansible ignores it")
    with pytest.raises(ConfigError, match="did you mean 'storage'"):
        fleet.select("storag")


def test_empty_group_is_not_an_error(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, "hosts.yml", "all:\n  hosts: {a: }\n  children:\n    spare:\n"))
    assert inv.select("spare") == []


def test_subscript_on_a_group_whose_ansible_order_is_undefined_warns(tmp_path: Path) -> None:
    text = "[a]\nh1\n[b]\nh2\n[a1]\nh3\n[b1]\nh4\n[a:children]\na1\n[b:children]\nb1\n[top:children]\na\nb\n"
    inv = load_inventory(write(tmp_path, "hosts", text))
    assert "top" in inv.unordered_groups and "a" not in inv.unordered_groups
    warnings: list[str] = []
    assert inv.select("top[0]", warnings=warnings) == ["h1"]
    assert len(warnings) == 1 and "host order for group 'top' is not defined" in warnings[0]
    warnings.clear()
    assert inv.select("a[-1]", warnings=warnings) == ["h3"] and warnings == []


def test_duplicate_keys_in_an_inventory_and_its_vars_files_are_warnings_where_ansible_warns() -> None:
    corpus = Path(__file__).resolve().parents[1] / "corpus" / "inventories" / "fabnet" / "duplicate-keys"
    loaded = load_inventory(corpus / "hosts.yml")
    duplicated = sorted(w.split(": duplicate key ")[1].split(" ")[0] for w in loaded.warnings if "duplicate key" in w)
    assert duplicated == ["'gpu01'", "'mtu'", "'nested'", "'x'"]  # what ansible-inventory warns about
    assert loaded.hosts["gpu01"].vars["ansible_host"] == "10.0.0.11" and "rack" not in loaded.hosts["gpu01"].vars
