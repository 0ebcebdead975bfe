"""fabnet against the real Ansible on a corpus of real inventories (tests/corpus/inventories/INDEX.md):
the same hosts, groups, resolved variables and host-pattern results as `ansible-inventory --list`,
`ansible-playbook --list-hosts` (a play's `hosts:`) and `ansible all --list-hosts --limit`."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.errors import ConfigError, ConfigErrors
from provisioner.load.ansible_tags import hide_passwords
from provisioner.load.inventory import load_inventory
from provisioner.load.inventory_json import list_json
from tests.unit.ansible_oracle import BIN, Ansible, available
from tests.unit.oracle_corpus import (
    CASES,
    CORPUS,
    EMPTY,
    GOLDENTOOTH,
    LIMITS,
    MITOGEN,
    ORDERED,
    PATTERNS,
    REFUSED,
    RETRY_FILES,
)

pytestmark = pytest.mark.skipif(not available(), reason="ansible-core (a test extra) is not installed")


@pytest.fixture(scope="module")
def ansible(tmp_path_factory: pytest.TempPathFactory) -> Ansible:
    return Ansible(tmp_path_factory.mktemp("ansible"))


def _json(data: object) -> object:
    return json.loads(json.dumps(data, default=str))


@pytest.mark.parametrize("case", sorted(CASES))
def test_fabnet_inventory_list_equals_ansible_inventory_list(
    case: str, ansible: Ansible, capsys: pytest.CaptureFixture[str]
) -> None:
    sources = CASES[case]
    with pytest.raises(SystemExit) as done:
        main(["inventory", *map(str, sources), "--list"])
    assert done.value.code == 0
    ours = json.loads(capsys.readouterr().out)
    assert ours == ansible.inventory_list(sources)
    assert ours == _json(list_json(load_inventory(sources)))


@pytest.mark.parametrize("case", sorted(PATTERNS))
def test_host_patterns_select_what_ansible_selects(case: str, ansible: Ansible) -> None:
    sources = CASES[case]
    inventory = load_inventory(sources)
    expected = ansible.list_hosts(sources, PATTERNS[case])
    for pattern, want in zip(PATTERNS[case], expected, strict=True):
        assert want, f"{case}: Ansible selects nothing for {pattern!r}: not a useful comparison"
        assert set(inventory.select(pattern, warnings=[])) == want, pattern


@pytest.mark.parametrize("case", sorted(ORDERED))
def test_host_patterns_keep_ansibles_order(case: str, ansible: Ansible) -> None:
    sources = CASES[case]
    inventory = load_inventory(sources)
    assert {"baremetal", "compute"}.isdisjoint(inventory.unordered_groups)
    for pattern in ORDERED[case]:
        got, want = inventory.select(pattern, warnings=[]), ansible.pattern_hosts(sources, pattern)
        if pattern in inventory.unordered_groups:
            # Ansible walks this group's generations through a set of group objects, so its order follows
            # memory addresses and changes from run to run (goldentooth's `all`): the same hosts is all it says.
            assert sorted(got) == sorted(want), pattern
        else:
            assert got == want, pattern


@pytest.mark.parametrize("case", sorted(EMPTY))
def test_known_empty_groups_select_nothing_without_error(case: str, ansible: Ansible) -> None:
    inventory = load_inventory(CASES[case])
    assert ansible.list_hosts(CASES[case], EMPTY[case]) == [set()] * len(EMPTY[case])
    for pattern in EMPTY[case]:
        assert inventory.select(pattern, warnings=[]) == []


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_patterns_ansible_reads_as_nothing_are_errors(case: str, ansible: Ansible) -> None:
    sources = CASES[case]
    inventory = load_inventory(sources)
    for pattern, want in zip(REFUSED[case], ansible.list_hosts(sources, REFUSED[case]), strict=True):
        assert not want, f"Ansible selects {want} for {pattern!r}"
        with pytest.raises(ConfigError):
            inventory.select(pattern, warnings=[])


@pytest.mark.parametrize("case", sorted(LIMITS))
def test_limits_select_what_ansible_selects(case: str, ansible: Ansible, tmp_path: Path) -> None:
    sources = CASES[case]
    inventory = load_inventory(sources)
    retry = tmp_path / "site.retry"
    retry.write_text(RETRY_FILES.get(case, ""))
    for limit in LIMITS[case]:
        limit = limit.replace("@retry", f"@{retry}")
        code, want, stderr = ansible.limit_hosts(sources, limit)
        assert code == 0 and want, stderr
        assert set(inventory.select_limit(limit)) == set(want), limit


def test_empty_limit_and_broken_regex_select_every_host_in_ansible_but_are_errors_here(
    ansible: Ansible, tmp_path: Path
) -> None:
    sources = CASES["kolla-multinode"]
    inventory = load_inventory(sources)
    everyone = set(inventory.hosts)
    empty = tmp_path / "empty.retry"
    empty.write_text("\n")
    for limit in ("", " , ", "~[", f"@{empty}"):
        code, hosts, _ = ansible.limit_hosts(sources, limit)
        assert (code, set(hosts)) == (0, everyone), f"Ansible no longer widens {limit!r}: {hosts}"
        with pytest.raises(ConfigError):
            inventory.select_limit(limit)


def test_fabnet_inventory_limit_equals_ansible_inventory_limit(
    ansible: Ansible, capsys: pytest.CaptureFixture[str]
) -> None:
    sources = CASES["kolla-multinode"]
    with pytest.raises(SystemExit) as done:
        main(["inventory", str(sources[0]), "--list", "--limit", "baremetal:!control"])
    assert done.value.code == 0
    assert json.loads(capsys.readouterr().out) == ansible.inventory_list(sources, "--limit", "baremetal:!control")


@pytest.mark.parametrize(("case", "queries"), [
    ("mixed-directory", (["--host", "gpu-b02"], ["--graph"], ["--graph", "gpu"])),
    ("kayobe", (["--host", "localhost"], ["--graph"], ["--graph", "overcloud"])),
    ("ceph-all-daemons", (["--host", "osd2"], ["--graph"])),
    ("openshift-example", (["--host", "ose3-master2.test.example.com"], ["--graph", "OSEv3"])),
    ("core-var-blending", (["--host", "testhost"], ["--graph"])),
    ("examples-two", (["--host", "host2"], ["--graph"])),
    ("fgci-examples", (["--host", "gpu"], ["--graph", "pxe_bootable_nodes"])),
    ("galaxy-eu", (["--host", "sn09.galaxyproject.eu"], ["--graph", "htcondor"])),
    ("nvue-mlag-bgp", (["--host", "leaf01"], ["--graph"])),
])
def test_fabnet_inventory_host_and_graph_equal_ansible(
    case: str, queries: tuple[list[str], ...], ansible: Ansible, capsys: pytest.CaptureFixture[str]
) -> None:
    sources = [str(source) for source in CASES[case]]
    for args in queries:
        with pytest.raises(SystemExit) as done:
            main(["inventory", *sources, *args])
        assert done.value.code == 0
        ours = capsys.readouterr().out
        theirs = ansible.run("ansible-inventory", *(arg for source in sources for arg in ("-i", source)), *args)
        assert theirs.returncode == 0, theirs.stderr
        if args[0] == "--host":
            assert json.loads(ours) == hide_passwords(json.loads(theirs.stdout))
        else:
            assert ours.strip() == theirs.stdout.strip()


def test_the_advice_for_a_script_or_plugin_inventory_gives_a_file_fabnet_reads_as_ansible_does(
    ansible: Ansible, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = {"gpu": {"hosts": ["gpu01", "gpu02"], "vars": {"data_iface": "eth1"}},
              "rack_a": {"hosts": ["gpu01"]},
              "_meta": {"hostvars": {"gpu01": {"ansible_host": "10.0.0.1"}, "gpu02": {"ansible_port": 2222}}}}
    script = tmp_path / "dyn inv.py"  # a space: the advised command must survive being pasted
    script.write_text(f"#!/usr/bin/env python3\nprint({json.dumps(json.dumps(listed))})\n")
    script.chmod(0o755)
    with pytest.raises(ConfigError) as raised:
        load_inventory(script)
    advised = str(raised.value).split("(", 2)[-1].rsplit(")", 1)[0]
    assert advised == f"ansible-inventory -i '{script}' --list --yaml > hosts.yml", str(raised.value)
    # Pasted as it is, into a shell whose PATH has this Ansible, from the folder it writes into.
    done = subprocess.run(["bash", "-c", advised], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**ansible.env, "PATH": f"{BIN}:{ansible.env['PATH']}"}, check=False)
    assert done.returncode == 0, done.stderr
    with pytest.raises(SystemExit) as code:
        main(["inventory", str(tmp_path / "hosts.yml"), "--list"])
    assert code.value.code == 0
    assert json.loads(capsys.readouterr().out) == ansible.inventory_list([script])


def _list(ansible: Ansible, capsys: pytest.CaptureFixture[str], source: Path) -> tuple[object, dict]:
    with pytest.raises(SystemExit) as done:
        main(["inventory", str(source), "--list"])
    assert done.value.code == 0
    return json.loads(capsys.readouterr().out), ansible.inventory_list([source])


@pytest.mark.parametrize(("ini", "user"), [
    ("[bastion]\nbastion ansible_host=192.0.2.1 ansible_user=root\n[gpu]\ngpu01\n", "ubuntu"),
    # written before the group exists: the host's own var, which group_vars/all.yml does not override
    ("bastion ansible_user=root\n[bastion]\nbastion ansible_host=192.0.2.1 ansible_user=admin\n", "root"),
])
def test_vars_on_the_line_of_a_host_named_like_its_group_have_a_group_vars_precedence(
    ini: str, user: str, ansible: Ansible, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Ansible sets them on the group of that name, where it exists already: group_vars/all.yml then wins.
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars/all.yml").write_text("ansible_user: ubuntu\n")
    (tmp_path / "hosts").write_text(ini)
    ours, theirs = _list(ansible, capsys, tmp_path / "hosts")
    assert ours == theirs
    assert load_inventory(tmp_path / "hosts").hosts["bastion"].user == user


def test_vars_on_the_line_of_a_host_named_like_a_group_with_other_hosts_are_an_error(
    ansible: Ansible, tmp_path: Path
) -> None:
    (tmp_path / "hosts").write_text("[gpu]\ngpu ansible_host=192.0.2.1\ngpu01\n")
    theirs = ansible.inventory_list([tmp_path / "hosts"])["_meta"]["hostvars"]
    assert theirs["gpu01"]["ansible_host"] == "192.0.2.1", "Ansible no longer gives gpu's address to gpu01"
    with pytest.raises(ConfigError) as raised:
        load_inventory(tmp_path / "hosts")
    assert (raised.value.file, raised.value.line, raised.value.key) == (str(tmp_path / "hosts"), 2, "gpu.ansible_host")
    assert "gpu01" in str(raised.value)


def test_yaml_timestamps_and_sets_print_as_ansible_prints_them(
    ansible: Ansible, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    gpu01:\n      day: 2024-01-02\n"
                                        "      at: 2001-12-14t21:59:43.10-05:00\n      racks: !!set {a}\n")
    ours, theirs = _list(ansible, capsys, tmp_path / "hosts.yml")
    assert ours == theirs


def test_placeholder_host_names_ansible_reads_are_refused_at_their_lines(ansible: Ansible) -> None:
    # cloud-native-stack's template to fill in: Ansible takes `<MASTER_IP>` as a host and fails on connecting.
    example = CORPUS / "cloud-native-stack/skills/cns-install/templates/hosts.master-workers.example"
    hosts = ansible.inventory_list([example])["_meta"]["hostvars"]
    assert sorted(hosts) == ["<MASTER_IP>", "<WORKER_1_IP>", "<WORKER_2_IP>"]
    with pytest.raises(ConfigErrors) as raised:
        load_inventory(example)
    assert [(error.file, error.line) for error in raised.value.errors] == [(str(example), 2), (str(example), 4),
                                                                          (str(example), 5)]


def test_a_directory_with_a_pipe_lookup_is_refused_at_each_file_line_and_key(ansible: Ansible) -> None:
    # mitogen's test inventory asks the controller's shell for the user name: Ansible keeps the template
    # unrendered in --list, fabnet has to render ansible_user and refuses to run commands to do it.
    default = MITOGEN / "default.hosts"
    assert ansible.inventory_list([MITOGEN])["_meta"]["hostvars"]["target"]["ansible_user"] == (
        "{{ lookup('pipe', 'whoami') }}")
    with pytest.raises(ConfigErrors) as raised:
        load_inventory(MITOGEN)
    located = {(error.file, error.line, error.key) for error in raised.value.errors}
    assert located == {
        (str(default), 8, "target.ansible_user"), (str(default), 18, "ssh-common-args.ansible_user"),
        (str(default), 25, "wait-for-connection.ansible_user"),
        (str(default), 35, "[tt_become_bare:vars].ansible_user"),
        (str(default), 47, "[tt_become_by_inv:vars].ansible_user"),
        (str(default), 54, "tt-private-key-file.ansible_private_key_file"),
    }
    assert all("lookup('pipe')" in str(error) or "git_basedir" in str(error) for error in raised.value.errors)
    # The group's variable fails each of its six hosts the same way: one line, naming them.
    assert len(raised.value.errors) == len(located)
    group = next(error for error in raised.value.errors if error.line == 47)
    assert str(group).endswith("(hosts tt-become, tt-become-exe, tt-become-flags and 3 more)"), str(group)


# Connection settings written as templates or through Ansible's older aliases (ansible_ssh_host...): the
# address, user and port fabnet will connect with are the ones Ansible's tasks see.
_RENDERED = ("ansible_host", "ansible_user", "ansible_port")
_ALIASES = ("ansible_ssh_host", "ansible_ssh_user", "ansible_ssh_port")


def _needs_rendering(host: object) -> bool:
    values = getattr(host, "vars", {})
    return any(name in values for name in _ALIASES) or any(
        isinstance(values.get(name), str) and "{{" in values[name] for name in (*_RENDERED, *_ALIASES))


def test_templated_and_aliased_connection_settings_are_what_ansible_tasks_see(ansible: Ansible) -> None:
    checked: dict[str, list[str]] = {}
    for case, sources in sorted(CASES.items()):
        try:
            inventory = load_inventory(sources)
        except ConfigError:
            continue  # fabnet refuses it: the tests above say where
        hosts = {name: host for name, host in inventory.hosts.items() if _needs_rendering(host)}
        if not hosts:
            continue
        theirs = ansible.rendered(sources, _RENDERED, sorted(hosts))
        compared = sorted(hosts.keys() & theirs.keys())
        assert compared, f"{case}: Ansible rendered none of {sorted(hosts)}"
        for name in compared:
            host, seen = hosts[name], theirs[name]
            assert host.address == seen["ansible_host"], (case, name)
            if seen["ansible_user"] is not None:
                assert host.user == seen["ansible_user"], (case, name)
            if seen["ansible_port"] is not None:
                assert host.port == int(str(seen["ansible_port"])), (case, name)
        checked[case] = compared
    # Ansible's own `ansible_host={{myhost}}` in [group:vars], and the ansible_ssh_* aliases of several sets.
    assert "core-delegate-to" in checked and len(checked) >= 5, checked


@pytest.mark.parametrize(("case", "pattern"), [
    ("goldentooth", "localhost"),  # a group of that name, empty: Ansible still answers with the controller
    ("goldentooth", "localhost:all_pi_5"), ("goldentooth", "127.0.0.1"), ("goldentooth", "::1"),
    ("goldentooth", "localhost[0]"),
])
def test_a_play_for_ansibles_implicit_localhost_is_refused_naming_it(case: str, pattern: str, ansible: Ansible) -> None:
    sources = CASES[case]
    inventory = load_inventory(sources)
    term = pattern.split(":")[0] if pattern != "::1" else pattern
    assert term.split("[")[0] not in inventory.hosts
    (want,) = ansible.list_hosts(sources, [pattern])
    assert want is not None and term.split("[")[0] in want, f"Ansible no longer adds the controller for {pattern!r}"
    with pytest.raises(ConfigError) as raised:
        inventory.select(pattern, warnings=[])
    assert "implicit localhost" in str(raised.value) and repr(term) in str(raised.value)


def test_another_name_of_localhost_selects_the_inventorys_localhost_as_in_ansible(ansible: Ansible) -> None:
    sources = CASES["kolla-all-in-one"]  # localhost is a host there, with ansible_connection=local
    inventory = load_inventory(sources)
    patterns = ["::1", "127.0.0.1", "127.0.0.1:control", "127.0.0.1[0]"]
    for pattern, want in zip(patterns, ansible.list_hosts(sources, patterns), strict=True):
        assert want and "localhost" in want, pattern
        assert set(inventory.select(pattern, warnings=[])) == want, pattern


def test_a_vault_encrypted_vars_file_is_skipped_and_its_secret_never_shown(
    ansible: Ansible, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # goldentooth keeps its secrets in group_vars/all/vault, a whole file encrypted with ansible-vault (left out
    # of the corpus): one of our own takes its place, so that Ansible can open it with a known password.
    inventory = tmp_path / "inventory"
    shutil.copytree(GOLDENTOOTH, inventory)
    secret = "s3cret-gossip-key-0123"
    vault = inventory / "group_vars/all/vault"
    vault.write_text(f"secret_vault:\n  consul:\n    gossip_key: {secret}\nconsul_datacenter: dc2\n")
    password = tmp_path / "vault-password"
    password.write_text("unused-in-production\n")
    done = ansible.run("ansible-vault", "encrypt", "--vault-password-file", str(password), str(vault))
    assert done.returncode == 0 and vault.read_text().startswith("$ANSIBLE_VAULT;"), done.stderr
    with pytest.raises(SystemExit) as code:
        main(["inventory", str(inventory), "--list"])
    assert code.value.code == 0
    out, err = capsys.readouterr()
    assert secret not in out + err
    assert f"{vault}: encrypted with ansible-vault as a whole file" in err
    # Ansible, given the password, sets the file's variables on every host; fabnet sets none of them and
    # agrees on everything else.
    theirs = ansible.inventory_list([inventory], "--vault-password-file", str(password))
    for variables in theirs["_meta"]["hostvars"].values():
        variables.pop("secret_vault")  # hidden by name in the oracle's answer: it holds secrets
        assert variables.pop("consul_datacenter") == "dc2"
    assert json.loads(out) == theirs


def test_a_vault_encrypted_inventory_file_is_refused_at_its_first_line(ansible: Ansible, tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("[gpu]\ngpu01 ansible_host=192.0.2.1\n")
    password = tmp_path / "vault-password"
    password.write_text("unused-in-production\n")
    assert ansible.run("ansible-vault", "encrypt", "--vault-password-file", str(password), str(hosts)).returncode == 0
    assert "gpu01" in ansible.inventory_list([hosts], "--vault-password-file", str(password))["_meta"]["hostvars"]
    with pytest.raises(ConfigError) as raised:
        load_inventory(hosts)
    assert (raised.value.file, raised.value.line) == (str(hosts), 1)
    assert "ansible-vault" in str(raised.value)
