"""Parse `show_gids`: the GID table of every RDMA port, with RoCE version, IPv4 address and netdev.

Columns are told apart by token shape, not position: the IPv4 column is often empty, a long address
pushes the later columns right, and an InfiniBand-only row has no DEV column. A row is
`DEV PORT INDEX GID [IPV4] VER [NETDEV]`. When the `n_gids_found=N` trailer is present it must agree
with the number of rows: a mismatch means lost lines, and the result is incomplete. show_gids prints the
trailer after every table, so a header without it was cut short (incomplete too); rows without header or
trailer (`show_gids | grep v2`) have `n_gids_found` None. Lines of another shape are listed in `unplaced`.
"""

from __future__ import annotations

import ipaddress
import re

from provisioner.parsers._text import Collector, Fact, Line, Parsed, content_lines, fail, is_prompt

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
    ipv4: str | None = None
    version: str
    netdev: str | None = None


class ShowGids(Parsed):
    gids: list[ShowGid]
    n_gids_found: int | None = None


def _row(tokens: list[str], line: Line) -> ShowGid:
    if len(tokens) < 5:
        fail(KIND, "row has too few columns (expected DEV PORT INDEX GID [IPv4] VER [DEV])", line)
    device, port, index, gid, *rest = tokens
    if not _INT.match(port) or not _INT.match(index):
        fail(KIND, "PORT and INDEX must be integers", line)
    try:
        ipaddress.IPv6Address(gid)
    except ValueError:
        fail(KIND, f"GID is not an IPv6-style address: {gid!r}", line)
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
    return ShowGid(device=device, port=int(port), index=int(index), gid=gid, ipv4=ipv4,
                   version=version, netdev=netdev)


def parse_show_gids(text: str) -> ShowGids:
    gids: list[ShowGid] = []
    count: int | None = None
    trailer: Line | None = None
    header: Line | None = None
    found = Collector(KIND)

    def handle(line: Line) -> None:
        nonlocal count, trailer, header
        tokens = line.stripped.split()
        if trailer is not None:
            fail(KIND, "output continues after the n_gids_found trailer", line)
        if tokens[0] == "DEV" and "GID" in tokens:
            header = line
            return
        if all(_SEPARATOR.match(t) for t in tokens):
            found.recognised -= 1  # a rule alone says nothing
            return
        if m := _TRAILER.match(line.stripped):
            count, trailer = int(m.group("count")), line
            return
        gids.append(_row(tokens, line))

    for line in content_lines(text):
        if not is_prompt(line):
            found.attempt(line, handle)
    if header is not None and trailer is None:
        found.lack("the n_gids_found trailer (show_gids prints it after the last row)")
    if trailer is not None and count is not None and count != len(gids):
        found.lack(f"{count - len(gids)} GID rows (the trailer says {count}, {len(gids)} were printed)"
                   if count > len(gids) else f"nothing: {len(gids)} rows but the trailer says {count}")
    completeness = found.result("no show_gids header, rows or n_gids_found trailer")
    return ShowGids(gids=gids, n_gids_found=count, **completeness)
