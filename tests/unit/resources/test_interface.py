"""interface: live MTU and link state from `ip -j -d link show`, MTU persistence from boot config files."""

from __future__ import annotations

import pytest

from provisioner.errors import ParseError
from provisioner.parsers.boot_mtu import persistent_mtu
from provisioner.resources import interface

from ._recorded import IP_LINK, NETWORKD_DATA, NOT_FOUND, failed, listing, run, sample

IP = "ip -j -d link show"
CONFIG = "/etc/netplan/"  # a fragment of the config-file probe's command
RDMA = "rdma link show"
IBDEV = "ibdev2netdev"

CASES = [
    pytest.param(
        {"name": "eth1", "mtu": 9000},
        {IP: IP_LINK, CONFIG: listing({"/etc/systemd/network/10-data.network": NETWORKD_DATA})},
        [("mtu", "ok", "9000", "9000"), ("link", "ok", "up", "up"),
         ("mtu_persistent", "ok", "9000", "9000 in /etc/systemd/network/10-data.network")],
        id="in-sync",
    ),
    pytest.param(
        {"name": "enp12s0f0np0", "mtu": 9000, "persistent": False},
        {IP: IP_LINK},
        [("mtu", "ok", "9000", "9000"), ("link", "ok", "up", "up")],
        id="altname-finds-the-link",
    ),
    pytest.param(
        {"name": "enp4s0f0np0", "mtu": 9000, "persistent": False},
        {IP: IP_LINK},
        [("mtu", "drift", "9000", "1500"), ("link", "ok", "up", "up")],
        id="live-mtu-drift",
    ),
    pytest.param(
        {"name": "enp4s0f1np1", "persistent": False},
        {IP: IP_LINK},
        [("link", "drift", "up", "down")],
        id="admin-down",
    ),
    pytest.param(
        {"name": "enp4s0f1np1", "state": "down"},
        {IP: IP_LINK},
        [("link", "ok", "down", "down")],
        id="wanted-down-no-mtu-no-config-probe",
    ),
    pytest.param(
        {"name": "eth1", "mtu": 9000},
        {IP: IP_LINK, CONFIG: ""},
        [("mtu", "ok", "9000", "9000"), ("link", "ok", "up", "up"),
         ("mtu_persistent", "drift", "9000", "none in boot config")],
        id="not-persistent",
    ),
    pytest.param(
        {"name": "eth1", "mtu": 9000},
        {IP: IP_LINK, CONFIG: listing({"/etc/netplan/50-cloud-init.yaml":
                                       "network:\n  version: 2\n  ethernets:\n    eth1:\n      mtu: 1500\n"})},
        [("mtu", "ok", "9000", "9000"), ("link", "ok", "up", "up"),
         ("mtu_persistent", "drift", "9000", "1500 in /etc/netplan/50-cloud-init.yaml")],
        id="persistent-value-differs",
    ),
    pytest.param(
        {"name": "eth7", "mtu": 9000},
        {IP: IP_LINK, CONFIG: ""},
        [("mtu", "drift", "9000", "absent"), ("link", "drift", "up", "absent"),
         ("mtu_persistent", "drift", "9000", "absent")],
        id="no-such-interface",
    ),
    pytest.param(
        {"rdma_device": "mlx5_0", "mtu": 9000, "persistent": False},
        {IP: IP_LINK, RDMA: sample("rdma-link-1.txt"), IBDEV: sample("ibdev2netdev-4.txt")},
        [("mtu", "drift", "9000", "1500"), ("link", "ok", "up", "up")],
        id="rdma-device-via-rdma-link",
    ),
    pytest.param(
        {"rdma_device": "mlx5_1", "persistent": False},
        {IP: IP_LINK, RDMA: NOT_FOUND, IBDEV: sample("ibdev2netdev-4.txt")},
        [("link", "drift", "up", "down")],
        id="rdma-device-via-ibdev2netdev-fallback",
    ),
    pytest.param(
        {"rdma_device": "mlx5_9", "mtu": 9000, "persistent": False},
        {IP: IP_LINK, RDMA: sample("rdma-link-1.txt"), IBDEV: sample("ibdev2netdev-4.txt")},
        [("mtu", "drift", "9000", "absent"), ("link", "drift", "up", "absent")],
        id="rdma-device-absent",
    ),
    pytest.param(
        # An InfiniBand port without IPoIB: `rdma link` lists it with no netdev. The device is there.
        {"rdma_device": "mlx5_7", "mtu": 4092, "persistent": False},
        {IP: IP_LINK, RDMA: sample("rdma-link-5-ib-polling.txt"), IBDEV: NOT_FOUND},
        [("mtu", "drift", "4092", "no netdev"), ("link", "drift", "up", "no netdev")],
        id="ib-port-without-ipoib-has-no-netdev",
    ),
    pytest.param(
        # Older kernels name no netdev in `rdma link`: ibdev2netdev still finds it.
        {"rdma_device": "mlx5_0", "persistent": False},
        {IP: IP_LINK, RDMA: sample("rdma-link-6-index-prefix.txt"), IBDEV: sample("ibdev2netdev-4.txt")},
        [("link", "ok", "up", "up")],
        id="rdma-link-without-netdevs-falls-back-to-ibdev2netdev",
    ),
    pytest.param(
        {"name": "eth1", "mtu": 9000},
        {IP: failed("Cannot open netlink socket: Permission denied", 2), CONFIG: ""},
        [("mtu", "error", "9000", None), ("link", "error", "up", None), ("mtu_persistent", "error", "9000", None)],
        id="ip-fails",
    ),
    pytest.param(
        {"rdma_device": "mlx5_0", "persistent": False},
        {IP: IP_LINK, RDMA: NOT_FOUND, IBDEV: NOT_FOUND},
        [("link", "error", "up", None)],
        id="no-rdma-tools",
    ),
]


@pytest.mark.parametrize(("spec", "outputs", "expected"), CASES)
def test_interface(spec: dict, outputs: dict, expected: list) -> None:
    assert run("interface", spec, outputs).summary() == expected


def test_probe_failure_message_names_exit_code_and_stderr() -> None:
    result = run("interface", {"name": "eth1", "persistent": False},
                 {IP: failed("Cannot open netlink socket: Permission denied", 2)})
    assert result.checks[0].message == (
        "ip -j -d link show: exit code 2: Cannot open netlink socket: Permission denied"
    )


def test_ip_output_that_is_not_json_is_an_error() -> None:
    result = run("interface", {"name": "eth1", "persistent": False}, {IP: "1: lo: <LOOPBACK,UP> mtu 65536\n"})
    assert result.checks[0].status == "error"
    assert "not JSON" in result.checks[0].message


def test_admin_up_without_carrier_says_so() -> None:
    check = run("interface", {"name": "enp4s0f0np0", "persistent": False}, {IP: IP_LINK}).by_attribute()["link"]
    assert (check.status, check.message) == ("ok", "admin up, operstate DOWN (no carrier)")


def test_unparseable_netplan_is_an_error_of_mtu_persistent_only() -> None:
    result = run("interface", {"name": "eth1", "mtu": 9000},
                 {IP: IP_LINK, CONFIG: listing({"/etc/netplan/01.yaml": "network: [unclosed\n"})})
    assert [c.status for c in result.checks] == ["ok", "ok", "error"]
    assert "/etc/netplan/01.yaml" in result.checks[2].message


def test_unreadable_config_without_an_mtu_is_an_error_not_drift() -> None:
    path = "/etc/NetworkManager/system-connections/data.nmconnection"
    check = run("interface", {"name": "eth1", "mtu": 9000},
                {IP: IP_LINK, CONFIG: listing({path: None})}).by_attribute()["mtu_persistent"]
    assert check.status == "error"
    assert path in check.message


def test_interfaces_share_the_ip_and_config_probes() -> None:
    one = run("interface", {"name": "eth1", "mtu": 9000}, {IP: IP_LINK, CONFIG: ""})
    two = run("interface", {"rdma_device": "mlx5_0", "mtu": 9000},
              {IP: IP_LINK, CONFIG: "", RDMA: sample("rdma-link-1.txt"), IBDEV: ""})
    assert one.probes[0].key == two.probes[0].key == interface.IP_LINK.key
    assert {p.key for p in one.probes} < {p.key for p in two.probes}


def test_config_probe_lists_every_boot_config_location() -> None:
    words = interface.BOOT_CONFIG.command.split("; do ", 1)[0].split()
    for pattern in ("/etc/netplan/*.yaml", "/etc/netplan/*.yml", "/etc/systemd/network/*.network",
                    "/etc/systemd/network/*.link", "/etc/NetworkManager/system-connections/*",
                    "/etc/sysconfig/network-scripts/ifcfg-*", "/etc/network/interfaces",
                    "/etc/network/interfaces.d/*"):
        assert pattern in words


# ------------------------------------------------------------------------------------- persistent_mtu

NM_DIR = "/etc/NetworkManager/system-connections/"

PERSISTENCE = [
    pytest.param({"/etc/systemd/network/10-data.network": NETWORKD_DATA}, "eth1",
                 (9000, "/etc/systemd/network/10-data.network"), id="networkd"),
    pytest.param({"/etc/systemd/network/10-data.network": NETWORKD_DATA}, "eth0", (None, None),
                 id="networkd-other-name"),
    pytest.param({"/etc/systemd/network/20-rdma.network": "[Match]\nName=enp* ib*\n[Link]\nMTUBytes=9K\n"},
                 "enp4s0f0np0", (9216, "/etc/systemd/network/20-rdma.network"), id="networkd-glob-and-K-suffix"),
    pytest.param({"/etc/systemd/network/20-x.network": "[Match]\nName=!eth0 lo\n[Link]\nMTUBytes=4200\n"},
                 "eth1", (4200, "/etc/systemd/network/20-x.network"), id="networkd-negated-list"),
    pytest.param({"/etc/systemd/network/05-first.network": "[Match]\nName=eth1\n[Network]\nDHCP=yes\n",
                  "/etc/systemd/network/10-data.network": NETWORKD_DATA}, "eth1", (None, None),
                 id="networkd-only-first-match-applies"),
    pytest.param({"/etc/systemd/network/10-mac.network": "[Match]\nMACAddress=58:a2:e1:2a:09:b8\n"
                                                         "[Link]\nMTUBytes=9000\n"}, "eth1", (None, None),
                 id="networkd-match-by-mac-not-judged"),
    pytest.param({"/etc/netplan/50.yaml": "network:\n  ethernets:\n    data:\n      match:\n        name: 'eth*'\n"
                                          "      mtu: 9000\n"}, "eth1", (9000, "/etc/netplan/50.yaml"),
                 id="netplan-match-name-glob"),
    pytest.param({"/etc/netplan/50.yaml": "network:\n  ethernets:\n    nic:\n      match:\n        macaddress: "
                                          "'58:a2:e1:2a:09:b8'\n      set-name: eth1\n      mtu: 4200\n"},
                 "eth1", (4200, "/etc/netplan/50.yaml"), id="netplan-set-name"),
    pytest.param({"/etc/netplan/50.yaml": "network:\n  ethernets:\n    eth1:\n      mtu: 1500\n",
                  "/etc/netplan/90-mtu.yaml": "network:\n  ethernets:\n    eth1:\n      mtu: 9000\n"},
                 "eth1", (9000, "/etc/netplan/90-mtu.yaml"), id="netplan-later-file-wins"),
    pytest.param({"/etc/netplan/50.yaml": "network:\n  bonds:\n    bond0:\n      interfaces: [eth1]\n"
                                          "      mtu: 9000\n"}, "bond0", (9000, "/etc/netplan/50.yaml"),
                 id="netplan-bond"),
    pytest.param({NM_DIR + "data.nmconnection": "[connection]\nid=data\ntype=ethernet\ninterface-name=eth1\n\n"
                                                "[ethernet]\nmtu=9000\n"}, "eth1",
                 (9000, NM_DIR + "data.nmconnection"), id="networkmanager"),
    pytest.param({NM_DIR + "data.nmconnection": "[connection]\ninterface-name=eth1\nautoconnect=false\n"
                                                "[ethernet]\nmtu=9000\n"}, "eth1", (None, None),
                 id="networkmanager-no-autoconnect"),
    pytest.param({"/etc/sysconfig/network-scripts/ifcfg-data": 'DEVICE=eth1\nONBOOT=yes\nMTU="9000"\n'}, "eth1",
                 (9000, "/etc/sysconfig/network-scripts/ifcfg-data"), id="ifcfg-device"),
    pytest.param({"/etc/sysconfig/network-scripts/ifcfg-eth1": "BOOTPROTO=none\nMTU=9000\n"}, "eth1",
                 (9000, "/etc/sysconfig/network-scripts/ifcfg-eth1"), id="ifcfg-file-name"),
    pytest.param({"/etc/sysconfig/network-scripts/ifcfg-eth1": "ONBOOT=no\nMTU=9000\n"}, "eth1", (None, None),
                 id="ifcfg-onboot-no"),
    pytest.param({"/etc/sysconfig/network-scripts/ifcfg-eth1.bak": "MTU=9000\n"}, "eth1", (None, None),
                 id="ifcfg-backup-ignored"),
    pytest.param({"/etc/network/interfaces": "source /etc/network/interfaces.d/*\n\nauto lo\niface lo inet loopback\n",
                  "/etc/network/interfaces.d/eth1": "auto eth1\niface eth1 inet static\n    address 192.0.2.2/24\n"
                                                    "    mtu 9000\n"}, "eth1",
                 (9000, "/etc/network/interfaces.d/eth1"), id="ifupdown"),
    pytest.param({"/etc/network/interfaces": "iface eth0 inet dhcp\n  mtu 1500\niface eth1 inet manual\n"
                                             "  post-up ip link set dev eth1 mtu 9000\n"}, "eth1",
                 (9000, "/etc/network/interfaces"), id="ifupdown-ip-link-hook"),
    pytest.param({"/etc/systemd/network/10-data.link": "[Match]\nOriginalName=eth1\n[Link]\nMTUBytes=9000\n"},
                 "eth1", (9000, "/etc/systemd/network/10-data.link"), id="udev-link-file"),
    pytest.param({"/etc/systemd/network/10-data.link": "[Match]\nOriginalName=eth1\n[Link]\nMTUBytes=1500\n",
                  "/etc/netplan/50.yaml": "network:\n  ethernets:\n    eth1:\n      mtu: 9000\n"},
                 "eth1", (9000, "/etc/netplan/50.yaml"), id="network-manager-config-beats-link-file"),
]


@pytest.mark.parametrize(("files", "netdev", "expected"), PERSISTENCE)
def test_persistent_mtu(files: dict[str, str], netdev: str, expected: tuple) -> None:
    assert persistent_mtu(files, netdev) == expected


def test_persistent_mtu_refuses_broken_netplan() -> None:
    with pytest.raises(ParseError, match="netplan"):
        persistent_mtu({"/etc/netplan/01.yaml": "network:\n  ethernets: [\n"}, "eth1")


def test_a_device_without_a_netdev_is_not_called_missing() -> None:
    check = run("interface", {"rdma_device": "mlx5_7", "persistent": False},
                {IP: IP_LINK, RDMA: sample("rdma-link-5-ib-polling.txt"), IBDEV: ""}).checks[0]
    assert "not found" not in check.message
    assert check.message.startswith(
        "RDMA device mlx5_7 has no netdev: `rdma link show` lists mlx5_7/1 (state DOWN, physical_state POLLING)")
