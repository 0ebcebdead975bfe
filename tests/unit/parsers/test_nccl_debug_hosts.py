"""The NCCL log parser names a line's host from what stands before it where NCCL's own prefix names none, as
`fabnet explain` does: a collector's `WORD >> ` label, a pdsh/clush label, a syslog host, a Kubernetes pod, a
Ray worker's address. Both read it through parsers/_loggers, so they name the same host for the same line."""

from __future__ import annotations

import re

import pytest

from provisioner.explain.logs import read_log
from provisioner.parsers.nccl_debug import parse_nccl_debug

from ._samples import SAMPLES

# NCCL's prefix with an empty host, as a process whose hostname NCCL could not read prints it.
_NO_HOST = ":166:1226 [0] NCCL INFO NCCL version 2.27.7+cuda12.9"
_WARN = ":166:1226 [0] misc/socket.cc:484 NCCL WARN socketFinalizeAccept: wrong magic 1 != 2"


def test_a_real_log_behind_a_collectors_arrow_label_names_its_host() -> None:
    # NVIDIA/nccl#1808: every line `worker-9 >> ` before NCCL's prefix with an empty host, a clock before
    # the label and a second one after it on the WARN.
    text = (SAMPLES / "logs" / "nccl-proxy-wrong-magic-worker-prefix-1.txt").read_text()
    parsed = parse_nccl_debug(text)
    assert parsed.hosts == ["worker-9"]
    assert parsed.warnings == ["socketFinalizeAccept: wrong magic 74656d2f20544547 != 7970663b906d70b9"]
    assert parsed.net_paths == ["IBext_v10"]
    assert {line.host for line in read_log("j.log", text).lines} == {"worker-9"}


def test_each_line_of_a_log_from_several_hosts_takes_its_own_arrow_label() -> None:
    text = "".join(f"worker-{n} >> :16{n}:12{n} [0] NCCL INFO NCCL version 2.2{n}.5+cuda12.4\n" for n in (1, 2))
    parsed = parse_nccl_debug(text)
    assert parsed.hosts == ["worker-1", "worker-2"]
    assert parsed.nccl_versions_by_host == {"worker-1": "2.21.5", "worker-2": "2.22.5"}


# What stands before every line -> the host both readers name (None: no host, a label that is no host's name).
_DECORATIONS: dict[str, tuple[str, str | None]] = {
    "arrow": ("worker-9 >> ", "worker-9"),
    "arrow-fqdn": ("node1.cluster.local >> ", "node1.cluster.local"),
    "arrow-number": ("42 >> ", None),
    "arrow-file": ("train.py >> ", None),
    "arrow-logger": ("torch.distributed >> ", None),
    "arrow-level": ("INFO >> ", None),
    "pdsh": ("gpu07: ", "gpu07"),
    "journald": ("Nov 25 10:00:00 gpu03 python[123]: ", "gpu03"),
    "syslog-iso": ("2024-11-25T10:00:00.123456+00:00 gpu03.example.com torchrun[77]: ", "gpu03.example.com"),
    "kubectl-prefix": ("[pod/train-worker-0/pytorch] ", "train-worker-0"),
    "stern": ("train-worker-0 pytorch ", "train-worker-0"),
    "ray": ("(RayWorkerWrapper pid=1019, ip=10.0.0.7) ", "10.0.0.7"),
    "glog": ("I1125 10:00:00.123456  1234 nccl_utils.cc:12] ", None),
    "timestamp": ("2025-08-12 09:37:02.216313 ", None),
}


@pytest.mark.parametrize("name", sorted(_DECORATIONS))
def test_the_parser_and_explain_name_the_same_host(name: str) -> None:
    prefix, host = _DECORATIONS[name]
    text = f"{prefix}{_NO_HOST}\n{prefix}{_WARN}\n"
    parsed = parse_nccl_debug(text)
    assert parsed.hosts == ([host] if host else [])
    assert parsed.nccl_versions_by_host == ({host: "2.27.7"} if host else {})
    assert parsed.warnings == ["socketFinalizeAccept: wrong magic 1 != 2"]
    assert {line.host for line in read_log("j.log", text).lines} == {host}


def test_nccls_own_host_wins_over_what_a_syslog_line_names() -> None:
    text = "Nov 25 10:00:00 gpu03 python[123]: gpu07:1:2 [0] NCCL INFO NCCL version 2.27.7+cuda12.9\n"
    assert parse_nccl_debug(text).hosts == ["gpu07"]


def test_an_arrow_label_on_few_lines_names_no_host() -> None:
    text = f"worker-9 >> {_NO_HOST}\n" + f"{_NO_HOST}\n" * 3
    assert parse_nccl_debug(text).hosts == []


# Two ranks on two hosts whose processes and threads carry the same numbers (containers start them alike),
# printing the same communicator address: what each rank's thread logged stays with that host.
_TWO_HOSTS = [
    ("worker-1", "NCCL INFO Using network IB"),
    ("worker-2", "NCCL INFO Using network Socket"),
    ("worker-1", "NCCL INFO comm 0x5581e6d0 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0"),
    ("worker-2", "NCCL INFO comm 0x5581e6d0 rank 1 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0"),
    ("worker-2", "NCCL INFO ncclCommInitRank comm 0x5581e6d0 rank 1 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE"),
]
# How a line names its host: a collector's label before NCCL's prefix with an empty host (with a clock
# between, or a clock before), or NCCL's own host field.
_SHAPES = {
    "arrow": "{host} >> :168:1228 [0] ",
    "arrow-clock-after": "{host} >> [2025-08-12 01:37:03] :168:1228 [0] ",
    "clock-arrow": "2025-08-12 09:37:02.216313 {host}.cluster.local >> :168:1228 [0] ",
    "nccl": "{host}:168:1228 [0] ",
}


def _two_hosts(shape: str) -> str:
    return "".join(_SHAPES[shape].format(host=host) + text + "\n" for host, text in _TWO_HOSTS)


@pytest.mark.parametrize("shape", sorted(_SHAPES))
def test_threads_of_the_same_numbers_on_two_hosts_stay_apart(shape: str) -> None:
    parsed = parse_nccl_debug(_two_hosts(shape))
    suffix = ".cluster.local" if shape == "clock-arrow" else ""
    assert [(c.host, c.pid, c.rank, c.network) for c in parsed.communicators] == [
        (f"worker-1{suffix}", 168, 0, "IB"), (f"worker-2{suffix}", 168, 1, "Socket")]


@pytest.mark.parametrize("shape", ["arrow", "arrow-clock-after"])
def test_a_hosts_label_gives_what_nccls_own_host_field_gives(shape: str) -> None:
    assert parse_nccl_debug(_two_hosts(shape)).model_dump() == parse_nccl_debug(_two_hosts("nccl")).model_dump()


def test_the_real_log_reads_as_it_would_with_nccls_own_host_filled() -> None:
    # NVIDIA/nccl#1808 as it would read had NCCL known its hostname: `worker-9:168:1228 [2]`.
    text = (SAMPLES / "logs" / "nccl-proxy-wrong-magic-worker-prefix-1.txt").read_text()
    filled = re.sub(r"(\S+) >> (\[[^\]]*\] )?:", r"\2\1:", text)
    assert "worker-9:166:1226 [0] misc/socket.cc:484 NCCL WARN" in filled
    assert parse_nccl_debug(text).model_dump() == parse_nccl_debug(filled).model_dump()
    lines, named = read_log("j.log", text).lines, read_log("j.log", filled).lines
    assert [line.host for line in lines] == [line.host for line in named] == ["worker-9"] * len(named)
    # What explain quotes starts with what NCCL printed; only the host NCCL left empty is missing from it.
    assert [line.text for line in lines] == [line.text.replace("worker-9:", ":", 1) for line in named]


def test_a_line_of_no_known_host_is_followed_by_no_thread() -> None:
    # Open MPI's `--tag-output` names the task, not the host: two hosts' processes with the same numbers
    # may be behind it, so neither takes the other's network.
    text = "".join(f"[1,{rank}]<stdout>::168:1228 [0] NCCL INFO {message}\n" for rank, message in [
        (0, "Using network IB"), (1, "Using network Socket"),
        (0, "comm 0x5581e6d0 rank 0 nRanks 2 nNodes 2"), (1, "comm 0x7f3a2c00 rank 1 nRanks 2 nNodes 2")])
    parsed = parse_nccl_debug(text)
    assert [(c.host, c.pid, c.rank, c.network) for c in parsed.communicators] == [
        (None, 168, 0, None), (None, 168, 1, None)]
    assert parsed.network == "Socket"


def test_a_label_on_few_lines_stays_in_the_text() -> None:
    text = f"worker-9 >> {_NO_HOST}\n" + f"{_NO_HOST}\n" * 3
    assert read_log("j.log", text).lines[0].text == f"worker-9 >> {_NO_HOST}"
