"""ibv_devinfo, plain and verbose."""

from __future__ import annotations

import re

import pytest

from provisioner.parsers.ibv_devinfo import parse_ibv_devinfo

from ._samples import read, rejected


def test_ibv_devinfo_1_two_hcas_two_ports() -> None:
    info = parse_ibv_devinfo(read("ibv_devinfo-1.txt"))
    assert [d.name for d in info.devices] == ["mlx4_1", "mlx4_0"]
    for device in info.devices:
        assert device.fw_ver == "2.42.5000"
        assert device.vendor_part_id == 4099
        assert device.board_id == "MT_1090120019"
        assert device.phys_port_cnt == 2
        assert device.transport == "InfiniBand (0)"
        assert [p.port for p in device.ports] == [1, 2]
        assert [(p.state, p.state_code) for p in device.ports] == [("PORT_ACTIVE", 4), ("PORT_DOWN", 1)]
        assert {p.active_mtu for p in device.ports} == {4096}
        assert {p.max_mtu for p in device.ports} == {4096}
        assert {p.link_layer for p in device.ports} == {"InfiniBand"}
        assert all(p.gids == [] for p in device.ports)
    first, second = info.devices
    assert first.node_guid == "7cfe:9003:00a5:95c0"
    assert (first.ports[0].sm_lid, first.ports[0].port_lid) == (1, 22)
    assert (second.ports[0].sm_lid, second.ports[0].port_lid) == (18, 32)
    assert second.node_guid == "e41d:2d03:00e0:c740"


def test_ibv_devinfo_2_spaces_and_no_device_ports_line() -> None:
    info = parse_ibv_devinfo(read("ibv_devinfo-2.txt"))
    assert len(info.devices) == 1
    device = info.devices[0]
    assert (device.name, device.fw_ver, device.vendor_part_id) == ("mlx5_0", "28.39.2048", 4129)
    assert device.board_id == "MT_0000000838"
    [port] = device.ports
    assert (port.port, port.state, port.active_mtu, port.link_layer) == (1, "PORT_DOWN", 4096, "InfiniBand")
    assert port.port_lid == 65535


def test_ibv_devinfo_verbose_flags_odp_caps_and_gid() -> None:
    info = parse_ibv_devinfo(read("ibv_devinfo-v-1.txt"))
    [device] = info.devices
    assert device.name == "mlx4_1"
    assert device.attributes["max_qp"] == "393144"
    assert device.attributes["log atomic arg sizes (mask)"] == "0x8"
    assert device.attributes["max fetch and add bit boundary"] == "64"
    assert device.attributes["ooo_rc_caps"] == "0x0"
    assert device.attributes["device_cap_flags"] == "0x057e9c76"
    assert device.flags["device_cap_flags"][0] == "BAD_PKEY_CNTR"
    assert device.flags["device_cap_flags"][-1] == "Unknown flags: 0x056e8000"
    assert len(device.flags["device_cap_flags"]) == 10
    assert device.flags["device_cap_exp_flags"][-1] == "EXP_MASKED_ATOMICS"
    assert device.flags["rc_odp_caps"] == ["NO SUPPORT"]
    assert "general_odp_caps" not in device.flags  # its next line is a sibling key, not a flag
    assert device.attributes["max_size"] == "0x0"
    assert device.notes == ["Multi-Packet RQ is not supported", "tag matching not supported"]
    [port] = device.ports  # -i 2 selected a single port
    assert (port.port, port.state, port.phys_state) == (2, "PORT_DOWN", "POLLING")
    assert port.active_width == "4X (2)"
    assert port.active_speed == "2.5 Gbps (1)"
    assert port.attributes["gid_tbl_len"] == "128"
    assert [(g.index, g.gid, g.type) for g in port.gids] == [
        (0, "fe80:0000:0000:0000:7cfe:9003:00a5:95c2", "IB"),
    ]


ROCE = """\
hca_id:\tmlx5_2
\ttransport:\t\t\tInfiniBand (0)
\tfw_ver:\t\t\t\t16.35.2000
\tphys_port_cnt:\t\t\t1
\tDevice ports:
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_ACTIVE (4)
\t\t\tmax_mtu:\t\t4096 (5)
\t\t\tactive_mtu:\t\t1024 (3)
\t\t\tlink_layer:\t\tEthernet
\t\t\tGID[  0]:\t\tfe80::ac0:ebff:feda:e2ca, RoCE v1
\t\t\tGID[  1]:\t\tfe80::ac0:ebff:feda:e2ca, RoCE v2
\t\t\tGID[  2]:\t\t::ffff:172.17.242.56, RoCE v1
\t\t\tGID[  3]:\t\t::ffff:172.17.242.56, RoCE v2
"""


def test_roce_gids_carry_their_type() -> None:
    [device] = parse_ibv_devinfo(ROCE).devices
    [port] = device.ports
    assert port.active_mtu == 1024
    assert port.link_layer == "Ethernet"
    assert [(g.index, g.gid, g.type) for g in port.gids] == [
        (0, "fe80::ac0:ebff:feda:e2ca", "RoCE v1"),
        (1, "fe80::ac0:ebff:feda:e2ca", "RoCE v2"),
        (2, "::ffff:172.17.242.56", "RoCE v1"),
        (3, "::ffff:172.17.242.56", "RoCE v2"),
    ]


@pytest.mark.parametrize("text", ["", "\n", "No IB devices found\n"])
def test_no_devices(text: str) -> None:
    assert parse_ibv_devinfo(text).devices == []


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("transport: InfiniBand (0)\n", 1, "expected 'hca_id:'"),
        ("hca_id: mlx5_0\n\tfw_ver: 1\n", None, "ports of mlx5_0"),
        ("hca_id: mlx5_0\n\tport: 1\n\t\tmax_mtu: 4096 (5)\n", None, "port 1 of mlx5_0: .*has no state line"),
        ("hca_id: mlx5_0\n\tport: 1\n\t\tstate: PORT ACTIVE (4)\n", None, "port state"),
        ("hca_id: mlx5_0\n\tport: 1\n\t\tstate: PORT_ACTIVE (4)\n\t\tactive_mtu: big\n", 4, "active_mtu"),
        ("hca_id: mlx5_0\n\tport: 1\n\t\tstate: PORT_ACTIVE (4)\n\t\tGID[0]: not-a-gid\n", 4, "GID"),
        ("hca_id: mlx5_0\n\tGID[ 0]: fe80::1\n", 2, "GID line outside a port"),
        ("hca_id: mlx5_0\n\tport: one\n", 2, "port number"),
        ("hca_id: mlx5_0\n\t\xbb\xbf garbage {}\n", 2, "fits no ibv_devinfo structure"),
        ("hca_id: mlx5_0\n\tport: 1\n\t\tstate: PORT_ACTIVE (4)\n\t\tsm_lid: x\n", 4, "sm_lid"),
    ],
)
def test_malformed_ibv_devinfo(text: str, line: int | None, message: str) -> None:
    found_line, reason = rejected(parse_ibv_devinfo, text)
    assert re.search(message, reason)
    assert found_line == line


def test_truncated_after_port_line_names_the_port() -> None:
    lines = read("ibv_devinfo-1.txt").splitlines(keepends=True)
    cut = "".join(lines[:21])  # ends at `port: 2` of the first device
    result = parse_ibv_devinfo(cut)
    assert result.complete is False
    assert result.missing == ["port 2 of mlx4_1: port 2 of mlx4_1 has no state line (truncated record?)"]
    assert [p.port for p in result.devices[0].ports] == [1]  # the complete part is kept


def test_truncated_mid_port_keeps_the_fields_printed() -> None:
    lines = read("ibv_devinfo-1.txt").splitlines(keepends=True)
    [device] = parse_ibv_devinfo("".join(lines[:22])).devices  # `port: 2` then its state only
    assert [(p.port, p.state, p.active_mtu) for p in device.ports] == [
        (1, "PORT_ACTIVE", 4096),
        (2, "PORT_DOWN", None),
    ]


def test_v_11_port_lines_left_under_a_mask_by_grep_are_not_its_flags() -> None:
    # `ibv_devinfo -v | grep ...` kept `device_cap_flags_ex: 0x...` and then the port's own lines.
    info = parse_ibv_devinfo(read("ibv_devinfo-v-11-bf3-grep-filtered.txt"))
    assert [d.name for d in info.devices] == ["mlx5_0", "mlx5_1"]
    bf3 = info.devices[0]
    assert (bf3.vendor_part_id, bf3.fw_ver, bf3.board_id) == (41692, "32.47.1088", "MT_0000000965")
    assert bf3.attributes["atomic_cap"] == "ATOMIC_HCA (1)"
    assert bf3.attributes["device_cap_flags_ex"] == "0x3000005021361C36"
    assert all(not d.flags for d in info.devices) and all(not d.ports for d in info.devices)
    assert [u.text.split(":")[0].strip() for u in info.unplaced] == ["state", "active_width", "active_speed",
                                                                      "phys_state"] * 2
    assert not info.complete and "ports of mlx5_0" in info.missing
