"""Counters a driver keeps for the whole device (`DEVICE/hw_counters`), beside or instead of a port's."""

from __future__ import annotations

from provisioner.parsers.port_counters import parse_port_counters

from ._samples import read


def test_efa_device_counters_are_the_devices_not_a_ports() -> None:
    facts = parse_port_counters(read("port-counters-sysfs-4-efa-device-hw-counters.txt"))
    assert facts.complete is True and not facts.unplaced
    assert facts.ports == []  # no line names a port: nothing may be invented for one
    [device] = facts.devices
    assert device.device == "efa_0"
    assert len(device.hw_counters) == 26
    assert device.value("cmds_err") == 0 and device.value("submitted_cmds") == 108
    assert device.value("keep_alive_rcvd") == 87 and device.value("lifespan") == 12


def test_device_and_port_lines_of_one_device_are_kept_apart() -> None:
    # The layout since EFA split its stats: the device's under hw_counters, the port's under ports/1.
    text = ("/sys/class/infiniband/efa_0/hw_counters/cmds_err:2\n"
            "/sys/class/infiniband/efa_0/hw_counters/submitted_cmds:108\n"
            "/sys/class/infiniband/efa_0/ports/1/hw_counters/rdma_read_wr_err:5\n"
            "/sys/class/infiniband/efa_0/ports/1/hw_counters/rx_drops:0\n")
    facts = parse_port_counters(text)
    assert facts.complete is True
    [port] = facts.ports
    assert (port.device, port.port) == ("efa_0", 1)
    assert port.hw_counters == {"rdma_read_wr_err": 5, "rx_drops": 0}
    assert [(d.device, d.hw_counters) for d in facts.devices] == [("efa_0", {"cmds_err": 2, "submitted_cmds": 108})]


def test_a_port_named_like_a_device_is_still_a_port() -> None:
    # `mlx5_0/ports/1/hw_counters/x` must not read as the device-level hw_counters of a device called `1`.
    facts = parse_port_counters("mlx5_0/ports/1/hw_counters/out_of_buffer:3\n")
    assert facts.devices == [] and [(p.device, p.port) for p in facts.ports] == [("mlx5_0", 1)]


def test_hfi1_device_counter_names_keep_their_width_suffix_and_inner_blanks() -> None:
    # hfi1's device counters as /sys/class/infiniband/hfi1_0/hw_counters lists them in
    # https://github.com/prometheus/node_exporter/issues/2023 (names; the values here are made up).
    text = ("hfi1_0/hw_counters/CceMiscInt,32:0\nhfi1_0/hw_counters/Pio Reserved 30:0\n"
            "hfi1_0/hw_counters/RcvOverflow,32:4294967295\nhfi1_0/hw_counters/DcXmitFlits:123\n")
    facts = parse_port_counters(text)
    assert facts.complete is True and not facts.unplaced
    [device] = facts.devices
    assert device.hw_counters == {"CceMiscInt,32": 0, "Pio Reserved 30": 0, "RcvOverflow,32": 4294967295,
                                  "DcXmitFlits": 123}
    assert device.saturated == ["RcvOverflow,32"]  # a 32-bit counter at its top counts no more


def test_a_rate_check_reads_the_device_counters_twice() -> None:
    text = "efa_0/hw_counters/cmds_err:1\n@@interval 2\nefa_0/hw_counters/cmds_err:4\n"
    facts = parse_port_counters(text)
    assert facts.interval_s == 2.0
    assert facts.devices[0].value("cmds_err") == 1 and facts.later_devices[0].value("cmds_err") == 4


def test_an_unreadable_device_counter_is_not_a_zero() -> None:
    text = ("efa_0/hw_counters/cmds_err:N/A (no PMA)\n"
            "grep: efa_0/hw_counters/mmap_err: Permission denied\n"
            "grep: */hw_counters/RcvOverflow,32: No such file or directory\n")
    facts = parse_port_counters(text)
    [device] = facts.devices
    assert device.value("cmds_err") is None and device.unreadable == {"cmds_err": "N/A (no PMA)",
                                                                     "mmap_err": "Permission denied"}
    assert facts.absent == ["*/hw_counters/RcvOverflow,32"]


def test_a_device_line_cut_before_its_value_makes_the_listing_incomplete() -> None:
    facts = parse_port_counters("efa_0/hw_counters/cmds_err:0\nefa_0/hw_counters/mmap_e")
    assert facts.complete is False and facts.missing
