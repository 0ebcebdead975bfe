"""`ethtool -S` as drivers print it: names with brackets, colons, dots and spaces, tab or space indentation,
a missing header, two readings, and what ethtool prints when there are no statistics."""

from __future__ import annotations

import pytest

from provisioner.errors import ParseError
from provisioner.parsers import parse
from provisioner.parsers.ethtool_stats import parse_ethtool_stats

from ._samples import read, rejected, samples_of

# (sample, how many counters, counters an operator would look up, with the value printed)
SAMPLES = [
    ("ethtool-S-1-mlx5-discards-phy-cut.txt", 101, {
        "rx_discards_phy": 58591428329, "rx_out_of_buffer": 990473555, "tx_pause_ctrl_phy": 5745055,
        "tx_global_pause_duration": 771103810, "rx_prio0_discards": 58591314012, "tx_errors_phy": 0,
    }),
    ("ethtool-S-2-bnxt_en-rings-tabs.txt", 397, {
        "[0]: rx_discards": 0, "[7]: missed_irqs": 0, "rx_stat_discard": 14, "tx_err": 12,
        "link_down_events": 2, "rx_pfc_ena_frames_pri3": 0, "pfc_pri3_rx_duration_us": 0,
        "rx_buffer_passed_threshold": 417, "tx_packets_pri7": 0,
    }),
    ("ethtool-S-3-ice-dot-nic.txt", 602, {
        "rx_dropped": 0, "rx_queue_0_packets": 487528, "tx_queue_127_bytes": 0, "rx_crc_errors.nic": 0,
        "fdir_sb_status.nic": 1, "tx_priority_3_xoff.nic": 0, "rx_priority_7_xoff.nic": 0,
    }),
    ("ethtool-S-4-bnx2x-queues-spaces-no-header.txt", 189, {
        "[0]: rx_bytes": 209487403324, "[1]: rx_bytes": 207561754146, "Tx LPI entry count": 0,
    }),
    ("ethtool-S-5-mlx5-cx4lx-4.15-no-indent.txt", 751, {
        "rx_discards_phy": 0, "rx_out_of_buffer": 0, "tx_pci_signal_integrity": 34,
        "rx_prio0_packets": 845715962, "tx_prio0_bytes": 2662454044895, "rx_prio7_packets": 0,
        "rx_global_pause_transition": 0, "rx_8192_to_10239_bytes_phy": 141701654, "tx15_xmit_more": 5530,
    }),
    ("ethtool-S-6-mlx5-grep-prio-byteps.txt", 32, {
        "rx_prio0_bytes": 88034564921216, "rx_prio0_packets": 419873392068, "tx_prio0_bytes": 13906677385186,
        "tx_prio0_packets": 40177770079, "rx_prio3_bytes": 0, "tx_prio3_packets": 0, "tx_prio7_packets": 0,
    }),
    ("ethtool-S-7-gve-bracket-queue-suffix.txt", 112, {
        "rx_bytes": 252265, "rx_bytes[0]": 167896, "tx_bytes[1]": 26256, "adminq_prod_cnt": 18,
    }),
]


def test_every_ethtool_sample_is_in_the_table() -> None:
    assert sorted(name for name, _, _ in SAMPLES) == samples_of("ethtool_stats")


@pytest.mark.parametrize(("name", "count", "values"), SAMPLES, ids=[s[0] for s in SAMPLES])
def test_real_outputs(name: str, count: int, values: dict[str, int]) -> None:
    facts = parse_ethtool_stats(read(name))
    assert (facts.complete, facts.missing, facts.unplaced, facts.repeated) == (True, [], [], [])
    assert len(facts.counters) == count
    assert {key: facts.counters.get(key) for key in values} == values
    assert facts.interval_s is None and facts.later == {}


def test_per_ring_names_keep_their_ring_and_only_the_last_colon_splits() -> None:
    counters = parse_ethtool_stats(read("ethtool-S-2-bnxt_en-rings-tabs.txt")).counters
    rings = {name for name in counters if name.endswith(": rx_ucast_packets")}
    assert rings == {f"[{n}]: rx_ucast_packets" for n in range(8)}
    assert counters["[6]: rx_ucast_packets"] == 635525358


@pytest.mark.parametrize(("line", "name", "value"), [
    ("     rx_queue_0_packets: 487528", "rx_queue_0_packets", 487528),
    ("     [0]: rx_packets: 12", "[0]: rx_packets", 12),
    ("     tx-0.packets: 7", "tx-0.packets", 7),
    ("     rxq0: rx_bytes: 176801946854589", "rxq0: rx_bytes", 176801946854589),
    ("\t\tTx LPI entry count: 0", "Tx LPI entry count", 0),
    ("     rx_bytes.nic:   18446744073709551615", "rx_bytes.nic", 18446744073709551615),
])
def test_line_shapes(line: str, name: str, value: int) -> None:
    assert parse_ethtool_stats(f"NIC statistics:\n{line}\n").counters == {name: value}


@pytest.mark.parametrize(("text", "words"), [
    ("Cannot get stats strings information: Operation not supported\n", "ethtool printed no statistics"),
    ("no stats available\n", "no stats available"),
    ("netlink error: No such device\n", "netlink error"),
    ("Cannot get driver information: No such device\n", "Cannot get driver information"),
    ("eth0: flags=4163<UP,BROADCAST,RUNNING,MULTICAST>  mtu 1500\n", "not an unsigned integer"),
    ("", "no 'NIC statistics:'"),
])
def test_output_that_is_not_statistics_is_a_parse_error(text: str, words: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_ethtool_stats(text)
    assert words in str(info.value)
    assert info.value.kind == "ethtool_stats"


@pytest.mark.parametrize(("text", "line", "reason"), [
    ("NIC statistics:\n     rx_packets: 12\n     rx_bytes: 1e3\n", 3, "not an unsigned integer: '1e3'"),
    ("NIC statistics:\n     rx_packets: 12\n     rx_dropped: -1\n", 3, "not an unsigned integer: '-1'"),
    ("NIC statistics:\n     rx_packets: 12\nNIC statistics:\n     rx_packets: 13\n", 3, "a second 'NIC statistics:'"),
    ("NIC statistics:\n     rx_packets: 12\n     : 4\n     tx_packets: 1\n", 3, "expected 'NAME: VALUE'"),
])
def test_lines_that_fit_nowhere_are_named(text: str, line: int, reason: str) -> None:
    where, why = rejected(parse_ethtool_stats, text)
    assert where == line and reason in why


@pytest.mark.parametrize(("text", "missing"), [
    ("NIC statistics:\n", "the counters after 'NIC statistics:' (line 1)"),
    ("NIC statistics:\n     rx_packets: 12\n     rx_disc", "the rest of line 3 ('rx_disc')"),
    ("NIC statistics:\n     rx_packets: 12\n     rx_discards_phy:", "the rest of line 3 ('rx_discards_phy:')"),
    ("NIC statistics:\n     rx_packets: 12\n@@interval 2\n", "the second reading, 2 s after the first"),
    ("NIC statistics:\n     rx_packets: 12\n@@interval 2\nNIC statistics:\n",
     "the counters after 'NIC statistics:' (line 4)"),
])
def test_cut_output_is_incomplete(text: str, missing: str) -> None:
    facts = parse_ethtool_stats(text)
    assert facts.complete is False and missing in facts.missing


def test_two_readings_around_an_interval() -> None:
    first = read("ethtool-S-1-mlx5-discards-phy-cut.txt")
    second = first.replace("rx_discards_phy: 58591428329", "rx_discards_phy: 58591429329")
    facts = parse_ethtool_stats(first + "@@interval 2\n" + second)
    assert facts.complete and facts.interval_s == 2.0
    assert (facts.counters["rx_discards_phy"], facts.later["rx_discards_phy"]) == (58591428329, 58591429329)


def test_a_name_printed_twice_is_listed() -> None:
    facts = parse_ethtool_stats("NIC statistics:\n     rx_errors: 1\n     rx_errors: 2\n")
    assert facts.repeated == ["rx_errors"] and facts.counters == {"rx_errors": 2}


def test_a_pasted_prompt_is_not_a_counter() -> None:
    text = "$ ethtool -S eth0\n" + read("ethtool-S-3-ice-dot-nic.txt")
    assert parse("ethtool_stats", text)["counters"]["rx_unicast"] == 12117448


def test_mlx5_lines_with_no_indentation_and_no_header_read_whole() -> None:
    # A capture kept without ethtool's header and indentation: every line is still a counter, the per-priority
    # ones for all eight priorities (mlx5 prints rx_prioN_pause only for priorities with PFC on).
    counters = parse_ethtool_stats(read("ethtool-S-5-mlx5-cx4lx-4.15-no-indent.txt")).counters
    assert {f"rx_prio{p}_bytes" for p in range(8)} <= set(counters)
    assert not any(name.endswith("_pause") and name.startswith("rx_prio") for name in counters)
    assert counters["rx_bytes_phy"] == 2202570777997 and counters["rx_packets_phy"] == 845715962


def test_mlx5_per_priority_lines_grepped_from_the_output_read_as_counters() -> None:
    # `ethtool -S IFACE | grep prio` keeps ethtool's indentation but not its header: each line is still one
    # counter, named as mlx5 names it, for every priority and both directions.
    counters = parse_ethtool_stats(read("ethtool-S-6-mlx5-grep-prio-byteps.txt")).counters
    expected = {f"{way}_prio{p}_{what}" for way in ("rx", "tx") for p in range(8) for what in ("bytes", "packets")}
    assert set(counters) == expected
    # Only priority 0 carried traffic: RoCE on this port was not classed onto a lossless priority.
    assert {name for name, value in counters.items() if value} == {
        "rx_prio0_bytes", "rx_prio0_packets", "tx_prio0_bytes", "tx_prio0_packets"}
