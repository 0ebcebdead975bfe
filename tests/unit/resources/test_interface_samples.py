"""interface and mtu_uniform on `ip -j [-d] link show` as real hosts printed it (tests/samples/ip-link/):
IPoIB ports, a bond and its member, a VLAN, from iproute2 releases before `min_mtu`/`max_mtu`."""

from __future__ import annotations

import pytest

from ._recorded import SAMPLES, fix, listing, run

IP = "ip -j -d link show"


def _ip(name: str) -> str:
    return (SAMPLES / "ip-link" / name).read_bytes().decode("utf-8")


CASES = [
    # 8 HDR IPoIB ports in datagram mode (MTU 2044), `ip -json link show` with `vfinfo_list: []`.
    ("ipoib-8x-1.json", "ibp141s0", 2044, [("mtu", "ok", "2044", "2044"), ("link", "ok", "up", "up")], ""),
    ("ipoib-8x-1.json", "ibp204s0", 4092, [("mtu", "drift", "4092", "2044"), ("link", "ok", "up", "up")], ""),
    # iproute2 4.14, pretty-printed: a bond member (`master`, `info_slave_kind`) up, the bond without carrier.
    ("bond-802.3ad-4.14-2.json", "swp5", 1500, [("mtu", "ok", "1500", "1500"), ("link", "ok", "up", "up")], ""),
    ("bond-802.3ad-4.14-2.json", "swp5", 9000, [("mtu", "drift", "9000", "1500"), ("link", "ok", "up", "up")], ""),
    ("bond-802.3ad-4.14-2.json", "bond42", 9000, [("mtu", "drift", "9000", "1500"), ("link", "ok", "up", "up")],
     "admin up, operstate DOWN (no carrier)"),
    # A VLAN (`link`: its parent) created and never set up: no UP flag.
    ("vlan-4.14-3.json", "eth0.42", 1500, [("mtu", "ok", "1500", "1500"), ("link", "drift", "up", "down")], ""),
]


@pytest.mark.parametrize(("sample", "netdev", "mtu", "expected", "message"), CASES,
                         ids=[f"{case[0]}-{case[1]}" for case in CASES])
def test_interface_reads_real_ip_link_json(sample: str, netdev: str, mtu: int, expected: list, message: str) -> None:
    result = run("interface", {"name": netdev, "mtu": mtu, "persistent": False}, {IP: _ip(sample)})
    assert result.summary() == expected
    assert result.by_attribute()["link"].message == message


def test_every_ipoib_port_reports_its_mtu_to_the_fleet_check() -> None:
    for netdev in ("ibp12s0", "ibp18s0", "ibp75s0", "ibp84s0", "ibp141s0", "ibp148s0", "ibp186s0", "ibp204s0"):
        result = run("mtu_uniform", {"interface": netdev}, {IP: _ip("ipoib-8x-1.json")})
        assert result.summary() == [("mtu", "ok", "same on all hosts", "2044")]


def test_a_bond_members_mtu_is_the_bonds_to_set() -> None:
    # swp5 is a member of bond42 (SLAVE flag, `master`, `info_slave_kind` bond): setting its own MTU would
    # leave the bond at 1500 and be undone at the bond's next change.
    outputs = {IP: _ip("bond-802.3ad-4.14-2.json")}
    spec = {"name": "swp5", "mtu": 9000, "persistent": False}
    mtu = run("interface", spec, outputs).by_attribute()["mtu"]
    assert "member of bond bond42" in mtu.message and "set it on bond42" in mtu.message
    steps = fix("interface", spec, outputs)
    assert [(s.action, s.possible) for s in steps] == [("mtu", False)]
    assert "set the MTU on bond42" in steps[0].shown
    # The bond itself is fixed as any netdev is.
    bond = fix("interface", {"name": "bond42", "mtu": 9000, "persistent": False}, outputs)
    assert [(s.action, s.possible) for s in bond] == [("mtu", True)]


def test_a_bond_members_boot_time_mtu_is_the_bonds_to_persist() -> None:
    # The boot-time config sets members from their bond (networkd, netplan, ifcfg): a member's own MTU line
    # would be overridden, so the step names the bond instead of editing a file.
    network = "[Match]\nName=swp5\n\n[Network]\nBond=bond42\n"
    outputs = {IP: _ip("bond-802.3ad-4.14-2.json"),
               "/etc/systemd/network/": listing({"/etc/systemd/network/10-swp5.network": network})}
    steps = fix("interface", {"name": "swp5", "mtu": 9000, "persistent": True}, outputs)
    assert [(s.action, s.possible) for s in steps] == [("mtu", False), ("persist", False)]
    assert "persist the MTU on bond42" in steps[1].shown and not any(s.writes for s in steps)


def test_a_bond_members_boot_time_mtu_is_read_from_its_bond() -> None:
    files = {"/etc/systemd/network/10-swp5.network": "[Match]\nName=swp5\n\n[Network]\nBond=bond42\n",
             "/etc/systemd/network/20-bond42.network": "[Match]\nName=bond42\n\n[Link]\nMTUBytes=9000\n"}
    outputs = {IP: _ip("bond-802.3ad-4.14-2.json"), "/etc/systemd/network/": listing(files)}
    persisted = run("interface", {"name": "swp5", "mtu": 9000, "persistent": True}, outputs).by_attribute()
    assert persisted["mtu_persistent"].status == "ok"
    assert persisted["mtu_persistent"].actual == "9000 in /etc/systemd/network/20-bond42.network (bond bond42)"

