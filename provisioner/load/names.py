"""Rules for the names a playbook hands to commands on a host: interfaces, units, modules, sysctls,
packages, RDMA devices, file paths, users.

Every value is shell-quoted on its way to a host, but a name that the kernel, systemd or the package
manager would refuse can only be a mistake or an attack: a leading `-` is read as an option by the
tool it reaches (quoting does not help there), and newlines, `;`, `$(...)` or backquotes end up in
files fabnet writes and in the reports operators read. So each rule is what the owning tool allows,
narrowed to characters that are not shell syntax. Each check returns the value or raises ValueError
with a sentence saying what is allowed (pydantic turns it into a located error).
"""

from __future__ import annotations

import re

# The kernel's IFNAMSIZ is 16 bytes with the terminating NUL.
IFNAME_MAX = 15
# IB_DEVICE_NAME_MAX is 64 with the NUL.
RDMA_NAME_MAX = 63
# systemd's UNIT_NAME_MAX is 256 with the NUL.
UNIT_NAME_MAX = 255
# MODULE_NAME_LEN is 64 - sizeof(unsigned long) with the NUL.
MODULE_NAME_MAX = 55
# PATH_MAX and NAME_MAX of Linux (PATH_MAX counts the NUL).
PATH_MAX = 4095
NAME_MAX = 255
# useradd/groupadd's default limit on Linux.
USER_NAME_MAX = 32
# A sysctl value is written to /proc in one page.
SYSCTL_VALUE_MAX = 4096
PACKAGE_NAME_MAX = 255
SYSCTL_NAME_MAX = 255
# A Slurm node name is usually a host name; a DNS name's length bounds it.
SLURM_NODE_MAX = 255

_NETDEV = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_RDMA = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_SLURM_NODE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_UNIT_CHARS = re.compile(r"[A-Za-z0-9:_.@\-]+")
_MODULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-]*")
_SYSCTL_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_\-+@:]*")
_PACKAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9+._\-]+(?::[a-z0-9][a-z0-9\-]*)?")
_PATH_PART = re.compile(r"[A-Za-z0-9_.,+@%=~:\-]+")
_USER = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_.\-]*\$?|[0-9]+)")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _first_problem(value: str) -> str:
    """A short description of the first character that is never allowed, or ""."""
    for char in value:
        if char == "\n":
            return "a newline"
        if ord(char) < 0x20 or ord(char) == 0x7F:
            return f"the control character {char!r}"
        if char.isspace():
            return "whitespace"
        if char in ";&|$`<>()'\"\\*?{}[]!#":
            return f"the shell character {char!r}"
    return ""


def _refuse(what: str, value: str, allowed: str) -> ValueError:
    if value.startswith("-"):
        reason = f"{what} must not start with '-' (a tool would read it as an option)"
        return ValueError(f"{reason}; {allowed}" if allowed else reason)
    problem = _first_problem(value)
    reason = f"{what} must not contain {problem}" if problem else f"invalid {what.split(' ', 1)[1]}"
    return ValueError(f"{reason}; {allowed}" if allowed else reason)


def _length(what: str, value: str, top: int, allowed: str, low: int = 1) -> None:
    # Characters first: "must not contain ';'" says more about "x; touch /tmp/pwned" than its length.
    if value.startswith("-") or _first_problem(value):
        raise _refuse(what, value, allowed)
    if not low <= len(value) <= top:
        raise ValueError(f"{what} must be {low}..{top} characters long (got {len(value)}); {allowed}")


def _matching(what: str, value: str, pattern: re.Pattern[str], top: int, allowed: str, low: int = 1) -> str:
    """`value` when it has the right length and matches `pattern` whole; else a ValueError saying why."""
    _length(what, value, top, allowed, low)
    if not pattern.fullmatch(value):
        raise _refuse(what, value, allowed)
    return value


def netdev(value: str) -> str:
    allowed = (
        f"allowed: 1..{IFNAME_MAX} letters, digits, '_', '.', '-' (the kernel's limit), "
        "starting with a letter, digit or '_', not all digits"
    )
    _matching("an interface name", value, _NETDEV, IFNAME_MAX, allowed)
    if value.isdigit():
        # systemd and iproute2 would take an all-digit name for an interface index.
        raise ValueError(f"an interface name must not be all digits; {allowed}")
    return value


def rdma_device(value: str) -> str:
    allowed = f"allowed: 1..{RDMA_NAME_MAX} letters, digits, '_', '.', '-', not starting with '-' or '.'"
    return _matching("an RDMA device name", value, _RDMA, RDMA_NAME_MAX, allowed)


def slurm_node(value: str) -> str:
    """A Slurm NodeName: it goes into `scontrol update NodeName=...`, `sinfo -n` and srun's `-w` hostlist,
    where a comma or a bracket would be hostlist syntax and name other nodes."""
    allowed = (f"allowed: 1..{SLURM_NODE_MAX} letters, digits, '_', '.', '-' (commas and brackets are Slurm's "
               "hostlist syntax), starting with a letter, digit or '_'")
    return _matching("a Slurm node name", value, _SLURM_NODE, SLURM_NODE_MAX, allowed)


def unit(value: str) -> str:
    allowed = (
        f"allowed: a systemd unit name of 1..{UNIT_NAME_MAX} letters, digits, ':', '_', '.', '@', '-', "
        "not starting with '-', '.' or '@', with at most one '@' (template@instance)"
    )
    _length("a unit name", value, UNIT_NAME_MAX, allowed)
    if not _UNIT_CHARS.fullmatch(value) or value.startswith((".", "@")) or value.count("@") > 1:
        # systemd's own `-.mount` and `-.slice` are refused too: they are not services to manage.
        raise _refuse("a unit name", value, allowed)
    return value


def kernel_module(value: str) -> str:
    allowed = f"allowed: 1..{MODULE_NAME_MAX} letters, digits, '_', '-', starting with a letter or digit"
    return _matching("a module name", value, _MODULE, MODULE_NAME_MAX, allowed)


def sysctl_name(value: str) -> str:
    allowed = (
        "allowed: parts separated by '.' (or '/', as in sysctl.d), each of letters, digits, '_', '-', "
        "'+', '@', ':' and starting with a letter, digit or '_'; an interface name with a dot is "
        "written with '/' in the dotted form (net.ipv4.conf.eth0/100.rp_filter)"
    )
    _length("a sysctl name", value, SYSCTL_NAME_MAX, allowed)
    first = next((c for c in value if c in "./"), ".")
    other = "/" if first == "." else "."
    # Split on the separator, then each part may hold the other one (an interface name with a dot).
    parts = [p for chunk in value.split(first) for p in (chunk.split(other) if chunk else [chunk])]
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"a sysctl name must not have empty, '.' or '..' parts; {allowed}")
    if not all(_SYSCTL_PART.fullmatch(p) for p in parts):
        raise _refuse("a sysctl name", value, allowed)
    return value


def sysctl_value(value: str) -> str:
    if len(value) > SYSCTL_VALUE_MAX:
        raise ValueError(f"a sysctl value must be 0..{SYSCTL_VALUE_MAX} characters long (got {len(value)})")
    if _CONTROL.search(value):
        raise ValueError(
            "a sysctl value is one line: no newline or control characters (tabs and spaces are fine)"
        )
    return value


def package(value: str) -> str:
    allowed = (
        f"allowed: a package name of 2..{PACKAGE_NAME_MAX} letters, digits, '+', '.', '_', '-', starting "
        "with a letter or digit, optionally ':arch' (libnccl2:amd64)"
    )
    return _matching("a package name", value, _PACKAGE, PACKAGE_NAME_MAX, allowed, low=2)


def file_path(value: str) -> str:
    allowed = (
        "allowed: an absolute path of parts made of letters, digits and '_ . , + @ % = ~ : -', "
        f"without '.' or '..' parts, '//' or a trailing '/', at most {PATH_MAX} characters "
        f"and {NAME_MAX} per part"
    )
    problem = _first_problem(value)
    if problem:
        raise ValueError(f"a path must not contain {problem}; {allowed}")
    if not value.startswith("/"):
        raise ValueError(f"a path must be absolute (start with '/'); {allowed}")
    _length("a path", value, PATH_MAX, allowed)
    parts = value[1:].split("/")
    for part in parts:
        if part == "":
            raise ValueError(f"a path must not contain '//' or end with '/'; {allowed}")
        if part in (".", ".."):  # a '..' would leave the directory a reader expects
            raise ValueError(f"a path must not contain {part!r} parts; {allowed}")
        if len(part) > NAME_MAX:
            raise ValueError(f"a path part must be at most {NAME_MAX} characters; {allowed}")
        if not _PATH_PART.fullmatch(part):
            raise _refuse("a path", part, allowed)
    return value


def shown(text: str) -> str:
    """`text` with every character that is not printable written as its escape (\\x1b, \\n, \\u202e), so
    an error that quotes a refused name does not carry the name's control characters to the terminal."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def inventory_name(what: str, value: str) -> str:
    """A host or group name as an inventory writes it. Ansible takes any text; fabnet refuses characters
    that are not printable (C0/C1 controls such as ESC and newline, tabs, bidi and zero-width format
    characters such as U+202E, line separators, unassigned code points, spaces other than ' '), because
    the name reaches the run history, Prometheus labels, --drain-cmd arguments, known_hosts pins and
    journal file names, where nothing escapes it and an escape or a reversed name misleads the reader."""
    for char in value:
        if not char.isprintable():
            raise ValueError(
                f"{what} '{shown(value)}' contains the unprintable character U+{ord(char):04X}; a host or group "
                "name must be printable text (letters, digits, '.', '-', '_', ':' and the like), so it cannot "
                "hide control or bidirectional characters in reports, metrics and known_hosts"
            )
    return value


def user(value: str) -> str:
    allowed = (
        f"allowed: a user or group name of 1..{USER_NAME_MAX} letters, digits, '_', '.', '-' starting "
        "with a letter or '_' (a trailing '$' is allowed), or a numeric id"
    )
    # A trailing '$' (Samba machine accounts) is literal to a shell: nothing follows it to expand.
    _length("a user or group name", value.removesuffix("$"), USER_NAME_MAX, allowed)
    if not _USER.fullmatch(value):
        raise _refuse("a user or group name", value, allowed)
    return value


# ethtool prints a driver's counter name as it is: spaces, brackets, dots and colons occur (`[0]: rx_discards`,
# `rx_crc_errors.nic`). Such a name is only compared with what a host printed; a sysfs counter is a file, so
# NAME_MAX bounds both.
_COUNTER = re.compile(rf"\S(?:[^\x00-\x1f\x7f]{{0,{NAME_MAX - 2}}}\S)?")


def counter_name(value: str) -> str:
    """A port counter's name as sysfs, perfquery or `ethtool -S` print it."""
    if not _COUNTER.fullmatch(value):
        raise ValueError(f"a counter name is 1..{NAME_MAX} printable characters, not starting or "
                         "ending with a blank")
    return value


# A sysfs counter is a file as the driver names it: hfi1 adds `,32` to its 32-bit ones (`RcvOverflow,32`) and puts
# blanks inside some (`Pio Reserved 30`). A '/' would reach another folder, a ':' would make grep's `PATH:VALUE`
# line ambiguous, and `.` or `..` name a folder, which the probe's `grep -r` would read whole; a blank at either
# end is refused as the parser never reads one there.
_SYSFS_COUNTER = re.compile(r"[^/:\s](?:[^/:\x00-\x1f\x7f-\x9f]*[^/:\s])?")
# perfquery prints CamelCase names, read as their sysfs names (symbol_error, VL15_dropped).
_PERFQUERY_COUNTER = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def rdma_counter_refusal(value: str, source: str) -> str | None:
    """Why `value` cannot name a counter of `source` (sysfs: one the probe puts, quoted, into a
    `DEVICE/hw_counters/NAME` path and reads back; perfquery), or None when it can."""
    if source == "perfquery":
        return None if _PERFQUERY_COUNTER.fullmatch(value) else "letters, digits and _, as sysfs names them"
    if value in (".", "..") or not _SYSFS_COUNTER.fullmatch(value):
        return "a file name as the kernel spells it: no '/' or ':', not '.' or '..'"
    return None
