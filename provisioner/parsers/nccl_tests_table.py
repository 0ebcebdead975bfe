"""The result table of nccl-tests output: the column header, and the rows it names.

The header names a prefix (`size count type redop root`; 2017-2019 builds `bytes N type op|root`) and two
groups, out-of-place then in-place, each `time algbw busbw` then `error`, `res` or `#wrong`. One group alone
is printed too: 2017-2018 broadcast (out-of-place only) and rccl-tests `-O 0` (in-place only, the label line
above the header says so). The 2017-2018 builds (`bytes N` header, no units line) printed the time in
milliseconds (`%7.3f` of seconds * 1e3); it is read into the same microsecond fields. Later builds
add what an option asks for: `cputime` for `time` (`-C 1`, CPU time), four per-iteration columns after
each group (`i_min i_max i_p99 i_cv%`, per-iteration timing), and a trailing `timestamp` (`-T`) whose
cells are a date and a time (`%Y-%m-%d %H:%M:%S`, two blank-separated cells).
"""

from __future__ import annotations

import re

from provisioner.parsers._text import Fact, Line, fail, number, to_float

KIND = "nccl_tests"

_PREFIX_COLUMNS = ("size", "count", "type", "redop", "root")
_GROUP = ("time", "algbw", "busbw")
_TIMES = ("time", "cputime")
_PER_ITER = ("i_min", "i_max", "i_p99", "i_cv%")
_PER_ITER_NAMES = ("i_min_us", "i_max_us", "i_p99_us", "i_cv_pct")
_WRONG = ("error", "#wrong", "res")
# nccl-tests 2017-2019 headers: `#  bytes  N  type  op|root  time  algbw  busbw  res ...`.
_OLD_NAMES = {"bytes": "size", "N": "count", "op": "redop"}


class NcclTestRow(Fact):
    """One message size. Times in microseconds, bandwidths in GB/s."""

    size: int
    count: int
    type: str
    redop: str | None = None  # nccl-tests before 2019 printed none for all_gather and broadcast
    root: int | None = None
    oop_time_us: float | None = None
    oop_algbw: float | None = None
    oop_busbw: float | None = None
    oop_wrong: int | float | None = None
    ip_time_us: float | None = None
    ip_algbw: float | None = None
    ip_busbw: float | None = None
    ip_wrong: int | float | None = None
    # Per-iteration timing (nccl-tests 2.19.6+ with per-iteration timing on): min, max, p99 in us, cv in %.
    oop_i_min_us: float | None = None
    oop_i_max_us: float | None = None
    oop_i_p99_us: float | None = None
    oop_i_cv_pct: float | None = None
    ip_i_min_us: float | None = None
    ip_i_max_us: float | None = None
    ip_i_p99_us: float | None = None
    ip_i_cv_pct: float | None = None
    timestamp: str | None = None  # `-T`: when the row was printed, `YYYY-MM-DD HH:MM:SS`


def columns_of(line: Line, alone: str = "oop") -> list[str] | None:
    """Column names from a header line, or None when the line is not the header. `alone` names the group
    of a header with one group only (`ip` where the label line above it reads `in-place` alone)."""
    raw = line.stripped.lstrip("#").split()
    tokens = [_OLD_NAMES.get(t, t) for t in raw]
    if len(tokens) < 2 or tokens[:2] != ["size", "count"]:
        return None
    # `bytes N ...`: the 2017-2018 builds, whose time column is in milliseconds.
    time_name = "time_ms" if raw[:2] == ["bytes", "N"] else "time_us"
    prefix: list[str] = []
    while tokens and tokens[0] in _PREFIX_COLUMNS:
        prefix.append(tokens.pop(0))
    columns = list(prefix)
    for index, group in enumerate(("oop", "ip")):
        if index == 1 and (not tokens or tokens == ["timestamp"]):
            # One group only: it is the one the label line names.
            columns = [c.replace("oop_", f"{alone}_", 1) for c in columns]
            break
        if not tokens or tokens[0] not in _TIMES or tokens[1:3] != list(_GROUP[1:]):
            fail(KIND, f"header: expected 'time algbw busbw' for the {group} group", line)
        tokens = tokens[3:]
        columns += [f"{group}_{time_name}", f"{group}_algbw", f"{group}_busbw"]
        if tokens and tokens[0] in _WRONG:
            columns.append(f"{group}_wrong:{tokens.pop(0)}")
        if tuple(tokens[:4]) == _PER_ITER:
            columns += [f"{group}_{name}" for name in _PER_ITER_NAMES]
            tokens = tokens[4:]
    if tokens == ["timestamp"]:
        columns.append("timestamp")
        tokens = []
    if tokens:
        fail(KIND, f"header: unexpected columns {' '.join(tokens)}", line)
    for needed in ("type",):
        if needed not in prefix:
            fail(KIND, f"header has no {needed} column", line)
    return columns


def _int_cell(cell: str, line: Line, what: str) -> int:
    value = number(cell)
    if value is None or (isinstance(value, float) and not value.is_integer()):
        fail(KIND, f"{what} is not an integer: {cell!r}", line)
    return int(value)


def infer_columns(cells: list[str]) -> list[str] | None:
    """The columns of a result row printed without its header, from the row's shape alone: size, count,
    a type name, a reduction name, [root], then two groups of time algbw busbw [error|#wrong]. A sentence that
    starts with a number (`1 job process is considered dead ...`, NCCL's RAS report) is not one: the count is a
    number too."""
    if number(cells[0]) is None or len(cells) < 2 or number(cells[1]) is None:
        return None
    if len(cells) in (9, 11) and cells[2][:1].isalpha() and number(cells[3]) is not None:
        # The 2017-2019 all_gather form: no reduction column, `res` (max error) after each group.
        groups = ["time_us", "algbw", "busbw"] + (["wrong:error"] if len(cells) == 11 else [])
        return ["size", "count", "type"] + [f"{g}_{c}" for g in ("oop", "ip") for c in groups]
    if len(cells) in (10, 12) and cells[2][:1].isalpha() and re.fullmatch(r"-?[0-9]+", cells[3]):
        # The 2019-2022 broadcast, gather and scatter form: a root but no reduction column.
        groups = ["time_us", "algbw", "busbw"] + (["wrong:error"] if len(cells) == 12 else [])
        return ["size", "count", "type", "root"] + [f"{g}_{c}" for g in ("oop", "ip") for c in groups]
    if len(cells) not in (10, 11, 12, 13) or not cells[2][:1].isalpha() or not cells[3][:1].isalpha():
        return None
    root = len(cells) in (11, 13)
    prefix = ["size", "count", "type", "redop"] + (["root"] if root else [])
    wrong = len(cells) in (12, 13)
    kind = ""
    if wrong:
        cell = cells[-1]
        kind = ":#wrong" if re.fullmatch(r"[0-9]+|N/A", cell) and root else ":error"
    groups = [f"{g}_{c}" for g in ("oop", "ip") for c in ("time_us", "algbw", "busbw", "wrong")]
    if not wrong:
        groups = [c for c in groups if not c.endswith("_wrong")]
    return prefix + [c + kind if c.endswith("_wrong") else c for c in groups]


def parse_row(columns: list[str], line: Line) -> NcclTestRow:
    cells = line.stripped.split()
    if number(cells[0]) is None:
        fail(KIND, "not a result row (a row starts with the size in bytes)", line)
    if columns[-1:] == ["timestamp"] and len(cells) == len(columns) + 1:
        cells[-2:] = [" ".join(cells[-2:])]  # the date and the time of one `%Y-%m-%d %H:%M:%S` cell
    if len(cells) != len(columns):
        fail(KIND, f"data row has {len(cells)} cells but the header names {len(columns)} columns", line)
    values: dict[str, object] = {}
    for column, cell in zip(columns, cells, strict=True):
        name, _, wrong = column.partition(":")
        if name in ("type", "redop", "timestamp"):
            values[name] = cell
        elif cell == "N/A":
            values[name] = None
        elif name in ("size", "count", "root") or wrong == "#wrong":
            values[name] = _int_cell(cell, line, name)
        elif name.endswith("_time_ms"):
            values[name.removesuffix("_ms") + "_us"] = round(to_float(KIND, cell, line, name) * 1000, 6)
        else:
            values[name] = to_float(KIND, cell, line, name)
    if values.get("size") is None or values.get("count") is None:
        fail(KIND, "size and count must be numbers", line)
    return NcclTestRow.model_validate(values)


def version_from_code(code: int) -> str:
    """NCCL_VERSION_CODE as a version: 22809 -> 2.28.9 (since 2.9: X*10000+Y*100+Z), 2708 -> 2.7.8."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"
