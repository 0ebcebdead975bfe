"""The link speed of a host's data interfaces, read in the pre-flight's exec (pure: probe and parse).

sysfs `class/net/IF/speed` in Mb/s, as ethtool reports it; under `fabnet_sysfs_root` first (where a
site or the lab keeps stand-in files), else the kernel's /sys. A down link, a virtual device without
a speed and a missing file read as -1 or nothing: unknown, never a guessed rate.
"""

from __future__ import annotations

from collections.abc import Sequence

from provisioner.resources.base import Probe, ProbeResult, sh
from provisioner.smoke.targets import Target

KEY = "link_speed"


def probe(target: Target) -> Probe | None:
    if not target.data_ifaces:
        return None
    roots = dict.fromkeys([target.sysfs_root.rstrip("/") or "/sys", "/sys"])
    parts = []
    for iface in target.data_ifaces:
        files = " ".join(sh(f"{root}/class/net/{iface}/speed") for root in roots)
        parts.append(f"v=unknown; for f in {files}; do if [ -r \"$f\" ]; then v=$(cat \"$f\" 2>/dev/null) "
                     f"&& break; v=unknown; fi; done; printf '%s %s\\n' {sh(iface)} \"${{v:-unknown}}\"")
    return Probe("; ".join(parts), timeout=10)


def parse(text: str, ifaces: Sequence[str]) -> int | None:
    """The host's data bandwidth in Mb/s: the sum over its data interfaces (NCCL uses every rail), or
    None when any of them has no known speed."""
    speeds: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit() and int(parts[1]) > 0:
            speeds[parts[0]] = int(parts[1])
    if not ifaces or any(i not in speeds for i in ifaces):
        return None
    return sum(speeds[i] for i in ifaces)


def from_result(result: ProbeResult | None, ifaces: Sequence[str]) -> int | None:
    return None if result is None else parse(result.stdout, ifaces)
