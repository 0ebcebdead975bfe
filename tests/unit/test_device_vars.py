"""Interface, RDMA device and sysfs names from the inventory and the playbook, checked when they load, and
the pre-flight's MTU read that must not hand a file's text to shell arithmetic."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from provisioner.errors import ConfigError
from provisioner.load.hostplans import resolve
from provisioner.load.inventory import load_inventory
from provisioner.load.playbook import load_playbook
from provisioner.load.specs import PortCountersSpec
from provisioner.smoke import preflight
from provisioner.smoke.targets import targets_from_plans
from tests.unit.smoke._helpers import target


def _inventory(tmp_path: Path, host_vars: dict[str, object]) -> Path:
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"hosts": {"gpu01": {"ansible_host": "192.0.2.1", **host_vars}}}},
                    sort_keys=False))
    return path


@pytest.mark.parametrize(("var", "value", "words"), [
    ("data_iface", "../../etc", "invalid interface name"),
    ("data_iface", "eth1/../../x", "invalid interface name"),
    ("data_iface", "..", "invalid interface name"),
    ("data_iface", "eth1; reboot", "must not contain"),
    ("data_iface", "$(reboot)", "must not contain"),
    ("data_iface", "-eth1", "must not start with '-'"),
    ("data_iface", "ens1f0np0-longer", "1..15 characters"),
    ("data_iface", "eth 1", "whitespace"),
    ("fabnet_data_ifaces", "eth1,../x", "invalid interface name"),
    ("fabnet_data_ifaces", ["eth1", "a[$(id)]"], "must not contain"),
    ("fabnet_management_interfaces", ["eth0", "../../etc"], "invalid interface name"),
    ("fabnet_management_interfaces", "{{ mgmt }}", "must not contain"),
    ("fabnet_sysfs_root", "/srv/../etc", "'..' parts"),
    ("fabnet_sysfs_root", "sysfs", "absolute"),
    ("fabnet_sysfs_root", "/srv/x;reboot", "must not contain"),
])
def test_bad_device_vars_are_refused_with_file_line_and_key(tmp_path: Path, var: str, value: object,
                                                            words: str) -> None:
    path = _inventory(tmp_path, {var: value})
    with pytest.raises(ConfigError) as info:
        load_inventory(path)
    error = info.value
    assert error.file == str(path) and error.line == 5, str(error)
    assert error.key is not None and error.key.endswith(var)
    assert words in error.message and var in error.message


def test_ordinary_device_vars_load(tmp_path: Path) -> None:
    path = _inventory(tmp_path, {
        "data_iface": "ens1f0np0", "fabnet_data_ifaces": "eth1, bond0.100,ib0", "fabnet_sysfs_root": "/srv/sys/",
        "fabnet_management_interfaces": ["eth0", "enp3s0f1"], "rail": 2,
    })
    assert load_inventory(path).hosts["gpu01"].vars["data_iface"] == "ens1f0np0"
    # A templated data interface is checked where it is rendered (the playbook's interface: fields).
    templated = _inventory(tmp_path, {"data_iface": "ens{{ rail }}f0", "rail": 2,
                                      "fabnet_data_ifaces": ["{{ data_iface }}", "eth2"]})
    assert load_inventory(templated).hosts["gpu01"].vars["data_iface"] == "ens{{ rail }}f0"


@pytest.mark.parametrize("device", ["..", "../../../etc", "-x", "mlx5_0/../..", "mlx5_0; reboot", "a" * 64])
def test_port_counters_device_is_an_rdma_device_name(device: str) -> None:
    with pytest.raises(ValidationError):
        PortCountersSpec.model_validate({"device": device, "max": {"symbol_error": 0}})
    assert PortCountersSpec.model_validate({"device": "mlx5_0", "max": {"symbol_error": 0}}).device == "mlx5_0"


def test_nccl_socket_ifname_entries_that_are_no_interface_are_not_used_as_one(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    gpu01:\n      ansible_host: 192.0.2.1\n")
    playbook = tmp_path / "site.yml"
    playbook.write_text("- hosts: all\n  resources:\n    - file:\n        path: /etc/nccl.conf\n"
                        "        content: \"NCCL_SOCKET_IFNAME=eth1,../../etc,a[$(id)]\\n\"\n")
    (found,) = targets_from_plans(resolve(load_playbook(playbook), load_inventory(inventory)))
    assert found.data_ifaces == ("eth1",)
    # The pre-flight still names the entries that name no interface on the host.
    facts = {"gpu01": preflight.HostFacts("gpu01", ifaces={"eth1": preflight.Iface("eth1", 9000, True)})}
    message = " ".join(f.message for f in preflight.check_env([found], facts))
    assert "'../../etc'" in message and "a[$(id)]" in message


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash, where $(( )) runs commands in subscripts")
@pytest.mark.parametrize(("content", "size"), [
    ("9000\n", 8972), ("1500", 1472),
    ("a[$(touch MARKER)]", 1472), ("x[`touch MARKER`]", 1472), ("9000 + $(touch MARKER)", 1472),
    ("", 1472), ("09000", 1472), ("99999999999999999999", 1472), ("-1", 1472),
])
def test_the_mtu_read_never_reaches_arithmetic_unless_it_is_a_number(tmp_path: Path, content: str,
                                                                     size: int) -> None:
    marker = tmp_path / "ran"
    mtu = tmp_path / "mtu"
    mtu.write_text(content.replace("MARKER", str(marker)))
    command = preflight.probes(target("gpu01"), [("gpu02", "198.19.1.2")], facts=False)["ping"].command
    assert "/sys/class/net/eth1/mtu" in command
    # The node's sysfs file is this test's file; ping always answers.
    stubs = f"cat() {{ command cat {str(mtu)!r}; }}; ping() {{ return 0; }}\n"
    done = subprocess.run(["bash", "-c", stubs + command], capture_output=True, text=True, timeout=30, check=False)
    assert not marker.exists(), "the file's content ran a command"
    assert done.stdout.split() == ["gpu02", "0", "0", str(size), "0"], done
