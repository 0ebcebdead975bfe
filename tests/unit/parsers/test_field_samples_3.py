"""Values read from the real outputs of the third pass: mlnx_qos across releases, ibv_devinfo -v blocks,
show_gids, nvidia-smi topo with NIC rows, rdma link, ibdev2netdev -v and ofed_info of DOCA builds."""

from __future__ import annotations

from provisioner.parsers import parse

from ._samples import read

# --------------------------------------------------------------------------------------------- mlnx_qos


def test_mlnx_qos_default_priority_line_and_max_buffer_size() -> None:
    facts = parse("mlnx_qos", read("mlnx_qos-5-default-priority-max-buffer.txt"))
    assert facts["complete"] is True and facts["unplaced"] == []
    assert (facts["dcbx_mode"], facts["trust"], facts["cable_len"]) == ("OS controlled", "dscp", 30)
    # `prio:5 dscp:40,47,...` and `prio:6 dscp:48,55,...`: a remapped DSCP keeps its row's priority.
    assert facts["dscp2prio"]["40"] == 5 and facts["dscp2prio"]["48"] == 6 and facts["dscp2prio"]["47"] == 5
    assert facts["receive_buffer"] == [19872, 220896, 0, 0, 0, 0, 0, 0]
    assert facts["receive_buffer_attributes"] == {"max_buffer_size": 4151520}
    assert facts["pfc_enabled"] == [5] and facts["pfc_buffer"] == [0, 0, 0, 0, 0, 1, 0, 0]
    assert [(tc["tc"], tc["tsa"], tc["bw"]) for tc in facts["tcs"][:5]] == [
        (0, "ets", 9), (1, "ets", 1), (2, "ets", 80), (3, "ets", 10), (4, "strict", None)]
    assert facts["extra"] == {"default priority": ""}


def test_mlnx_qos_firmware_dcbx_with_three_classes_sharing_priorities() -> None:
    facts = parse("mlnx_qos", read("mlnx_qos-6-firmware-dcbx-shared-tc.txt"))
    assert facts["complete"] is True
    assert facts["dcbx_mode"] == "Firmware controlled"
    assert [(tc["tc"], tc["priorities"], tc["tsa"], tc["bw"]) for tc in facts["tcs"]] == [
        (0, [0, 1, 2, 4, 5, 7], "ets", 50), (3, [3], "ets", 50), (6, [6], "vendor", None)]
    assert facts["pfc_enabled"] == [3]
    assert facts["receive_buffer_attributes"] == {"max_buffer_size": 262016}


def test_mlnx_qos_skprio_lines_belong_to_their_traffic_class() -> None:
    facts = parse("mlnx_qos", read("mlnx_qos-7-skprio.txt"))
    assert facts["complete"] is True
    assert facts["extra"] == {}  # the 16 `skprio:` lines are not one `skprio` key
    assert facts["unplaced"] == []  # root's `# mlnx_qos -i eth35` is the command, skipped
    by_tc = {tc["tc"]: tc for tc in facts["tcs"]}
    assert by_tc[1]["priorities"] == [0]
    assert [s["skprio"] for s in by_tc[1]["skprios"]] == list(range(16))
    assert {s["skprio"]: s["tos"] for s in by_tc[1]["skprios"] if s["tos"] is not None} == {2: 8, 4: 24, 6: 16}
    assert all(not by_tc[tc]["skprios"] for tc in by_tc if tc != 1)
    assert facts["trust"] is None and facts["pfc_enabled"] == []


def test_mlnx_qos_skprio_of_a_vlan_egress_map() -> None:
    text = ("PFC configuration:\n priority 0 1 2 3 4 5 6 7\n enabled 0 0 0 0 1 0 0 0\n"
            "tc: 0 ratelimit: unlimited, tsa: vendor\n  priority: 0 1 2 3 4 5 6 7\n"
            "  skprio: 2 (vlan 100 tos: 8)\n  skprio: 3 (vlan 100)\n")
    (tc,) = parse("mlnx_qos", text)["tcs"]
    assert tc["skprios"] == [{"skprio": 2, "tos": 8, "vlan": 100}, {"skprio": 3, "tos": None, "vlan": 100}]


def test_mlnx_qos_skprio_outside_a_traffic_class_is_unplaced() -> None:
    text = "Priority trust state: pcp\nskprio: 2 (tos: 8)\n"
    facts = parse("mlnx_qos", text)
    assert [u["line"] for u in facts["unplaced"]] == [2]


def test_mlnx_qos_priority_printed_on_two_dscp_rows() -> None:
    facts = parse("mlnx_qos", read("mlnx_qos-8-dscp-split-row.txt"))
    assert facts["complete"] is True and len(facts["dscp2prio"]) == 64
    assert facts["dscp2prio"]["30"] == 6 and facts["dscp2prio"]["48"] == 6 and facts["dscp2prio"]["31"] == 3
    assert sorted(int(d) for d, p in facts["dscp2prio"].items() if p == 6) == [30, 48, 49, 50, 51, 52, 53, 54, 55]
    assert facts["pfc_buffer"] == [0, 2, 5, 7, 1, 2, 3, 6]
    assert facts["receive_buffer"] == [80256, 80256, 896, 80256, 896, 896, 896, 896]


# ------------------------------------------------------------------------------------------ ibv_devinfo


def test_ibv_devinfo_nested_capability_blocks_are_attributes_not_flags() -> None:
    facts = parse("ibv_devinfo", read("ibv_devinfo-v-6-cx6-nested-caps.txt"))
    assert facts["complete"] is True and facts["unplaced"] == []
    (device,) = facts["devices"]
    assert (device["fw_ver"], device["vendor_part_id"], device["board_id"]) == ("20.24.4702", 4123, "MT_0000000225")
    attrs, flags = device["attributes"], device["flags"]
    assert attrs["tso_caps.max_tso"] == "262144"
    assert attrs["rss_caps.rx_hash_fields_mask"] == "0x800000FF"
    assert attrs["packet_pacing_caps.qp_rate_limit_max"] == "0kbps"
    assert attrs["cq moderation caps.max_cq_period"] == "4095 us"
    assert flags["tso_caps.supported_qp"] == ["SUPPORT_RAW_PACKET"]
    assert flags["rss_caps.supported_qp"] == ["SUPPORT_RAW_PACKET"]
    assert "tso_caps" not in flags and "cq moderation caps" not in flags
    assert flags["raw packet caps"] == ["C-VLAN stripping offload", "Scatter FCS offload", "IP csum offload",
                                        "Delay drop"]
    assert device["notes"] == ["tag matching not supported"]
    assert attrs["maximum available device memory"] == "131072Bytes"
    (port,) = device["ports"]
    assert (port["state"], port["active_mtu"], port["link_layer"], port["phys_state"]) == (
        "PORT_ACTIVE", 4096, "Ethernet", "LINK_UP")
    assert [(g["index"], g["gid"], g["type"]) for g in port["gids"]] == [
        (0, "fe80:0000:0000:0000:ba59:9fff:fe37:8268", "RoCE v1"),
        (1, "fe80::ba59:9fff:fe37:8268", "RoCE v2"),
        (2, "0000:0000:0000:0000:0000:ffff:c0a8:010b", "RoCE v1"),
        (3, "::ffff:192.168.1.11", "RoCE v2")]


def test_ibv_devinfo_ofed4_blocks_and_mask_flags() -> None:
    facts = parse("ibv_devinfo", read("ibv_devinfo-v-7-ofed4-blocks.txt"))
    assert facts["complete"] is True and facts["unplaced"] == []
    (device,) = facts["devices"]
    attrs, flags = device["attributes"], device["flags"]
    # Under a mask every line is a flag, the `Unknown flags: 0x...` one too.
    assert flags["device_cap_flags"][-1] == "Unknown flags: 0x84400000"
    assert flags["device_cap_exp_flags"][-1] == "Unknown flags: 0x200000000000"
    assert attrs["UMR fixed size.max entity size"] == "2147483648"
    assert "UMR fixed size" not in flags
    assert attrs["ooo_rc_caps"] == "0x0" and attrs["Log number of strides for single WQE"] == "9 - 16"
    assert flags["Supported payload shifts"] == ["2 bytes"]
    assert device["notes"] == ["Multi-Packet RQ supported", "tag matching not supported"]
    (port,) = device["ports"]
    assert (port["active_mtu"], port["active_width"], port["active_speed"]) == (1024, "1X (1)", "10.0 Gbps (4)")
    assert [g["gid"] for g in port["gids"]][2] == "0000:0000:0000:0000:0000:ffff:c0a8:f238"
    assert {g["type"] for g in port["gids"]} == {None}  # this release printed no GID types


# ------------------------------------------------------------------------------------- show_gids, topo


def test_show_gids_infiniband_row_without_netdev_after_roce_rows() -> None:
    facts = parse("show_gids", read("show_gids-8-ib-row-no-dev.txt"))
    assert facts["complete"] is True and facts["n_gids_found"] == 5
    rows = [(g["device"], g["index"], g["ipv4"], g["version"], g["netdev"]) for g in facts["gids"]]
    assert rows[3] == ("mlx5_0", 3, "192.168.6.132", "v2", "mce0")
    assert rows[4] == ("mlx5_1", 0, None, "v1", None)


def test_topo_ten_nics_behind_pcie_switches_tab_separated() -> None:
    facts = parse("nvidia_smi_topo", read("nvidia-smi-topo-11-10nics-pxb-tabs.txt"))
    assert facts["complete"] is True and facts["unplaced"] == []
    assert facts["info_columns"] == ["CPU Affinity", "NUMA Affinity"]
    assert len(facts["gpus"]) == 8 and len(facts["nics"]) == 10
    assert [n for n, link in facts["matrix"]["GPU4"].items() if link == "PXB"] == ["NIC4", "NIC5"]
    assert facts["matrix"]["NIC8"]["NIC9"] == "PIX" and facts["matrix"]["NIC9"]["GPU0"] == "SYS"
    assert facts["cpu_affinity"]["GPU4"] == "112-127,240-255" and facts["numa_affinity"]["GPU6"] == "5"
    assert facts["nic_legend"]["NIC9"] == "mlx5_9" and facts["legend"]["PXB"].startswith("Connection traversing")


def test_topo_gb200_numa_affinity_lists_and_gpu_numa_ids() -> None:
    facts = parse("nvidia_smi_topo", read("nvidia-smi-topo-12-gb200-cut.txt"))
    assert facts["complete"] is False
    assert facts["missing"] == ["rows for GPU3, NIC0, NIC1, NIC2, NIC3, NIC4, NIC5"]
    assert facts["numa_affinity"] == {"GPU0": "0,3-9,11-17", "GPU1": "0,3-9,11-17", "GPU2": "1,19-25,27-33"}
    assert facts["gpu_numa_id"] == {"GPU0": "2", "GPU1": "10", "GPU2": "18"}
    assert facts["cpu_affinity"]["GPU2"] == "72-143" and facts["matrix"]["GPU2"]["GPU3"] == "NV18"


def test_topo_nic_rows_end_at_their_last_device_cell() -> None:
    facts = parse("nvidia_smi_topo", read("nvidia-smi-topo-13-nic-rows-no-info.txt"))
    assert facts["complete"] is True and facts["unplaced"] == []
    assert facts["matrix"]["NIC0"]["NIC1"] == "PIX" and facts["matrix"]["NIC1"]["NIC1"] == "X"
    assert facts["matrix"]["GPU6"]["NIC0"] == "PHB"
    assert set(facts["gpu_numa_id"].values()) == {None}  # `\t\tN/A`: an empty cell before N/A
    assert facts["numa_affinity"]["GPU7"] == "1"


# ------------------------------------------------------------------ rdma link, ibdev2netdev, ofed, perfquery


def test_rdma_link_with_index_prefix_and_no_netdev() -> None:
    facts = parse("rdma_link", read("rdma-link-6-index-prefix.txt"))
    assert facts["complete"] is True and facts["unplaced"] == []
    links = [(x["device"], x["port"], x["state"], x["physical_state"], x["netdev"]) for x in facts["links"]]
    assert links[0] == ("mlx5_0", 1, "DOWN", "DISABLED", None)
    assert links[-1] == ("mlx5_1", 1, "ACTIVE", "LINK_UP", None)
    ib = facts["links"][3]
    assert (ib["device"], ib["attributes"]["lid"], ib["attributes"]["sm_lid"]) == ("mlx5_5", "12", "4")


def test_ibdev2netdev_verbose_with_a_long_board_description() -> None:
    facts = parse("ibdev2netdev", read("ibdev2netdev-7-long-description.txt"))
    assert facts["complete"] is True
    assert facts["unplaced"] == []  # root's `# ibdev2netdev -v` is the command, skipped
    assert [(x["pci"], x["device"], x["netdev"], x["port_state"], x["state"], x["fw"]) for x in facts["links"]][2] == (
        "0000:8f:00.0", "mlx5_2", "p2p1", "ACTIVE", "Up", "20.28.1002")
    assert "(200Gb/s)" in facts["links"][0]["description"]


def test_ofed_info_of_doca_builds() -> None:
    facts = parse("ofed_info", read("ofed_info-s-9-doca-25.10.txt"))
    assert (facts["flavor"], facts["version"], facts["complete"]) == ("OFED-internal", "25.10-1.7.1", True)
    facts = parse("ofed_info", read("ofed_info-s-10-doca-24.10-five-part.txt"))
    assert (facts["flavor"], facts["version"]) == ("OFED-internal", "24.10-1.1.4.0.200")


def test_perfquery_extended_with_data_counters_only() -> None:
    facts = parse("perfquery", read("perfquery-x-4-data-only.txt"))
    assert facts["complete"] is True and facts["unplaced"] == []
    (port,) = facts["ports"]
    assert (port["lid"], port["port"]) == (274, 1)
    assert port["counters"]["port_xmit_data"] == 4372366170488
    assert port["counters"]["multicast_rcv_packets"] == 1890846
    assert "symbol_error" not in port["counters"]
