"""mlnx_qos reports, the RoCE QoS script report that embeds one, and the traffic_class sysfs file."""

from __future__ import annotations

import re

import pytest

from provisioner.errors import ParseError
from provisioner.parsers.mlnx_qos import parse_mlnx_qos
from provisioner.parsers.rdma_qos_script import parse_rdma_qos_script
from provisioner.parsers.traffic_class import parse_traffic_class

from ._samples import read, rejected

DEFAULT_TC_PRIORITIES = {0: [1], 1: [0], 2: [2], 3: [3], 4: [4], 5: [5], 6: [6], 7: [7]}


def test_mlnx_qos_1_older_format_dscp_trust_pfc_on_3() -> None:
    qos = parse_mlnx_qos(read("mlnx_qos-1.txt"))
    assert qos.dcbx_mode == "OS controlled"
    assert qos.trust == "dscp"
    assert qos.pfc_enabled == [3]
    assert qos.pfc_priorities == list(range(8))
    assert qos.pfc_buffer is None  # older tool: no buffer row
    assert qos.receive_buffer is None  # ... and no receive buffer line
    assert qos.cable_len == 7
    assert len(qos.dscp2prio) == 64
    assert qos.dscp2prio[26] == 3
    assert qos.dscp2prio[0] == 0
    assert qos.dscp2prio[46] == 5
    assert qos.dscp2prio[63] == 7
    assert [tc.tc for tc in qos.tcs] == list(range(8))
    assert {tc.tc: tc.priorities for tc in qos.tcs} == DEFAULT_TC_PRIORITIES
    assert {tc.tsa for tc in qos.tcs} == {"vendor"}
    assert {tc.bw for tc in qos.tcs} == {None}
    assert qos.ratelimit == dict.fromkeys(range(8), "unlimited")


def test_mlnx_qos_2_default_pcp_trust_no_dscp_block() -> None:
    qos = parse_mlnx_qos(read("mlnx_qos-2.txt"))
    assert qos.trust == "pcp"
    assert qos.dscp2prio == {}
    assert qos.pfc_enabled == []
    assert qos.pfc_buffer == [0] * 8
    assert qos.receive_buffer == [524160, 0, 0, 0, 0, 0, 0, 0]  # trailing comma ignored
    assert qos.receive_buffer_attributes == {}
    assert qos.cable_len == 7
    assert {tc.tc: tc.priorities for tc in qos.tcs} == DEFAULT_TC_PRIORITIES


def test_mlnx_qos_3_after_trust_dscp() -> None:
    qos = parse_mlnx_qos(read("mlnx_qos-3.txt"))
    assert qos.trust == "dscp"
    assert len(qos.dscp2prio) == 64
    assert qos.dscp2prio[24] == 3
    assert qos.dscp2prio[48] == 6
    assert qos.pfc_enabled == []
    assert qos.receive_buffer == [524160, 0, 0, 0, 0, 0, 0, 0]


def test_mlnx_qos_json_keys() -> None:
    from provisioner.parsers import parse

    data = parse("mlnx_qos", read("mlnx_qos-1.txt"))
    assert data["dscp2prio"]["26"] == 3
    assert data["tcs"][0] == {
        "tc": 0, "tsa": "vendor", "bw": None, "ratelimit": "unlimited", "priorities": [1], "skprios": [],
        "attributes": {"ratelimit": "unlimited", "tsa": "vendor"},
    }


NEWER = """\
DCBX mode: OS controlled
Priority trust state: dscp
dscp2prio mapping:
\tprio:0 dscp:07,06,05,04,03,02,01,00,
\tprio:3 dscp:31,30,29,28,27,26,25,24,
default priority:
Receive buffer size (bytes): 130944,130944,0,0,0,0,0,0,max_buffer_size=262016
Cable len: 7
PFC configuration:
\tpriority    0   1   2   3   4   5   6   7
\tenabled     0   0   0   1   0   0   0   0
\tbuffer      0   0   0   1   0   0   0   0
tc: 0 ratelimit: unlimited, tsa: ets, bw: 50%
\t priority:  0 1 2
tc: 3 ratelimit: unlimited, tsa: ets, bw: 50%
\t priority:  3
tc: 6 ratelimit: 25 Gbps, tsa: strict
\t priority:  4
\t priority:  5
\t priority:  6
\t priority:  7
"""


def test_newer_format_ets_bandwidth_and_priority_layouts() -> None:
    qos = parse_mlnx_qos(NEWER)
    assert qos.pfc_enabled == [3]
    assert qos.pfc_buffer == [0, 0, 0, 1, 0, 0, 0, 0]
    assert qos.receive_buffer == [130944, 130944, 0, 0, 0, 0, 0, 0]
    assert qos.receive_buffer_attributes == {"max_buffer_size": 262016}
    assert qos.dscp2prio == {**dict.fromkeys(range(8), 0), **dict.fromkeys(range(24, 32), 3)}
    assert qos.extra == {"default priority": ""}
    tcs = {tc.tc: tc for tc in qos.tcs}
    assert tcs[0].priorities == [0, 1, 2]
    assert (tcs[0].tsa, tcs[0].bw) == ("ets", 50)
    assert (tcs[3].tsa, tcs[3].bw, tcs[3].priorities) == ("ets", 50, [3])
    assert (tcs[6].tsa, tcs[6].bw, tcs[6].priorities) == ("strict", None, [4, 5, 6, 7])
    assert qos.ratelimit == {0: "unlimited", 3: "unlimited", 6: "25 Gbps"}


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("Priority trust state: dscp\n\tprio:0 dscp:01,\n", 2, "outside the dscp2prio block"),
        ("Priority trust state: dscp\ndscp2prio mapping:\n\tprio:9 dscp:01,\n", 3, "out of range"),
        ("Priority trust state: dscp\ndscp2prio mapping:\n\tprio:1 dscp:01,\n\tprio:2 dscp:01,\n", 4,
         "mapped twice"),
        ("Priority trust state: dscp\ndscp2prio mapping:\n\tprio:1 dscp:x1,\n", 3, "not an integer"),
        ("Priority trust state: pcp\n\t priority:  1\n", 2, "before any 'tc:'"),
        ("Priority trust state: pcp\nPFC configuration:\n\tenabled 0 0 0 1\n", 3, "before the 'priority'"),
        ("Priority trust state: pcp\nPFC configuration:\n\tpriority 0 1 2 3\n\tenabled 0 0 1\n", 4,
         "3 values for 4 priorities"),
        ("Priority trust state: pcp\nPFC configuration:\n\tpriority 0 1\n\tenabled 0 2\n", 4, "0 or 1"),
        ("Priority trust state: pcp\ntc: 0 ratelimit: unlimited, tsa: ets, bw: half\n", 2, "percentage"),
        ("Priority trust state: pcp\ntc: 0 ratelimit unlimited\n", 2, "not 'key: value'"),
        ("Priority trust state: pcp\nReceive buffer size (bytes): 1,two,\n", 2, "not a number"),
        ("Priority trust state: pcp\nthis line is not mlnx_qos\n", 2, "fits no mlnx_qos block"),
        ("DCBX mode: OS controlled\n", None, "not mlnx_qos output"),
    ],
)
def test_malformed_mlnx_qos(text: str, line: int | None, message: str) -> None:
    found_line, reason = rejected(parse_mlnx_qos, text)
    assert re.search(message, reason)
    assert found_line == line


def test_empty_mlnx_qos_is_an_error() -> None:
    with pytest.raises(ParseError, match="empty output"):
        parse_mlnx_qos("\n")


def test_truncated_mlnx_qos_keeps_what_was_printed() -> None:
    lines = read("mlnx_qos-1.txt").splitlines(keepends=True)
    cut = "".join(lines[:15])  # stops after the PFC enabled row, before the tc list
    qos = parse_mlnx_qos(cut)
    assert qos.pfc_enabled == [3]
    assert qos.tcs == []


def test_pfc_block_cut_before_its_enabled_row_is_incomplete() -> None:
    lines = read("mlnx_qos-1.txt").splitlines(keepends=True)
    qos = parse_mlnx_qos("".join(lines[:14]))
    assert qos.complete is False
    assert qos.missing == ["the PFC 'enabled' row", "the traffic classes ('tc:' entries)"]
    assert qos.pfc_enabled == []
    assert qos.trust == "dscp"


def test_rdma_qos_script_report() -> None:
    report = parse_rdma_qos_script(read("rdma-qos-script-q-1.txt"))
    assert len(report.devices) == 1
    device = report.devices[0]
    assert (device.netdev, device.device) == ("eth0", "mlx5_0")
    assert device.qos.trust == "dscp"
    assert device.qos.pfc_enabled == [5]
    assert device.qos.pfc_buffer == [0, 0, 0, 0, 0, 1, 0, 0]
    assert set(device.ecn) == {"roce_np", "roce_rp"}
    assert device.ecn["roce_np"] == dict.fromkeys(range(8), True)
    assert device.ecn_priorities == list(range(8))
    assert device.cnp_dscp == 48
    assert device.cma_roce_tos == 160
    assert device.traffic_class == 160


def test_rdma_qos_script_several_devices_and_disabled_ecn() -> None:
    text = (
        "======== show configuration for device eth0 / mlx5_0========\n"
        "Priority trust state: dscp\n"
        "ECN Enabled for priority 3: /sys/class/net/eth0/ecn/roce_np/enable/3 = 1\n"
        "ECN Enabled for priority 3: /sys/class/net/eth0/ecn/roce_rp/enable/3 = 0\n"
        "QOS for rdma: /sys/class/infiniband/mlx5_0/tc/1/traffic_class = \n"
        "======== show configuration for device eth1 / mlx5_1========\n"
        "Priority trust state: pcp\n"
        "cma_roce_tos: 106\n"
    )
    report = parse_rdma_qos_script(text)
    assert [(d.netdev, d.device) for d in report.devices] == [("eth0", "mlx5_0"), ("eth1", "mlx5_1")]
    first, second = report.devices
    assert first.ecn == {"roce_np": {3: True}, "roce_rp": {3: False}}
    assert first.ecn_priorities == []
    assert first.traffic_class is None
    assert (second.qos.trust, second.cma_roce_tos) == ("pcp", 106)


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("ECN Enabled for priority 3: /sys/x/ecn/roce_np/enable/3 = 2\n", 1, "0 or 1"),
        ("QOS for CNP: /sys/x/cnp_dscp = high\n", 1, "not an integer"),
        ("QOS for rdma: /sys/x/traffic_class = Global tclass=abc\n", 1, "Global tclass=N"),
        ("======== show configuration for device eth0 / mlx5_0========\n", None, "no configuration lines"),
        ("cma_roce_tos: 160\nrandom words here\n", 2, "fits no mlnx_qos block"),
    ],
)
def test_malformed_rdma_qos_script(text: str, line: int | None, message: str) -> None:
    found_line, reason = rejected(parse_rdma_qos_script, text)
    assert re.search(message, reason)
    assert found_line == line


def test_traffic_class_sample() -> None:
    setting = parse_traffic_class(read("traffic_class-1.txt"))
    assert setting.tclass == 106
    assert setting.scope == "global"
    assert setting.dscp == 26


@pytest.mark.parametrize(("text", "tclass"), [("", None), ("\n", None), ("106\n", 106), ("tclass=0\n", 0)])
def test_traffic_class_unset_and_bare(text: str, tclass: int | None) -> None:
    assert parse_traffic_class(text).tclass == tclass


@pytest.mark.parametrize(
    ("text", "line"),
    [("Global tclass=256\n", 1), ("Global tclass=x\n", 1), ("Global tclass=106\nGlobal tclass=1\n", 2),
     ("cat: /sys/class/infiniband/mlx5_2/tc/1/traffic_class: No such file or directory\n", 1)],
)
def test_malformed_traffic_class(text: str, line: int) -> None:
    found_line, _reason = rejected(parse_traffic_class, text)
    assert found_line == line
