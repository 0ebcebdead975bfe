"""The kind registry, `parse()`, line splitting and prompt detection, and that every recorded sample is covered."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, ValidationError

from provisioner.errors import ParseError
from provisioner.parsers import COMMANDS, KINDS, PARSERS, parse
from provisioner.parsers._shell import is_command, is_prompt, is_shell
from provisioner.parsers._text import split_lines

from ._samples import SAMPLE_KINDS, SAMPLES, read


def test_kinds_are_sorted_and_match_parsers() -> None:
    assert sorted(PARSERS) == KINDS
    assert {
        "ofed_info", "mlnx_qos", "rdma_qos_script", "ibv_devinfo", "ibstat", "ibstatus", "ibdev2netdev",
        "show_gids", "rdma_link", "nvidia_smi_topo", "nccl_tests", "nccl_debug", "traffic_class",
        "perfquery", "port_counters", "dcb", "ethtool_stats",
    } == set(KINDS)


def test_every_kind_names_the_commands_that_print_it() -> None:
    assert sorted(COMMANDS) == KINDS
    assert all(COMMANDS[kind] for kind in KINDS)


def test_unknown_kind_lists_known_kinds() -> None:
    with pytest.raises(ParseError, match="unknown kind; known kinds: dcb, ethtool_stats, ibdev2netdev, ibstat") as err:
        parse("ethtool", "")
    assert err.value.kind == "ethtool"
    assert "traffic_class" in str(err.value)


def test_every_sample_file_has_a_kind() -> None:
    on_disk = {p.name for p in SAMPLES.glob("*.txt")}
    assert on_disk == set(SAMPLE_KINDS)
    assert (SAMPLES / "INDEX.md").is_file()


def test_every_kind_has_a_sample() -> None:
    assert set(KINDS) == set(SAMPLE_KINDS.values())


@pytest.mark.parametrize(("name", "kind"), sorted(SAMPLE_KINDS.items()))
def test_sample_output_is_json_serialisable_and_frozen(name: str, kind: str) -> None:
    data = parse(kind, read(name))
    assert json.loads(json.dumps(data)) == data
    model = PARSERS[kind](read(name))
    assert isinstance(model, BaseModel)
    field = next(iter(type(model).model_fields))
    with pytest.raises(ValidationError):
        setattr(model, field, None)


def test_split_lines_handles_every_line_ending_and_keeps_numbers() -> None:
    lines = split_lines("a\r\nb\rc\n\nd  \t\n")
    assert [(line.number, line.text) for line in lines] == [(1, "a"), (2, "b"), (3, "c"), (4, ""), (5, "d")]
    assert lines[4].raw == "d  \t"
    assert split_lines("") == []
    assert [line.text for line in split_lines("x\x0cy\n")] == ["x\x0cy"]  # form feed is not a line break
    assert split_lines("\ufeffa\n")[0].text == "a"
    assert split_lines("\t\tx")[0].indent == 16


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$ ibstat | grep mlx5", True),
        ("user@node-1:~$ ofed_info -s", True),
        ("[root@node1 ~]# mlnx_qos -i eth0", True),
        ("root@gpu01:/tmp# show_gids", True),
        ("#  Rank  0 Group  0 Pid 1 on host device 0 [0x00] GPU", False),
        ("# Avg bus bandwidth    : 53.7098", False),
        ("CA 'mlx5_0'", False),
    ],
)
def test_prompt_detection(text: str, expected: bool) -> None:
    assert is_prompt(split_lines(text)[0]) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("show_gids", True),
        ("show_gids mlx5_0", True),
        ("# show_gids mlx5_0 | grep v2", True),  # root's bare prompt: the command's name tells it from a comment
        ("$ sudo -E /usr/sbin/show_gids", True),
        ("[root@node1 ~]# nvidia-smi topo -m", True),
        ("nvidia-smi topo -m", True),
        ("show_gids;ibdev2netdev", True),
        ("NCCL_DEBUG=INFO sudo -E env A=1 /opt/bin/nvidia-smi topo -m", True),  # variables set for it
        ("NCCL_DEBUG=INFO", False),
        ("# nThread 1 nGpus 8 minBytes 8", False),
        ("# ibstat", False),  # another tool's command line is not this one's
        ("show_gidsX 1 3", False),
        ("mlx5_0 1 0 fe80:0000:0000:0000:0e42:a1ff:fe5d:4db8 v1 ens1f0", False),
    ],
)
def test_command_line_detection(text: str, expected: bool) -> None:
    assert is_command(split_lines(text)[0], "show_gids", "nvidia-smi") is expected


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("# ibstat", "ibstat", True),
        ("ibstat -l", "ibstat", True),
        ("# ibstat", "show_gids", False),  # another tool's command without a prompt: left to the parser
        ("$ ibstat", "show_gids", True),  # any prompt line is the shell's
        ("# nThread 1 nGpus 8 minBytes 8", "nccl_tests", False),  # nccl-tests' own comment
        ("# Port counters: Lid 3 port 1 (CapMask: 0x1B01)", "perfquery", False),
        # A launcher's command line runs the tool; its own messages name no program.
        ("NCCL_DEBUG=INFO mpirun -np 8 -x NCCL_DEBUG=INFO ./all_reduce_perf -b 8", "nccl_tests", True),
        ("$ srun -N 2 --ntasks-per-node=8 /opt/nccl-tests/build/all_reduce_perf -g 1", "nccl_tests", True),
        ("mpirun noticed that process rank 3 with PID 1234 on node gpu02 exited on signal 6 (Aborted).",
         "nccl_tests", False),
        ("srun: error: gpu02: task 3: Exited with exit code 1", "nccl_tests", False),
        ("+ ibstat", "ibstat", True),  # a `set -x` trace of the command
        ("++ ibstat mlx5_0", "ibstat", True),
        ("+ 12 more", "ibstat", False),
        ("NCCL_DEBUG=INFO ./build/all_reduce_perf -b 8 -e 128M", "nccl_tests", True),
    ],
)
def test_shell_lines_of_a_kind(text: str, kind: str, expected: bool) -> None:
    assert is_shell(split_lines(text)[0], kind) is expected
