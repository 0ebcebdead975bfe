"""The node settings RCCL warns about when a communicator starts: a kernel command line or an environment
without what RCCL wants on AMD GPUs, and NUMA auto-balancing left on. No failure by itself, but RCCL's own
words for each are a hang, instability or low or uneven bandwidth, so a log that shows them names the
settings and the hosts, below any failure the log names.

Wording read (RCCL's init.cc, 2020 on): `Missing "iommu=pt" from kernel command line which can lead to ...`
(and `Missing "amd_iommu=on" ...` until late 2023), `Missing "HSA_FORCE_FINE_GRAIN_PCIE=1" from environment
which can lead to ...` (not in builds with uncached HIP memory), `NUMA auto balancing enabled which can lead
to variability in the RCCL performance! ...`. Read by structure: whatever RCCL names between the quotes, and
where it says it is missing.
"""

from __future__ import annotations

import re

from provisioner.explain.evidence import evidence, grep, hosts
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.parsers._text import unique

_MISSING = re.compile(r"\bMissing \"(?P<item>[^\"]+)\" from (?P<where>kernel command line|environment)\b", re.I)
_NUMA = re.compile(r"\bNUMA auto ?balancing (?:is )?enabled\b", re.I)

# What RCCL names -> how to set it. Anything else RCCL names reads by where it is missing.
_CMDLINE_FIX = ("add {items} to the kernel command line on the hosts named (GRUB_CMDLINE_LINUX in "
                "/etc/default/grub, then `update-grub` or `grub2-mkconfig -o /boot/grub2/grub.cfg`) and reboot; "
                "`cat /proc/cmdline` shows what the running kernel has")
_ENV_FIX = ("set {items} in every rank's environment (the job script or the launcher's `-x`/`--export`, "
            "and inside the container), not only in the shell that starts the job")
_NUMA_FIX = ("turn NUMA auto-balancing off on the hosts named (`sysctl -w kernel.numa_balancing=0`, kept "
             "across reboots in /etc/sysctl.d/ or with a `sysctl` resource in the playbook)")


def _found(logs: list[Log]) -> tuple[dict[str, list[LogLine]], dict[str, list[LogLine]], list[LogLine]]:
    cmdline: dict[str, list[LogLine]] = {}
    environment: dict[str, list[LogLine]] = {}
    for line, m in grep(logs, _MISSING):
        where = cmdline if m["where"].lower().startswith("kernel") else environment
        where.setdefault(m["item"].strip(), []).append(line)
    return cmdline, environment, [line for line, _ in grep(logs, _NUMA)]


def _said(item: str, lines: list[LogLine], where: str) -> str:
    on = hosts(lines)
    return f"`{item}` missing from the {where}" + (f" on {', '.join(on[:6])}" if on else "")


def rccl_settings(logs: list[Log]) -> list[Cause]:
    cmdline, environment, numa = _found(logs)
    if not (cmdline or environment or numa):
        return []
    said = ([_said(i, ls, "kernel command line") for i, ls in cmdline.items()]
            + [_said(i, ls, "environment") for i, ls in environment.items()])
    if numa:
        on = hosts(numa)
        said.append("NUMA auto-balancing on" + (f" on {', '.join(on[:6])}" if on else ""))
    fixes = []
    if cmdline:
        fixes.append(_CMDLINE_FIX.format(items=" and ".join(f"`{i}`" for i in cmdline)))
    if environment:
        fixes.append(_ENV_FIX.format(items=" and ".join(f"`{i}`" for i in environment)))
    if numa:
        fixes.append(_NUMA_FIX)
    lines = [ln for ls in [*cmdline.values(), *environment.values(), numa] for ln in ls]
    # The first of each kind of warning, so every setting shows in the evidence.
    firsts = list(dict.fromkeys(ls[0] for ls in [*cmdline.values(), *environment.values(), numa] if ls))
    shown: dict[str, LogLine] = {}  # a warning every rank repeats, once
    for line in firsts + lines:
        shown.setdefault(line.text, line)
    names = unique([*cmdline, *environment] + (["kernel.numa_balancing"] if numa else []))
    return [Cause(
        id="rccl-node-settings",
        title=f"RCCL warned that the node is not set up for it: {', '.join(names[:3])}",
        detail=f"{'; '.join(said)}. RCCL checks these as a communicator starts and warns that without them "
               "peer-to-peer traffic between the GPUs may hang or crawl (the IOMMU translating every DMA, "
               "coarse-grained host memory for RCCL's flags) or its bandwidth may vary from run to run. Not "
               "a failure by itself: where the log names one, that comes first; a hang or low bandwidth "
               "with nothing else named points here.",
        fix="; ".join(fixes) + ". Then rerun: RCCL no longer prints the warning.",
        score=30, hosts=hosts(lines), settings=list(environment),
        evidence=evidence(shown.values()),
    )]
