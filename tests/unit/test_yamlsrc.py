"""Line-aware YAML loading: data, lines of keys and items, and located errors."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from provisioner.errors import ConfigError
from provisioner.load import yamlsrc
from provisioner.load.yamlsrc import Origin, format_path, load_yaml, parse_yaml

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


def test_a_duplicate_key_can_be_a_warning_with_the_last_one_kept() -> None:
    # What inventories and variable files need: Ansible warns and uses the last value.
    warnings: list[str] = []
    src = parse_yaml("a:\n  x: 1\n  y: 2\nb: 3\na:\n  z: 4\n", file="inv.yml", duplicates=warnings)
    assert src.data == {"a": {"z": 4}, "b": 3}
    assert src.lines[("a",)] == 5 and src.lines[("a", "z")] == 6 and ("a", "x") not in src.lines
    assert warnings == ["inv.yml:5: a: duplicate key 'a' (first defined on line 1); the last one is used "
                        "(Ansible warns the same)"]


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


# ------------------------------------------------------------------------------------ bounded input


def bomb(levels: int = 9, width: int = 9) -> str:
    """The classic 'billion laughs': a few hundred bytes that expand to width**levels values."""
    lines = ["l0: &l0 [" + ", ".join(['"lol"'] * width) + "]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_refused_where_the_expansion_is_used() -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml(bomb(), file="x.yml")
    assert f"expands to more than {yamlsrc.MAX_VALUES:,} values" in info.value.message
    # l5 (9**6 values) is the first level past the limit: its 7th alias crosses it. The message points
    # at that use of the alias, not at l0's line where the values were written.
    assert (info.value.line, info.value.key) == (6, "l5[6]")


def test_a_few_aliases_are_fine() -> None:
    assert parse_yaml(bomb(levels=3, width=3), file="x.yml").data["l3"][2][2][0] == ["lol"] * 3


def test_too_many_alias_uses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yamlsrc, "MAX_ALIASES", 5)
    text = "a: &a 1\nb: [" + ", ".join(["*a"] * 6) + "]\n"
    with pytest.raises(ConfigError) as info:
        parse_yaml(text, file="x.yml")
    assert info.value.line == 2
    assert "more than 5 alias uses" in info.value.message


@pytest.mark.parametrize(
    "text",
    [
        "[" * 5000 + "]" * 5000,
        "{a: " * 5000 + "1" + "}" * 5000,
        "".join(f"{'  ' * i}k:\n" for i in range(300)),
        "".join(f"{'  ' * i}-\n" for i in range(300)),
    ],
    ids=["flow-seq", "flow-map", "block-map", "block-seq"],
)
def test_deep_nesting_is_refused_not_a_recursion_error(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml(text, file="x.yml")
    assert f"nested more than {yamlsrc.MAX_DEPTH} levels deep" in info.value.message
    assert info.value.line is not None


def test_nesting_up_to_the_limit_is_fine() -> None:
    depth = yamlsrc.MAX_DEPTH
    value = parse_yaml("[" * depth + "1" + "]" * depth, file="x.yml").data
    for _ in range(depth):
        value = value[0]
    assert value == 1


def test_aliases_cannot_nest_deeper_than_the_limit() -> None:
    # Each anchor is written 60 levels deep at most, but every level wraps the one before.
    lines = ["a0: &a0 1"]
    for i in range(1, 5):
        lines.append(f"a{i}: &a{i} " + "[" * 60 + f"*a{i - 1}" + "]" * 60)
    with pytest.raises(ConfigError) as info:
        parse_yaml("\n".join(lines) + "\n", file="x.yml")
    assert "levels deep once aliases are expanded" in info.value.message


def test_merge_key_chains_are_bounded() -> None:
    lines = ["m0: &m0 {x: 1}"] + [f"m{i}: &m{i} {{<<: *m{i - 1}}}" for i in range(1, 300)]
    with pytest.raises(ConfigError) as info:
        parse_yaml("\n".join(lines) + "\n", file="x.yml")
    assert "merge keys (<<) nested more than" in info.value.message


def test_tagged_collections_count_towards_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yamlsrc, "MAX_VALUES", 50)
    text = "a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\nb: !!omap [" + ", ".join(f"k{i}: *a" for i in range(6)) + "]\n"
    with pytest.raises(ConfigError, match="expands to more than 50 values"):
        parse_yaml(text, file="x.yml")


@pytest.mark.parametrize(
    ("raw", "line", "message"),
    [
        (b"a: 1\nb: x\x00y\n", 2, "a NUL byte at column 5"),
        (b"a: 1\n\nb: \x1b[2J\n", 3, "the control character U+001B at column 4"),
        (b"a: \x07\n", 1, "the control character U+0007"),
        (b"a: 1\nb: \xff\xfe\n", 2, "not UTF-8 text: byte 0xff at column 4"),
        (b"a: caf\xe9\n", 1, "not UTF-8 text: byte 0xe9"),
    ],
)
def test_bytes_yaml_does_not_allow_are_located(tmp_path: Path, raw: bytes, line: int, message: str) -> None:
    path = tmp_path / "x.yml"
    path.write_bytes(raw)
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    assert (info.value.file, info.value.line) == (str(path), line)
    assert message in info.value.message


def test_tabs_crlf_and_a_bom_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "x.yml"
    path.write_bytes(b"\xef\xbb\xbfa: 'x\ty'\r\nb: 2\r\n")
    assert load_yaml(path).data == {"a": "x\ty", "b": 2}


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yml"
    os.mkfifo(path)
    started = time.monotonic()
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    assert time.monotonic() - started < 2
    assert info.value.message == "is a named pipe (FIFO), expected a regular YAML file"


def test_a_device_and_a_directory_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a character device, expected a regular YAML file"):
        load_yaml("/dev/zero")  # would never end if read
    with pytest.raises(ConfigError, match="is a directory"):
        load_yaml(tmp_path)


def test_a_symlink_to_a_regular_file_is_fine(tmp_path: Path) -> None:
    target = write(tmp_path, "a: 1\n")
    link = tmp_path / "link.yml"
    link.symlink_to(target)
    assert load_yaml(link).data == {"a": 1}


def test_large_files_are_refused_without_reading_them_whole(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(yamlsrc, "MAX_FILE_BYTES", 1024)
    path = tmp_path / "big.yml"
    path.write_text("a: " + "x" * 2000 + "\n")
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    assert info.value.message == "larger than the limit of 1024 bytes for a YAML file"
    path.write_text("a: " + "x" * 1000 + "\n")
    assert len(load_yaml(path).data["a"]) == 1000


def test_unreadable_file(tmp_path: Path) -> None:
    path = write(tmp_path, "a: 1\n")
    path.chmod(0)
    if os.access(path, os.R_OK):
        pytest.skip("root reads every file")
    with pytest.raises(ConfigError, match="cannot read: Permission denied"):
        load_yaml(path)
