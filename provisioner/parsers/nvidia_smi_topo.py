"""Parse `nvidia-smi topo -m`: the GPU/NIC connection matrix, CPU/NUMA affinity, and the legends.

The header names the columns; multi-word headers (`CPU Affinity`, `GPU NUMA ID`) are cells separated
from their neighbours by a tab or 2+ spaces. Rows are `NAME CELL...`: one link type per device column
(`X`, `NV18`, `SYS`, `PIX`, ...), then the affinity columns (NIC rows stop after the device columns).
Then optional `Legend:` (`X = Self`) and `NIC Legend:` (`NIC0: mlx5_0`) blocks. Every device column
must have its row: rows cut off make the result incomplete (`missing: ["rows for NIC1..NIC3"]`). Newer
drivers name NIC columns `NIC0`.. and say in the NIC Legend which RDMA device each is; older ones name the
column by the device (`mlx5_0`): `nic_devices` gives the device of every NIC either way, where the output
says it. A NIC Legend that stops before a NIC column's entry was cut (`missing: ["NIC Legend entries for
NIC6..NIC9"]`).
Headers re-spaced by `column -t` (`CPU  Affinity`) are put back together. A row one or more cells short
where a cell is two of nvidia-smi's link types run together (`SYSSYS`, `PXBNODE`: the tab between two
columns missing, as in some 16-NIC matrices) is split back into its cells; so is a header cell that is
two numbered labels run together (`NIC11NIC12`).

Captured output may also start mid-legend (no matrix), and may have `ibstatus` blocks appended after
the legend: those are parsed into `ibstatus`. Lines that fit nowhere are listed in `unplaced`; output
with no header, row or legend at all raises ParseError.
"""

from __future__ import annotations

import re

from pydantic import Field

from provisioner.parsers._shell import is_shell
from provisioner.parsers._text import Collector, Line, Parsed, content_lines, fail
from provisioner.parsers.ibstatus import HEADER as IBSTATUS_HEADER
from provisioner.parsers.ibstatus import IbStatusPort, parse_ibstatus_lines

KIND = "nvidia_smi_topo"

_DEVICE = re.compile(r"^(?:GPU|NIC|CPU|mlx[0-9]*_|ib|rdma|bnxt_re|irdma|efa|hfi)[\w.:-]*[0-9]$", re.ASCII)
_CELL_SPLIT = re.compile(r"\t+|\s{2,}")
_LINK = re.compile(r"^(?:X|NV[0-9]+|[A-Z][A-Z0-9]{1,7}|N/A)$", re.ASCII)
# nvidia-smi's own link types, which may lose the tab between them in wide matrices (`SYSSYS`, `PXBNODE`).
_KNOWN_LINK = r"X|NV[0-9]+|SYS|NODE|PHB|PXB|PIX"
_GLUED = re.compile(rf"^(?:{_KNOWN_LINK}){{2,}}$", re.ASCII)
_GLUED_PART = re.compile(_KNOWN_LINK, re.ASCII)
# Numbered column labels, which lose the blank between them in the same way (`NIC11NIC12`).
_LABEL = r"(?:GPU|NIC)[0-9]+|mlx[0-9]*_[0-9]+"
_GLUED_LABELS = re.compile(rf"^(?:{_LABEL}){{2,}}$", re.ASCII)
_LABEL_PART = re.compile(_LABEL, re.ASCII)
_LEGEND_TITLE = re.compile(r"^(?P<nic>NIC\s+)?Legend:$")
_LEGEND_ENTRY = re.compile(r"^(?P<key>\S+)\s*=\s*(?P<text>\S.*)$")
_LEGEND_OWN_HASH = re.compile(r"\s+#.*?(?=\s+#(?:\s|$)|$)")
# Only a line that reached the edge of a terminal (or of a pager) can have been wrapped onto the next one.
_WRAP_WIDTH = 60
_NIC_ENTRY = re.compile(r"^(?P<nic>NIC[0-9]+)\s*:\s*(?P<device>\S+)$", re.ASCII)
_NIC_N = re.compile(r"^NIC[0-9]+$", re.ASCII)  # a NIC column named by number: its device is in the NIC Legend

_KNOWN_INFO = {"CPU Affinity": "cpu_affinity", "NUMA Affinity": "numa_affinity", "GPU NUMA ID": "gpu_numa_id"}
_PHRASES = sorted(_KNOWN_INFO, key=lambda p: -len(p.split()))


class NvidiaSmiTopo(Parsed):
    """`matrix[row][column]` is the link type; affinity maps hold GPU rows only, None for `N/A`. `gpus` and
    `nics` are every device the output names, in its header, its rows or its NIC Legend, whether or not its
    row is there. `nic_devices` maps each NIC to its RDMA device (`NIC0` -> `mlx5_0` by the NIC Legend, `mlx5_0`
    -> itself where the column is named by device); a NIC whose device the output does not say is left out."""

    columns: list[str] = Field(default_factory=list)
    info_columns: list[str] = Field(default_factory=list)
    gpus: list[str] = Field(default_factory=list)
    nics: list[str] = Field(default_factory=list)
    nic_devices: dict[str, str] = Field(default_factory=dict)
    matrix: dict[str, dict[str, str]] = Field(default_factory=dict)
    cpu_affinity: dict[str, str | None] = Field(default_factory=dict)
    numa_affinity: dict[str, str | None] = Field(default_factory=dict)
    gpu_numa_id: dict[str, str | None] = Field(default_factory=dict)
    other_columns: dict[str, dict[str, str | None]] = Field(default_factory=dict)
    legend: dict[str, str] = Field(default_factory=dict)
    nic_legend: dict[str, str] = Field(default_factory=dict)
    ibstatus: list[IbStatusPort] = Field(default_factory=list)


def _join_phrases(cells: list[str]) -> list[str]:
    # `column -t` splits `CPU Affinity` into two cells: put the known multi-word headers back together.
    joined: list[str] = []
    i = 0
    while i < len(cells):
        for phrase in _PHRASES:
            words = phrase.split()
            if cells[i : i + len(words)] == words:
                joined.append(phrase)
                i += len(words)
                break
        else:
            joined.append(cells[i])
            i += 1
    return joined


def _header_cells(line: Line) -> tuple[list[str], list[str]] | None:
    """(device columns, info columns) when `line` is the matrix header, else None."""
    cells: list[str] = []
    for cell in _CELL_SPLIT.split(line.stripped):
        words = cell.split()
        # Compact output may leave one space between device names: split those, keep phrases whole.
        if len(words) > 1 and all(_DEVICE.match(w) for w in words):
            cells.extend(words)
        elif len(words) == 1 and _GLUED_LABELS.match(words[0]):
            cells.extend(_LABEL_PART.findall(words[0]))
        elif words:
            cells.append(" ".join(words))
    cells = _join_phrases(cells)
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


def _ranges(names: list[str]) -> str:
    """`NIC5, NIC6, NIC7, NIC8` -> `NIC5..NIC8` when they run in order; else the names joined."""
    if len(names) > 2:
        stems = {re.sub(r"[0-9]+$", "", n) for n in names}
        numbers = [int(m.group()) for n in names if (m := re.search(r"[0-9]+$", n))]
        if len(stems) == 1 and numbers == list(range(numbers[0], numbers[0] + len(names))):
            return f"{names[0]}..{names[-1]}"
    return ", ".join(names)


def _fits(cells: list[str], devices: int, info: int) -> bool:
    """Whether a row's cells are one link type per device column and then at most the affinity columns."""
    return devices <= len(cells) <= devices + info and all(_LINK.match(c) for c in cells[:devices])


class _Topo:
    def __init__(self) -> None:
        self.devices: list[str] = []
        self.info: list[str] = []
        self.matrix: dict[str, dict[str, str]] = {}
        self.info_values: dict[str, dict[str, str | None]] = {}
        self.legend: dict[str, str] = {}
        self.nic_legend: dict[str, str] = {}
        self.in_nic_legend = False
        self.short_rows: list[str] = []
        self.last_entry: tuple[str, int] | None = None  # the legend key just read, and its line number
        self.other_view = False  # a second matrix header came after the legend (`topo -p2p rw`)

    def row(self, line: Line) -> bool:
        tokens = line.stripped.split()
        devices, info = self.devices, self.info
        if not (devices and tokens[0] in devices and tokens[0] not in self.matrix
                and not _LEGEND_ENTRY.match(line.stripped)):
            return False
        name, cells = tokens[0], tokens[1:]
        if not _fits(cells, len(devices), len(info)):
            # Wide matrices (16 NICs) have been seen with one column's tab missing in every row: two of
            # nvidia-smi's own link types run together. Split them only where that makes the row fit.
            unglued = [part for cell in cells for part in
                       (_GLUED_PART.findall(cell) if _GLUED.match(cell) else [cell])]
            if _fits(unglued, len(devices), len(info)):
                cells = unglued
        if not len(devices) <= len(cells) <= len(devices) + len(info):
            fail(KIND, f"row {name} has {len(cells)} cells; expected {len(devices)} link types "
                       f"plus up to {len(info)} affinity columns", line)
        links = cells[: len(devices)]
        for column, cell in zip(devices, links, strict=True):
            if not _LINK.match(cell):
                fail(KIND, f"{name}/{column}: {cell!r} is not a link type (X, NV#, SYS, NODE, PHB, "
                           "PXB, PIX, ...)", line)
        self.matrix[name] = dict(zip(devices, links, strict=True))
        # NIC rows stop after the device columns; a GPU row always fills its affinity columns (N/A if none).
        if name.startswith("GPU") and len(cells) < len(devices) + len(info):
            self.short_rows.append(f"{name}'s {', '.join(info[len(cells) - len(devices):])}")
        for column, cell in zip(info, cells[len(devices):], strict=False):
            self.info_values.setdefault(column, {})[name] = None if cell == "N/A" else cell
        return True

    def other(self, line: Line) -> None:
        body = line.stripped
        last, self.last_entry = self.last_entry, None
        if m := _LEGEND_TITLE.match(body):
            self.in_nic_legend = bool(m.group("nic"))
        elif m := _NIC_ENTRY.match(body):
            self.nic_legend[m.group("nic")] = m.group("device")
        elif not self.in_nic_legend and (m := _LEGEND_ENTRY.match(body)):
            # `NV#  = ... a bonded set of # NVLinks`: the legend's own `#` (the key's count) looks like a
            # person's note at the end of the line; that first `# ...` is the tool's, any later one is not.
            own = _LEGEND_OWN_HASH.match(line.note) if "#" in m.group("key") else None
            text = m.group("text") + (own.group(0) if own else "")
            self.legend[m.group("key")] = " ".join(text.split())  # prose: re-spacing is noise
            if len(line.raw.expandtabs(8)) >= _WRAP_WIDTH:
                self.last_entry = (m.group("key"), line.number)
        elif last is not None and line.number == last[1] + 1 and not _DEVICE.match(body.split()[0]):
            # A legend line as wide as the terminal goes on, on the next line, without a key: the same entry.
            self.legend[last[0]] = " ".join(f"{self.legend[last[0]]} {line.text}{line.note}".split())
            self.last_entry = (last[0], line.number) if len(line.raw.expandtabs(8)) >= _WRAP_WIDTH else None
        else:
            fail(KIND, "line fits no part of nvidia-smi topo output (header, matrix row, legend)", line)


def parse_nvidia_smi_topo(text: str) -> NvidiaSmiTopo:
    """The matrix, affinities and legends; rows cut off are named in `missing`, stray lines in `unplaced`."""
    # The commands themselves (`nvidia-smi topo -m`, then `ibstatus`) pasted with or without their prompt.
    lines = [line for line in content_lines(text) if not is_shell(line, KIND)]
    if not lines:
        fail(KIND, "empty output")
    topo = _Topo()
    found = Collector(KIND)
    ibstatus: list[IbStatusPort] = []

    def handle(line: Line) -> None:
        if topo.other_view:
            fail(KIND, "after a second matrix header: another nvidia-smi topo view (such as -p2p), "
                       "not this topology", line)
        if not topo.devices and not topo.legend and not topo.nic_legend and (header := _header_cells(line)):
            topo.devices, topo.info = header
        elif topo.devices and (topo.legend or topo.nic_legend) and _header_cells(line):
            # Its legend (`OK = Status Ok`, `NS = Not supported`) would otherwise pass for this one's.
            topo.other_view = True
            fail(KIND, "a second matrix header after the legend: another nvidia-smi topo view "
                       "(such as -p2p), not this topology", line)
        elif not topo.row(line):
            topo.other(line)

    for position, line in enumerate(lines):
        if IBSTATUS_HEADER.match(line.stripped):
            ibstatus = parse_ibstatus_lines(KIND, lines[position:], found)
            found.recognised += 1
            break
        found.attempt(line, handle)

    if not topo.matrix and not topo.legend and not topo.nic_legend and not topo.devices and not ibstatus:
        found.recognised = 0
    if missing := [d for d in topo.devices if d not in topo.matrix]:
        found.lack(f"rows for {_ranges(missing)}")
    for short in topo.short_rows:
        found.lack(short)
    # nvidia-smi prints an entry for every NICn column; the legend comes last, so a cut takes its tail.
    if topo.nic_legend and (unnamed := [d for d in topo.devices if _NIC_N.match(d) and d not in topo.nic_legend]):
        found.lack(f"NIC Legend entries for {_ranges(unnamed)}")
    # Every driver ends the Legend with `NV#`, and prints a NIC Legend after it wherever columns are NICn:
    # a Legend without them was cut (by the person pasting it, or by `head`).
    if topo.legend and "NV#" not in topo.legend:
        found.lack("Legend entries after " + list(topo.legend)[-1])
    elif topo.legend and not topo.nic_legend and (numbered := [d for d in topo.devices if _NIC_N.match(d)]):
        found.lack(f"NIC Legend (entries for {_ranges(numbered)})")
    completeness = found.result("no topology matrix or legend found")
    # Every device the header or a row names: a cut output still says how many GPUs and NICs there are
    # (the rows it lacks are in `missing`).
    devices = list(dict.fromkeys([*topo.devices, *topo.matrix, *topo.nic_legend]))
    nics = [d for d in devices if not d.startswith("GPU")]
    info_values = topo.info_values
    return NvidiaSmiTopo(
        columns=topo.devices,
        info_columns=topo.info,
        gpus=[d for d in devices if d.startswith("GPU")],
        nics=nics,
        nic_devices={nic: topo.nic_legend.get(nic, nic) for nic in nics
                     if nic in topo.nic_legend or not _NIC_N.match(nic)},
        matrix=topo.matrix,
        cpu_affinity=info_values.get("CPU Affinity", {}),
        numa_affinity=info_values.get("NUMA Affinity", {}),
        gpu_numa_id=info_values.get("GPU NUMA ID", {}),
        other_columns={k: v for k, v in info_values.items() if k not in _KNOWN_INFO},
        legend=topo.legend,
        nic_legend=topo.nic_legend,
        ibstatus=ibstatus,
        **completeness,
    )
