"""interface remedies: runtime `ip link set`, and the MTU persisted in the node's own backend.

Every edit is checked with the audit's own reader: after the edit, the boot config gives the netdev the
wanted MTU, from the file that was edited, and no other file was added beside it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from provisioner.apply import changes
from provisioner.parsers.boot_mtu import persistent_mtu
from provisioner.resources.base import HostContext
from provisioner.resources.interface_fix import ini_set, netplan_set_mtu, persist_edit
from provisioner.resources.steps import Step
from provisioner.run.transport import framed

from ._recorded import IP_LINK, NOT_FOUND, listing, sample
from ._recorded import fix as fix_steps

IP = "ip -j -d link show"
CONFIG = "/etc/netplan/"

NETWORKD_NO_MTU = "[Match]\nName=eth1\n\n[Network]\nAddress=198.19.1.2/24\n"

BACKENDS = [
    pytest.param({"/etc/systemd/network/10-data.network": NETWORKD_NO_MTU},
                 "/etc/systemd/network/10-data.network", id="networkd-adds-link-section"),
    pytest.param({"/etc/systemd/network/10-data.network":
                  "[Match]\nName=eth*\n\n[Link]\nMTUBytes=1500\nRequiredForOnline=no\n\n[Network]\nDHCP=no\n"},
                 "/etc/systemd/network/10-data.network", id="networkd-glob-replaces-value"),
    pytest.param({"/etc/netplan/50-cloud-init.yaml":
                  "network:\n  version: 2\n  ethernets:\n    eth1:\n      addresses: [198.19.1.2/24]\n"},
                 "/etc/netplan/50-cloud-init.yaml", id="netplan"),
    pytest.param({"/etc/netplan/01-a.yaml": "network:\n  ethernets:\n    data:\n      match: {name: eth1}\n"
                                            "      set-name: eth1\n      mtu: 1500\n"},
                 "/etc/netplan/01-a.yaml", id="netplan-match-set-name"),
    pytest.param({"/etc/NetworkManager/system-connections/data.nmconnection":
                  "[connection]\nid=data\ntype=ethernet\ninterface-name=eth1\n\n[ipv4]\nmethod=manual\n"},
                 "/etc/NetworkManager/system-connections/data.nmconnection", id="nm-keyfile"),
    pytest.param({"/etc/sysconfig/network-scripts/ifcfg-eth1": "DEVICE=eth1\nONBOOT=yes\nMTU=1500\n"},
                 "/etc/sysconfig/network-scripts/ifcfg-eth1", id="ifcfg"),
    pytest.param({"/etc/network/interfaces": "auto lo\niface lo inet loopback\n\nauto eth1\niface eth1 inet static\n"
                                             "    address 198.19.1.2/24\n"},
                 "/etc/network/interfaces", id="ifupdown-adds-mtu"),
    pytest.param({"/etc/network/interfaces": "iface eth1 inet manual\n  post-up ip link set eth1 mtu 1500\n"},
                 "/etc/network/interfaces", id="ifupdown-hook"),
    pytest.param({}, "/etc/systemd/network/10-fabnet-eth1.network", id="nothing-configures-it"),
    pytest.param({"/etc/netplan/01-mgmt.yaml": "network:\n  ethernets:\n    eth0: {dhcp4: true}\n"},
                 "/etc/netplan/90-fabnet-eth1.yaml", id="netplan-node-new-file"),
    pytest.param({"/etc/sysconfig/network-scripts/ifcfg-eth0": "DEVICE=eth0\n"},
                 "/etc/sysconfig/network-scripts/ifcfg-eth1", id="ifcfg-node-new-file"),
    pytest.param({"/etc/NetworkManager/system-connections/mgmt.nmconnection":
                  "[connection]\nid=mgmt\ninterface-name=eth0\n"},
                 "/etc/NetworkManager/system-connections/fabnet-eth1.nmconnection", id="nm-node-new-file"),
]


@pytest.mark.parametrize(("files", "edited"), BACKENDS)
def test_persist_edit_is_read_back_by_the_audit_from_that_file(files: dict[str, str], edited: str) -> None:
    path, text = persist_edit(files, "eth1", 9000)
    assert path == edited
    after = {**files, path: text}
    assert persistent_mtu(after, "eth1") == (9000, edited)
    assert set(after) - set(files) <= {edited}  # at most the one new file, never a second source


def test_persist_edit_keeps_other_settings() -> None:
    _, text = persist_edit({"/etc/systemd/network/10-data.network": NETWORKD_NO_MTU}, "eth1", 9000)
    assert "Address=198.19.1.2/24" in text and "[Match]\nName=eth1" in text


CLOUD_INIT = """\
# This file is generated from information provided by the datasource.  Changes
# to it will not persist across an instance reboot.
network:
    ethernets:
        data:
            dhcp4: false   # the data port: addresses from the fabric's IPAM
            match:
                macaddress: 52:54:00:12:34:56
            set-name: eth1
    version: 2
"""


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param(CLOUD_INIT, CLOUD_INIT.replace("            dhcp4:", "            mtu: 9000\n            dhcp4:"),
                 id="block-4-spaces-comments"),
    pytest.param("network:\n  ethernets:\n    eth1:\n      mtu: 1500  # old\n      addresses: [10.0.0.1/24]\n",
                 "network:\n  ethernets:\n    eth1:\n      mtu: 9000  # old\n      addresses: [10.0.0.1/24]\n",
                 id="value-replaced"),
    pytest.param("network:\n  ethernets:\n    eth1: {dhcp4: true}\n",
                 "network:\n  ethernets:\n    eth1: {dhcp4: true, mtu: 9000}\n", id="flow"),
    pytest.param("network:\n  ethernets:\n    eth1: {}\n", "network:\n  ethernets:\n    eth1: {mtu: 9000}\n",
                 id="flow-empty"),
    pytest.param("network:\n  ethernets:\n    eth1:\n  version: 2\n",
                 "network:\n  ethernets:\n    eth1:\n      mtu: 9000\n  version: 2\n", id="null"),
])
def test_netplan_edit_keeps_the_admins_text(text: str, expected: str) -> None:
    # Comments, key order, quoting and indentation stay; only the MTU line is new or changed.
    assert netplan_set_mtu(text, "eth1", 9000) == expected


def test_netplan_edit_through_anchors_stays_right() -> None:
    text = "network:\n  ethernets:\n    base: &b {dhcp4: true}\n    eth1:\n      <<: *b\n"
    edited = netplan_set_mtu(text, "eth1", 9000)
    assert edited is not None and persistent_mtu({"/etc/netplan/01.yaml": edited}, "eth1")[0] == 9000
    assert "base: &b {dhcp4: true}" in edited


def test_ini_set_replaces_in_place_and_adds_sections() -> None:
    assert ini_set("[Link]\nMTUBytes=1500\n[Network]\nDHCP=no\n", "Link", "MTUBytes", "9000") == \
        "[Link]\nMTUBytes=9000\n[Network]\nDHCP=no\n"
    assert ini_set("[Match]\nName=eth1\n", "Link", "MTUBytes", "9000") == \
        "[Match]\nName=eth1\n\n[Link]\nMTUBytes=9000\n"
    assert ini_set("[Match]\nName=eth1\n[Link]\nName=x\n\n[Network]\n", "Link", "MTUBytes", "9000") == \
        "[Match]\nName=eth1\n[Link]\nName=x\nMTUBytes=9000\n\n[Network]\n"


def test_drifted_mtu_gives_runtime_and_persist_steps() -> None:
    ip = IP_LINK.replace('"ifname":"eth1","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":9000',
                         '"ifname":"eth1","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":1500')
    steps = fix_steps("interface", {"name": "eth1", "mtu": 9000},
                      {IP: ip, CONFIG: listing({"/etc/systemd/network/10-data.network": NETWORKD_NO_MTU})})
    assert [s.action for s in steps] == ["mtu", "persist"]
    assert steps[0].command == "ip link set dev eth1 mtu 9000"
    # Put back only while the MTU is still the one set (or the old one): see the rollback test below.
    assert (steps[0].undo or "").endswith("else ip link set dev eth1 mtu 1500; fi")
    assert '[ "$__fn_u" != 9000 ] && [ "$__fn_u" != 1500 ]' in (steps[0].undo or "")
    assert steps[1].writes == ("/etc/systemd/network/10-data.network",)
    assert not steps[0].lockout


def test_management_interface_changes_are_marked_lockout() -> None:
    steps = fix_steps("interface", {"name": "eth0", "mtu": 9000, "persistent": False}, {IP: IP_LINK},
                      HostContext("gpu01", management_interfaces=("eth0",)))
    assert steps and all(s.lockout for s in steps)


def test_in_sync_interface_needs_nothing() -> None:
    assert fix_steps("interface", {"name": "eth1", "mtu": 9000},
                     {IP: IP_LINK, CONFIG: listing({"/etc/systemd/network/10-data.network":
                                                    NETWORKD_NO_MTU.replace("[Network]", "[Link]\nMTUBytes=9000\n"
                                                                            "[Network]")})}) == []


def test_absent_interface_cannot_be_fixed() -> None:
    steps = fix_steps("interface", {"name": "ens9", "mtu": 9000, "persistent": False}, {IP: IP_LINK})
    assert [s.action for s in steps] == ["find"] and "exit 3" in steps[0].command


def test_rdma_device_without_a_netdev_cannot_be_fixed_and_says_why() -> None:
    steps = fix_steps("interface", {"rdma_device": "mlx5_7", "mtu": 4092, "persistent": False},
                      {IP: IP_LINK, "rdma link show": sample("rdma-link-5-ib-polling.txt"), "ibdev2netdev": NOT_FOUND})
    assert [s.action for s in steps] == ["find"]
    assert "has no netdev" in steps[0].command and "no interface" not in steps[0].command


# `ip -o link show dev eth1` on a lab node, up at 9000 and down.
IP_O_UP = ("3: eth1@if10518: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc noqueue state UP mode DEFAULT "
           "group default qlen 1000\\    link/ether 02:fb:01:02:00:04 brd ff:ff:ff:ff:ff:ff link-netnsid 0")
IP_O_DOWN = ("3: eth1@if10518: <BROADCAST,MULTICAST> mtu 9000 qdisc noqueue state DOWN mode DEFAULT "
             "group default qlen 1000\\    link/ether 02:fb:01:02:00:04 brd ff:ff:ff:ff:ff:ff link-netnsid 0")


def _run_with_ip(steps: list[Step], shown: str, tmp_path: Path) -> tuple[list[str], list[str]]:
    """The change script run with an `ip` that shows `shown` and logs what it is asked to set:
    (step statuses, the `ip link set` calls)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "ip.log"
    (bin_dir / "ip").write_text(f"#!/bin/sh\nif [ \"$2\" = set ]; then echo \"$*\" >> {log}; exit 0; fi\n"
                                f"printf '%s\\n' {shlex.quote(shown)}\n")
    (bin_dir / "ip").chmod(0o755)
    holder = changes.Holder("20261123T000000Z-abc", "ops@control", "2026-11-23T00:00:00Z")
    script = changes.build_script(steps, "n0nce", holder.run_id, "gpu01", holder)
    proc = subprocess.run(["sh", "-s"], input=framed(script), capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    parsed = changes.parse_output(proc.stdout, "n0nce", len(steps))
    return [r.status for r in parsed.steps], (log.read_text().splitlines() if log.exists() else [])


@pytest.mark.parametrize(("live", "expected"), [
    pytest.param(IP_O_UP.replace("mtu 9000", "mtu 1500"), "ok", id="still-as-read"),
    pytest.param(IP_O_UP.replace("mtu 9000", "mtu 4200"), "conflict", id="set-by-hand-since"),
])
def test_an_mtu_set_by_hand_after_the_read_is_never_overwritten(host_dirs: Path, live: str, expected: str) -> None:
    ip = IP_LINK.replace('"ifname":"eth1","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":9000',
                         '"ifname":"eth1","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":1500')
    steps = fix_steps("interface", {"name": "eth1", "mtu": 9000, "persistent": False}, {IP: ip})
    assert [s.action for s in steps] == ["mtu"]
    statuses, calls = _run_with_ip(steps, live, host_dirs)
    assert statuses == [expected]
    assert calls == (["link set dev eth1 mtu 9000"] if expected == "ok" else [])


@pytest.mark.parametrize(("live", "expected"), [
    pytest.param(IP_O_DOWN, "ok", id="still-down"),
    pytest.param(IP_O_UP, "conflict", id="brought-up-by-hand-since"),
])
def test_a_link_state_changed_by_hand_after_the_read_is_left(host_dirs: Path, live: str, expected: str) -> None:
    ip = IP_LINK.replace('"ifname":"eth1","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":9000',
                         '"ifname":"eth1","flags":["BROADCAST","MULTICAST"],"mtu":9000')
    steps = fix_steps("interface", {"name": "eth1", "mtu": 9000, "state": "up", "persistent": False}, {IP: ip})
    assert [s.action for s in steps] == ["link"]
    statuses, calls = _run_with_ip(steps, live, host_dirs)
    assert statuses == [expected]
    assert calls == (["link set dev eth1 up"] if expected == "ok" else [])
