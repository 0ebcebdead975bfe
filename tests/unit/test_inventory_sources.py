"""Inventory sources as Ansible takes them: directories, several sources, group_vars/host_vars beside the
inventory and beside the playbook with Ansible's precedence; `!vault`, `!unsafe`, filters and lookups."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.errors import ConfigError
from provisioner.load.ansible_tags import VaultedValue
from provisioner.load.hostplans import resolve
from provisioner.load.inventory import load_inventory
from provisioner.load.playbook import load_playbook

VAULT = """!vault |
  $ANSIBLE_VAULT;1.1;AES256
  62313365396662343061393464336163383764373764613633653634306231386433626436623361
"""


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_directory_files_are_read_in_name_order_skipping_what_ansible_skips(tmp_path: Path) -> None:
    write(tmp_path, "inv/b.yml", "gpu:\n  hosts:\n    gpu02:\n")
    write(tmp_path, "inv/a", "[gpu]\ngpu01\n")
    write(tmp_path, "inv/sub/c.ini", "[gpu]\ngpu03\n")
    write(tmp_path, "inv/notes.md", "[gpu]\nnot-a-host\n")
    write(tmp_path, "inv/old.retry", "gpu09\n")
    write(tmp_path, "inv/.hidden", "[gpu]\nhidden\n")
    write(tmp_path, "inv/group_vars/gpu.yml", "mtu: 9000\n")
    inv = load_inventory(tmp_path / "inv")
    assert inv.group_order["gpu"] == ["gpu01", "gpu02", "gpu03"]
    assert inv.hosts["gpu03"].vars["mtu"] == 9000  # the directory's own group_vars/


def test_several_sources_merge_in_order_each_with_its_own_vars(tmp_path: Path) -> None:
    write(tmp_path, "common/groups", "[gpu]\n[storage]\n[cluster:children]\ngpu\nstorage\n")
    write(tmp_path, "common/group_vars/cluster.yml", "mtu: 1500\nowner: common\n")
    write(tmp_path, "site/hosts.yml", "gpu:\n  hosts:\n    gpu01:\n  vars:\n    mtu: 4200\n")
    write(tmp_path, "site/group_vars/gpu/net.yml", "mtu: 9000\n")
    inv = load_inventory([tmp_path / "common", tmp_path / "site/hosts.yml"])
    assert inv.hosts["gpu01"].groups == ("cluster", "gpu")
    assert (inv.hosts["gpu01"].vars["mtu"], inv.hosts["gpu01"].vars["owner"]) == (9000, "common")


def test_playbook_group_vars_and_host_vars_take_ansibles_precedence(tmp_path: Path) -> None:
    # Lowest first: inventory-file group vars, inventory group_vars/all, playbook group_vars/all,
    # inventory group_vars/gpu, playbook group_vars/gpu, inventory-file host vars, inventory host_vars,
    # playbook host_vars.
    keys = ["v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7"]
    write(tmp_path, "inv/hosts.yml",
          "gpu:\n  vars: {v0: 0, v1: 0, v2: 0, v3: 0, v4: 0, v5: 0, v6: 0, v7: 0}\n"
          "  hosts:\n    gpu01: {v5: 5, v6: 5, v7: 5}\n")
    write(tmp_path, "inv/group_vars/all.yml", "{v1: 1, v2: 1, v3: 1, v4: 1}\n")
    write(tmp_path, "play/group_vars/all.yml", "{v2: 2, v3: 2, v4: 2}\n")
    write(tmp_path, "inv/group_vars/gpu.yml", "{v3: 3, v4: 3}\n")
    write(tmp_path, "play/group_vars/gpu.yml", "{v4: 4}\n")
    write(tmp_path, "inv/host_vars/gpu01.yml", "{v6: 6, v7: 6}\n")
    write(tmp_path, "play/host_vars/gpu01.yml", "{v7: 7}\n")
    write(tmp_path, "play/site.yml", "- hosts: gpu\n  resources: []\n")
    inv = load_inventory(tmp_path / "inv/hosts.yml", playbook_dir=tmp_path / "play")
    assert [inv.hosts["gpu01"].vars[k] for k in keys] == [0, 1, 2, 3, 4, 5, 6, 7]
    assert str(inv.hosts["gpu01"].var_origins["v7"]).startswith(str(tmp_path / "play/host_vars/gpu01.yml"))


def test_vaulted_become_password_does_not_stop_an_audit_that_does_not_need_it(tmp_path: Path) -> None:
    write(tmp_path, "inv/hosts", "[gpu]\ngpu01 ansible_host=192.0.2.1\n")
    write(tmp_path, "inv/group_vars/gpu/vault.yml", f"ansible_become_pass: {VAULT}")
    playbook = write(tmp_path, "site.yml", """\
        - hosts: gpu
          resources:
            - sysctl: {name: net.ipv4.ip_forward, value: 0}
        """)
    inv = load_inventory(tmp_path / "inv/hosts")
    assert isinstance(inv.hosts["gpu01"].vars["ansible_become_pass"], VaultedValue)
    plans = resolve(load_playbook(playbook), inv)
    assert [plan.host.name for plan in plans] == ["gpu01"]
    assert any("ansible_become_pass is ignored" in w for w in inv.warnings)


def test_a_template_that_uses_a_vaulted_value_says_it_is_vaulted(tmp_path: Path) -> None:
    write(tmp_path, "hosts", "[gpu]\ngpu01\n")
    write(tmp_path, "host_vars/gpu01.yml", f"token: {VAULT}")
    playbook = write(tmp_path, "site.yml", """\
        - hosts: all
          resources:
            - file: {path: /etc/token, content: "{{ token }}"}
            - file: {path: /etc/token.env, content: "TOKEN={{ token }}"}
        """)
    with pytest.raises(ConfigError) as info:
        resolve(load_playbook(playbook), load_inventory(tmp_path / "hosts"))
    messages = [str(e) for e in info.value.errors]  # type: ignore[attr-defined]
    assert len(messages) == 2 and all("encrypted with ansible-vault" in m for m in messages), messages
    assert "$ANSIBLE_VAULT" not in "".join(messages)


def test_unsafe_values_are_never_rendered(tmp_path: Path) -> None:
    write(tmp_path, "hosts.yml", 'all:\n  hosts:\n    gpu01:\n      motd: !unsafe "{{ lookup(\'pipe\', \'id\') }}"\n')
    playbook = write(tmp_path, "site.yml", """\
        - hosts: all
          resources:
            - file: {path: /etc/motd, content: "{{ motd }}"}
        """)
    plans = resolve(load_playbook(playbook), load_inventory(tmp_path / "hosts.yml"))
    assert plans[0].plays[0].resources[0].spec.content == "{{ lookup('pipe', 'id') }}"


def test_filters_and_env_lookup_in_connection_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FABNET_TEST_BASTION_USER", "svc-ops")
    write(tmp_path, "hosts.yml", """\
        all:
          vars:
            ansible_user: "{{ lookup('env', 'FABNET_TEST_BASTION_USER') }}"
            key_dir: /srv/keys/cluster-a/
            ansible_ssh_private_key_file: >-
              {{ key_dir | dirname }}/{{ inventory_hostname | regex_replace('-.*', '') }}.pem
            meta: "{{ {'a': 1} | to_json }}"
          hosts:
            gpu-01:
              ansible_host: "{{ '/x/192.0.2.7' | basename }}"
        """)
    host = load_inventory(tmp_path / "hosts.yml").hosts["gpu-01"]
    assert (host.user, host.address, str(host.key_file)) == ("svc-ops", "192.0.2.7", "/srv/keys/cluster-a/gpu.pem")


def test_lookups_that_read_files_stay_refused(tmp_path: Path) -> None:
    text = "all:\n  hosts:\n    gpu01:\n      ansible_user: \"{{ lookup('file', '/etc/passwd') }}\"\n"
    write(tmp_path, "hosts.yml", text)
    with pytest.raises(ConfigError, match=r"lookup\('file'\) is not supported"):
        load_inventory(tmp_path / "hosts.yml")


@pytest.mark.parametrize(
    ("text", "warning"),
    [
        ("all:\n  hosts: gpu01\n", "read as {gpu01: null}"),
        ("all:\n  hosts:\n    1:\n", "is a number"),
        ("all:\n  children:\n    gpu: [a, b]\n", "not a group definition"),
    ],
)
def test_where_ansible_only_warns_fabnet_warns_with_file_and_line(tmp_path: Path, text: str, warning: str) -> None:
    path = write(tmp_path, "hosts.yml", text)
    inv = load_inventory(path)
    assert any(w.startswith(f"{path}:") and warning in w for w in inv.warnings), inv.warnings


def test_a_host_list_written_as_one_string_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts.yml", "all:\n  hosts: gpu01, gpu02\n")
    with pytest.raises(ConfigError, match="ONE host"):
        load_inventory(path)


def test_inventory_command_exit_codes_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "hosts", "[gpu]\ngpu01 mtu=9000\ngpu02\n")

    def run(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as done:
            main(["inventory", str(path), *args])
        out, err = capsys.readouterr()
        return done.value.code, out, err

    code, out, _ = run("--host", "gpu01")
    assert (code, json.loads(out)) == (0, {"mtu": 9000})
    assert run("--host", "gpu09")[0] == 3
    assert run("--graph", "nosuch")[0] == 3
    assert run("--list", "--limit", "")[0] == 3
    assert run("--list", "--host", "gpu01")[0] == 64
    code, out, _ = run("--list", "--limit", "gpu02")
    assert code == 0 and json.loads(out)["gpu"] == {"hosts": ["gpu02"]}


def test_a_local_or_docker_connection_is_a_warning_since_fabnet_always_uses_ssh(tmp_path: Path) -> None:
    text = "[deployment]\nlocalhost ansible_connection=local\n[gpu]\ngpu01 ansible_connection=ssh\n"
    path = write(tmp_path, "hosts", text)
    warnings = load_inventory(path).warnings
    assert len(warnings) == 1 and warnings[0].startswith(f"{path}:2: ansible_connection is ignored")
    assert "hosts localhost" in warnings[0]


def test_inventory_dir_of_a_directory_source_is_that_directory(tmp_path: Path) -> None:
    write(tmp_path, "inv/hosts", "[gpu]\ngpu01 ansible_ssh_private_key_file='{{ inventory_dir }}/keys/id'\n")
    inv = load_inventory(tmp_path / "inv")
    assert inv.hosts["gpu01"].key_file == tmp_path / "inv/keys/id"


def test_audit_goes_on_past_a_vaulted_become_password(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as sock:  # a loopback port nobody listens on: the host is unreachable, quickly
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    write(tmp_path, "inv/hosts", f"[gpu]\ngpu01 ansible_host=127.0.0.1 ansible_port={port}\n")
    write(tmp_path, "inv/group_vars/gpu/vault.yml", f"ansible_become: true\nansible_become_pass: {VAULT}")
    sysctl = "    - sysctl: {name: net.ipv4.ip_forward, value: 0}\n"
    playbook = write(tmp_path, "site.yml", "- hosts: gpu\n  resources:\n" + sysctl)
    with pytest.raises(SystemExit) as done:
        main(["audit", str(tmp_path / "inv/hosts"), "-p", str(playbook), "--json", "--connect-timeout", "2"])
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert done.value.code == 4 and report["hosts"][0]["status"] == "unreachable"
    assert "vault" not in report["hosts"][0]["error"].lower() and "$ANSIBLE_VAULT" not in out + err


def test_only_the_branch_taken_is_rendered(tmp_path: Path) -> None:
    write(tmp_path, "hosts.yml", """\
        all:
          vars:
            use_mgmt: true
            mgmt_ip: 192.0.2.10
            data_ip: "{{ data_prefix }}.10"
            ansible_host: "{{ mgmt_ip if use_mgmt else data_ip }}"
          hosts:
            gpu01:
            gpu02:
              use_mgmt: false
        """)
    with pytest.raises(ConfigError) as info:
        load_inventory(tmp_path / "hosts.yml")
    # gpu01 never needs data_ip (whose data_prefix is undefined); gpu02 does, and the error names data_ip
    assert [(e.line, e.key) for e in info.value.errors] == [(5, "all.vars.data_ip")]  # type: ignore[attr-defined]
    assert "gpu02" in str(info.value) and "gpu01" not in str(info.value)


def test_a_toml_file_is_read_by_ansibles_toml_rules_after_ini_fails(tmp_path: Path) -> None:
    inventory = write(tmp_path, "hosts.toml", """\
        [gpu.vars]
        mtu = 9000
        [gpu.hosts."gpu[01:02]:2222"]
        rack = "a"
        [fabric]
        children = ["gpu"]
        """)
    inv = load_inventory(inventory)
    assert [(h.name, h.port, h.vars["mtu"], h.vars["rack"]) for h in inv.hosts.values()] == [
        ("gpu01", 2222, 9000, "a"), ("gpu02", 2222, 9000, "a")]
    assert set(inv.select("fabric", warnings=[])) == {"gpu01", "gpu02"}
    assert "gpu.vars" not in inv.groups  # what the failed INI reading added is gone, as in Ansible


@pytest.mark.parametrize(("text", "error"), [
    ('[g]\nchildren = "other"\n', "children of group 'g' must be a list"),
    ('[g.hosts]\nh1 = "x"\n', "host 'h1' must be a table"),
    ("plugin = 'aws_ec2'\n", "inventory plugin configuration"),
    ("[g\n", "not a valid TOML inventory"),
])
def test_a_toml_inventory_ansible_refuses_is_an_error(tmp_path: Path, text: str, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        load_inventory(write(tmp_path, "hosts.toml", text))


def test_yaml_is_read_only_from_the_names_ansibles_yaml_plugin_takes(tmp_path: Path) -> None:
    yaml_text = "gpu:\n  hosts:\n    gpu01:\n"
    assert list(load_inventory(write(tmp_path, "a/hosts", yaml_text)).hosts) == ["gpu01"]
    assert list(load_inventory(write(tmp_path, "b/hosts.json", '{"gpu": {"hosts": {"gpu01": null}}}')).hosts) == [
        "gpu01"]
    with pytest.raises(ConfigError, match="gpu:"):  # Ansible reads hosts.example as INI only, and fails
        load_inventory(write(tmp_path, "c/hosts.example", yaml_text))


def test_an_executable_inventory_script_is_a_clear_error_naming_it(tmp_path: Path) -> None:
    script = write(tmp_path, "inv/ec2.py", "#!/usr/bin/env python3\nprint('{}')\n")
    write(tmp_path, "inv/static", "[gpu]\ngpu01\n")
    script.chmod(0o755)
    with pytest.raises(ConfigError, match="executable inventory script") as raised:
        load_inventory(tmp_path / "inv")
    assert (raised.value.file, raised.value.line) == (str(script), 1)
    assert ("what Ansible makes of the whole directory as a static inventory "
            f"(ansible-inventory -i {tmp_path / 'inv'} --list") in str(raised.value)
    script.chmod(0o644)  # not executable: Ansible reads it as INI (and fails), so does fabnet
    with pytest.raises(ConfigError) as raised:
        load_inventory(tmp_path / "inv")
    assert "executable inventory script" not in str(raised.value)


def test_a_plugin_file_in_an_inventory_directory_advises_saving_the_whole_directory(tmp_path: Path) -> None:
    # `constructed` beside static files groups the hosts they define: on its own Ansible gives no hosts at all.
    write(tmp_path, "inv/01-hosts", "[gpu]\ngpu01 rack=a\n")
    plugin = write(tmp_path, "inv/zz-constructed.yml", "plugin: ansible.builtin.constructed\nkeyed_groups:\n"
                                                     "  - key: rack\n")
    with pytest.raises(ConfigError, match="inventory plugin configuration") as raised:
        load_inventory(tmp_path / "inv")
    assert (raised.value.file, raised.value.line, raised.value.key) == (str(plugin), 1, "plugin")
    assert ("what Ansible makes of the whole directory as a static inventory "
            f"(ansible-inventory -i {tmp_path / 'inv'} --list") in str(raised.value)
    with pytest.raises(ConfigError) as raised:  # given alone, the file itself is what to save
        load_inventory(plugin)
    assert f"what Ansible makes of it as a static inventory (ansible-inventory -i {plugin} --list" in str(raised.value)


def test_a_host_name_in_another_script_is_taken_as_ansible_takes_it(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, "hosts.yml", "all:\n  hosts:\n    příbor:\n    узел-01.кластер:\n"))
    assert [h.address for h in inv.hosts.values()] == ["příbor", "узел-01.кластер"]
    for bad in ("příbor;reboot", "a\u200bb", "-příbor"):
        with pytest.raises(ConfigError, match="host name or an IP address"):
            load_inventory(write(tmp_path, "bad.yml", f"all:\n  hosts:\n    x:\n      ansible_host: '{bad}'\n"))
