"""NCCL_DEBUG=INFO logs."""

from __future__ import annotations

import pytest

from provisioner.errors import ParseError
from provisioner.parsers.nccl_debug import parse_nccl_debug

from ._samples import read


def test_net_lines_sample_four_transports() -> None:
    log = parse_nccl_debug(read("nccl-debug-net-lines-1.txt"))
    assert log.net_transports == ["FastSocket", "IB", "Socket"]
    assert log.network == "Socket"  # no `Using network`: the last NET/X : Using line
    assert log.ib_devices == [f"mlx5_{i}:1/IB" for i in range(8)] + ["mlx5_bond_0:1/RoCE"]
    assert log.ib_relaxed_ordering is True
    assert log.oob_interfaces == ["eno1:101.262.0.9", "ibp25s0:10.0.12.82"]
    assert log.socket_interfaces[:2] == ["ibs108:10.0.19.12", "ibs109:10.0.19.13"]
    assert log.socket_interfaces[-1] == "eth0:10.0.0.23"
    assert len(log.socket_interfaces) == 9
    assert log.log_lines == 4
    assert log.hosts == []  # bare `NCCL INFO` lines carry no host prefix
    assert log.unplaced == []


def test_debug_2_mixed_ib_roce_and_wrapped_warning() -> None:
    log = parse_nccl_debug(read("nccl-debug-2.txt"))
    assert log.network == "IB"
    assert log.ib_devices == ["ibP111p0s0:1/IB", "rdmaP1111p0s2:1/RoCE"]
    assert log.oob_interfaces == ["eth0:10.2.0.4"]
    assert log.warnings == [
        "NET/IB : Got completion from peer 10.2.0.5<33092> with error 12, opcode 0, len 0, vendor err 129 (Recv)"
    ]
    assert log.hosts == ["node-2"]
    assert log.unplaced == []  # the wrapped tail is part of the warning
    assert log.log_lines == 5


def test_debug_3_socket_with_host_prefix() -> None:
    log = parse_nccl_debug(read("nccl-debug-3.txt"))
    assert (log.network, log.socket_interfaces, log.hosts) == ("Socket", ["enp67s0:192.168.50.21"], ["DeepWhite"])
    assert log.ib_devices == []


def test_debug_4_no_ib_device_falls_back_to_socket() -> None:
    log = parse_nccl_debug(read("nccl-debug-4.txt"))
    assert (log.nccl_version, log.cuda_version) == ("2.19.3", "12.3")
    assert log.cuda_driver_version == 12000
    assert log.network == "Socket"
    assert log.bootstrap == ["ens7:10.128.0.33"]
    assert log.socket_interfaces == ["ens7:10.128.0.33"]
    assert log.plugins == [
        "NET/Plugin: Failed to find ncclNetPlugin_v7 symbol.",
        "NET/Plugin: Failed to find ncclNetPlugin symbol (>= v5). ncclNetPlugin symbols v4 and lower are not "
        "supported.",
        "Using non-device net plugin version 0",
    ]
    assert log.warnings == []
    assert log.log_lines == 13


def test_debug_6_plugin_messages_deduplicated_across_ranks() -> None:
    log = parse_nccl_debug(read("nccl-debug-6.txt"))
    assert (log.nccl_version, log.cuda_version, log.cuda_driver_version) == ("2.21.5", "12.4", 12040)
    assert log.plugins[0] == "NET/Plugin: No plugin found (libnccl-net.so)"
    assert log.plugins[-1] == "NET/Plugin: Using internal network plugin."
    assert len(log.plugins) == 3
    assert log.network is None
    assert log.bootstrap == ["eth0:172.17.2.7"]
    assert log.log_lines == 15


def test_debug_7_older_plugin_wording_and_rank_line() -> None:
    log = parse_nccl_debug(read("nccl-debug-7.txt"))
    assert (log.nccl_version, log.cuda_version, log.cuda_driver_version) == ("2.18.1", "12.1", 12020)
    assert log.plugins[-1] == "NET/Plugin : No plugin found, using internal implementation"
    assert log.bootstrap == ["ibs85f0:192.168.1.14"]
    [rank] = log.ranks
    assert (rank.rank, rank.host, rank.device, rank.bus_id, rank.pid) == (15, "user", 7, "0xca", 169132)


def test_debug_9_environment() -> None:
    log = parse_nccl_debug(read("nccl-debug-9.txt"))
    assert log.env == {"NCCL_SOCKET_IFNAME": "bond0"}
    assert log.cuda_driver_version == 12080
    assert log.bootstrap == ["bond0:172.36.134.184"]
    assert log.hosts == ["hostname-test"]
    assert log.nccl_version is None


def test_using_network_wins_and_noise_is_kept_with_line_numbers() -> None:
    text = (
        "Starting training...\n"
        "node1:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        "node1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>\n"
        "node1:1:2 [0] NCCL INFO Using network IB\n"
        "node1:1:2 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0,mlx5_1\n"
        "epoch 1 loss 0.5\n"
    )
    log = parse_nccl_debug(text)
    assert (log.nccl_version, log.cuda_version, log.network) == ("2.21.5", "12.4", "IB")
    assert log.ib_relaxed_ordering is None
    assert log.env == {"NCCL_IB_HCA": "mlx5_0,mlx5_1"}
    assert [(u.line, u.text) for u in log.unplaced] == [(1, "Starting training..."), (6, "epoch 1 loss 0.5")]


def test_blank_line_ends_a_wrapped_warning() -> None:
    text = "h:1:2 [0] misc/socket.cc:50 NCCL WARN Net : Connection closed by\nremote peer\n\ntraining done\n"
    log = parse_nccl_debug(text)
    assert log.warnings == ["Net : Connection closed by remote peer"]
    assert [(u.line, u.text) for u in log.unplaced] == [(4, "training done")]


@pytest.mark.parametrize(
    ("text", "line"),
    [("", None), ("\n\n", None), ("hello\nworld\n", 1), ("\n# just a comment\n", 2)],
)
def test_input_without_any_nccl_line_is_an_error(text: str, line: int | None) -> None:
    with pytest.raises(ParseError, match="no NCCL log line") as err:
        parse_nccl_debug(text)
    assert err.value.line == line
    assert err.value.kind == "nccl_debug"


@pytest.mark.parametrize(("line", "interfaces", "devices"), [
    # 2.23+ with an out-of-band network: the net device and its port (bootstrap.cc's `Bootstrap: Using %s:%d`).
    ("gpu01:2811:2811 [0] NCCL INFO Bootstrap: Using mlx5_0:1", [], ["mlx5_0:1"]),
    ("gpu01:2811:2811 [0] NCCL INFO Bootstrap: Using N/A:-1", [], ["N/A:-1"]),
    # The socket bootstrap, old and new spacing, IPv4 and IPv6.
    ("gpu01:2811:2811 [0] NCCL INFO Bootstrap: Using ens7:10.128.0.33<0>", ["ens7:10.128.0.33"], []),
    ("gpu01:2811:2811 [0] NCCL INFO Bootstrap : Using [0]ib0:fe80::1%ib0<0>", ["ib0:fe80::1%ib0"], []),
])
def test_the_bootstrap_line_tells_an_interface_from_an_out_of_band_device(line: str, interfaces: list[str],
                                                                         devices: list[str]) -> None:
    parsed = parse_nccl_debug(line + "\n")
    assert (parsed.bootstrap, parsed.bootstrap_devices) == (interfaces, devices)


# `Using network %s` prints the network plugin's own name (ncclNet->name), which may hold blanks: aws-ofi-nccl
# calls itself `AWS Libfabric`; NCCL's external IB plugin `IBext_v8`; the closed-source 2.1/2.2 wording.
@pytest.mark.parametrize(("line", "name"), [
    ("algo-1:46:58 [0] NCCL INFO Using network AWS Libfabric", "AWS Libfabric"),
    ("gpu01:12:34 [0] NCCL INFO Using network IBext_v8  ", "IBext_v8"),
    ("gpu01:12:34 [0] NCCL INFO Using network Socket", "Socket"),
    ("gpu01:24499:24701 [0] INFO Using internal Network IB", "IB"),
])
def test_the_network_is_the_plugins_whole_name(line: str, name: str) -> None:
    log = parse_nccl_debug(f"{line}\ngpu01:12:34 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 - Init COMPLETE\n")
    assert log.network == name
