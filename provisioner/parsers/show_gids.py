"""Parse `show_gids`: the GID table of every RDMA port, with RoCE version, IPv4 address and netdev.

Columns are told apart by token shape, not position: the IPv4 column is often empty, a long address
pushes the later columns right, and an InfiniBand-only row has no DEV column. A row is
`DEV PORT INDEX GID [IPV4] VER [NETDEV]`. When the `n_gids_found=N` trailer is present it must agree
with the number of rows: a mismatch means lost lines, and the result is incomplete. show_gids prints the
trailer after every table, so a header without it was cut short (incomplete too); rows without header or
trailer (`show_gids | grep v2`) have `n_gids_found` None. Run once per device (`show_gids mlx5_0; show_gids
mlx5_1`), the output holds one table after another: a header starts the next table, each table is checked
against its own trailer, and the rows of all are kept (each names its device). Lines of another shape,
such as a row after a trailer with no new header, are listed in `unplaced`. The command line itself, pasted
with its prompt, behind root's bare `# ` or without one (`show_gids mlx5_1`), is skipped like any prompt.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from pydantic import Field

from provisioner.parsers._gid import gid_of
from provisioner.parsers._shell import is_shell
from provisioner.parsers._text import Collector, Fact, Line, Parsed, content_lines, fail

KIND = "show_gids"

_TRAILER = re.compile(r"^n_gids_found\s*=\s*(?P<count>[0-9]+)$", re.ASCII)
_IPV4 = re.compile(r"^[0-9]{1,3}(?:\.[0-9]{1,3}){3}$", re.ASCII)
_VERSION = re.compile(r"^v[0-9]+$", re.ASCII)
_SEPARATOR = re.compile(r"^-+$")
_INT = re.compile(r"^[0-9]+$", re.ASCII)


class ShowGid(Fact):
    device: str
    port: int
    index: int
    gid: str
    gid_normal: str  # the full form (see _gid.normal_gid); show_gids prints that form already
    ipv4: str | None = None
    version: str
    netdev: str | None = None


class GidTable(Fact):
    """One show_gids run's table: where it starts, its devices, its rows and its trailer's count."""

    line: int
    devices: list[str]
    rows: int
    n_gids_found: int | None = None


class ShowGids(Parsed):
    """The rows of every table in the output; `n_gids_found` is the sum of the trailers printed."""

    gids: list[ShowGid]
    n_gids_found: int | None = None
    tables: list[GidTable] = Field(default_factory=list)


def _row(tokens: list[str], line: Line) -> ShowGid:
    if len(tokens) < 5:
        fail(KIND, "row has too few columns (expected DEV PORT INDEX GID [IPv4] VER [DEV])", line)
    device, port, index, gid, *rest = tokens
    if not _INT.match(port) or not _INT.match(index):
        fail(KIND, "PORT and INDEX must be integers", line)
    normal = gid_of(KIND, gid, line)
    ipv4 = None
    if rest and _IPV4.match(rest[0]):
        try:
            ipaddress.IPv4Address(rest[0])
        except ValueError:
            fail(KIND, f"invalid IPv4 address {rest[0]!r}", line)
        ipv4 = rest.pop(0)
    if not rest or not _VERSION.match(rest[0]):
        fail(KIND, "missing RoCE version column (v1/v2)", line)
    version = rest.pop(0)
    netdev = rest.pop(0) if rest else None
    if rest:
        fail(KIND, f"unexpected extra columns: {' '.join(rest)}", line)
    return ShowGid(device=device, port=int(port), index=int(index), gid=gid, gid_normal=normal, ipv4=ipv4,
                   version=version, netdev=netdev)


@dataclass
class _Table:
    first: Line  # its header, or its first line where the header was not pasted
    header: bool
    rows: list[ShowGid] = field(default_factory=list)
    count: int | None = None
    trailer: Line | None = None


def parse_show_gids(text: str) -> ShowGids:
    tables: list[_Table] = []
    found = Collector(KIND)

    def table(line: Line) -> _Table:
        if not tables:
            tables.append(_Table(line, header=False))
        return tables[-1]

    def handle(line: Line) -> None:
        tokens = line.stripped.split()
        if tokens[0] == "DEV" and "GID" in tokens:
            # `show_gids mlx5_0; show_gids mlx5_1`, or a loop over devices: every run prints its own table.
            tables.append(_Table(line, header=True))
            return
        if tables and tables[-1].trailer is not None:
            fail(KIND, "output continues after the n_gids_found trailer without a new DEV ... GID header", line)
        if all(_SEPARATOR.match(t) for t in tokens):
            found.recognised -= 1  # a rule alone says nothing
            return
        if m := _TRAILER.match(line.stripped):
            current = table(line)
            current.count, current.trailer = int(m.group("count")), line
            return
        row = _row(tokens, line)
        table(line).rows.append(row)

    commands = 0
    for line in content_lines(text):
        # The command itself (`show_gids mlx5_1` before the next table), prompt or not: no row, and no line
        # after a trailer either.
        if is_shell(line, KIND):
            commands += 1
        else:
            found.attempt(line, handle)
    for current in tables:
        _check(current, found, several=len(tables) > 1)
    completeness = found.result("no show_gids header, rows or n_gids_found trailer"
                                + (" after the command line" if commands and not found.first_line else ""))
    counts = [t.count for t in tables if t.count is not None]
    return ShowGids(gids=[row for t in tables for row in t.rows], n_gids_found=sum(counts) if counts else None,
                    tables=[GidTable(line=t.first.number, devices=list(dict.fromkeys(r.device for r in t.rows)),
                                     rows=len(t.rows), n_gids_found=t.count) for t in tables],
                    **completeness)


def _check(table: _Table, found: Collector, several: bool) -> None:
    """Record what one table lacks. Where the output holds several tables, name the one cut short."""
    where = ""
    if several:
        devices = ", ".join(dict.fromkeys(r.device for r in table.rows))
        where = f" of the table at line {table.first.number}" + (f" ({devices})" if devices else
                                                                  ", cut before its first row")
    if table.header and table.trailer is None:
        found.lack(f"the n_gids_found trailer{where} (show_gids prints it after the last row)")
    count, printed = table.count, len(table.rows)
    if count is not None and count != printed:
        found.lack(f"{count - printed} GID rows{where} (the trailer says {count}, {printed} were printed)"
                   if count > printed else f"nothing{where}: {printed} rows but the trailer says {count}")
