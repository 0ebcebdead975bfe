"""Values read from real outputs of machines the other samples lack: GPU counts other than eight, GPUs
without NVLink, header labels run together, and legends cut where they were pasted."""

from __future__ import annotations

from provisioner.parsers import parse

from ._samples import read


def _clean(facts: dict) -> None:
    assert facts["unplaced"] == []


def test_topo_three_gpus_one_without_nvlink() -> None:
    facts = parse("nvidia_smi_topo", read("nvidia-smi-topo-17-3gpu-nv4-pair-and-pcie-gpu.txt"))
    _clean(facts)
    assert facts["complete"] is True and facts["missing"] == []
    assert facts["gpus"] == ["GPU0", "GPU1", "GPU2"] and facts["nics"] == ["NIC0", "NIC1"]
    matrix = facts["matrix"]
    assert (matrix["GPU0"]["GPU1"], matrix["GPU0"]["GPU2"], matrix["GPU2"]["NIC0"], matrix["NIC0"]["NIC1"]) == (
        "NV4", "NODE", "PHB", "PIX")
    assert facts["nic_devices"] == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    assert facts["cpu_affinity"] == dict.fromkeys(["GPU0", "GPU1", "GPU2"], "64-71")
    assert facts["numa_affinity"] == dict.fromkeys(["GPU0", "GPU1", "GPU2"], "1")
    assert facts["gpu_numa_id"] == dict.fromkeys(["GPU0", "GPU1", "GPU2"], None)
    assert list(facts["legend"]) == ["X", "SYS", "NODE", "PHB", "PXB", "PIX", "NV#"]


def test_topo_header_labels_run_together_are_two_columns() -> None:
    # `NIC11NIC12`: the blank between two labels lost; the rows still have a cell for each.
    facts = parse("nvidia_smi_topo", read("nvidia-smi-topo-18-b200-glued-header-labels-cut.txt"))
    _clean(facts)
    assert facts["columns"][-3:] == ["NIC10", "NIC11", "NIC12"] and len(facts["nics"]) == 13
    assert facts["info_columns"] == ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    assert [facts["matrix"]["GPU0"][n] for n in ("NIC8", "NIC10", "NIC11", "NIC12")] == [
        "NODE", "NODE", "PIX", "NODE"]
    assert [facts["matrix"]["GPU1"][n] for n in ("NIC10", "NIC11", "NIC12")] == ["PIX", "NODE", "NODE"]
    assert facts["cpu_affinity"]["GPU3"] == "0-15" and facts["numa_affinity"]["GPU3"] == "0"
    assert facts["complete"] is False and facts["missing"][0].startswith("rows for GPU4, GPU5")


def test_topo_four_h100_comma_cpu_lists_and_a_cut_legend() -> None:
    facts = parse("nvidia_smi_topo", read("nvidia-smi-topo-19-4h100-nv6-cpu-lists-legend-cut.txt"))
    _clean(facts)
    assert facts["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"] and len(facts["nics"]) == 4
    assert all(facts["matrix"][f"GPU{i}"][f"NIC{i}"] == "PIX" for i in range(4))
    assert facts["matrix"]["NIC3"]["NIC3"] == "X" and facts["matrix"]["GPU0"]["GPU3"] == "NV6"
    assert facts["cpu_affinity"] == {"GPU0": "6,14,22,30", "GPU1": "4,12,20,28", "GPU2": "7,15,23,31",
                                     "GPU3": "5,13,21,29"}
    assert facts["numa_affinity"] == {"GPU0": "3", "GPU1": "1", "GPU2": "7", "GPU3": "5"}
    # The Legend stops after PHB: what follows it, and the NIC Legend, were not pasted.
    assert facts["complete"] is False and facts["missing"] == ["Legend entries after PHB"]


def test_topo_without_nic_legend_after_a_whole_legend_is_cut() -> None:
    text = read("nvidia-smi-topo-17-3gpu-nv4-pair-and-pcie-gpu.txt")
    facts = parse("nvidia_smi_topo", text[: text.index("NIC Legend:")])
    assert facts["complete"] is False and facts["missing"] == ["NIC Legend (entries for NIC0, NIC1)"]
    assert "NIC0" in facts["nics"] and facts["nic_devices"] == {}


def test_topo_five_pcie_gpus() -> None:
    facts = parse("nvidia_smi_topo", read("nvidia-smi-topo-20-5gpu-pcie-only-sys-phb-node.txt"))
    _clean(facts)
    assert facts["complete"] is True and facts["missing"] == [] and facts["nics"] == []
    matrix = facts["matrix"]
    assert [matrix["GPU0"][f"GPU{i}"] for i in range(5)] == ["X", "SYS", "SYS", "SYS", "SYS"]
    assert [matrix["GPU1"][f"GPU{i}"] for i in range(5)] == ["SYS", "X", "PHB", "NODE", "NODE"]
    assert [matrix["GPU4"][f"GPU{i}"] for i in range(5)] == ["SYS", "NODE", "NODE", "PHB", "X"]
    assert facts["cpu_affinity"]["GPU0"] == "8-15,24-31" and facts["cpu_affinity"]["GPU4"] == "0-7,16-23"
    assert facts["numa_affinity"] == {"GPU0": "1", "GPU1": "0", "GPU2": "0", "GPU3": "0", "GPU4": "0"}


def test_topo_affinity_cells_a_few_blanks_apart() -> None:
    facts = parse("nvidia_smi_topo", read("nvidia-smi-topo-21-b200-narrow-info-cells-cut.txt"))
    _clean(facts)
    assert facts["cpu_affinity"] == {"GPU0": "0-27", "GPU1": "0-27", "GPU2": "28-55", "GPU3": "28-55",
                                     "GPU4": "56-83"}
    assert facts["numa_affinity"] == {"GPU0": "0", "GPU1": "0", "GPU2": "1", "GPU3": "1", "GPU4": "2"}
    assert facts["gpu_numa_id"]["GPU4"] is None and facts["other_columns"] == {}
    assert facts["matrix"]["GPU2"]["NIC2"] == "PIX" and facts["matrix"]["GPU0"]["NIC8"] == "NODE"
    assert facts["complete"] is False


def test_ethtool_gve_queue_counters_keep_their_bracketed_suffix() -> None:
    # gVNIC names a queue's counter `rx_bytes[0]`: a name of its own, not the port's `rx_bytes`.
    facts = parse("ethtool_stats", read("ethtool-S-7-gve-bracket-queue-suffix.txt"))
    _clean(facts)
    assert facts["complete"] is True and facts["missing"] == [] and facts["repeated"] == []
    counters = facts["counters"]
    assert len(counters) == 112
    assert (counters["rx_bytes"], counters["rx_bytes[0]"], counters["rx_bytes[1]"]) == (252265, 167896, 84369)
    assert (counters["tx_bytes"], counters["tx_bytes[0]"], counters["tx_bytes[1]"]) == (71982, 45726, 26256)
    assert counters["tx_consumed_desc[1]"] == 342 and counters["interface_up_cnt"] == 2
    assert counters["adminq_query_rss_cnt"] == 0
