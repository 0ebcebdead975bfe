"""Playbooks: structure checks with file:line: key, per-host Jinja2 rendering, and the shipped site.yml."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from provisioner.errors import ConfigError, ConfigErrors
from provisioner.load.hostplans import HostPlan, resolve, validate
from provisioner.load.inventory import load_inventory
from provisioner.load.playbook import load_playbook
from provisioner.load.specs import FileSpec, InterfaceSpec, RoceQosSpec

REPO = Path(__file__).resolve().parents[2]

INVENTORY = """\
all:
  vars:
    ansible_user: root
  children:
    gpu:
      vars:
        data_iface: ens1f0np0
      hosts:
        gpu01:
          rdma_device: mlx5_0
        gpu02:
          rdma_device: mlx5_1
        gpu03:
          rdma_device: mlx5_0
    mgmt:
      hosts:
        mgmt01:
"""


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def inv_path(tmp_path: Path) -> Path:
    return write(tmp_path, "inventory/hosts.yml", INVENTORY)


def plans_for(tmp_path: Path, inv_path: Path, playbook: str, limit: str | None = None) -> list[HostPlan]:
    path = write(tmp_path, "pb/play.yml", playbook)
    return resolve(load_playbook(path), load_inventory(inv_path), limit)


def only_error(inv_path: Path, pb_path: Path) -> ConfigError:
    found = validate(inv_path, pb_path)
    assert len(found) == 1, [str(e) for e in found]
    return found[0]


# ---------------------------------------------------------------------------------------- shipped files


def test_shipped_site_playbook_validates(inv_path: Path) -> None:
    assert validate(inv_path, REPO / "playbooks/site.yml") == []


def test_shipped_site_playbook_resolves_for_each_gpu_host(inv_path: Path) -> None:
    plans = resolve(load_playbook(REPO / "playbooks/site.yml"), load_inventory(inv_path))
    assert [p.host.name for p in plans] == ["gpu01", "gpu02", "gpu03"]
    by_kind = {}
    for resource in plans[1].resources:
        by_kind.setdefault(resource.kind, []).append(resource.spec)
    assert set(by_kind) == {
        "interface",
        "mtu_uniform",
        "service",
        "kernel_module",
        "sysctl",
        "ofed",
        "nccl",
        "roce_qos",
        "file",
    }
    assert by_kind["interface"] == [InterfaceSpec(name="ens1f0np0", mtu=9000, state="up", persistent=True)]
    qos = by_kind["roce_qos"][0]
    assert isinstance(qos, RoceQosSpec)
    assert (qos.trust, qos.pfc, qos.ecn, qos.traffic_class, qos.cnp_dscp) == ("dscp", [3], [3], 106, 48)
    assert (qos.active_mtu, qos.gid_index) == (4096, 3)
    assert [s.name for s in by_kind["service"]] == ["rdma_cm", "openibd"]
    assert str(by_kind["nccl"][0].version) == "==2.21.5"
    files = {f.path: f for f in by_kind["file"]}
    assert set(files) == {"/etc/nccl.conf", "/etc/profile.d/nccl.sh"}


def test_shipped_nccl_conf_is_bare_key_value_lines(inv_path: Path) -> None:
    plans = resolve(load_playbook(REPO / "playbooks/site.yml"), load_inventory(inv_path))
    conf = next(r.spec for r in plans[1].resources if r.kind == "file" and r.spec.path == "/etc/nccl.conf")
    assert isinstance(conf, FileSpec)
    lines = conf.content.splitlines()
    # NCCL takes every line with '=' literally: no export, no spaces, no comments.
    assert all(line.count("=") >= 1 and " " not in line and not line.startswith("#") for line in lines)
    values = dict(line.split("=", 1) for line in lines)
    assert values["NCCL_SOCKET_IFNAME"] == "ens1f0np0"
    assert values["NCCL_IB_HCA"] == "mlx5_1"  # gpu02's own host var
    assert (values["NCCL_IB_GID_INDEX"], values["NCCL_IB_TC"]) == ("3", "106")
    assert conf.template == "nccl.conf.j2"


def test_shipped_profile_script_exports(inv_path: Path) -> None:
    plans = resolve(load_playbook(REPO / "playbooks/site.yml"), load_inventory(inv_path))
    script = next(r.spec for r in plans[0].resources if r.kind == "file" and r.spec.path.endswith("nccl.sh"))
    exports = [line for line in script.content.splitlines() if line and not line.startswith("#")]
    assert all(line.startswith("export NCCL_") for line in exports)
    assert "export NCCL_IB_TC=106" in exports


def test_shipped_playbook_names_the_missing_inventory_variable(tmp_path: Path) -> None:
    inv = write(tmp_path, "hosts.yml", "all:\n  children:\n    gpu:\n      hosts:\n        g1:\n")
    found = [str(e) for e in validate(inv, REPO / "playbooks/site.yml")]
    assert found
    assert all("'data_iface' is undefined" in e and "(host g1)" in e for e in found)


# ------------------------------------------------------------------------------------- structure errors


def test_unknown_key_names_file_line_key_and_allowed(tmp_path: Path, inv_path: Path) -> None:
    path = write(
        tmp_path,
        "site.yml",
        """\
        - hosts: gpu
          resources:
            - roce_qos:
                interface: eth1
                pfcc: [3]
        """,
    )
    err = only_error(inv_path, path)
    assert str(err) == (
        f"{path}:5: plays[0].resources[0].roce_qos.pfcc: unknown key; allowed: interface, rdma_device, trust, pfc, "
        "dscp2prio, ecn, traffic_class, cnp_dscp, roce_tos, port_state, active_mtu, gid_index, tsa, tcbw "
        "(did you mean 'pfc'?)"
    )


def test_unknown_play_key(tmp_path: Path, inv_path: Path) -> None:
    path = write(tmp_path, "site.yml", "- hosts: gpu\n  resource: []\n")
    err = only_error(inv_path, path)
    assert (err.line, err.key) == (2, "plays[0].resource")
    assert "allowed: name, hosts, vars, resources, verify, serial, max_fail_percentage" in err.message


def test_unknown_verify_key_lists_verify_keys(tmp_path: Path, inv_path: Path) -> None:
    path = write(tmp_path, "site.yml", "- hosts: gpu\n  verify:\n    all_reduce: {}\n    bandwidth: 1\n")
    err = only_error(inv_path, path)
    assert (err.line, err.key, err.message) == (4, "plays[0].verify.bandwidth", "unknown key; allowed: all_reduce")


def test_wrong_type_says_what_was_expected(tmp_path: Path, inv_path: Path) -> None:
    path = write(tmp_path, "site.yml", "- hosts: gpu\n  resources:\n    - interface: {name: eth0, mtu: abc}\n")
    err = only_error(inv_path, path)
    assert (err.line, err.key) == (3, "plays[0].resources[0].interface.mtu")
    assert "valid integer" in err.message
    assert "(got 'abc')" in err.message
    assert "expected MTU in bytes, 1500..9216" in err.message


def test_unknown_kind_lists_the_kinds(tmp_path: Path, inv_path: Path) -> None:
    path = write(tmp_path, "site.yml", "- hosts: gpu\n  resources:\n    - interfce: {name: eth0}\n")
    err = only_error(inv_path, path)
    assert err.key == "plays[0].resources[0].interfce"
    assert ("allowed kinds: file, interface, kernel_module, mtu_uniform, nccl, ofed, port_counters, roce_qos, "
            "service, sysctl") in err.message
    assert "did you mean 'interface'" in err.message


def test_resource_must_have_one_key(tmp_path: Path, inv_path: Path) -> None:
    path = write(tmp_path, "site.yml", "- hosts: gpu\n  resources:\n    - {service: {name: a}, sysctl: {name: b}}\n")
    err = only_error(inv_path, path)
    assert err.line == 3
    assert "one-key mapping" in err.message


def test_every_structure_error_is_collected(tmp_path: Path, inv_path: Path) -> None:
    path = write(
        tmp_path,
        "site.yml",
        """\
        - hosts: gpu
          serial: none
          resources:
            - interface: {name: eth0, mtu: 90000}
            - service: {name: rdma_cm, enabled: maybe}
            - kernel_module: {name: nvidia_peermem, state: gone}
        """,
    )
    found = validate(inv_path, path)
    assert [(e.line, e.key) for e in found] == [
        (2, "plays[0].serial"),
        (4, "plays[0].resources[0].interface.mtu"),
        (5, "plays[0].resources[1].service.enabled"),
        (6, "plays[0].resources[2].kernel_module.state"),
    ]
    with pytest.raises(ConfigErrors) as info:
        load_playbook(path)
    assert len(info.value.errors) == 4


def test_playbook_must_be_a_list(tmp_path: Path) -> None:
    path = write(tmp_path, "site.yml", "hosts: gpu\n")
    with pytest.raises(ConfigError, match="a playbook is a list of plays"):
        load_playbook(path)


def test_bad_yaml_in_playbook(tmp_path: Path, inv_path: Path) -> None:
    path = write(tmp_path, "site.yml", "- hosts: gpu\n  resources:\n    - service: {name: a\n")
    err = only_error(inv_path, path)
    assert err.file == str(path)
    assert err.line == 4
    assert err.message.startswith("invalid YAML")


def test_duplicate_key_in_playbook(tmp_path: Path, inv_path: Path) -> None:
    text = "- hosts: gpu\n  resources:\n    - interface:\n        mtu: 1500\n        mtu: 9000\n"
    path = write(tmp_path, "site.yml", text)
    err = only_error(inv_path, path)
    assert (err.line, err.key) == (5, "plays[0].resources[0].interface.mtu")
    assert "duplicate key" in err.message


def test_missing_playbook(inv_path: Path, tmp_path: Path) -> None:
    err = only_error(inv_path, tmp_path / "absent.yml")
    assert err.message == "file not found"


def test_template_syntax_error_in_a_value_is_found_offline(tmp_path: Path) -> None:
    path = write(tmp_path, "site.yml", "- hosts: gpu\n  resources:\n    - interface: {name: '{{ data_iface }'}\n")
    with pytest.raises(ConfigError) as info:
        load_playbook(path)
    assert (info.value.line, info.value.key) == (3, "plays[0].resources[0].interface.name")
    assert "template syntax error" in info.value.message


def test_missing_template_file_is_found_offline(tmp_path: Path) -> None:
    path = write(tmp_path, "pb/site.yml", "- hosts: gpu\n  resources:\n    - file: {path: /etc/x, template: x.j2}\n")
    with pytest.raises(ConfigError, match=r"template 'x\.j2' not found") as info:
        load_playbook(path)
    assert info.value.key == "plays[0].resources[0].file.template"


def test_template_file_syntax_error_points_into_the_template(tmp_path: Path) -> None:
    bad = write(tmp_path, "templates/x.j2", "A=1\n{% if x %}\nB=2\n")
    path = write(tmp_path, "pb/site.yml", "- hosts: gpu\n  resources:\n    - file: {path: /etc/x, template: x.j2}\n")
    with pytest.raises(ConfigError) as info:
        load_playbook(path)
    assert info.value.file == str(bad)
    assert "template syntax error" in info.value.message


def test_unknown_play_hosts_pattern(tmp_path: Path, inv_path: Path) -> None:
    path = write(tmp_path, "site.yml", "- name: x\n  hosts: gpus\n")
    err = only_error(inv_path, path)
    assert (err.line, err.key) == (2, "plays[0].hosts")
    assert "could not match host pattern 'gpus'" in err.message


# --------------------------------------------------------------------------------------------- rendering


def test_rendered_string_9000_is_coerced(tmp_path: Path, inv_path: Path) -> None:
    plans = plans_for(
        tmp_path,
        inv_path,
        """\
        - hosts: gpu
          vars:
            mtu_text: "9000"
          resources:
            - interface: {name: "{{ data_iface }}", mtu: "{{ mtu_text }}"}
            - interface: {name: eth9, mtu: "{{ mtu_text | int - 4800 }}"}
        """,
    )
    first, second = (r.spec for r in plans[0].resources)
    assert (first.name, first.mtu) == ("ens1f0np0", 9000)
    assert second.mtu == 4200


def test_rendered_value_out_of_range_names_host_and_value(tmp_path: Path, inv_path: Path) -> None:
    path = write(
        tmp_path,
        "site.yml",
        """\
        - hosts: gpu
          vars:
            big: 90000
          resources:
            - interface: {name: eth9, mtu: "{{ big }}"}
        """,
    )
    err = only_error(inv_path, path)
    assert (err.line, err.key) == (5, "plays[0].resources[0].interface.mtu")
    assert "(got 90000)" in err.message
    assert "(hosts gpu01, gpu02, gpu03)" in err.message


def test_single_expression_keeps_its_type(tmp_path: Path, inv_path: Path) -> None:
    plans = plans_for(
        tmp_path,
        inv_path,
        """\
        - hosts: gpu01
          vars:
            lossless: [3, 4]
          resources:
            - roce_qos: {interface: eth1, pfc: "{{ lossless }}", ecn: "{{ lossless[:1] }}"}
        """,
    )
    spec = plans[0].resources[0].spec
    assert (spec.pfc, spec.ecn) == ([3, 4], [3])


def test_undefined_variable_is_located_and_named(tmp_path: Path, inv_path: Path) -> None:
    text = "- hosts: gpu01\n  resources:\n    - interface:\n        name: '{{ data_ifce }}'\n"
    path = write(tmp_path, "site.yml", text)
    err = only_error(inv_path, path)
    assert (err.file, err.line, err.key) == (str(path), 4, "plays[0].resources[0].interface.name")
    assert "'data_ifce' is undefined" in err.message
    assert "(host gpu01)" in err.message


def test_same_failure_on_many_hosts_is_one_line(tmp_path: Path, inv_path: Path) -> None:
    path = write(tmp_path, "site.yml", "- hosts: all\n  resources:\n    - sysctl: {name: a.b, value: '{{ nope }}'}\n")
    err = only_error(inv_path, path)
    assert err.message.endswith("(hosts gpu01, gpu02, gpu03 and 1 more)")


def test_play_vars_use_inventory_vars_and_each_other(tmp_path: Path, inv_path: Path) -> None:
    plans = plans_for(
        tmp_path,
        inv_path,
        """\
        - hosts: gpu02
          vars:
            hca: "{{ rdma_device }}"
            label: "{{ hca }}-{{ inventory_hostname }}-{{ groups['gpu'] | length }}"
          resources:
            - file: {path: /etc/label, content: "{{ label }}\\n"}
        """,
    )
    assert plans[0].resources[0].spec.content == "mlx5_1-gpu02-3\n"
    assert plans[0].plays[0].vars == {"hca": "mlx5_1", "label": "mlx5_1-gpu02-3"}


def test_play_vars_override_inventory_vars(tmp_path: Path, inv_path: Path) -> None:
    plans = plans_for(
        tmp_path,
        inv_path,
        "- hosts: gpu01\n  vars: {data_iface: eth7}\n  resources:\n    - interface: {name: '{{ data_iface }}'}\n",
    )
    assert plans[0].resources[0].spec.name == "eth7"


def test_templated_inventory_vars_are_rendered_lazily(tmp_path: Path) -> None:
    write(tmp_path, "hosts.yml", "all:\n  children:\n    gpu:\n      hosts:\n        g1: {rail: 2}\n")
    write(tmp_path, "group_vars/gpu.yml", 'data_iface: "ens{{ rail }}f0"\n')
    pb = write(tmp_path, "site.yml", "- hosts: gpu\n  resources:\n    - interface: {name: '{{ data_iface }}'}\n")
    plans = resolve(load_playbook(pb), load_inventory(tmp_path / "hosts.yml"))
    assert plans[0].resources[0].spec.name == "ens2f0"


def test_variable_loop_is_reported_once(tmp_path: Path, inv_path: Path) -> None:
    path = write(tmp_path, "site.yml", "- hosts: gpu01\n  vars:\n    a: '{{ b }}'\n    b: '{{ a }}'\n")
    err = only_error(inv_path, path)
    assert (err.line, err.key) == (3, "plays[0].vars.a")
    assert "loop: a -> b -> a" in err.message


def test_template_file_is_rendered_per_host(tmp_path: Path, inv_path: Path) -> None:
    write(tmp_path, "templates/hca.conf.j2", "HCA={{ rdma_device }}\n{% if extra is defined %}\nX=1\n{% endif %}\n")
    text = "- hosts: gpu\n  resources:\n    - file: {path: /etc/hca, template: hca.conf.j2}\n"
    plans = plans_for(tmp_path, inv_path, text)
    assert [p.resources[0].spec.content for p in plans] == ["HCA=mlx5_0\n", "HCA=mlx5_1\n", "HCA=mlx5_0\n"]


def test_undefined_variable_in_template_file_points_at_its_line(tmp_path: Path, inv_path: Path) -> None:
    tpl = write(tmp_path, "templates/t.j2", "A=1\nB={{ missing_var }}\n")
    path = write(tmp_path, "pb/site.yml", "- hosts: gpu01\n  resources:\n    - file: {path: /etc/t, template: t.j2}\n")
    err = only_error(inv_path, path)
    assert (err.file, err.line) == (str(tpl), 2)
    assert "'missing_var' is undefined" in err.message
    assert "plays[0].resources[0].file.template" in err.message


def test_sandbox_blocks_unsafe_attributes(tmp_path: Path, inv_path: Path) -> None:
    path = write(
        tmp_path,
        "site.yml",
        "- hosts: gpu01\n  resources:\n    - file: {path: /etc/x, content: \"{{ ''.__class__.__mro__ }}\"}\n",
    )
    err = only_error(inv_path, path)
    assert err.key == "plays[0].resources[0].file.content"


# ------------------------------------------------------------------------------------- plans and limit


def test_limit_and_play_hosts_intersect(tmp_path: Path, inv_path: Path) -> None:
    plans = plans_for(
        tmp_path,
        inv_path,
        """\
        - hosts: gpu
          resources:
            - mtu_uniform: {interface: "{{ data_iface }}"}
        - hosts: all
          resources:
            - sysctl: {name: net.ipv4.conf.all.arp_ignore, value: 1}
        """,
        limit="~gpu0[12],mgmt01",
    )
    assert [p.host.name for p in plans] == ["gpu01", "gpu02", "mgmt01"]
    assert plans[0].plays[0].hosts == ("gpu01", "gpu02")
    assert [len(p.plays) for p in plans] == [2, 2, 1]


def test_resources_keep_their_playbook_line(tmp_path: Path, inv_path: Path) -> None:
    plans = plans_for(
        tmp_path,
        inv_path,
        "- hosts: gpu01\n  resources:\n    - service: {name: rdma_cm}\n    - service:\n        name: openibd\n",
    )
    first, second = plans[0].resources
    assert (first.origin.line, first.key, first.target) == (3, "plays[0].resources[0].service", "service[rdma_cm]")
    assert (second.origin.line, second.key) == (4, "plays[0].resources[1].service")
    assert first.origin.file.endswith("play.yml")
