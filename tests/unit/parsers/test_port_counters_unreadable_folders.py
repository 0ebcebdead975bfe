"""A whole counters folder the reader could not read: its set is kept and the folder named with the reason, so a
counter it would hold is unreadable rather than absent. Listings are the recorded mlx5 and EFA ones with one
folder's lines replaced by the complaint GNU grep prints for it (`grep -r` names the folder it could not open)."""

from __future__ import annotations

import pytest

from provisioner.parsers.port_counters import parse_port_counters

from ._samples import read

MLX5 = [line for line in read("port-counters-sysfs-3-procfs-mlx5-hfi1-mlx4.txt").splitlines()
        if line.startswith("mlx5_0/")]


def _without(prefix: str, complaint: str) -> str:
    kept = [line for line in MLX5 if not line.startswith(prefix)]
    return "\n".join([complaint, *kept]) + "\n"


@pytest.mark.parametrize("reason", ["Permission denied", "Input/output error", "Too many levels of symbolic links"])
def test_an_unreadable_counters_folder_makes_its_counters_unreadable(reason: str) -> None:
    facts = parse_port_counters(_without("mlx5_0/ports/1/counters/", f"grep: mlx5_0/ports/1/counters: {reason}"))
    assert facts.complete and not facts.unplaced and facts.absent == []
    [port] = facts.ports
    assert port.unreadable_folders == {"counters": reason}
    assert port.counters == {} and port.hw_counters["local_ack_timeout_err"] == 131
    assert port.unread_folder("symbol_error") == ("mlx5_0/ports/1/counters", reason)
    # A driver counter lives in hw_counters/, which was read: one it lacks is still absent, one it has is read.
    assert port.unread_folder("rx_discards_phy") is None and port.unread_folder("out_of_buffer") is None


def test_an_unreadable_hw_counters_folder_leaves_the_pma_counters_read() -> None:
    facts = parse_port_counters(_without("mlx5_0/ports/1/hw_counters/",
                                         "grep: mlx5_0/ports/1/hw_counters: Permission denied"))
    [port] = facts.ports
    assert port.value("symbol_error") == 0 and port.unread_folder("symbol_error") is None
    assert port.unread_folder("out_of_buffer") == ("mlx5_0/ports/1/hw_counters", "Permission denied")


def test_a_port_whose_only_folder_failed_is_still_listed() -> None:
    text = "grep: mlx5_0/ports/1/counters: Permission denied\ngrep: */ports/*/hw_counters: No such file or directory\n"
    facts = parse_port_counters(text)
    assert facts.complete and [(p.device, p.port, p.unreadable_folders) for p in facts.ports] == [
        ("mlx5_0", 1, {"counters": "Permission denied"})]
    assert facts.absent == ["*/ports/*/hw_counters"]


def test_a_devices_own_folder_and_absolute_paths() -> None:
    efa = [line for line in read("port-counters-sysfs-4-efa-device-hw-counters.txt").splitlines() if line.strip()]
    ports = [line.replace("efa_0/hw_counters/", "efa_0/ports/1/hw_counters/") for line in efa]
    text = "\n".join(["grep: /sys/class/infiniband/efa_0/hw_counters/: Input/output error", *ports]) + "\n"
    facts = parse_port_counters(text)
    assert facts.complete and not facts.unplaced
    [device] = facts.devices
    assert (device.device, device.hw_counters, device.unreadable_folders) == ("efa_0", {},
                                                                              {"hw_counters": "Input/output error"})
    assert device.unread_folder("cmds_err") == ("efa_0/hw_counters", "Input/output error")
    assert facts.ports[0].value("rx_drops") == 0


def test_a_missing_folder_is_still_absent() -> None:
    facts = parse_port_counters(_without("mlx5_0/ports/1/counters/",
                                         "grep: mlx5_0/ports/1/counters: No such file or directory"))
    assert facts.absent == ["mlx5_0/ports/1/counters"] and facts.ports[0].unreadable_folders == {}
