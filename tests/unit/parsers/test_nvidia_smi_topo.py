"""nvidia-smi topo -m."""

from __future__ import annotations

import re

import pytest

from provisioner.parsers.nvidia_smi_topo import parse_nvidia_smi_topo

from ._samples import read, rejected

GPUS8 = [f"GPU{i}" for i in range(8)]


def test_topo_1_h100_nv18() -> None:
    topo = parse_nvidia_smi_topo(read("nvidia-smi-topo-1.txt"))
    assert topo.gpus == GPUS8
    assert topo.nics == []
    assert topo.info_columns == ["CPU Affinity", "NUMA Affinity"]
    for row in GPUS8:
        for column in GPUS8:
            assert topo.matrix[row][column] == ("X" if row == column else "NV18")
    assert topo.cpu_affinity["GPU0"] == "0-51,104-155"
    assert topo.cpu_affinity["GPU7"] == "52-103,156-207"
    assert [topo.numa_affinity[g] for g in GPUS8] == ["0"] * 4 + ["1"] * 4
    assert topo.legend == {} and topo.nic_legend == {}


def test_topo_2_compact_spacing() -> None:
    topo = parse_nvidia_smi_topo(read("nvidia-smi-topo-2.txt"))
    assert topo.gpus == GPUS8
    assert topo.matrix["GPU3"]["GPU5"] == "NV12"
    assert topo.matrix["GPU3"]["GPU3"] == "X"
    assert topo.cpu_affinity == {g: ("0-23" if i < 4 else "24-47") for i, g in enumerate(GPUS8)}


def test_topo_3_numa_not_available() -> None:
    topo = parse_nvidia_smi_topo(read("nvidia-smi-topo-3.txt"))
    assert topo.gpus == ["GPU0", "GPU1"]
    assert topo.matrix == {"GPU0": {"GPU0": "X", "GPU1": "NV2"}, "GPU1": {"GPU0": "NV2", "GPU1": "X"}}
    assert topo.numa_affinity == {"GPU0": None, "GPU1": None}
    assert topo.cpu_affinity == {"GPU0": "0-23", "GPU1": "0-23"}


def test_topo_4_nics_gpu_numa_id_and_legends() -> None:
    topo = parse_nvidia_smi_topo(read("nvidia-smi-topo-4.txt"))
    assert topo.gpus == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert topo.nics == ["NIC0", "NIC1", "NIC2", "NIC3"]
    assert topo.info_columns == ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    assert topo.matrix["GPU0"]["NIC0"] == "NODE"
    assert topo.matrix["GPU2"]["NIC3"] == "NODE"
    assert topo.matrix["GPU0"]["NIC3"] == "SYS"
    assert topo.matrix["NIC0"]["NIC1"] == "PIX"
    assert topo.matrix["NIC3"]["NIC3"] == "X"
    assert topo.cpu_affinity == {"GPU0": "0-31,64-95", "GPU1": "0-31,64-95",
                                 "GPU2": "32-63,96-127", "GPU3": "32-63,96-127"}
    assert topo.numa_affinity == {"GPU0": "0", "GPU1": "0", "GPU2": "1", "GPU3": "1"}
    assert topo.gpu_numa_id == dict.fromkeys(["GPU0", "GPU1", "GPU2", "GPU3"])
    assert "NIC0" not in topo.cpu_affinity  # NIC rows stop after the link columns
    assert topo.nic_legend == {f"NIC{i}": f"mlx5_{i}" for i in range(4)}
    assert topo.legend["X"] == "Self"
    assert topo.legend["PIX"] == "Connection traversing at most a single PCIe bridge"
    assert len(topo.legend) == 7
    assert topo.ibstatus == []


def test_topo_6_legend_only_with_trailing_ibstatus() -> None:
    topo = parse_nvidia_smi_topo(read("nvidia-smi-topo-6-legend-and-ibstatus.txt"))
    assert topo.gpus == [] and topo.matrix == {}
    assert topo.nic_legend == {f"NIC{i}": f"mlx5_{i}" for i in range(5)}
    assert set(topo.legend) == {"SYS", "NODE", "PHB", "PXB", "PIX", "NV#"}
    assert [(p.device, p.port, p.state, p.rate, p.link_layer) for p in topo.ibstatus] == [
        ("mlx5_0", 1, "ACTIVE", 100, "Ethernet"), ("mlx5_1", 1, "ACTIVE", 100, "Ethernet"),
    ]


TABBED = (
    "\tGPU0\tGPU1\tmlx5_0\tCPU Affinity\tNUMA Affinity\n"
    "GPU0\t X \tNV4\tPXB\t0-15\t0\n"
    "GPU1\tNV4\t X \tPXB\t0-15\t0\n"
    "mlx5_0\tPXB\tPXB\t X \n"
)


def test_tab_separated_output_with_older_nic_names() -> None:
    topo = parse_nvidia_smi_topo(TABBED)
    assert topo.columns == ["GPU0", "GPU1", "mlx5_0"]
    assert topo.nics == ["mlx5_0"]
    assert topo.matrix["GPU1"]["mlx5_0"] == "PXB"
    assert topo.numa_affinity == {"GPU0": "0", "GPU1": "0"}


def test_single_space_between_device_headers() -> None:
    text = "      GPU0 GPU1  CPU Affinity\nGPU0   X   NV2   0-7\nGPU1  NV2   X    0-7\n"
    topo = parse_nvidia_smi_topo(text)
    assert topo.columns == ["GPU0", "GPU1"]
    assert topo.cpu_affinity == {"GPU0": "0-7", "GPU1": "0-7"}


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("", None, "empty output"),
        ("hello world\n", 1, "fits no part"),
        ("        GPU0    GPU1\nGPU0     X      NV2\nGPU1    NV2\n", 3, "row GPU1 has 1 cells"),
        ("        GPU0    GPU1\nGPU0     X      nv2\n", 2, "not a link type"),
        ("        GPU0    GPU1\n", None, "rows for GPU0, GPU1"),
        ("        GPU0    GPU1\nGPU0     X      NV2\nGPU2    NV2      X\n", 3, "fits no part"),
        ("        GPU0\nGPU0     X\n\nLegend:\n\n  X    = Self\nsomething odd\n", 7, "fits no part"),
        ("NIC Legend:\n\n  NIC0: mlx5_0\nInfiniband device 'mlx5_0' port 1 status:\n\tstate: 4: ACTIVE\n", None,
         "no rate line"),
    ],
)
def test_malformed_topo(text: str, line: int | None, message: str) -> None:
    found_line, reason = rejected(parse_nvidia_smi_topo, text)
    assert re.search(message, reason)
    assert found_line == line


def test_truncated_topo_keeps_the_rows_printed_and_names_the_rest() -> None:
    lines = read("nvidia-smi-topo-4.txt").splitlines(keepends=True)
    topo = parse_nvidia_smi_topo("".join(lines[:6]))  # header + four GPU rows + NIC0
    assert topo.complete is False
    assert topo.missing == ["rows for NIC1..NIC3"]
    assert list(topo.matrix) == ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0"]
    cut = parse_nvidia_smi_topo("".join(lines[:6]) + lines[6][:20] + "\n")
    assert [(u.line, u.reason) for u in cut.unplaced] == [
        (7, "row NIC1 has 2 cells; expected 8 link types plus up to 3 affinity columns")
    ]
    assert cut.missing == ["rows for NIC1..NIC3"]


# ------------------------------------------------------------------------------------- NICs of a cut output

TENS = read("nvidia-smi-topo-11-10nics-pxb-tabs.txt").splitlines(keepends=True)  # NIC rows 10..19, NIC Legend 31..
NICS10 = [f"NIC{i}" for i in range(10)]
LEGEND10 = {f"NIC{i}": f"mlx5_{i}" for i in range(10)}


@pytest.mark.parametrize(
    ("name", "nics"),
    [
        ("nvidia-smi-topo-9-nv8-cut.txt", [f"NIC{i}" for i in range(9)]),
        ("nvidia-smi-topo-10-18nics-cut.txt", [f"NIC{i}" for i in range(18)]),
        ("nvidia-smi-topo-12-gb200-cut.txt", [f"NIC{i}" for i in range(6)]),
        ("nvidia-smi-topo-8-mlx4-column-cut.txt", ["mlx4_0"]),
        ("nvidia-smi-topo-15-16gpu-mlx5-columns-cut.txt", [f"mlx5_{i}" for i in range(10)]),
    ],
)
def test_real_outputs_cut_before_their_nic_rows_still_name_every_nic(name: str, nics: list[str]) -> None:
    topo = parse_nvidia_smi_topo(read(name))
    assert topo.nics == nics and not any(nic in topo.matrix for nic in nics)
    (missing,) = topo.missing
    assert missing.startswith("rows for ") and missing.endswith(nics[-1])
    # Old drivers name the column by its device; the NIC0.. names of newer ones need the NIC Legend, cut here.
    assert topo.nic_devices == ({nic: nic for nic in nics} if nics[0].startswith("mlx") else {})


def test_the_nic_legend_says_the_device_of_every_nic_column() -> None:
    topo = parse_nvidia_smi_topo("".join(TENS))
    assert topo.complete and topo.nics == NICS10 and topo.nic_devices == LEGEND10


def test_nic_rows_cut_out_of_an_excerpt_keep_the_legends_devices() -> None:
    # The header, the GPU rows and both legends, as an issue quotes them without the NIC rows.
    topo = parse_nvidia_smi_topo("".join(TENS[:9] + TENS[19:]))
    assert topo.nics == NICS10 and topo.nic_devices == LEGEND10
    assert topo.missing == ["rows for NIC0..NIC9"] and topo.unplaced == []


def test_a_nic_legend_cut_short_is_missing_its_last_entries() -> None:
    topo = parse_nvidia_smi_topo("".join(TENS[:38]))  # the paste stops after `NIC5: mlx5_5`
    assert topo.nics == NICS10 and topo.nic_devices == {f"NIC{i}": f"mlx5_{i}" for i in range(6)}
    assert (topo.complete, topo.missing) == (False, ["NIC Legend entries for NIC6..NIC9"])


def test_a_legend_without_its_matrix_still_names_the_nics() -> None:
    topo = parse_nvidia_smi_topo(read("nvidia-smi-topo-6-legend-and-ibstatus.txt"))
    assert topo.nics == [f"NIC{i}" for i in range(5)] and topo.columns == []
    assert topo.nic_devices == {f"NIC{i}": f"mlx5_{i}" for i in range(5)} and topo.complete


@pytest.mark.parametrize("command", ["nvidia-smi topo -m", "$ nvidia-smi topo -m", "# nvidia-smi topo --matrix",
                                     "[root@node1 ~]# sudo nvidia-smi topo -m"])
def test_the_command_line_pasted_before_the_matrix_is_skipped(command: str) -> None:
    topo = parse_nvidia_smi_topo(f"{command}\n" + read("nvidia-smi-topo-4.txt"))
    assert (topo.complete, topo.unplaced) == (True, [])
    assert topo.model_dump() == parse_nvidia_smi_topo(read("nvidia-smi-topo-4.txt")).model_dump()


def test_the_real_paste_with_its_command_line_places_every_line() -> None:
    topo = parse_nvidia_smi_topo(read("nvidia-smi-topo-15-16gpu-mlx5-columns-cut.txt"))
    assert topo.unplaced == []  # line 1 is `nvidia-smi topo -m`, the prompt cut off


def test_the_ibstatus_command_before_its_appended_blocks_is_skipped() -> None:
    text = read("nvidia-smi-topo-6-legend-and-ibstatus.txt")
    first = text.index("Infiniband device")
    topo = parse_nvidia_smi_topo(f"{text[:first]}# ibstatus\n{text[first:]}")
    assert topo.unplaced == [] and topo.ibstatus == parse_nvidia_smi_topo(text).ibstatus


def test_topo_16_b200_cells_run_together_are_split_back() -> None:
    # nvidia-smi left out the tab after the NIC8 column in most rows: `SYSSYS`, `PXBNODE`, ` X NODE`.
    topo = parse_nvidia_smi_topo(read("nvidia-smi-topo-16-b200-16nics-glued-cells.txt"))
    assert topo.complete and topo.unplaced == []
    nics = [f"NIC{i}" for i in range(16)]
    assert topo.gpus == GPUS8 and topo.nics == nics
    assert set(topo.matrix) == set(GPUS8 + nics)
    # The matrix is symmetric: each cell split back agrees with the one across the diagonal.
    for row in topo.matrix:
        for column, link in topo.matrix[row].items():
            assert topo.matrix[column][row] == link, (row, column)
    assert topo.matrix["GPU2"]["NIC8"] == "PXB" and topo.matrix["GPU2"]["NIC9"] == "NODE"
    assert topo.matrix["GPU4"]["NIC10"] == "PXB" and topo.matrix["NIC10"]["NIC9"] == "SYS"
    assert topo.cpu_affinity["GPU7"] == "56-111,168-223" and topo.numa_affinity["GPU7"] == "1"
    assert topo.gpu_numa_id["GPU7"] is None
    assert topo.nic_devices["NIC15"] == "mlx5_15"


def test_a_cell_that_is_not_two_link_types_is_still_refused() -> None:
    text = "\tGPU0\tNIC0\tNIC1\nGPU0\t X \tPXBQ\nNIC0\tPXB\t X \tPIX\nNIC1\tPXB\tPIX\t X\n"
    topo = parse_nvidia_smi_topo(text)
    assert "GPU0" not in topo.matrix and [u.line for u in topo.unplaced] == [2]
