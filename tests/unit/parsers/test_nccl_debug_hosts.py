"""The NCCL log parser names a line's host from what stands before it where NCCL's own prefix names none, as
`fabnet explain` does: a collector's `WORD >> ` label, a pdsh/clush label, a syslog host, a Kubernetes pod, a
Ray worker's address. Both read it through parsers/_loggers, so they name the same host for the same line."""

from __future__ import annotations

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


def test_a_label_on_few_lines_stays_in_the_text() -> None:
    text = f"worker-9 >> {_NO_HOST}\n" + f"{_NO_HOST}\n" * 3
    assert read_log("j.log", text).lines[0].text == f"worker-9 >> {_NO_HOST}"
