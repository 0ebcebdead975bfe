"""Parse nccl-tests output (`all_reduce_perf`, `all_gather_perf`, ...): the result table and its summary.

Columns come from the header line (`#  size  count  type  redop  [root]  time  algbw  busbw  error|#wrong
time ...`), first the out-of-place group then the in-place one. Older nccl-tests print an `error`
column (max relative error, a float), newer ones `#wrong` (count of wrong elements, an int); both land
in `oop_wrong`/`ip_wrong`, and `wrong_column` says which it was. `N/A` cells become None.

Comment lines (`# ...`) that are not recognised are skipped, as are NCCL log lines interleaved by
NCCL_DEBUG; `Test NCCL failure` style lines are collected in `failures`. A data row before any header,
or with the wrong number of cells, and any other line, raise ParseError.
"""

from __future__ import annotations

import re

from pydantic import Field

from provisioner.parsers._text import Fact, Line, content_lines, fail, is_prompt, to_float, to_int

KIND = "nccl_tests"

RANK = re.compile(
    r"^#\s*Rank\s+(?P<rank>[0-9]+)(?:\s+Group\s+(?P<group>[0-9]+))?\s+Pid\s+(?P<pid>[0-9]+)\s+on\s+"
    r"(?P<host>\S+)\s+device\s+(?P<device>[0-9]+)\s+\[(?P<bus>[^\]]*)\]\s*(?P<name>.*)$",
    re.ASCII,
)
NCCL_VERSION = re.compile(r"NCCL version (?P<version>[0-9]+(?:\.[0-9]+)+)(?:[-+](?P<suffix>\S+))?", re.ASCII)
CUDA_SUFFIX = re.compile(r"cuda(?P<cuda>[0-9]+(?:\.[0-9]+)*)", re.ASCII)
LOG_LINE = re.compile(r"(?:^|\s)NCCL (?:INFO|WARN|TRACE|ABORT)\b")

_OUT_OF_BOUNDS = re.compile(
    r"^#\s*Out of bounds values\s*:\s*(?P<count>[0-9]+)\s*(?P<verdict>\S+)?$", re.ASCII
)
_AVG_BUSBW = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(?P<value>\S+)$")
_PARAMS = re.compile(r"^#\s*nThread\s")
_FAILURE = re.compile(r"\bTest (?:NCCL |CUDA )?failure\b|\bTest failure\b", re.IGNORECASE)

_PREFIX_COLUMNS = ("size", "count", "type", "redop", "root")
_GROUP = ("time", "algbw", "busbw")
_WRONG = ("error", "#wrong")


class NcclTestRank(Fact):
    """One `#  Rank` line: which process drove which GPU on which host."""

    rank: int
    group: int | None = None
    pid: int
    host: str
    device: int
    bus_id: str
    name: str


class NcclTestRow(Fact):
    """One message size. Times in microseconds, bandwidths in GB/s."""

    size: int
    count: int
    type: str
    redop: str
    root: int | None = None
    oop_time_us: float | None = None
    oop_algbw: float | None = None
    oop_busbw: float | None = None
    oop_wrong: int | float | None = None
    ip_time_us: float | None = None
    ip_algbw: float | None = None
    ip_busbw: float | None = None
    ip_wrong: int | float | None = None


class NcclTests(Fact):
    rows: list[NcclTestRow] = Field(default_factory=list)
    avg_busbw: float | None = None
    out_of_bounds: int | None = None
    out_of_bounds_ok: bool | None = None
    wrong_column: str | None = None
    columns: list[str] = Field(default_factory=list)
    nccl_version: str | None = None
    cuda_version: str | None = None
    devices: list[NcclTestRank] = Field(default_factory=list)
    parameters: dict[str, str] = Field(default_factory=dict)
    failures: list[str] = Field(default_factory=list)


def parse_rank(line: Line) -> NcclTestRank | None:
    """The rank described by a `#  Rank N Group G Pid P on HOST device D [BUS] NAME` line, else None."""
    m = RANK.match(line.stripped)
    if not m:
        return None
    return NcclTestRank(
        rank=int(m.group("rank")),
        group=int(m.group("group")) if m.group("group") else None,
        pid=int(m.group("pid")),
        host=m.group("host"),
        device=int(m.group("device")),
        bus_id=m.group("bus").strip(),
        name=m.group("name").strip(),
    )


def split_nccl_version(text: str) -> tuple[str, str | None] | None:
    """("2.19.3", "12.3") from text containing `NCCL version 2.19.3+cuda12.3`; None if it has none."""
    m = NCCL_VERSION.search(text)
    if not m:
        return None
    cuda = CUDA_SUFFIX.search(m.group("suffix") or "")
    return m.group("version"), cuda.group("cuda") if cuda else None


def _columns(line: Line) -> list[str] | None:
    """Column names from a header line, or None when the line is not the header."""
    tokens = line.stripped.lstrip("#").split()
    if len(tokens) < 2 or tokens[:2] != ["size", "count"]:
        return None
    prefix: list[str] = []
    while tokens and tokens[0] in _PREFIX_COLUMNS:
        prefix.append(tokens.pop(0))
    columns = list(prefix)
    for group in ("oop", "ip"):
        if tokens[:3] != list(_GROUP):
            fail(KIND, f"header: expected 'time algbw busbw' for the {group} group", line)
        tokens = tokens[3:]
        columns += [f"{group}_time_us", f"{group}_algbw", f"{group}_busbw"]
        if tokens and tokens[0] in _WRONG:
            columns.append(f"{group}_wrong:{tokens.pop(0)}")
    if tokens:
        fail(KIND, f"header: unexpected columns {' '.join(tokens)}", line)
    for needed in ("type", "redop"):
        if needed not in prefix:
            fail(KIND, f"header has no {needed} column", line)
    return columns


def _row(columns: list[str], line: Line) -> NcclTestRow:
    cells = line.stripped.split()
    if len(cells) != len(columns):
        fail(KIND, f"data row has {len(cells)} cells but the header names {len(columns)} columns", line)
    values: dict[str, object] = {}
    for column, cell in zip(columns, cells, strict=True):
        name, _, wrong = column.partition(":")
        if name in ("type", "redop"):
            values[name] = cell
        elif cell == "N/A":
            values[name] = None
        elif name in ("size", "count", "root") or wrong == "#wrong":
            values[name] = to_int(KIND, cell, line, name)
        else:
            values[name] = to_float(KIND, cell, line, name)
    if values.get("size") is None or values.get("count") is None:
        fail(KIND, "size and count must be numbers", line)
    return NcclTestRow.model_validate(values)


def parse_nccl_tests(text: str) -> NcclTests:
    lines = [line for line in content_lines(text) if not is_prompt(line)]
    columns: list[str] | None = None
    rows: list[NcclTestRow] = []
    devices: list[NcclTestRank] = []
    failures: list[str] = []
    fields: dict[str, object] = {}
    recognised = 0

    for line in lines:
        body = line.stripped
        if body.startswith("#"):
            if (header := _columns(line)) is not None:
                columns = header
                recognised += 1
            elif rank := parse_rank(line):
                devices.append(rank)
                recognised += 1
            elif m := _OUT_OF_BOUNDS.match(body):
                fields["out_of_bounds"] = int(m.group("count"))
                verdict = (m.group("verdict") or "").upper()
                fields["out_of_bounds_ok"] = verdict == "OK" if verdict else None
                recognised += 1
            elif m := _AVG_BUSBW.match(body):
                fields["avg_busbw"] = to_float(KIND, m.group("value"), line, "average bus bandwidth")
                recognised += 1
            elif _PARAMS.match(body):
                fields["parameters"] = _parameters(body)
                recognised += 1
            continue
        version = split_nccl_version(body)
        if version and (body.startswith("NCCL version") or LOG_LINE.search(body)):
            fields["nccl_version"], fields["cuda_version"] = version
            recognised += 1
            continue
        if LOG_LINE.search(body):
            continue
        if _FAILURE.search(body):
            failures.append(body)
            recognised += 1
            continue
        if columns is None:
            fail(KIND, "line before the column header (expected '#  size  count  type ...')", line)
        rows.append(_row(columns, line))
        recognised += 1

    if not recognised:
        fail(KIND, "no nccl-tests header, result table or summary found", lines[0] if lines else None)
    wrong = next((c.partition(":")[2] for c in columns or [] if ":" in c), None)
    return NcclTests(
        rows=rows,
        wrong_column=wrong,
        columns=[c.partition(":")[0] for c in columns or []],
        devices=devices,
        failures=failures,
        **fields,  # type: ignore[arg-type]
    )


def _parameters(body: str) -> dict[str, str]:
    # `# nThread 1 nGpus 1 minBytes 8 maxBytes 128M step: 2(factor) warmup iters: 5 iters: 20 ...`
    text = body.lstrip("#").strip()
    pairs = re.findall(r"([A-Za-z][A-Za-z ]*?):?\s+(\S+)(?=\s+[A-Za-z]|\s*$)", text)
    return {key.strip(): value for key, value in pairs}
