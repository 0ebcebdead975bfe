"""ibstat and ibstatus."""

from __future__ import annotations

import re

import pytest

from provisioner.parsers.ibstat import parse_ibstat
from provisioner.parsers.ibstatus import parse_ibstatus

from ._samples import ibstatus_tail, read, rejected


def test_ibstat_1_two_connectx3_adapters() -> None:
    result = parse_ibstat(read("ibstat-1.txt"))
    assert result.errors == []
    assert [ca.name for ca in result.cas] == ["mlx4_0", "mlx4_1"]
    for ca in result.cas:
        assert (ca.type, ca.firmware, ca.number_of_ports) == ("MT4099", "2.42.5000", 2)
        assert [p.port for p in ca.ports] == [1, 2]
        for port in ca.ports:
            assert (port.state, port.physical_state, port.rate, port.link_layer) == (
                "Active", "LinkUp", 56, "InfiniBand")
            assert port.capability_mask == "0x02514868"
    assert [p.base_lid for p in result.cas[0].ports] == [10, 12]
    assert [p.base_lid for p in result.cas[1].ports] == [1, 4]
    assert result.cas[1].ports[1].port_guid == "0xf45214030033b852"
    assert result.cas[0].node_guid == "0xec0d9a03000c8980"


def test_ibstat_2_second_adapter_down_and_disabled() -> None:
    result = parse_ibstat(read("ibstat-2.txt"))
    assert result.errors == []
    up, down = result.cas
    assert (up.name, up.type, up.firmware) == ("mlx5_0", "MT4123", "20.33.1048")
    assert (up.ports[0].state, up.ports[0].rate, up.ports[0].base_lid, up.ports[0].sm_lid) == ("Active", 200, 569, 393)
    assert down.name == "mlx5_1"
    assert (down.ports[0].state, down.ports[0].physical_state, down.ports[0].rate) == ("Down", "Disabled", 10)
    assert down.ports[0].base_lid == 65535


def test_ibstat_3_roce_adapters() -> None:
    result = parse_ibstat(read("ibstat-3.txt"))
    assert [(ca.name, ca.type, ca.firmware) for ca in result.cas] == [
        ("mlx5_0", "MT4129", "28.39.1002"), ("mlx5_1", "MT4129", "28.39.1002"),
    ]
    assert {ca.ports[0].link_layer for ca in result.cas} == {"Ethernet"}
    assert {ca.ports[0].rate for ca in result.cas} == {200}
    assert {ca.ports[0].base_lid for ca in result.cas} == {0}
    assert result.cas[0].ports[0].capability_mask == "0x00010000"


def test_ibstat_6_ndr() -> None:
    result = parse_ibstat(read("ibstat-6.txt"))
    assert [(ca.name, ca.firmware) for ca in result.cas] == [("mlx5_0", "28.43.2026"), ("mlx5_1", "28.43.2026")]
    assert [(ca.ports[0].rate, ca.ports[0].link_layer, ca.ports[0].base_lid) for ca in result.cas] == [
        (400, "InfiniBand", 50), (400, "InfiniBand", 49),
    ]


def test_ibstat_grep_names_only_are_reported_as_incomplete() -> None:
    result = parse_ibstat(read("ibstat-grep-1.txt"))
    assert [ca.name for ca in result.cas] == [f"mlx5_{i}" for i in range(8)]
    assert all(ca.ports == [] and ca.firmware is None for ca in result.cas)
    assert result.errors[0] == "line 1: shell prompt line skipped: $ ibstat | grep mlx5"
    assert len(result.errors) == 9
    assert result.errors[1] == "line 2: CA 'mlx5_0' has no port records (incomplete record)"


def test_ibstat_port_count_mismatch_and_missing_fields_are_reported() -> None:
    lines = read("ibstat-1.txt").splitlines(keepends=True)
    result = parse_ibstat("".join(lines[:20]))  # first CA, its port 2 cut after State/Physical state
    [ca] = result.cas
    assert [p.port for p in ca.ports] == [1, 2]
    assert ca.ports[1].state == "Active"
    assert ca.ports[1].rate is None
    assert result.errors == ["line 18: CA 'mlx4_0' port 2 has no Rate, Link layer (incomplete record)"]
    one_port = parse_ibstat("".join(lines[:17]))  # cut just before `Port 2:`
    assert one_port.errors == ["line 1: CA 'mlx4_0' reports 2 ports, found 1 port records"]


@pytest.mark.parametrize("text", ["", "\n", "No IB devices found\n"])
def test_ibstat_no_devices(text: str) -> None:
    assert parse_ibstat(text).cas == []


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("\tCA type: MT4099\n", 1, "expected \"CA 'name'\""),
        ("CA 'mlx5_0'\n\tPort 1:\n\t\tRate: fast\n", 3, "rate is not a number"),
        ("CA 'mlx5_0'\n\tPort one:\n", 2, "port number"),
        ("CA 'mlx5_0'\n\tNumber of ports: two\n\tPort 1:\n", 2, "Number of ports"),
        ("CA 'mlx5_0'\n\tthis is not ibstat\n", 2, "fits no ibstat structure"),
    ],
)
def test_malformed_ibstat(text: str, line: int, message: str) -> None:
    found_line, reason = rejected(parse_ibstat, text)
    assert re.search(message, reason)
    assert found_line == line


def test_ibstatus_blocks() -> None:
    result = parse_ibstatus(ibstatus_tail())
    assert [(p.device, p.port) for p in result.ports] == [("mlx5_0", 1), ("mlx5_1", 1)]
    first = result.ports[0]
    assert first.default_gid == "fe80:0000:0000:0000:8ae9:a4ff:fe9c:7f1a"
    assert (first.state, first.state_code, first.phys_state, first.phys_state_code) == ("ACTIVE", 4, "LinkUp", 5)
    assert (first.rate, first.rate_detail, first.link_layer) == (100, "4X EDR", "Ethernet")
    assert (first.base_lid, first.sm_lid) == ("0x0", "0x0")
    assert result.ports[1].default_gid.endswith(":7f1b")


def test_ibstatus_fractional_rate() -> None:
    text = ("Infiniband device 'mlx4_0' port 1 status:\n\tstate:\t 1: DOWN\n"
            "\trate:\t 2.5 Gb/sec (1X SDR)\n\tlink_layer:\t InfiniBand\n")
    [port] = parse_ibstatus(text).ports
    assert (port.state, port.rate, port.rate_detail) == ("DOWN", 2.5, "1X SDR")


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("\tstate: 4: ACTIVE\n", 1, "expected \"Infiniband device"),
        ("Infiniband device 'mlx5_0' port 1 status:\n\tstate: 4: ACTIVE\n", None, "no rate line"),
        ("Infiniband device 'mlx5_0' port 1 status:\n\tstate: 4: ACTIVE\n\trate: fast\n", None, "rate is not like"),
        ("Infiniband device 'mlx5_0' port 1 status:\n\t!!!\n", 2, "fits no ibstatus structure"),
    ],
)
def test_malformed_ibstatus(text: str, line: int | None, message: str) -> None:
    found_line, reason = rejected(parse_ibstatus, text)
    assert re.search(message, reason)
    assert found_line == line


def test_ibstatus_empty_is_no_ports() -> None:
    assert parse_ibstatus("").ports == []


@pytest.mark.parametrize("divider", ["---- mlx5_1 ----", "==== mlx5_1 =====", "### host gpu07 ###"])
def test_a_divider_between_adapters_is_not_a_stray_line(divider: str) -> None:
    text = read("ibstat-1.txt")
    second = text.index("CA 'mlx4_1'")
    result = parse_ibstat(text[:second] + divider + "\n" + text[second:])
    assert result.unplaced == [] and [ca.name for ca in result.cas] == ["mlx4_0", "mlx4_1"]
    assert any("divider" in error for error in result.errors)


@pytest.mark.parametrize("line", ["----", "--- mlx5_1", "-- mlx5_1 --", "---- mlx5_1 ===="])
def test_what_is_not_a_divider_stays_unplaced(line: str) -> None:
    text = read("ibstat-1.txt")
    second = text.index("CA 'mlx4_1'")
    result = parse_ibstat(text[:second] + line + "\n" + text[second:])
    assert [u.text.strip() for u in result.unplaced] == [line]
