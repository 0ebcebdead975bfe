"""Line-aware YAML loading: data, lines of keys and items, and located errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.errors import ConfigError
from provisioner.yamlsrc import Origin, format_path, load_yaml, parse_yaml

DOC = """\
plays:
  - hosts: gpu
    resources:
      - interface:
          name: eth0
          mtu: 9000
      - service: {name: rdma_cm}
"""


def write(tmp_path: Path, text: str, name: str = "doc.yml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_data_is_plain_python(tmp_path: Path) -> None:
    src = load_yaml(write(tmp_path, DOC))
    assert src.data == {
        "plays": [
            {
                "hosts": "gpu",
                "resources": [{"interface": {"name": "eth0", "mtu": 9000}}, {"service": {"name": "rdma_cm"}}],
            }
        ]
    }


def test_lines_of_keys_and_items(tmp_path: Path) -> None:
    src = load_yaml(write(tmp_path, DOC))
    assert src.line(("plays",)) == 1
    assert src.line(("plays", 0)) == 2
    assert src.line(("plays", 0, "resources", 0, "interface", "mtu")) == 6
    assert src.line(("plays", 0, "resources", 1, "service", "name")) == 7


def test_line_falls_back_to_nearest_ancestor(tmp_path: Path) -> None:
    src = load_yaml(write(tmp_path, DOC))
    # A key that is not in the file (e.g. an index into a rendered list) is placed at its parent.
    assert src.line(("plays", 0, "resources", 0, "interface", "mtu", 3)) == 6
    assert src.line(("plays", 0, "nope", "deeper")) == 2


def test_key_paths_are_formatted_with_a_root() -> None:
    assert format_path((0, "resources", 2, "roce_qos", "pfcc"), root="plays") == "plays[0].resources[2].roce_qos.pfcc"
    assert format_path(("all", "children", "gpu")) == "all.children.gpu"
    src = parse_yaml("- a: 1\n", file="site.yml", root="plays")
    err = src.error("boom", (0, "a"))
    assert str(err) == "site.yml:1: plays[0].a: boom"


def test_origin_points_at_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, DOC)
    origin = load_yaml(path).origin(("plays", 0, "hosts"))
    assert origin == Origin(str(path), 2, "plays[0].hosts")
    assert str(origin) == f"{path}:2"


def test_bad_yaml_reports_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "a: 1\nb: [1, 2\nc: 3\n")
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    assert info.value.file == str(path)
    assert info.value.line == 3
    assert "invalid YAML" in info.value.message


def test_bad_indentation_reports_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "a:\n  b: 1\n c: 2\n")
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    assert info.value.line == 3


def test_missing_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "absent.yml"
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    assert info.value.file == str(path)
    assert info.value.message == "file not found"


def test_duplicate_key_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "a:\n  mtu: 1500\n  name: eth0\n  mtu: 9000\n")
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    assert info.value.line == 4
    assert info.value.key == "a.mtu"
    assert "duplicate key 'mtu' (first defined on line 2)" in info.value.message


def test_merge_keys_are_not_duplicates() -> None:
    src = parse_yaml("base: &b {mtu: 1500, state: up}\nnic:\n  <<: *b\n  mtu: 9000\n", file="x.yml")
    assert src.data["nic"] == {"mtu": 9000, "state": "up"}
    assert src.line(("nic", "mtu")) == 4


def test_empty_document_is_none() -> None:
    assert parse_yaml("# nothing\n", file="x.yml").data is None


def test_several_documents_are_refused() -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml("a: 1\n---\nb: 2\n", file="x.yml")
    assert info.value.line == 2


def test_int_mapping_keys_are_addressed_as_text() -> None:
    src = parse_yaml("dscp2prio:\n  26: 3\n  48: 6\n", file="x.yml")
    assert src.data == {"dscp2prio": {26: 3, 48: 6}}
    assert src.line(("dscp2prio", "48")) == 3
    assert src.key(("dscp2prio", "48")) == "dscp2prio.48"
