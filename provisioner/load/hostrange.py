"""Inventory host keys as Ansible reads them: `name:port`, `[v6]:port`, and ranges (`gpu[01:16]`,
`[a:f]`, strides `[0:10:2]`), expanded with a cap so a typo cannot ask for a hundred million hosts.
"""

from __future__ import annotations

import ipaddress
import re
import string

MAX_RANGE_HOSTS = 100_000  # far above any real fleet; a bigger range is a typo or an attack on memory


class HostRangeError(ValueError):
    """A host key or range that cannot be expanded; the message says why."""


def split_host_port(key: str) -> tuple[str, int | None]:
    """`gpu01:2222` -> ("gpu01", 2222); `[fe80::1]:22` -> ("fe80::1", 22); a bare IPv6 address keeps its
    colons. A range's `[1:3]` is never read as a port."""
    bracketed = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\](?::(\d+))?", key)
    if bracketed:
        port = bracketed.group(2)
        return bracketed.group(1), int(port) if port else None
    try:
        ipaddress.ip_address(key)
        return key, None
    except ValueError:
        pass
    outside = re.sub(r"\[[^\]]*\]", "", key)
    if outside.count(":") == 1:
        host, _, port = key.rpartition(":")
        if port.isdigit() and host:
            return host, int(port)
    return key, None


def expand_host_range(pattern: str, limit: int = MAX_RANGE_HOSTS) -> list[str]:
    """Every host name a pattern stands for, in order, as Ansible's `expand_hostname_range` gives them.

    Raises HostRangeError for a malformed range, one that runs backwards, or more than `limit` hosts.
    """
    names: list[str] = []
    try:
        _expand(pattern, pattern, names, limit)
    except _TooMany:
        raise HostRangeError(f"host range {pattern!r} stands for more than {limit} hosts; at most {limit} are "
                             "allowed") from None
    return names


class _TooMany(Exception):
    pass


def _expand(whole: str, pattern: str, names: list[str], limit: int) -> None:
    if "[" not in pattern:
        if len(names) >= limit:
            raise _TooMany
        names.append(pattern)
        return
    parts = pattern.replace("[", "|", 1).replace("]", "|", 1).split("|")
    if len(parts) != 3:
        raise HostRangeError(f"host range {whole!r}: expected NAME[BEGIN:END] or NAME[BEGIN:END:STEP]")
    head, body, tail = parts
    bounds = body.split(":")
    if len(bounds) not in (2, 3):
        raise HostRangeError(f"host range {whole!r}: must be begin:end or begin:end:step")
    beg, end = bounds[0] or "0", bounds[1]
    step_text = bounds[2] if len(bounds) == 3 else "1"
    if not end:
        raise HostRangeError(f"host range {whole!r}: the range needs an end value")
    if not step_text.isdigit() or int(step_text) < 1:
        raise HostRangeError(f"host range {whole!r}: the step must be a whole number of at least 1")
    step = int(step_text)
    width = len(beg) if beg[0] == "0" and len(beg) > 1 else 0
    if width and len(end) != width:
        raise HostRangeError(f"host range {whole!r}: a zero-padded range needs begin and end of equal length")
    seq: list[str] | range
    if len(beg) == 1 and len(end) == 1 and beg in string.ascii_letters and end in string.ascii_letters:
        first, last = string.ascii_letters.index(beg), string.ascii_letters.index(end)
        seq = list(string.ascii_letters[first : last + 1 : step])
    elif beg.isdigit() and end.isdigit():
        first, last = int(beg), int(end)
        seq = range(first, last + 1, step)
    else:
        raise HostRangeError(f"host range {whole!r}: use numbers ([01:16]) or single letters ([a:f])")
    if first > last:
        raise HostRangeError(f"host range {whole!r}: the range runs backwards")
    if len(names) + len(seq) > limit:  # checked before expanding: gpu[0:99999999] never builds a list
        raise _TooMany
    for item in seq:
        _expand(whole, head + (str(item).zfill(width) if width else str(item)) + tail, names, limit)


__all__ = ["MAX_RANGE_HOSTS", "HostRangeError", "expand_host_range", "split_host_port"]
