"""Values read from the real outputs added with their sources in tests/samples/INDEX.md (-7 and later)."""

from __future__ import annotations

from provisioner.errors import ParseError
from provisioner.parsers import parse

from ._samples import read


def test_ibstat_stopped_by_ibpanic_is_incomplete_and_keeps_the_adapters_it_printed() -> None:
    facts = parse("ibstat", read("ibstat-9-ibpanic-a100.txt"))
    assert [ca["name"] for ca in facts["cas"]] == [f"mlx5_{n}" for n in range(8)]
    assert facts["complete"] is False
    assert "ibstat stopped" in facts["missing"][0] and "mlx5_8" in facts["missing"][0]
    last = facts["cas"][-1]["ports"][0]
    assert (last["state"], last["rate"], last["base_lid"], last["link_layer"]) == ("Active", 200, 13305, "InfiniBand")
    assert "ibpanic" not in last["attributes"]  # the tool's panic is not a port attribute


def test_ibstat_own_warnings_and_a_cut_value() -> None:
    facts = parse("ibstat", read("ibstat-7-ibwarn.txt"))
    # Line 1 is the `set -x` trace of the command (`+ ibstat`): the shell's, noted and skipped.
    assert facts["errors"][0] == "line 1: shell prompt line skipped: + ibstat"
    assert [line.split(": ")[0] for line in facts["errors"][1:5]] == [f"line {n}" for n in range(2, 6)]
    ca = facts["cas"][0]
    assert (ca["name"], ca["type"], ca["number_of_ports"]) == ("mlx4_0", "MT4099", 2)
    down, up = ca["ports"]
    assert (down["state"], down["physical_state"], down["rate"], down["base_lid"]) == ("Down", "Disabled", 10, 38)
    assert (up["state"], up["rate"], up["base_lid"]) == ("Active", 56, None)
    assert facts["complete"] is False
    assert "CA 'mlx4_0' port 2: Base lid value" in facts["missing"]


def test_ibv_devinfo_azure_renamed_device_and_old_rxe() -> None:
    azure = parse("ibv_devinfo", read("ibv_devinfo-3-azure.txt"))
    device = azure["devices"][0]
    assert (device["name"], device["vendor_part_id"], device["board_id"]) == ("rdmaP23800p0s2", 4118, "MSF0010110035")
    port = device["ports"][0]
    assert (port["state"], port["active_mtu"], port["link_layer"]) == ("PORT_ACTIVE", 1024, "Ethernet")
    assert azure["complete"] is True
    rxe = parse("ibv_devinfo", read("ibv_devinfo-4-rxe-nolinklayer.txt"))
    assert rxe["complete"] is True  # no board_id and no link_layer line: that version printed none
    assert (rxe["devices"][0]["name"], rxe["devices"][0]["ports"][0]["link_layer"]) == ("rxe0", None)


def test_ibv_devinfo_verbose_tabs_keys_without_colon_cut_before_ports() -> None:
    facts = parse("ibv_devinfo", read("ibv_devinfo-v-5-tabs-cut.txt"))
    device = facts["devices"][0]
    assert device["attributes"]["log atomic arg sizes (mask)"] == "0x8"
    assert device["attributes"]["masked_log_atomic_arg_sizes (mask)"] == "0x3c"
    assert device["flags"]["device_cap_flags"][-1] == "Unknown flags: 0xe5620000"
    assert (facts["complete"], facts["missing"]) == (False, ["ports of mlx5_1"])


def test_ibv_devinfo_port_cut_after_its_state_line_is_incomplete() -> None:
    lines = read("ibv_devinfo-3-azure.txt").splitlines(keepends=True)
    facts = parse("ibv_devinfo", "".join(lines[:14]))  # ends at `max_mtu:`
    assert facts["complete"] is False
    assert facts["missing"] == ["port 1 of rdmaP23800p0s2: active_mtu, sm_lid, port_lid, port_lmc"]


def test_mlnx_qos_cable_len_blank_lines_and_strict_class() -> None:
    facts = parse("mlnx_qos", read("mlnx_qos-4-cable-len.txt"))
    assert facts["complete"] is True
    assert (facts["trust"], facts["cable_len"], facts["pfc_enabled"]) == ("dscp", 10, [0, 2, 6, 7])
    assert [(tc["tc"], tc["tsa"], tc["bw"], tc["priorities"]) for tc in facts["tcs"]][5:] == [
        (5, "ets", 10, [5]), (6, "strict", None, [6]), (7, "ets", 40, [7])]
    assert len(facts["dscp2prio"]) == 64 and facts["dscp2prio"]["26"] == 3


def test_mlnx_qos_cut_anywhere_before_its_last_class_is_incomplete() -> None:
    for name in ("mlnx_qos-1.txt", "mlnx_qos-2.txt", "mlnx_qos-3.txt", "mlnx_qos-4-cable-len.txt"):
        lines = read(name).splitlines(keepends=True)
        last = max(i for i, line in enumerate(lines) if line.strip())
        for keep in range(1, last + 1):
            try:
                facts = parse("mlnx_qos", "".join(lines[:keep]))
            except ParseError:
                continue  # `DCBX mode:` alone is not yet recognisably mlnx_qos: refused, never complete
            assert facts["complete"] is False, (name, keep)


def test_mlnx_qos_cut_inside_the_dscp_map_names_it() -> None:
    lines = read("mlnx_qos-4-cable-len.txt").splitlines(keepends=True)
    facts = parse("mlnx_qos", "".join(lines[:6]))  # prio:0..prio:2 of the map
    assert facts["missing"][0] == "dscp2prio rows (24 of the 64 DSCP values were printed)"


def test_ibdev2netdev_column_t_with_notes() -> None:
    facts = parse("ibdev2netdev", read("ibdev2netdev-5-column-t-notes.txt"))
    links = {link["device"]: (link["netdev"], link["state"]) for link in facts["links"]}
    assert len(links) == 12 and links["mlx5_7"] == ("enp157s0f0np0", "Up") and links["mlx5_0"] == ("ibp26s0", "Down")
    assert facts["unplaced"] == []


def test_show_gids_trailer_decides_completeness() -> None:
    empty = parse("show_gids", read("show_gids-4-empty.txt"))
    assert (empty["gids"], empty["n_gids_found"], empty["complete"]) == ([], 0, True)
    whole = parse("show_gids", read("show_gids-6-prompt.txt"))
    assert (len(whole["gids"]), whole["complete"]) == (6, True)
    assert (whole["gids"][5]["ipv4"], whole["gids"][5]["version"], whole["gids"][5]["netdev"]) == (
        "172.19.0.60", "v2", "ens1f0")
    for name in ("show_gids-5-tabs.txt", "show_gids-7-rocep.txt"):
        cut = parse("show_gids", read(name))
        assert cut["complete"] is False and cut["missing"][0].startswith("the n_gids_found trailer")
    tabs = parse("show_gids", read("show_gids-5-tabs.txt"))["gids"]
    assert [(g["index"], g["ipv4"], g["netdev"]) for g in tabs[:3]] == [(4, None, "net1"), (5, None, "net1"),
                                                                       (6, "10.152.0.12", "net1")]
    rocep = parse("show_gids", read("show_gids-7-rocep.txt"))["gids"]
    assert (rocep[-1]["device"], rocep[-1]["version"], rocep[-1]["netdev"]) == ("rocep193s0f0", "v2", "enp193s0f0np0")


def test_ofed_info_and_rdma_link_variants() -> None:
    ofed = parse("ofed_info", read("ofed_info-s-7.txt"))
    assert (ofed["flavor"], ofed["version"]) == ("MLNX_OFED_LINUX", "5.0-2.1.8.0")
    links = parse("rdma_link", read("rdma-link-4-trailing-space.txt"))
    assert links["complete"] is True and links["unplaced"] == []


def test_topology_with_tabs_keeps_the_legends_own_hash() -> None:
    facts = parse("nvidia_smi_topo", read("nvidia-smi-topo-7-tabs-2gpu.txt"))
    assert facts["matrix"] == {"GPU0": {"GPU0": "X", "GPU1": "PHB"}, "GPU1": {"GPU0": "PHB", "GPU1": "X"}}
    assert (facts["cpu_affinity"]["GPU1"], facts["numa_affinity"]["GPU1"], facts["gpu_numa_id"]["GPU1"]) == (
        "0-63", "0", None)
    assert facts["legend"]["NV#"] == "Connection traversing a bonded set of # NVLinks"


def test_topology_gpu_row_cut_before_its_affinity_is_incomplete() -> None:
    text = read("nvidia-smi-topo-7-tabs-2gpu.txt")
    cut = text[: text.index("GPU1\tPHB\t X \t") + len("GPU1\tPHB\t X \t")]
    facts = parse("nvidia_smi_topo", cut)
    assert facts["complete"] is False
    assert facts["missing"] == ["GPU1's CPU Affinity, NUMA Affinity, GPU NUMA ID"]


def test_topology_excerpts_name_the_rows_they_lack() -> None:
    old = parse("nvidia_smi_topo", read("nvidia-smi-topo-8-mlx4-column-cut.txt"))
    assert old["columns"][-1] == "mlx4_0" and old["matrix"]["GPU3"]["mlx4_0"] == "PHB"
    assert old["missing"] == ["rows for GPU4, GPU5, GPU6, GPU7, mlx4_0"]
    assert old["gpus"] == [f"GPU{i}" for i in range(8)] and old["nics"] == ["mlx4_0"]  # named by the header
    wide = parse("nvidia_smi_topo", read("nvidia-smi-topo-10-18nics-cut.txt"))
    assert len(wide["columns"]) == 26 and wide["matrix"]["GPU2"]["NIC1"] == "PXB"
    assert wide["cpu_affinity"]["GPU3"] == "16-31,144-159" and wide["complete"] is False
