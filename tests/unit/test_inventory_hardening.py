"""Hostile and clumsy inventories: values that could reach a shell or ssh as syntax or options, huge host
ranges, FIFOs, NUL bytes, and limits that Ansible would widen to every host. Each is a clear error naming
where it is; nothing runs on this machine."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.errors import ConfigError, ConfigErrors
from provisioner.load.hostplans import resolve
from provisioner.load.inventory import load_inventory
from provisioner.load.playbook import load_playbook

PLAYBOOK = "- hosts: all\n  resources:\n    - sysctl: {name: net.ipv4.ip_forward, value: 0}\n"


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(args)
    out, err = capsys.readouterr()
    return done.value.code, out, err


def test_shell_syntax_in_ansible_host_never_reaches_ssh_config_match_exec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "ran"
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text(f'Match exec "touch {marker}-%h"\n  User nobody\n')
    # The oracle can see a Match exec run: paramiko runs it for an ordinary host name.
    lookup = f"import paramiko; paramiko.SSHConfig.from_path({str(ssh_config)!r}).lookup('gpu01')"
    subprocess.run([sys.executable, "-c", lookup], stdin=subprocess.DEVNULL, check=True, timeout=60)
    assert Path(f"{marker}-gpu01").exists()
    Path(f"{marker}-gpu01").unlink()

    payload = f"10.0.0.1;touch${{IFS}}{marker}-payload;true"
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(f'all:\n  hosts:\n    gpu01:\n      ansible_host: "{payload}"\n')
    playbook = tmp_path / "site.yml"
    playbook.write_text(PLAYBOOK)
    for command in (["validate", str(inventory), "-p", str(playbook)],
                    ["audit", str(inventory), "-p", str(playbook), "--ssh-config", str(ssh_config)]):
        code, _, err = run_cli(command, capsys)
        assert code == 3
        assert f"{inventory}:4" in err and "must be a host name or an IP address" in err
    assert list(tmp_path.glob("ran*")) == []


@pytest.mark.parametrize(
    ("var", "value", "words"),
    [
        ("ansible_host", "-oProxyCommand=sh", "host name or an IP address"),
        ("ansible_host", "gpu01 -p 2", "host name or an IP address"),
        ("ansible_host", "$(reboot)", "host name or an IP address"),
        ("ansible_host", "a..b", "host name or an IP address"),
        ("ansible_user", "-oProxyCommand=sh", "user name"),
        ("ansible_user", "root;id", "user name"),
        ("ansible_become_user", "root`id`", "user name"),
        ("ansible_port", "22;id", "port number"),
        ("ansible_port", True, "port number"),
        ("ansible_ssh_private_key_file", "-i/etc/shadow", "file path"),
        ("ansible_ssh_private_key_file", "~/.ssh/id;rm -rf ~", "file path"),
        ("fabnet_known_hosts", "/tmp/kh\nMatch exec x", "file path"),
    ],
)
def test_connection_values_are_validated_with_file_and_line(tmp_path: Path, var: str, value: object,
                                                            words: str) -> None:
    import yaml

    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"hosts": {"gpu01": {"ansible_host": "192.0.2.1", var: value}}}}))
    with pytest.raises(ConfigError) as info:
        load_inventory(path)
    assert info.value.file == str(path) and info.value.line is not None
    assert words in info.value.message


@pytest.mark.parametrize("address", ["192.0.2.1", "2001:db8::1", "fe80::1%eth0", "gpu-01.rack_a.example.", "gpu01"])
def test_ordinary_addresses_are_accepted(tmp_path: Path, address: str) -> None:
    path = tmp_path / "hosts.yml"
    path.write_text(f'all:\n  hosts:\n    h:\n      ansible_host: "{address}"\n      ansible_user: svc.ops-1\n')
    assert load_inventory(path).hosts["h"].address == address


def test_a_host_name_used_as_address_is_validated_too(tmp_path: Path) -> None:
    path = tmp_path / "hosts"
    path.write_text("[gpu]\n'a;id'\n")
    with pytest.raises(ConfigError, match="host's name"):
        load_inventory(path)


def test_a_placeholder_host_name_is_refused_at_the_line_that_writes_it(tmp_path: Path) -> None:
    # NVIDIA cloud-native-stack's example inventory: Ansible reads `<MASTER_IP>` as a host and fails only when
    # it connects; fabnet refuses it, and the error has to say where it is.
    path = tmp_path / "hosts"
    path.write_text("[master]\n<MASTER_IP> ansible_ssh_user=nvidia\n[nodes]\n<WORKER_1_IP> ansible_ssh_user=nvidia\n")
    with pytest.raises(ConfigErrors) as info:
        load_inventory(path)
    assert [(e.file, e.line) for e in info.value.errors] == [(str(path), 2), (str(path), 4)]
    assert "'<MASTER_IP>'" in str(info.value.errors[0]) and "no ansible_host" in str(info.value.errors[0])


@pytest.mark.parametrize("first", ["[gpu]", "# a comment", "gpu00", ""])
def test_an_ini_file_with_a_byte_order_mark_is_refused_naming_it(tmp_path: Path, first: str) -> None:
    # Ansible's ini plugin keeps the mark in line 1: a phantom host '\ufeff' (or '\ufeffgpu00'), or an error.
    path = tmp_path / "hosts"
    path.write_text(f"\ufeff{first}\n[gpu]\ngpu01\n")
    with pytest.raises(ConfigError, match="byte-order mark") as info:
        load_inventory(path)
    assert (info.value.file, info.value.line) == (str(path), 1) and str(info.value).isprintable()
    yaml = tmp_path / "hosts.yml"  # YAML readers drop the mark, Ansible's too
    yaml.write_text("\ufeffall:\n  hosts:\n    gpu01:\n")
    assert list(load_inventory(yaml).hosts) == ["gpu01"]


def test_huge_host_range_is_refused_quickly(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yml"
    path.write_text("all:\n  children:\n    gpu:\n      hosts:\n        gpu[0:99999999]:\n")
    started = time.monotonic()
    with pytest.raises(ConfigError) as info:
        load_inventory(path)
    assert time.monotonic() - started < 2
    assert info.value.line == 5 and "at most 100000" in info.value.message
    nested = tmp_path / "nested"
    nested.write_text("[gpu]\ngpu[0:999]-[0:999]\n")
    with pytest.raises(ConfigError, match=r"'gpu\[0:999\]-\[0:999\]' stands for more than 100000") as info:
        load_inventory(nested)
    assert info.value.line == 2


def _load_in_thread(path: Path) -> BaseException | None:
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            load_inventory(path)
            outcome.append(None)
        except BaseException as exc:  # handed back to the test
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(5)
    assert outcome, "loading hung"
    return outcome[0]


def test_an_inventory_that_is_a_fifo_is_an_error_not_a_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "hosts"
    os.mkfifo(fifo)
    error = _load_in_thread(fifo)
    assert isinstance(error, ConfigError) and "named pipe (FIFO)" in error.message and error.file == str(fifo)


def test_a_fifo_in_group_vars_is_an_error_not_a_hang(tmp_path: Path) -> None:
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    gpu01:\n")
    (tmp_path / "group_vars").mkdir()
    os.mkfifo(tmp_path / "group_vars" / "all.yml")
    error = _load_in_thread(tmp_path / "hosts.yml")
    assert isinstance(error, ConfigError) and "named pipe (FIFO)" in error.message


def test_nul_byte_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "hosts"
    path.write_bytes(b"[gpu]\ngpu01\ngpu\x0002\n")
    with pytest.raises(ConfigError, match="NUL") as info:
        load_inventory(path)
    assert info.value.line == 3


@pytest.fixture
def fleet(tmp_path: Path) -> tuple[Path, Path]:
    inventory = tmp_path / "hosts"
    inventory.write_text("[gpu]\ngpu01 ansible_host=192.0.2.1\ngpu02 ansible_host=192.0.2.2\n")
    playbook = tmp_path / "site.yml"
    playbook.write_text(PLAYBOOK)
    return inventory, playbook


@pytest.mark.parametrize("limit", ["", " ", ",", "~[", "~", "gpu[", "!", "@EMPTY"])
def test_limits_ansible_widens_to_every_host_are_exit_3(fleet: tuple[Path, Path], limit: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.retry"
    empty.write_text("\n\n")
    limit = limit.replace("@EMPTY", f"@{empty}")
    inventory, playbook = fleet
    code, out, err = run_cli(["validate", str(inventory), "-p", str(playbook), "--limit", limit], capsys)
    assert code == 3, (out, err)
    assert "--limit" in err
    with pytest.raises(ConfigError):
        resolve(load_playbook(playbook), load_inventory(inventory), limit)


def test_unknown_limit_names_warn_and_select_the_rest(fleet: tuple[Path, Path],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    inventory, playbook = fleet
    code, out, err = run_cli(["validate", str(inventory), "-p", str(playbook), "--limit", "gpu01,gpu09"], capsys)
    assert code == 0 and "(1 host," in out
    assert "could not match host pattern 'gpu09'" in err
    code, _, err = run_cli(["validate", str(inventory), "-p", str(playbook), "--limit", "gpu09"], capsys)
    assert code == 3 and "did you mean" in err


@pytest.mark.parametrize(("name", "text"), [
    ("deep.yml", "all:\n  vars:\n    x: " + "[" * 5000 + "]" * 5000 + "\n"),
    ("deep", "[all:vars]\nx=" + "[" * 100000 + "]" * 100000 + "\n"),
    ("escape.yml", "all:\n  hosts:\n    gpu01\x1b[2J:\n"),
])
def test_deep_nesting_and_control_characters_are_clear_errors_or_text(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    try:
        inventory = load_inventory(path)
    except ConfigError as exc:
        assert exc.file == str(path)
    else:  # INI keeps a value Python cannot parse as text, as Ansible does
        assert inventory.hosts == {}


def test_ssh_args_that_only_ask_for_strict_host_keys_are_understood(tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")
    path = tmp_path / "hosts.yml"
    path.write_text(
        "all:\n  hosts:\n    gpu01: {}\n    gpu02:\n      ansible_ssh_common_args: '-o ForwardAgent=yes'\n"
        f"  vars:\n    ansible_ssh_common_args: '-o UserKnownHostsFile={known} -o StrictHostKeyChecking=yes'\n"
    )
    inventory = load_inventory(path)
    # The known_hosts file named there is used, and nothing is said about it.
    assert inventory.hosts["gpu01"].known_hosts == known
    assert inventory.hosts["gpu01"].ignored_vars == ()
    # Anything else those arguments ask for is still not passed on, and said so.
    assert inventory.hosts["gpu02"].ignored_vars == ("ansible_ssh_common_args",)
    assert any("ansible_ssh_common_args is ignored" in w and "gpu02" in w for w in inventory.warnings)
    assert not any("gpu01" in w for w in inventory.warnings)


# Names whose escapes YAML, TOML and JSON decode after the raw text was checked: a terminal escape, a
# newline, a right-to-left override (shows `gpu10` for `gpu01`), a line separator, a zero-width space.
_HIDDEN = ["gpu01\x1b[2J", "gpu\n01", "gpu\u202e01", "gpu\u2028x", "gpu\u200bx", "gpu\t01", "gpu\x85x",
           "gpu\u00a001"]


def _escaped(name: str, style: str) -> str:
    if style == "yaml":
        return "".join(c if c.isprintable() and c != '"' else f"\\u{ord(c):04x}" for c in name)
    return "".join(c if c.isprintable() and c != '"' else f"\\u{ord(c):04X}" for c in name)


@pytest.mark.parametrize("name", _HIDDEN)
@pytest.mark.parametrize(("file", "text", "line", "key"), [
    ("hosts.yml", 'all:\n  hosts:\n    ok01:\n    "{n}":\n      ansible_host: 192.0.2.1\n', 4, "all.hosts."),
    ("groups.yml", 'all:\n  children:\n    "{n}":\n      hosts:\n        ok01:\n', 3, "all.children."),
    ("hosts.json", '{{"all": {{"hosts": {{"{n}": {{"ansible_host": "192.0.2.1"}}}}}}}}\n', 1, "all.hosts."),
    ("hosts.toml", '[all.hosts."{n}"]\nansible_host = "192.0.2.1"\n', None, "all.hosts."),
    ("groups.toml", '[all]\nchildren = ["{n}"]\n', None, "all.children."),
])
def test_unprintable_host_and_group_names_are_refused_where_they_enter(
        tmp_path: Path, name: str, file: str, text: str, line: int | None, key: str) -> None:
    path = tmp_path / file
    path.write_text(text.format(n=_escaped(name, "yaml" if file.endswith(".yml") else "json")))
    with pytest.raises(ConfigError) as info:
        load_inventory(path)
    error = info.value
    assert "contains the unprintable character" in error.message, error
    assert error.file == str(path) and error.line == line
    assert error.key is not None and error.key.startswith(key)
    # The error names the character without carrying it.
    assert str(error).isprintable()


@pytest.mark.parametrize("name", ["gpu\u202e01", "gpu\u200b01", "gpu\u206601", "gpu\ufeff01"])
def test_unprintable_names_in_ini_files_and_host_lists_are_refused(tmp_path: Path, name: str) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text(f"[gpu]\nok01\n{name} ansible_host=192.0.2.1\n")
    with pytest.raises(ConfigError, match=r"host name .* unprintable") as info:
        load_inventory(hosts)
    assert info.value.file == str(hosts) and info.value.line == 3
    groups = tmp_path / "groups"
    groups.write_text(f"[ok]\nok01\n\n[{name}]\nok02\n")
    with pytest.raises(ConfigError, match=r"group name .* unprintable") as info:
        load_inventory(groups)
    assert info.value.line == 4 and str(info.value).isprintable()
    with pytest.raises(ConfigError, match=r"host name .* unprintable") as info:
        load_inventory(f"ok01,{name},")
    assert str(info.value).isprintable()
    ranged = tmp_path / "ranged"
    ranged.write_text(f"[gpu]\n{name}[1:2]-[a:b]\n")
    with pytest.raises(ConfigError, match=r"host name .* unprintable"):
        load_inventory(ranged)


def test_ordinary_host_and_group_names_still_load(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yml"
    path.write_text(
        "all:\n  children:\n    gpu-rack_a.1:\n      hosts:\n        gpu-01.rack_a.example:\n"
        "        192.0.2.7:\n        '2001:db8::7':\n        gpu02:2222:\n        příbor:\n"
        "        'gpu[03:04]':\n"
    )
    inventory = load_inventory(path)
    assert list(inventory.hosts) == ["gpu-01.rack_a.example", "192.0.2.7", "2001:db8::7", "gpu02", "příbor",
                                     "gpu03", "gpu04"]
    assert inventory.hosts["gpu02"].port == 2222 and "gpu-rack_a.1" in inventory.groups
    ini = tmp_path / "hosts"
    ini.write_text("[gpu_rack-a.1]\ngpu01:2222\n[2001:db8::8]:22\n10.0.0.[1:2]\n")
    assert list(load_inventory(ini).hosts) == ["gpu01", "2001:db8::8", "10.0.0.1", "10.0.0.2"]
    assert list(load_inventory("gpu01:2222,[2001:db8::9]:22,10.0.0.3,").hosts) == ["gpu01", "2001:db8::9",
                                                                                    "10.0.0.3"]


def test_a_regex_limit_python_warns_about_selects_as_written_with_no_warning(fleet: tuple[Path, Path]) -> None:
    """`~[[g]pu01` is a valid expression ("[" or "g", then "pu01") that Python's re marks with a FutureWarning
    (a nested set in a future release): the operator's limit works, and no warning reaches the screen."""
    inventory, playbook = fleet
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plans = resolve(load_playbook(playbook), load_inventory(inventory), "~[[g]pu01")
    assert [p.host.name for p in plans] == ["gpu01"]
