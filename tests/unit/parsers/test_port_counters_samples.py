"""Port counters as real machines print them: values the kernel could not read, counters stuck at the top
of their width, files the reader could not open or find, and a listing cut inside its last line."""

from __future__ import annotations

import re

import pytest

from provisioner.parsers import parse
from provisioner.parsers.port_counters import parse_perfquery, parse_port_counters

from ._samples import read


def test_iwarp_counters_without_a_pma_are_unreadable_not_zero() -> None:
    facts = parse_port_counters(read("port-counters-sysfs-2-iwarp-no-pma.txt"))
    assert facts.complete is True and not facts.unplaced
    [port] = facts.ports
    assert (port.device, port.port) == ("i40iw0", 1)
    assert port.counters == {} and port.hw_counters == {}
    assert port.unreadable["link_downed"] == "N/A (no PMA)"
    assert len(port.unreadable) == 8
    assert port.value("link_downed") is None and port.value("port_rcv_errors") is None


# Values of mlx5_1 port 1 as listed in https://github.com/leptonai/gpud/pull/943 (one `cat` per file under
# /sys/class/infiniband/mlx5_1/ports/1/counters): link_downed 255 (8 bits), port_xmit_discards 65535
# (16 bits), port_xmit_wait 4294967295 (32 bits) and excessive_buffer_overrun_errors 15 (4 bits) are each at
# their ceiling; the rest counted on.
_GPUD_943 = {
    "unicast_rcv_packets": 240037171331, "port_xmit_data": 205143497464492, "port_xmit_constraint_errors": 0,
    "VL15_dropped": 0, "port_rcv_errors": 0, "port_xmit_wait": 4294967295, "link_error_recovery": 0,
    "excessive_buffer_overrun_errors": 15, "port_rcv_data": 205128687774249, "link_downed": 255,
    "local_link_integrity_errors": 0, "port_xmit_discards": 65535, "port_rcv_switch_relay_errors": 2,
    "port_xmit_packets": 242071897216, "symbol_error": 0,
}


def _grep_lines(values: dict[str, int], device: str = "mlx5_1", port: int = 1) -> str:
    return "".join(f"{device}/ports/{port}/counters/{name}:{value}\n" for name, value in values.items())


def test_counters_at_the_ceiling_of_their_width_are_saturated() -> None:
    [port] = parse_port_counters(_grep_lines(_GPUD_943)).ports
    assert sorted(port.saturated) == ["excessive_buffer_overrun_errors", "link_downed", "port_xmit_discards",
                                      "port_xmit_wait"]
    assert port.value("port_xmit_wait") == 4294967295  # the value stays readable; `saturated` says what it means


@pytest.mark.parametrize(("name", "value", "stuck"), [
    ("symbol_error", 65535, True), ("symbol_error", 65534, False), ("symbol_error", 4294967295, False),
    ("port_rcv_errors", 65535, True), ("link_error_recovery", 255, True), ("local_link_integrity_errors", 15, True),
    ("port_xmit_data", 4294967295, True), ("port_xmit_data", 4294967296, False),
    ("port_rcv_packets", 18446744073709551615, True), ("out_of_buffer", 4294967295, True),
    ("np_cnp_sent", 65535, False),
])
def test_saturation_follows_the_width_the_kernel_gives_each_counter(name: str, value: int, stuck: bool) -> None:
    # Widths from drivers/infiniband/core/sysfs.c (PORT_PMA_ATTR table); hw_counters are 64-bit driver values.
    group = "hw_counters" if name in {"out_of_buffer", "np_cnp_sent"} else "counters"
    [port] = parse_port_counters(f"mlx5_0/ports/1/{group}/{name}:{value}\n").ports
    assert (name in port.saturated) is stuck


def test_extended_perfquery_is_not_held_to_the_narrow_widths() -> None:
    # perfquery -x reads PortCountersExtended: its data counters are 64 bits wide.
    text = re.sub(r"(?m)^(PortXmitData:\.+)[0-9]+$", r"\g<1>4294967295", read("perfquery-x-1.txt"), count=1)
    facts = parse_perfquery(text)
    assert facts.ports[0].counters["port_xmit_data"] == 4294967295
    assert all(not port.saturated for port in facts.ports)
    classic = re.sub(r"(?m)^(SymbolErrorCounter:\.+)0$", r"\g<1>65535", read("perfquery-2.txt"))
    assert parse_perfquery(classic).ports[0].saturated == ["symbol_error"]


def test_read_errors_kept_from_stderr_name_the_counter_and_never_read_zero() -> None:
    # GNU grep reports a file it cannot read as `grep: FILE: strerror` (src/grep.c, suppressible_error).
    text = ("mlx5_0/ports/1/counters/symbol_error:0\n"
            "grep: mlx5_0/ports/1/hw_counters/rx_icrc_encapsulated: Permission denied\n"
            "grep: mlx5_0/ports/1/counters/port_rcv_errors: Invalid argument\n"
            "grep: */ports/*/*counters/np_cnp_sent: No such file or directory\n"
            "grep: mlx5_0/ports/1/hw_counters: No such file or directory\n")
    facts = parse_port_counters(text)
    assert facts.complete is True and not facts.unplaced
    [port] = facts.ports
    assert port.unreadable == {"rx_icrc_encapsulated": "Permission denied", "port_rcv_errors": "Invalid argument"}
    assert port.value("port_rcv_errors") is None and port.value("symbol_error") == 0
    assert facts.absent == ["*/ports/*/*counters/np_cnp_sent", "mlx5_0/ports/1/hw_counters"]


def test_a_read_error_about_some_other_file_is_unplaced() -> None:
    facts = parse_port_counters("mlx5_0/ports/1/counters/symbol_error:0\ngrep: /etc/shadow: Permission denied\n")
    assert [u.line for u in facts.unplaced] == [2]


@pytest.mark.parametrize("tail", [
    "/sys/class/infiniband/i40iw0/ports/1/counters/link_dow",
    "/sys/class/infiniband/i40iw0/ports/1/counters/link_downed:",
    "/sys/class/infiniband/i40iw0/ports/1/coun",
    "/sys/class/infiniband/i40iw0/ports",
])
def test_a_listing_cut_inside_its_last_line_is_incomplete(tail: str) -> None:
    text = read("port-counters-sysfs-1.txt") + tail
    facts = parse("port_counters", text)
    assert facts["complete"] is False
    assert facts["missing"] == [f"the rest of line 5 ({tail!r})"]


def test_a_bad_value_mid_listing_is_unplaced_not_a_cut() -> None:
    text = "mlx5_0/ports/1/counters/symbol_error:lots\n" + read("port-counters-sysfs-1.txt")
    facts = parse("port_counters", text)
    assert facts["complete"] is True
    assert [u["line"] for u in facts["unplaced"]] == [1]


def test_counter_files_of_an_mlx5_an_hfi1_and_a_two_port_mlx4_are_read_whole() -> None:
    facts = parse_port_counters(read("port-counters-sysfs-3-procfs-mlx5-hfi1-mlx4.txt"))
    assert facts.complete is True and not facts.unplaced and not facts.absent
    ports = {(p.device, p.port): p for p in facts.ports}
    assert sorted(ports) == [("hfi1_0", 1), ("mlx4_0", 1), ("mlx4_0", 2), ("mlx5_0", 1)]
    assert [len(ports[k].counters) for k in sorted(ports)] == [17, 17, 17, 21]
    mlx5 = ports[("mlx5_0", 1)]
    assert len(mlx5.hw_counters) == 25 and not mlx5.unreadable and not mlx5.saturated
    # Past 32 bits (the extended PortCounters the kernel serves when the device has them), read whole.
    assert mlx5.value("port_xmit_data") == 2880761508848 and mlx5.value("port_xmit_packets") == 10907922116
    assert (mlx5.value("local_ack_timeout_err"), mlx5.value("out_of_sequence"), mlx5.value("req_cqe_error"),
            mlx5.value("roce_slow_restart_cnps")) == (131, 1, 3481, 131)
    assert ports[("mlx4_0", 2)].value("port_xmit_wait") == 3846
    assert ports[("hfi1_0", 1)].hw_counters == {}


def test_hw_counter_names_are_the_file_names_whatever_their_punctuation() -> None:
    # hfi1 names its 32-bit hw_counters files `NAME,32` (init_cntrs in drivers/infiniband/hw/hfi1/chip.c); a
    # find over one such port lists `/sys/class/infiniband/hfi1_0/ports/1/hw_counters/SwLinkUp,32`
    # (github.com/prometheus/node_exporter/issues/2023).
    text = ("hfi1_0/ports/1/hw_counters/RcResend:2079\nhfi1_0/ports/1/hw_counters/SwLinkUp,32:3\n"
            "grep: hfi1_0/ports/1/hw_counters/TxLinkdownErr,32: Invalid argument\n")
    facts = parse_port_counters(text)
    assert not facts.unplaced
    [port] = facts.ports
    assert port.hw_counters == {"RcResend": 2079, "SwLinkUp,32": 3}
    assert port.unreadable == {"TxLinkdownErr,32": "Invalid argument"}
