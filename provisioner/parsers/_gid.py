"""One written form for RDMA GIDs, so that the same GID printed by two tools, or two releases, compares equal.

ibv_devinfo prints a GID as its rdma-core release does: older releases write every group in full
(`fe80:0000:0000:0000:5aa2:e1ff:fe2a:09b8`), newer ones pass it through inet_ntop (`fe80::5aa2:e1ff:fe2a:9b8`,
`::ffff:192.0.2.2`), and one `ibv_devinfo -v` may mix both. show_gids and sysfs (`ports/N/gids/I`) always
write the full form. The normal form is that full one, `ipaddress.IPv6Address(...).exploded`: it is what
show_gids and sysfs print, so it can be grepped there as is; it has one fixed width; and the compressed
form Python would give an IPv4-mapped GID (`::ffff:c000:202`) is printed by neither tool.
"""

from __future__ import annotations

import ipaddress

from provisioner.parsers._text import Line, fail


def normal_gid(value: str) -> str:
    """`value` in the normal form: eight groups of four lower-case hex digits; ValueError if it is no GID."""
    if "%" in value:  # an IPv6 scope (`fe80::1%eth0`) is an interface address, never a GID
        raise ValueError(f"a GID has no scope: {value!r}")
    return ipaddress.IPv6Address(value).exploded


def same_gid(a: str, b: str) -> bool:
    """True when two printed GIDs name the same GID, whichever form each tool printed."""
    try:
        return normal_gid(a) == normal_gid(b)
    except ValueError:
        return False


def gid_of(kind: str, value: str, line: Line) -> str:
    """The normal form of the GID `value` printed on `line`, or a ParseError for `kind` naming the line."""
    try:
        return normal_gid(value)
    except ValueError:
        fail(kind, f"GID is not an IPv6-style address: {value!r}", line)
