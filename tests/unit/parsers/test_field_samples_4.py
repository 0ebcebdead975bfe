"""Values read from the real outputs of the fourth pass: RDMA devices of other vendors (AWS EFA, Intel
irdma, Broadcom bnxt_re), nccl-tests tables of other releases and sizes, and nvidia-smi topo as pasted
from narrow terminals and older drivers."""

from __future__ import annotations

from provisioner.parsers import parse
from provisioner.parsers._shell import is_prompt
from provisioner.parsers._text import split_lines

from ._samples import read

# ------------------------------------------------------------------------------------------------ AWS EFA


def test_ibv_devinfo_efa_with_unspecified_transport_and_no_board_id() -> None:
    facts = parse("ibv_devinfo", read("ibv_devinfo-8-efa-unspecified-transport.txt"))
    assert facts["complete"] is True and facts["unplaced"] == []  # `$ ibv_devinfo ` is a prompt
    (device,) = facts["devices"]
    assert (device["name"], device["transport"], device["vendor_id"], device["vendor_part_id"]) == (
        "efa_0", "unspecified (4)", "0x1d0f", 61344)
    assert (device["fw_ver"], device["hw_ver"], device["board_id"]) == ("0.0.0.0", "0xEFA0", None)
    (port,) = device["ports"]
    assert (port["state"], port["active_mtu"], port["link_layer"]) == ("PORT_ACTIVE", 4096, "InfiniBand")
    assert port["attributes"]["port_lmc"] == "0x01"


def test_ibstat_efa_prints_empty_versions_which_are_unknown_not_empty_strings() -> None:
    facts = parse("ibstat", read("ibstat-10-efa-empty-values.txt"))
    assert facts["complete"] is True
    # `ip-172-30-4-150:~ # ibstat`: SUSE's prompt, with no user@ and a blank before `#`.
    assert facts["unplaced"] == [] and facts["errors"] == ["line 1: shell prompt line skipped: "
                                                           "ip-172-30-4-150:~ # ibstat"]
    (ca,) = facts["cas"]
    assert (ca["name"], ca["type"], ca["firmware"], ca["hardware_version"]) == ("efa_0", None, None, None)
    assert ca["attributes"]["Firmware version"] == ""  # kept as printed
    (port,) = ca["ports"]
    assert (port["state"], port["physical_state"], port["rate"], port["lmc"], port["link_layer"]) == (
        "Active", "LinkUp", 100, 1, "Unknown")


def test_suse_prompt_is_a_prompt_and_its_hash_is_not_a_note() -> None:
    line = split_lines("gpu07:~ # show_gids mlx5_0")[0]
    assert is_prompt(line) and line.text == "gpu07:~ # show_gids mlx5_0" and line.note == ""
    assert is_prompt(split_lines("root@gpu07:/tmp # ibstat")[0])
    # A host and port, or a device and port, before a person's note stay what they were.
    assert not is_prompt(split_lines("mlx5_0:1 # the slow one")[0])
    assert not is_prompt(split_lines("gpu07:1234:1234 [0] NCCL INFO Bootstrap")[0])


# ------------------------------------------------------------------------------------------- Intel irdma


def test_ibv_devinfo_irdma_two_devices_without_board_id() -> None:
    facts = parse("ibv_devinfo", read("ibv_devinfo-9-irdma-e810.txt"))
    assert facts["complete"] is True and facts["unplaced"] == []
    assert [d["name"] for d in facts["devices"]] == ["irdma0", "irdma1"]
    for device in facts["devices"]:
        assert (device["vendor_id"], device["vendor_part_id"], device["fw_ver"], device["board_id"]) == (
            "0x8086", 5531, "1.72", None)
        (port,) = device["ports"]
        assert (port["state"], port["max_mtu"], port["active_mtu"], port["port_lid"], port["link_layer"]) == (
            "PORT_ACTIVE", 4096, 1024, 1, "Ethernet")


def test_ibv_devinfo_verbose_irdma_empty_caps_and_sentences() -> None:
    facts = parse("ibv_devinfo", read("ibv_devinfo-v-10-irdma-e810-verbose.txt"))
    assert facts["complete"] is True and facts["unplaced"] == []
    (device,) = facts["devices"]
    assert device["flags"]["device_cap_flags"] == [
        "RC_RNR_NAK_GEN", "MEM_WINDOW", "MEM_MGT_EXTENSIONS", "Unknown flags: 0x8000"]
    assert device["flags"]["rc_odp_caps"] == ["NO SUPPORT"]
    assert device["attributes"]["general_odp_caps"] == ""  # a heading with nothing under it
    assert device["attributes"]["completion timestamp_mask"] == "0x000000000001ffff"
    assert device["attributes"]["packet_pacing_caps.qp_rate_limit_max"] == "0kbps"
    assert device["notes"] == ["core clock not supported", "tag matching not supported"]
    (port,) = device["ports"]
    assert (port["phys_state"], port["active_width"], port["active_speed"]) == (
        "LINK_UP", "4X (2)", "25.0 Gbps (32)")
    assert [(g["index"], g["gid_normal"], g["type"]) for g in port["gids"]] == [
        (0, "fe80:0000:0000:0000:6efe:54ff:fe3d:8a39", "RoCE v2"),
        (1, "0000:0000:0000:0000:0000:ffff:0a16:74dd", "RoCE v2")]


def test_rdma_link_irdma_and_bnxt_re() -> None:
    irdma = parse("rdma_link", read("rdma-link-7-irdma.txt"))
    assert irdma["complete"] is True and irdma["unplaced"] == []
    assert [(x["device"], x["port"], x["state"], x["netdev"]) for x in irdma["links"]] == [
        ("irdma0", 1, "ACTIVE", "ens6f0"), ("irdma1", 1, "ACTIVE", "ens6f1")]
    bnxt = parse("rdma_link", read("rdma-link-8-bnxt-re.txt"))
    assert [(x["device"], x["state"], x["physical_state"], x["netdev"]) for x in bnxt["links"]] == [
        ("bnxt_re0", "ACTIVE", "LINK_UP", "enp194s0f0np0"), ("bnxt_re1", "DOWN", "DISABLED", "enp194s0f1np1")]


# ------------------------------------------------------------------------------------------ Broadcom


def test_ibstat_bnxt_re_cut_before_link_layer() -> None:
    facts = parse("ibstat", read("ibstat-11-bnxt-re-cut.txt"))
    (ca,) = facts["cas"]
    assert (ca["type"], ca["firmware"], ca["hardware_version"]) == (
        "Broadcom NetXtreme-C/E RoCE Driver HCA", "231.0.154.0", "0x14e4")
    (port,) = ca["ports"]
    assert (port["state"], port["rate"], port["capability_mask"], port["link_layer"]) == (
        "Active", 100, "0x001d0000", None)
    assert facts["complete"] is False and facts["missing"] == ["CA 'bnxt_re0' port 1: Link layer"]
    assert facts["unplaced"] == []  # the bare `ibstat` a script echoed is the command, skipped and noted
    assert facts["errors"][0] == "line 1: shell prompt line skipped: ibstat"


# ------------------------------------------------------------------------------------------ nccl-tests


def test_nccl_tests_gb200_rows_with_whole_microsecond_times() -> None:
    facts = parse("nccl_tests", read("all_reduce_perf-16-gb200-nvl72-integer-time.txt"))
    assert facts["complete"] is True and facts["verdict"] == "ok"
    assert facts["avg_busbw"] == 745.53 and facts["out_of_bounds_ok"] is True
    assert facts["devices"][0]["rank"] == 71 and facts["devices"][0]["host"] == "slurm-gb200-207-171"
    by_size = {r["size"]: r for r in facts["rows"]}
    assert len(by_size) == 5 and max(by_size) == 8589934592
    # `10094` and `20299` (no decimals once a time passes 10 ms) are times like `1806.7`.
    assert (by_size[4294967296]["oop_time_us"], by_size[4294967296]["ip_time_us"]) == (10094, 10141)
    assert by_size[8589934592]["ip_busbw"] == 846.82


def test_nccl_tests_reduce_scatter_repeats_zero_byte_rows() -> None:
    facts = parse("nccl_tests", read("reduce_scatter_perf-17-zero-size-rows-cut.txt"))
    rows = facts["rows"]
    assert [r["size"] for r in rows] == [0, 0, 0, 0, 0, 128, 256]
    assert [r["oop_time_us"] for r in rows[:5]] == [5.70, 5.92, 5.52, 5.53, 5.57]
    assert all(r["oop_busbw"] == 0 and r["oop_wrong"] == 0 for r in rows[:5])
    assert facts["complete"] is False and facts["verdict"] == "truncated: no footer"


def test_nccl_tests_2_13_one_gpu_all_gather_header() -> None:
    facts = parse("nccl_tests", read("all_gather_perf-18-nixos-2.13.6-one-gpu-cut.txt"))
    assert facts["parameters"]["graph"] == "0" and facts["parameters"]["agg iters"] == "1"
    assert facts["parameters"]["step"] == "1048576(bytes)"
    (row,) = facts["rows"]
    assert (row["redop"], row["oop_algbw"], row["ip_time_us"], row["ip_algbw"]) == ("none", 1816.16, 0.05, 619657.10)
    assert facts["out_of_bounds_ok"] is True and facts["avg_busbw"] is None and facts["complete"] is False
    assert [u["line"] for u in facts["unplaced"]] == [1]  # the Nix wrapper's `Running /nix/store/...`


# ------------------------------------------------------------------------------------- nvidia-smi topo


def test_topology_legend_wrapped_by_a_narrow_terminal_is_joined() -> None:
    facts = parse("nvidia_smi_topo", read("nvidia-smi-topo-14-wrapped-legend-and-p2p.txt"))
    assert facts["complete"] is True
    assert facts["matrix"] == {"GPU0": {"GPU0": "X", "GPU1": "NODE"}, "GPU1": {"GPU0": "NODE", "GPU1": "X"}}
    assert facts["cpu_affinity"] == {"GPU0": "0-15", "GPU1": "0-15"} and facts["gpu_numa_id"]["GPU0"] is None
    assert facts["legend"]["SYS"] == ("Connection traversing PCIe as well as the SMP interconnect between "
                                      "NUMA nodes (e.g., QPI/UPI)")
    assert facts["legend"]["PHB"].endswith("(typically the CPU)")
    assert facts["legend"]["PIX"] == "Connection traversing at most a single PCIe bridge"


def test_topology_followed_by_a_p2p_matrix_keeps_the_p2p_legend_out() -> None:
    facts = parse("nvidia_smi_topo", read("nvidia-smi-topo-14-wrapped-legend-and-p2p.txt"))
    assert "NS" not in facts["legend"] and "OK" not in facts["legend"]
    assert len(facts["legend"]) == 7
    # From `GPU0 GPU1` of `topo -p2p rw` on: another view, every line of it named.
    assert [u["line"] for u in facts["unplaced"]] == [19, 20, 21, 23, *range(25, 33)]


def test_a_short_legend_line_followed_by_another_line_is_not_a_wrap() -> None:
    text = "\tGPU0\tCPU Affinity\nGPU0\t X \t0-7\n\nLegend:\n\n  X    = Self\nsomething odd\n"
    facts = parse("nvidia_smi_topo", text)
    assert facts["legend"] == {"X": "Self"} and [u["line"] for u in facts["unplaced"]] == [7]


def test_topology_of_16_gpus_with_nic_columns_named_by_device() -> None:
    facts = parse("nvidia_smi_topo", read("nvidia-smi-topo-15-16gpu-mlx5-columns-cut.txt"))
    assert len(facts["columns"]) == 26 and facts["columns"][16:18] == ["mlx5_0", "mlx5_1"]
    assert facts["info_columns"] == ["CPU Affinity"]
    # The header names all 16 GPUs and 10 NICs; only the first four rows survived the cut.
    assert facts["gpus"] == [f"GPU{i}" for i in range(16)] and facts["nics"] == [f"mlx5_{i}" for i in range(10)]
    assert list(facts["matrix"]) == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert facts["matrix"]["GPU0"]["GPU15"] == "NV6"
    assert [facts["matrix"]["GPU2"][f"mlx5_{i}"] for i in range(4)] == ["PXB", "PIX", "NODE", "NODE"]
    assert facts["cpu_affinity"]["GPU3"] == "0-23,48-71"
    (missing,) = facts["missing"]
    assert facts["complete"] is False and missing.startswith("rows for GPU4, ") and missing.endswith(", mlx5_9")


# ----------------------------------------------------------------------------------------------- show_gids


def test_show_gids_of_a_pod_from_index_4_with_blank_ipv4_cells() -> None:
    facts = parse("show_gids", read("show_gids-9-k8s-net1-index4.txt"))
    assert [(g["device"], g["index"], g["ipv4"], g["version"], g["netdev"]) for g in facts["gids"]] == [
        ("mlx5_0", 4, "10.12.0.21", "v1", "net1"), ("mlx5_0", 5, "10.12.0.21", "v2", "net1"),
        ("mlx5_0", 6, None, "v1", "net1"), ("mlx5_0", 7, None, "v2", "net1")]
    assert facts["gids"][1]["gid_normal"] == "0000:0000:0000:0000:0000:ffff:0a0c:0015"
    assert facts["unplaced"] == []  # the bare `show_gids` echoed before the header is the command, not a row
    assert facts["complete"] is False and facts["n_gids_found"] is None  # cut before its trailer


def test_show_gids_of_ipv6_only_rocev2_ports() -> None:
    # No IPv4 on any port: every IPv4 cell is blank, and the rows (v1 and v2 alike) are still placed.
    facts = parse("show_gids", read("show_gids-10-mi355-ipv6-only-cut.txt"))
    gids = facts["gids"]
    assert len(gids) == 10 and facts["unplaced"] == [] and all(g["ipv4"] is None for g in gids)
    assert (gids[1]["device"], gids[1]["index"], gids[1]["gid"], gids[1]["version"], gids[1]["netdev"]) == (
        "rocep105s0", 1, "fd93:16d3:59b6:010d:0690:81ff:fe39:e3e8", "v2", "enp105s0")
    assert [(g["version"], g["netdev"]) for g in gids[-2:]] == [("v1", "enp193s0f0np0"), ("v2", "enp193s0f0np0")]
    assert facts["complete"] is False  # the excerpt ends before the trailer
