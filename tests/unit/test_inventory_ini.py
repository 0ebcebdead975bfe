"""The INI reader on its own: values as Ansible's ini plugin types them, and every malformed line a
clear error naming file and line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from provisioner.errors import ConfigError
from provisioner.load.inventory import load_inventory
from provisioner.load.inventory_ini import parse_ini_value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("9000", 9000), ("0.5", 0.5), ("True", True), ("None", None), ("'eth1'", "eth1"), ("eth1", "eth1"),
        ("[3, 4]", [3, 4]), ("(1, 2)", [1, 2]), ("{'a': (1,)}", {"a": [1]}), ("yes", "yes"),
        ("1_000", 1000), ("1j", "1j"), ("...", "..."), ("b'x'", "x"), ("9" * 5000, "9" * 5000),
        ("[" * 2000 + "]" * 2000, "[" * 2000 + "]" * 2000), ("a=b", "a=b"), ("", ""),
    ],
)
def test_values_are_python_literals_where_python_reads_them(text: str, value: object) -> None:
    assert parse_ini_value(text) == value


def write(tmp_path: Path, text: str, name: str = "hosts") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_groups_children_vars_ranges_and_ports(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, """\
        lonely ansible_host=192.0.2.9
        [gpu:children]
        rack_a
        [rack_a]
        gpu[1:3:2]:2222 mtu=9000
        [rack_a:vars]
        data_iface=eth1
        [all:vars]
        ansible_user='ops'
        """))
    assert inv.group_order["gpu"] == ["gpu1", "gpu3"]
    assert inv.group_order["ungrouped"] == ["lonely"]
    gpu1 = inv.hosts["gpu1"]
    assert (gpu1.port, gpu1.user, gpu1.vars["mtu"], gpu1.vars["data_iface"]) == (2222, "ops", 9000, "eth1")
    assert gpu1.var_origins["mtu"].line == 5


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("[gpu]\na\n[gpu:children]\nnope\n", 4, "never defined"),
        ("[gpu:vars]\nx=1\n", 1, "never defined"),
        ("[gpu:host]\n", 1, "unknown type"),
        ("[gpu]\na b\n", 2, "expected key=value"),
        ("[gpu]\na x='unclosed\n", 2, "cannot read host line"),
        ("[gpu]\na:\n", 2, "ends in ':'"),
        ("[gpu:vars]\njustaword\n[gpu]\n", 2, "expected key=value"),
        ("[gpu]\ngpu[0:99999999]\n", 2, "at most 100000"),
        ("[gpu]\ngpu[9:1]\n", 2, "runs backwards"),
        ("[ gpu ]\n", 1, "invalid section"),
        ("[a:children]\nb\n[b:children]\na\n", 4, "loop"),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path: Path, text: str, line: int, words: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_inventory(path)
    assert (info.value.file, info.value.line) == (str(path), line)
    assert words in info.value.message


def test_yaml_errors_win_for_yaml_files_that_are_not_ini(tmp_path: Path) -> None:
    path = write(tmp_path, "all:\n  hosts:\n    a: [\n", name="hosts.yml")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_inventory(path)
