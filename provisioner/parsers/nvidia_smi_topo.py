"""Parse `nvidia-smi topo -m`: the GPU/NIC connection matrix, CPU/NUMA affinity, and the legends.

The header names the columns; multi-word headers (`CPU Affinity`, `GPU NUMA ID`) are cells separated
from their neighbours by a tab or 2+ spaces. Rows are `NAME CELL...`: one link type per device column
(`X`, `NV18`, `SYS`, `PIX`, ...), then the affinity columns (NIC rows stop after the device columns).
Then optional `Legend:` (`X = Self`) and `NIC Legend:` (`NIC0: mlx5_0`) blocks. Every device column
must have its row: a matrix with rows missing is truncated output and raises ParseError.

Captured output may also start mid-legend (no matrix), and may have `ibstatus` blocks appended after
the legend: those are parsed into `ibstatus`. Any other line raises ParseError.
"""

from __future__ import annotations

import re

from pydantic import Field

from provisioner.parsers._text import Fact, Line, content_lines, fail, is_prompt
from provisioner.parsers.ibstatus import HEADER as IBSTATUS_HEADER
from provisioner.parsers.ibstatus import IbStatusPort, parse_ibstatus_lines

KIND = "nvidia_smi_topo"

_DEVICE = re.compile(r"^(?:GPU|NIC|CPU|mlx[0-9]*_|ib|rdma|bnxt_re|irdma|efa|hfi)[\w.:-]*[0-9]$", re.ASCII)
_CELL_SPLIT = re.compile(r"\t+|\s{2,}")
_LINK = re.compile(r"^(?:X|NV[0-9]+|[A-Z][A-Z0-9]{1,7}|N/A)$", re.ASCII)
_LEGEND_TITLE = re.compile(r"^(?P<nic>NIC )?Legend:$")
_LEGEND_ENTRY = re.compile(r"^(?P<key>\S+)\s*=\s*(?P<text>\S.*)$")
_NIC_ENTRY = re.compile(r"^(?P<nic>NIC[0-9]+)\s*:\s*(?P<device>\S+)$", re.ASCII)

_KNOWN_INFO = {"CPU Affinity": "cpu_affinity", "NUMA Affinity": "numa_affinity", "GPU NUMA ID": "gpu_numa_id"}


class NvidiaSmiTopo(Fact):
    """`matrix[row][column]` is the link type; affinity maps hold GPU rows only, None for `N/A`."""

    columns: list[str] = Field(default_factory=list)
    info_columns: list[str] = Field(default_factory=list)
    gpus: list[str] = Field(default_factory=list)
    nics: list[str] = Field(default_factory=list)
    matrix: dict[str, dict[str, str]] = Field(default_factory=dict)
    cpu_affinity: dict[str, str | None] = Field(default_factory=dict)
    numa_affinity: dict[str, str | None] = Field(default_factory=dict)
    gpu_numa_id: dict[str, str | None] = Field(default_factory=dict)
    other_columns: dict[str, dict[str, str | None]] = Field(default_factory=dict)
    legend: dict[str, str] = Field(default_factory=dict)
    nic_legend: dict[str, str] = Field(default_factory=dict)
    ibstatus: list[IbStatusPort] = Field(default_factory=list)


def _header_cells(line: Line) -> tuple[list[str], list[str]] | None:
    """(device columns, info columns) when `line` is the matrix header, else None."""
    cells: list[str] = []
    for cell in _CELL_SPLIT.split(line.stripped):
        words = cell.split()
        # Compact output may leave one space between device names: split those, keep phrases whole.
        if len(words) > 1 and all(_DEVICE.match(w) for w in words):
            cells.extend(words)
        elif words:
            cells.append(" ".join(words))
    devices: list[str] = []
    for cell in cells:
        if not _DEVICE.match(cell):
            break
        devices.append(cell)
    if not devices:
        return None
    info = cells[len(devices):]
    # A matrix row also starts with a device name, but a link type (X, NV18) follows it.
    if any(_DEVICE.match(c) for c in info) or (info and _LINK.match(info[0])):
        return None
    return devices, info


def parse_nvidia_smi_topo(text: str) -> NvidiaSmiTopo:
    lines = [line for line in content_lines(text) if not is_prompt(line)]
    if not lines:
        fail(KIND, "empty output")
    devices: list[str] = []
    info: list[str] = []
    matrix: dict[str, dict[str, str]] = {}
    info_values: dict[str, dict[str, str | None]] = {}
    legend: dict[str, str] = {}
    nic_legend: dict[str, str] = {}
    ibstatus: list[IbStatusPort] = []
    in_nic_legend = False
    header_line: Line | None = None

    for position, line in enumerate(lines):
        body = line.stripped
        tokens = body.split()
        if not devices and not legend and not nic_legend and (header := _header_cells(line)):
            devices, info = header
            header_line = line
            continue
        if devices and tokens[0] in devices and tokens[0] not in matrix and not _LEGEND_ENTRY.match(body):
            name, cells = tokens[0], tokens[1:]
            if not len(devices) <= len(cells) <= len(devices) + len(info):
                fail(KIND, f"row {name} has {len(cells)} cells; expected {len(devices)} link types "
                           f"plus up to {len(info)} affinity columns", line)
            links = cells[: len(devices)]
            for column, cell in zip(devices, links, strict=True):
                if not _LINK.match(cell):
                    fail(KIND, f"{name}/{column}: {cell!r} is not a link type (X, NV#, SYS, NODE, PHB, "
                               "PXB, PIX, ...)", line)
            matrix[name] = dict(zip(devices, links, strict=True))
            for column, cell in zip(info, cells[len(devices):], strict=False):
                info_values.setdefault(column, {})[name] = None if cell == "N/A" else cell
            continue
        if m := _LEGEND_TITLE.match(body):
            in_nic_legend = bool(m.group("nic"))
            continue
        if m := _NIC_ENTRY.match(body):
            nic_legend[m.group("nic")] = m.group("device")
            continue
        if not in_nic_legend and (m := _LEGEND_ENTRY.match(body)):
            legend[m.group("key")] = m.group("text")
            continue
        if IBSTATUS_HEADER.match(body):
            ibstatus = parse_ibstatus_lines(KIND, lines[position:])
            break
        fail(KIND, "line fits no part of nvidia-smi topo output (header, matrix row, legend)", line)

    if devices and not matrix:
        fail(KIND, "matrix header without any rows", header_line)
    if missing := [d for d in devices if d not in matrix]:
        fail(KIND, f"matrix has no rows for {', '.join(missing)} (truncated output?)", header_line)
    if not matrix and not legend and not nic_legend:
        fail(KIND, "no topology matrix or legend found", lines[0])
    rows = list(matrix)
    gpus = [r for r in rows if r.startswith("GPU")]
    return NvidiaSmiTopo(
        columns=devices,
        info_columns=info,
        gpus=gpus,
        nics=[r for r in rows if not r.startswith("GPU")],
        matrix=matrix,
        cpu_affinity=info_values.get("CPU Affinity", {}),
        numa_affinity=info_values.get("NUMA Affinity", {}),
        gpu_numa_id=info_values.get("GPU NUMA ID", {}),
        other_columns={k: v for k, v in info_values.items() if k not in _KNOWN_INFO},
        legend=legend,
        nic_legend=nic_legend,
        ibstatus=ibstatus,
    )
