"""A pdsh/clush label (`gpu07: `, `10.0.0.7: `) reads the same wherever a reader meets it: the parsers' line
cleaning, `fabnet explain`'s log reader, the label before an NCCL line's level, and the host a launcher's report
of an ended rank names when only its own line carries a label."""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from provisioner.explain.launch_lines import read_ends
from provisioner.explain.logs import read_log
from provisioner.parsers._text import prefix_label, split_lines
from provisioner.parsers.nccl_debug import parse_nccl_debug
from provisioner.parsers.nccl_line import label_host

# mm/oom_kill.c (4.19 on), as syslog or dmesg leaves it after the timestamp.
_OOM = "Out of memory: Killed process 123 (python) total-vm:81234560kB, anon-rss:70012345kB"
# NCCL's own prefix with an empty host, so that the label alone names it.
_NCCL = ":166:1226 [0] NCCL INFO NCCL version 2.27.7+cuda12.9"


@pytest.mark.parametrize("host", ["gpu07", "node-a1.cluster.local", "10.0.0.7"])
def test_a_label_on_every_line_names_the_same_host_for_each_reader(host: str) -> None:
    text = f"{host}: {_NCCL}\n{host}: NCCL WARN Cuda failure 'out of memory'\n"
    assert {line.host for line in read_log("j.log", text).lines} == {host}
    assert label_host(f"{host}: ") == host
    assert prefix_label(f"{host}: ") == host


@pytest.mark.parametrize("host", ["gpu07", "10.0.87.143"])
def test_a_label_nested_in_another_comes_off_with_it_for_a_name_and_an_address(host: str) -> None:
    # pdsh running pdsh labels every line twice.
    text = (f"{host}: {host}: ip-10-0-87-143:149:298 [5] NCCL WARN x\n"
            f"{host}: {host}: Traceback (most recent call last):\n")
    assert [(line.text, line.host) for line in read_log("j.log", text).lines] == [
        ("ip-10-0-87-143:149:298 [5] NCCL WARN x", "ip-10-0-87-143"), ("Traceback (most recent call last):", host)]


@pytest.mark.parametrize("label", ["gpu07", "10.0.0.7"])
def test_nccls_own_host_names_its_line_before_a_collectors_label(label: str) -> None:
    # The label names where the output was collected; NCCL's prefix the process's own hostname, the name the
    # rest of the log uses. The label still names a line that NCCL's prefix does not.
    text = f"{label}: gpu08:1:2 [0] NCCL WARN Cuda failure 'out of memory'\n{label}: step 3 failed\n"
    assert [line.host for line in read_log("j.log", text).lines] == ["gpu08", label]
    assert parse_nccl_debug(text).hosts == ["gpu08"]


@pytest.mark.parametrize("word", ["Rate", "Warning", "error"])
def test_a_word_before_a_colon_is_no_label(word: str) -> None:
    text = f"{word}: 100\n{word}: 200\n"
    assert [line.text for line in split_lines(text)] == [f"{word}: 100", f"{word}: 200"]
    assert {line.host for line in read_log("j.log", text).lines} == {None}
    assert prefix_label(f"{word}: ") is None


def test_torchs_last_error_before_an_nccl_level_is_no_label() -> None:
    assert label_host("Last error: ") is None
    assert label_host("Last error: NCCL ") is None


def test_only_the_line_before_an_nccl_level_takes_a_name_without_a_digit() -> None:
    # Right before NCCL's level a word and a colon can only be a launcher's label.
    assert label_host("master: ") == "master"
    lines = read_log("j.log", "master: NCCL WARN Cuda failure 'out of memory'\nmaster: starting\n").lines
    assert [(line.text, line.host) for line in lines] == [
        ("NCCL WARN Cuda failure 'out of memory'", "master"), ("master: starting", None)]


@pytest.mark.parametrize("host", ["gpu04", "10.0.0.4"])
def test_a_label_on_the_oom_line_alone_names_its_host(host: str) -> None:
    # The kernel's report collected with pdsh among lines of a log that carry no label.
    text = f"starting step 3\n{host}: {_OOM}\nstep 3 done\n"
    log = read_log("j.log", text)
    assert [line.host for line in log.lines] == [None, None, None]
    assert [(end.kind, end.host) for end in read_ends(log)] == [("oom", host)]
    top = explain([("j.log", text)]).causes[0]
    assert (top.id, top.hosts) == ("rank-oom", [host])


def test_slurmstepds_own_prefix_names_the_node_not_the_daemon() -> None:
    log = read_log("j.log", "slurmstepd-gpu05: error: Detected 1 oom-kill event(s) in step 1234.0 cgroup.\n")
    assert [end.host for end in read_ends(log)] == ["gpu05"]
