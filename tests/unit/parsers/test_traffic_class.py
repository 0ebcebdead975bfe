"""The traffic_class sysfs file: recorded reads, the address rules newer MLNX_OFED prints after the global
class, and reads cut at any character; the same for the RoCE QoS script report that echoes the file."""

from __future__ import annotations

import re

import pytest

from provisioner.errors import ParseError
from provisioner.parsers.rdma_qos_script import parse_rdma_qos_script
from provisioner.parsers.traffic_class import TclassRule, parse_traffic_class

from ._samples import read, rejected

# What mlx5_ib's traffic_class_show prints with a global class and three rules: `Global tclass=%d\n`, then
# per rule `src_ip=%pI4,` `dst_ip=%pI4/%d,` `src_ip6=%pI6,` `dst_ip6=%pI6,` (those it has, in that order)
# and `tclass=%d\n` (MLNX_OFED kernel, drivers/infiniband/hw/mlx5/main_ext.c, as mirrored in
# knneth/mlnx-ofa_kernel at commit fee19be2999acc2292616ccadc3227ccca5e95e2). %pI6 prints the full form.
WITH_RULES = (
    "Global tclass=106\n"
    "dst_ip=10.1.0.0/16,tclass=96\n"
    "src_ip=10.1.0.5,dst_ip=10.2.0.0/24,tclass=104\n"
    "dst_ip6=fe80:0000:0000:0000:0000:0000:0000:0001,tclass=98\n"
)


def test_prompt_then_global_class() -> None:
    setting = parse_traffic_class(read("traffic_class-2-prompt.txt"))
    assert (setting.tclass, setting.scope, setting.dscp, setting.complete) == (106, "global", 26, True)


def test_unset_file_between_two_prompts_reads_unset() -> None:
    setting = parse_traffic_class(read("traffic_class-3-empty-prompts.txt"))
    assert (setting.tclass, setting.rules, setting.complete, setting.unplaced) == (None, [], True, [])


def test_bare_number_as_cma_roce_tos_prints_it() -> None:
    setting = parse_traffic_class(read("traffic_class-4-cma-roce-tos-bare.txt"))
    assert (setting.tclass, setting.scope) == (106, None)


def test_address_rules_after_the_global_class() -> None:
    setting = parse_traffic_class(WITH_RULES)
    assert (setting.tclass, setting.complete, setting.unplaced) == (106, True, [])
    assert setting.rules == [
        TclassRule(tclass=96, dst_ip="10.1.0.0/16"),
        TclassRule(tclass=104, src_ip="10.1.0.5", dst_ip="10.2.0.0/24"),
        TclassRule(tclass=98, dst_ip6="fe80::1"),
    ]


def test_rules_without_a_global_class_leave_it_unset() -> None:
    setting = parse_traffic_class(WITH_RULES.split("\n", 1)[1])
    assert setting.tclass is None
    assert [rule.tclass for rule in setting.rules] == [96, 104, 98]


@pytest.mark.parametrize("whole", [WITH_RULES, "Global tclass=106\n", "dst_ip=10.1.0.0/16,tclass=96\n"])
def test_a_read_cut_at_any_character_is_a_prefix_or_incomplete(whole: str) -> None:
    full = parse_traffic_class(whole)
    for end in range(1, len(whole)):
        text = whole[:end]
        part = parse_traffic_class(text)  # never raises
        assert part.unplaced == [], text
        # Every rule but the last is whole; the last may have lost digits of its class to the cut.
        assert part.rules[:-1] == full.rules[: max(len(part.rules) - 1, 0)], text
        if part.rules:
            last = full.rules[len(part.rules) - 1]
            assert str(last.tclass).startswith(str(part.rules[-1].tclass)), text
        if part.complete:
            # Whole only where the cut fell after a class's digits (one digit may be all a class has).
            assert text.rstrip("\n")[-1].isdigit(), text
        else:
            assert part.missing[0].startswith(f"the rest of line {text.count(chr(10)) + 1}"), text


@pytest.mark.parametrize("cut", ["Global tcl", "Glo", "Global tclass=", "dst_ip=10.1.0.0/16,tcl",
                                 "src_ip=10.1.0.5,", "dst_ip=10.1.", "dst_ip6=fe80:0000:"])
def test_cut_last_line_is_incomplete_not_an_error(cut: str) -> None:
    setting = parse_traffic_class("Global tclass=106\n" + cut if not cut.startswith("G") else cut)
    assert setting.complete is False
    assert "cut inside" in setting.missing[0]


def test_cut_inside_a_line_that_is_not_the_last_is_an_error() -> None:
    line, reason = rejected(parse_traffic_class, "Global tcl\ndst_ip=10.1.0.0/16,tclass=96\n")
    assert line == 1
    assert "Global tclass=N" in reason


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("Global tclass=106\ndst_ip=10.1.0.300/16,tclass=96\n", 2, "not an address"),
        ("Global tclass=106\ndst_ip=10.1.0.0/16,tclass=996\n", 2, "out of range"),
        ("Global tclass=106\ndst_ip=10.1.0.0/16,tos=96,tclass=9\n", 2, "unknown rule item"),
        ("Global tclass=106\ndst_ip=10.1.0.0/16,src_ip=10.0.0.1,tclass=9\n", 2, "out of order"),
        ("Global tclass=106\ndst_ip=10.1.0.0/16\nGlobal tclass=1\n", 2, "ends with 'tclass=N'"),
        ("dst_ip=10.1.0.0/16,tclass=96\nGlobal tclass=1\n", 2, "before the address rules"),
    ],
)
def test_malformed_rules(text: str, line: int, message: str) -> None:
    found_line, reason = rejected(parse_traffic_class, text)
    assert (found_line, message in reason) == (line, True), reason


def test_not_the_file_at_all_is_an_error() -> None:
    with pytest.raises(ParseError) as err:
        parse_traffic_class("cat: /sys/class/infiniband/mlx5_2/tc/1/traffic_class: Permission denied\n")
    assert err.value.line == 1


# ----------------------------------------------------------------- the RoCE QoS script that echoes the file

def test_script_report_cut_at_any_character_never_raises_and_is_whole_only_at_its_end() -> None:
    whole = read("rdma-qos-script-q-1.txt")
    assert parse_rdma_qos_script(whole).complete
    for end in range(1, len(whole) - 1):
        part = parse_rdma_qos_script(whole[:end])  # never raises
        assert part.unplaced == [], end
        last = whole[:end].splitlines()[-1].rstrip()
        # Whole only where the script could have stopped: an unset file (`... =`) or a class's digits.
        ends_value = re.fullmatch(r"QOS for rdma: \S+ =(?: Global tclass=[0-9]+)?", last)
        assert part.complete is bool(ends_value), last


def test_script_echoes_the_rule_lines_of_the_file_after_its_label() -> None:
    text = (
        "======== show configuration for device eth0 / mlx5_0========\n"
        "Priority trust state: dscp\n"
        "cma_roce_tos: \n"
        "QOS for rdma: /sys/class/infiniband/mlx5_0/tc/1/traffic_class = Global tclass=106\n"
        "dst_ip=10.1.0.0/16,tclass=96\n"
        "======== show configuration for device eth1 / mlx5_1========\n"
        "Priority trust state: dscp\n"
        "QOS for rdma: /sys/class/infiniband/mlx5_1/tc/1/traffic_class = dst_ip=10.2.0.0/16,tclass=98\n"
    )
    first, second = parse_rdma_qos_script(text).devices
    assert (first.cma_roce_tos, first.traffic_class) == (None, 106)  # the tool printed nothing on stdout
    assert first.traffic_class_rules == [TclassRule(tclass=96, dst_ip="10.1.0.0/16")]
    assert second.traffic_class is None
    assert second.traffic_class_rules == [TclassRule(tclass=98, dst_ip="10.2.0.0/16")]


def test_script_section_without_its_traffic_class_line_at_the_end_is_cut() -> None:
    lines = read("rdma-qos-script-q-1.txt").splitlines(keepends=True)
    part = parse_rdma_qos_script("".join(lines[:-2]))  # stops after the CNP line
    assert part.complete is False
    assert part.missing == ["section eth0/mlx5_0: its lines up to 'QOS for rdma:' (the output stops at line 23)"]
    assert part.devices[0].cnp_dscp == 48
