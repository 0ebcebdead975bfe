"""Device-to-netdev maps and GID tables: ibdev2netdev, rdma link, show_gids."""

from __future__ import annotations

import re

import pytest

from provisioner.parsers.ibdev2netdev import parse_ibdev2netdev
from provisioner.parsers.rdma_link import parse_rdma_link
from provisioner.parsers.show_gids import parse_show_gids

from ._samples import read, rejected


def test_ibdev2netdev_1_mixed_ethernet_and_ib_crlf() -> None:
    links = parse_ibdev2netdev(read("ibdev2netdev-1.txt")).links
    assert [(link.device, link.port, link.netdev, link.state) for link in links] == [
        ("mlx5_0", 1, "ens4f0", "Down"),
        ("mlx5_1", 1, "ens4f1", "Down"),
        ("mlx5_2", 1, "ens6", "Up"),
        ("mlx5_3", 1, "ens14f0", "Up"),
        ("mlx5_4", 1, "ens14f1", "Down"),
        ("mlx5_5", 1, "ib0", "Up"),
        ("mlx5_6", 1, "ens6f1", "Down"),
        ("mlx5_7", 1, "ens6f2", "Up"),
    ]


def test_ibdev2netdev_3_sriov_vfs() -> None:
    links = parse_ibdev2netdev(read("ibdev2netdev-3.txt")).links
    assert len(links) == 16
    assert (links[0].device, links[0].netdev, links[0].state) == ("mlx5_19", "ibp75s0v7", "Down")
    up = sorted(link.device for link in links if link.state == "Up")
    assert up == ["mlx5_2", "mlx5_4", "mlx5_6"]
    assert {link.netdev for link in links if link.netdev.startswith("ibp141s0v")} == {
        f"ibp141s0v{i}" for i in range(7)
    }


def test_ibdev2netdev_4() -> None:
    links = parse_ibdev2netdev(read("ibdev2netdev-4.txt")).links
    assert [(link.device, link.netdev, link.state) for link in links] == [
        ("mlx5_0", "enp4s0f0np0", "Up"), ("mlx5_1", "enp4s0f1np1", "Up"),
    ]


def test_ibdev2netdev_verbose_form() -> None:
    text = ("0000:3b:00.0 mlx5_0 (MT4119 - MCX516A-CCAT) CX516A - ConnectX-5 QSFP28 fw 16.28.2006 "
            "port 1 (ACTIVE) ==> ens1f0 (Up)\n")
    [link] = parse_ibdev2netdev(text).links
    assert (link.pci, link.device, link.port, link.port_state, link.netdev, link.state) == (
        "0000:3b:00.0", "mlx5_0", 1, "ACTIVE", "ens1f0", "Up")
    assert link.fw == "16.28.2006"


def test_ibdev2netdev_no_devices_is_empty() -> None:
    assert parse_ibdev2netdev("").links == []


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("mlx5_0 port 1 ==> ens4f0 (Up)\nmlx5_1 port 1 -> ens4f1 (Up)\n", 2),
        ("mlx5_0 port x ==> ens4f0 (Up)\n", 1),
        ("mlx5_0 port 1 ==> \n", 1),
        ("\nmlx5_0 port 1 ==> ens4f0 (Up) extra\n", 2),
    ],
)
def test_malformed_ibdev2netdev(text: str, line: int) -> None:
    found_line, reason = rejected(parse_ibdev2netdev, text)
    assert reason.startswith("expected 'DEVICE port N ==> NETDEV")
    assert found_line == line


def test_ibdev2netdev_keeps_the_good_lines_around_a_bad_one() -> None:
    text = "mlx5_0 port 1 ==> ens4f0 (Up)\nmlx5_1 port 1 -> ens4f1 (Up)\nmlx5_2 port 1 ==> x (Up)\n"
    result = parse_ibdev2netdev(text)
    assert [link.device for link in result.links] == ["mlx5_0", "mlx5_2"]
    assert [(u.line, u.text) for u in result.unplaced] == [(2, "mlx5_1 port 1 -> ens4f1 (Up)")]
    assert result.complete is True


def test_rdma_link_samples() -> None:
    links = parse_rdma_link(read("rdma-link-1.txt")).links
    assert [(link.device, link.port, link.state, link.physical_state, link.netdev) for link in links] == [
        ("mlx5_0", 1, "ACTIVE", "LINK_UP", "enp4s0f0np0"),
        ("mlx5_1", 1, "ACTIVE", "LINK_UP", "enp4s0f1np1"),
    ]
    [rxe] = parse_rdma_link(read("rdma-link-3.txt")).links
    assert (rxe.device, rxe.port, rxe.state, rxe.physical_state, rxe.netdev) == (
        "rxe_0", 1, "ACTIVE", "LINK_UP", "p1p1")


def test_rdma_link_infiniband_port_without_netdev_and_detail_lines() -> None:
    text = ("link mlx5_2/1 subnet_prefix fe80:0000:0000:0000 lid 7 sm_lid 1 lmc 0 state ACTIVE "
            "physical_state LINK_UP\n    caps: <SM, CM, PKEY_SW_EXT_PORT_TRAP>\n")
    [link] = parse_rdma_link(text).links
    assert (link.state, link.netdev) == ("ACTIVE", None)
    assert link.attributes["lid"] == "7"
    assert link.attributes["caps"] == "<SM, CM, PKEY_SW_EXT_PORT_TRAP>"


def test_rdma_link_empty_is_no_links() -> None:
    assert parse_rdma_link("\n").links == []


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("link mlx5_0/1 state ACTIVE physical_state\n", None, "stops before the value of physical_state"),
        ("link mlx5_0/1 physical_state LINK_UP\n", 1, "no state"),
        ("link mlx5_0 state ACTIVE\n", 1, "expected 'link DEV/PORT"),
        ("link mlx5_0/1 state ACTIVE\ngarbage\n", 2, "expected 'link DEV/PORT"),
    ],
)
def test_malformed_rdma_link(text: str, line: int | None, message: str) -> None:
    found_line, reason = rejected(parse_rdma_link, text)
    assert re.search(message, reason)
    assert found_line == line


def test_show_gids_1_shifted_columns_and_ib_only_row() -> None:
    result = parse_show_gids(read("show_gids-1.txt"))
    assert result.n_gids_found == 19
    assert len(result.gids) == 19
    first = result.gids[0]
    assert (first.device, first.port, first.index, first.ipv4, first.version, first.netdev) == (
        "mlx5_0", 1, 0, None, "v1", "ens4f0")
    assert first.gid == "fe80:0000:0000:0000:0ac0:ebff:fe40:8df2"
    by_key = {(g.device, g.index): g for g in result.gids}
    assert (by_key["mlx5_2", 3].ipv4, by_key["mlx5_2", 3].version, by_key["mlx5_2", 3].netdev) == (
        "172.17.242.56", "v2", "ens6")
    # the long address pushes VER and DEV one tab stop right
    assert (by_key["mlx5_3", 2].ipv4, by_key["mlx5_3", 2].version, by_key["mlx5_3", 2].netdev) == (
        "192.168.242.56", "v1", "ens14f0")
    ib_only = by_key["mlx5_5", 0]
    assert (ib_only.ipv4, ib_only.version, ib_only.netdev) == (None, "v1", None)
    assert sum(1 for g in result.gids if g.ipv4) == 4


def test_show_gids_3() -> None:
    result = parse_show_gids(read("show_gids-3.txt"))
    assert result.n_gids_found == 5
    assert [(g.device, g.index, g.ipv4, g.version, g.netdev) for g in result.gids] == [
        ("mlx5_0", 0, None, "v1", "mce0"),
        ("mlx5_0", 1, None, "v2", "mce0"),
        ("mlx5_0", 2, "192.168.6.132", "v1", "mce0"),
        ("mlx5_0", 3, "192.168.6.132", "v2", "mce0"),
        ("mlx5_1", 0, None, "v1", None),
    ]


def test_show_gids_filtered_through_grep_has_no_trailer() -> None:
    text = "mlx5_0  1       3       0000:0000:0000:0000:0000:ffff:c0a8:0684 192.168.6.132   v2      mce0\n"
    result = parse_show_gids(text)
    assert result.n_gids_found is None
    assert result.gids[0].ipv4 == "192.168.6.132"


def test_show_gids_truncated_output_disagrees_with_trailer() -> None:
    lines = read("show_gids-3.txt").splitlines(keepends=True)
    result = parse_show_gids("".join(lines[:6] + lines[7:]))
    assert result.complete is False
    assert result.missing == ["1 GID rows (the trailer says 5, 4 were printed)"]
    assert len(result.gids) == 4


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("", None, "no show_gids header"),
        ("mlx5_0 1 0 fe80::1\n", 1, "too few columns"),
        ("mlx5_0 one 0 fe80::1 v1 eth0\n", 1, "integers"),
        ("mlx5_0 1 0 not-a-gid v1 eth0\n", 1, "GID"),
        ("mlx5_0 1 0 fe80::1 10.0.0.1 eth0\n", 1, "RoCE version"),
        ("mlx5_0 1 0 fe80::1 999.0.0.1 v2 eth0\n", 1, "IPv4"),
        ("mlx5_0 1 0 fe80::1 v2 eth0 extra\n", 1, "extra columns"),
        ("n_gids_found=0\nmlx5_0 1 0 fe80::1 v2 eth0\n", 2, "continues after"),
    ],
)
def test_malformed_show_gids(text: str, line: int | None, message: str) -> None:
    found_line, reason = rejected(parse_show_gids, text)
    assert re.search(message, reason)
    assert found_line == line


def test_ibdev2netdev_8_pci_domain_in_the_names() -> None:
    links = parse_ibdev2netdev(read("ibdev2netdev-8-cx7-two-pci-domains.txt")).links
    assert [(x.device, x.port, x.netdev, x.state) for x in links] == [
        ("rocep1s0f0", 1, "enp1s0f0np0", "Down"), ("rocep1s0f1", 1, "enp1s0f1np1", "Up"),
        ("roceP2p1s0f0", 1, "enP2p1s0f0np0", "Down"), ("roceP2p1s0f1", 1, "enP2p1s0f1np1", "Up"),
    ]
