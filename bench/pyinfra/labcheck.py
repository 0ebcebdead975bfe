"""Shared pieces of the benchmark's pyinfra deploys: the read commands, their parsers and the `check` operation.

A check is a pyinfra operation that compares one fact with its desired value: in sync it does nothing
(a noop), drifted it yields a placeholder command, so `pyinfra --dry` lists the host under that check
as "would change" without touching it. Every host runs the same checks in the same order, which keeps
pyinfra's operation order identical across hosts.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import jinja2
from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, operation
from pyinfra.facts.server import Command

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"

# host name -> live MTU of the data port, filled by site.py and read by fleet.py (a later deploy file,
# which pyinfra starts only once every host has finished the first one).
FLEET_MTU: dict[str, int | None] = {}

LISTING_LOOP = (
    'do if [ -f "$f" ]; then set -- "$@" "$f"; fi; done; '
    'if [ $# -gt 0 ]; then tail -v -n +1 -- "$@"; echo; fi; true'
)


def listing(*patterns: str) -> str:
    """Print every existing file among the glob `patterns`, each after a `==> PATH <==` line (one `tail`
    for all of them, as fabnet reads them)."""
    return f"set --; for f in {' '.join(patterns)}; {LISTING_LOOP}"


def rdma_dev_of(iface: str, sysfs: str) -> str:
    """Shell prefix that sets $dev to the RDMA device of netdev `iface` (as fabnet looks it up: sysfs
    first, then `rdma link show`)."""
    return (
        f"dev=; for d in {shlex.quote(f'{sysfs}/class/net/{iface}/device/infiniband')}/*; do "
        '[ -d "$d" ] || continue; if [ -z "$dev" ]; then dev=${d##*/}; else dev=; break; fi; done; '
        '[ -n "$dev" ] || dev=$(rdma link show 2>/dev/null | awk -v want=' + shlex.quote(iface)
        + " '$NF == want {split($2, a, \"/\"); print a[1]; exit}'); "
        '[ -n "$dev" ] || { echo "no RDMA device for netdev" >&2; exit 1; }; '
    )


def file_probe(path: str) -> str:
    quoted = shlex.quote(path)
    return (
        f"if [ -e {quoted} ]; then stat -L -c 'stat %a %U %G' -- {quoted} && echo content && "
        f"base64 < {quoted}; else echo missing; fi"
    )


def read(command: str) -> str | None:
    """Output of one command on the current host (one SSH exec); None when it failed."""
    return host.get_fact(Command, command=command, _ignore_errors=True)


@operation()
def check(key: str, want: object, have: object, ok: bool) -> Iterator[StringCommand]:
    """In sync: nothing to do. Drifted: a harmless placeholder command, so --dry reports a change."""
    if ok:
        host.noop(f"{key} is {have}")
        return
    yield StringCommand("echo", QuoteString(f"drift {key}: want {want}, have {have}"))


def first(pattern: str, text: str | None, default: str = "none", flags: int = re.MULTILINE) -> str:
    match = re.search(pattern, text or "", flags)
    return match.group(1) if match else default


def link_of(ip_json: str | None, iface: str) -> dict:
    try:
        links = json.loads(ip_json or "[]")
    except ValueError:
        return {}
    return next((link for link in links if link.get("ifname") == iface), {})


def boot_mtu(text: str | None, iface: str) -> str:
    """MTUBytes of the systemd-networkd file that matches `iface`."""
    found = "none"
    for chunk in (text or "").split("==> ")[1:]:
        names = re.findall(r"^Name=(.*)$", chunk, re.MULTILINE)
        if any(iface in n.split() for n in names):
            found = first(r"^MTUBytes=(\d+)", chunk, found)
    return found


def boot_sysctl(text: str | None, name: str) -> str:
    values = re.findall(rf"^\s*{re.escape(name)}\s*=\s*(\S+)", text or "", re.MULTILINE)
    return values[-1] if values else "not set"


def systemctl_show(text: str | None) -> dict[str, str]:
    return dict(line.split("=", 1) for line in (text or "").splitlines() if "=" in line)


def qos_read(iface: str, sysfs: str) -> str:
    """Shell printing the port's DCB state as fabnet reads it: iproute2's `dcb` where it answers (and no
    sysfs `qos/trust` exists), else `mlnx_qos -i`."""
    dev = shlex.quote(iface)
    return (
        f"if [ ! -e {shlex.quote(f'{sysfs}/class/net/{iface}/qos/trust')} ] && "
        f"q=$({{ dcb -N app show dev {dev} dscp-prio && dcb pfc show dev {dev} prio-pfc && "
        f"dcb ets show dev {dev} tc-tsa tc-bw prio-tc; }} 2>/dev/null); "
        f"then printf '%s\\n' \"$q\"; else mlnx_qos -i {dev}; fi"
    )


def qos_facts(qos: str | None) -> tuple[str, str, dict[int, str]]:
    """(trust, PFC priorities, DSCP -> priority) from either tool's report."""
    text = qos or ""
    if re.search(r"^prio-pfc ", text, re.MULTILINE):  # dcb: trust is dscp exactly when DSCP rows exist
        dscp_row = first(r"^dscp-prio (.*)$", text, "")
        mapping = {int(d): p for d, p in re.findall(r"(\d+):(\d)", dscp_row)}
        pfc = ",".join(re.findall(r"(\d):on", first(r"^prio-pfc (.*)$", text, "")))
        return ("dscp" if mapping else "pcp"), pfc, mapping
    flags = first(r"^\s*enabled((?:\s+\d)+)", text, "").split()
    pfc = ",".join(str(i) for i, flag in enumerate(flags) if flag == "1")
    mapping = {int(d): prio for prio, dscps in re.findall(r"prio:(\d+) dscp:([\d,]*)", text)
               for d in dscps.split(",") if d}
    return first(r"Priority trust state: (\S+)", text, "unknown"), pfc, mapping


def ecn_on(text: str | None, side: str) -> str:
    return ",".join(sorted(re.findall(rf"{side}/enable/(\d):1", text or "")))


def version_key(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", text)]


def render(template: str, data: dict) -> bytes:
    env = jinja2.Environment(
        trim_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined, autoescape=False
    )
    env.filters["quote"] = lambda value: shlex.quote(str(value))
    return env.from_string((TEMPLATES / template).read_text()).render(**data).encode()


def file_checks(path: str, output: str | None, want_content: bytes, mode: str = "644") -> list[tuple]:
    """(key, want, have, ok) for one file; only `present` when it does not exist, as fabnet reports."""
    key = f"file[{path}]"
    lines = (output or "").splitlines()
    if lines[:1] == ["missing"] or not lines:
        return [(f"{key}.present", "present", "missing", False)]
    _, have_mode, owner, group = [*lines[0].split(), "", "", "", ""][:4]
    content = base64.b64decode("".join(lines[2:]))
    sha = hashlib.sha256
    return [
        (f"{key}.present", "present", "present", True),
        (f"{key}.content", sha(want_content).hexdigest()[:12], sha(content).hexdigest()[:12],
         content == want_content),
        (f"{key}.mode", mode, have_mode, have_mode == mode),
        (f"{key}.owner", "root", owner, owner == "root"),
        (f"{key}.group", "root", group, group == "root"),
    ]
