"""A hang with no error on PCIe peer-to-peer paths: every rank finished NCCL's init (or torch's first collective
started), the GPUs talk to each other (or to the NIC) over PCIe, and then nothing moves until a watchdog or a
time limit ends the job. PCIe Access Control Services (ACS) on the bridges, or the IOMMU, redirect the peer
traffic through the root complex, where it is dropped or crawls; NCCL sees no error (its troubleshooting guide,
"PCI Access Control Services"; NVIDIA/nccl#2079, #667, #199).

Read after the other rules: the hang must be all the log shows (a timeout, a hung watchdog, a stalled or cut
nccl-tests run, perhaps ended by a scheduler's time limit or a cancel), never a peer that died, a network error
or ranks at different collectives, which explain the same silence better. A time limit or a cancel alone is no
hang: a healthy job runs until its time is up or it is preempted.

Wording read: NCCL's connection lines `Channel 00/0 : 0[0] -> 1[1] via P2P/IPC` (`P2P/CUMEM`, `P2P/direct pointer`,
`P2P/IPC/read`; `Ring 00 : ... via P2P/IPC` before 2.7) and `[send] via NET/IB/0/GDRDMA`; the path types of its
graph search (`type PHB/PIX`, `type NVL/PIX`) and of `nvidia-smi topo -m` (`NV12`, `PIX`, `NODE`).
"""

from __future__ import annotations

import re

from provisioner.explain import rules_torch
from provisioner.explain.evidence import evidence, grep, hosts
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause

# What a hang with no error of its own looks like once the other rules have read it.
HANG_SIGNS = {"collective-timeout", "watchdog-hung", "mtu-blackhole", "nccl-tests-truncated"}
# How the scheduler may end a hung job: allowed beside a sign, never one itself.
_ENDS = {"step-time-limit", "job-cancelled"}
# Below every concrete error, just above the timeout it explains (and below a stall between nodes, where the
# MTU is the likelier cause).
SCORE = 61
# With only the NIC path in view (GPUDirect RDMA, which nearly every multi-node job on RDMA shows), the guess is
# broad: listed below the timeout it would explain, as a place to look rather than the likely cause.
NIC_ONLY_SCORE = 58
# Causes under this score are notes on a slow path or a setting; they do not explain a hang.
_NOTE_SCORE = 50

_VIA_P2P = re.compile(r"\bvia P2P/")
_VIA_GDR = re.compile(r"\bvia NET/\S+/GDRDMA\b")
_INIT_DONE = re.compile(r"Init COMPLETE|Connected all (?:rings|trees)")
# NCCL's graph search: the GPU-to-GPU path type, then the GPU-to-NIC one (`type NVL/PIX`, `type PHB/PHB`).
_GRAPH_TYPE = re.compile(r"\btype (?P<intra>[A-Z]{2,4})/(?P<inter>[A-Z]{2,4})\b")
# `nvidia-smi topo -m` rows (`GPU0  X  NV12  SYS ...`) and NCCL's path dump (`GPU/1000 (2/264.000000/NVL)`).
_TOPO_ROW = re.compile(r"^\s*GPU[0-9]+\s+(?P<cells>(?:(?:X|NV[0-9]+|PIX|PXB|PHB|NODE|SYS|SOC)\s+){1,}\S*)")
_PATH_NVL = re.compile(r"\bGPU/[0-9A-Fa-f]+ \([0-9]+/[0-9.]+/NVL\)|\b[1-9][0-9]* nvls channels\b|\bMNNVL 1\b")
_PCIE_TYPES = {"PIX", "PXB", "PHB", "NODE", "SYS", "SOC", "PXN"}

ID = "pcie-p2p-hang"
_FIX = ("Check the PCIe bridges between these devices for ACS: `sudo lspci -vvv | grep ACSCtl` must show "
        "`SrcValid-` (and ReqRedir-/CmpltRedir-) on every bridge above the GPUs and NICs; turn ACS off in the BIOS "
        "(or `setpci -s BDF ECAP_ACS+6.w=0000` on each bridge until the next boot). Check the IOMMU too: boot with "
        "`iommu=pt` (`intel_iommu=on iommu=pt`, or `amd_iommu=on iommu=pt`), or VT-d/AMD-Vi off, and in a VM enable "
        "ATS or pass the whole PCIe switch through. To confirm before touching the node, rerun with "
        "NCCL_P2P_DISABLE=1 (or NCCL_P2P_LEVEL=LOC, NCCL_NET_GDR_LEVEL=LOC for the NIC path): if the hang goes, the "
        "peer-to-peer path is the cause; `p2pBandwidthLatencyTest` from the CUDA samples shows the same on its own.")


def _topology(logs: list[Log]) -> tuple[bool, bool, list[LogLine]]:
    """(NVLink between the GPUs, PCIe between them, the lines that say so), as far as the log shows."""
    nvlink = pcie = False
    lines: list[LogLine] = []
    for line, m in grep(logs, _GRAPH_TYPE):
        nvlink |= m["intra"] == "NVL"
        pcie |= m["intra"] in _PCIE_TYPES
        lines.append(line)
    for line, m in grep(logs, _TOPO_ROW):
        cells = set(m["cells"].split())
        nvlink |= any(c.startswith("NV") for c in cells)
        pcie |= bool(cells & _PCIE_TYPES) and not any(c.startswith("NV") for c in cells)
        lines.append(line)
    if grep(logs, _PATH_NVL):
        nvlink = True
    return nvlink, pcie, lines


def p2p_hang(logs: list[Log], causes: list[Cause]) -> list[Cause]:
    """The ACS/IOMMU cause for a hang whose only signs are the ones in HANG_SIGNS, on PCIe peer paths."""
    signs = [c for c in causes if c.id in HANG_SIGNS]
    if not signs or any(c.id not in HANG_SIGNS | _ENDS and c.score >= _NOTE_SCORE for c in causes):
        return []
    done = grep(logs, _INIT_DONE)
    if not done and not any(c.id in {"collective-timeout", "watchdog-hung"} for c in signs):
        return []
    nvlink, pcie, topo = _topology(logs)
    gpu_paths = [line for line, _ in grep(logs, _VIA_P2P)] if pcie or not nvlink else []
    nic_paths = [line for line, _ in grep(logs, _VIA_GDR)]
    if not gpu_paths and not nic_paths:
        return []
    what = []
    if gpu_paths:
        what.append("GPU to GPU (`via P2P`)" + ("" if pcie else ": over PCIe, unless the GPUs share NVLink, which "
                                                                "this log does not show"))
    if nic_paths:
        what.append("GPU to NIC with GPUDirect RDMA (`GDRDMA`)")
    sign = max(signs, key=lambda c: c.score)
    # One rank's `Init COMPLETE` is what the log may hold of the others'; without one, a collective was started.
    setup = "NCCL's setup completed" if done else "The ranks got as far as a collective"
    detail = (f"{setup}, and the data moves peer to peer over PCIe: {'; '.join(what)}. "
              f"Then the job hung with no error ({sign.title}). PCIe ACS on a bridge, or the IOMMU, redirecting peer "
              "traffic through the root complex, can hang NCCL just so: transfers that never complete, and no error.")
    if pcie:
        detail += " The topology in the log puts the GPUs on PCIe (no NVLink between them)."
    lines = [line for line, _ in done[-1:]] + gpu_paths[:2] + nic_paths[:2] + topo[:1]
    settings = ["NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"] + (["NCCL_NET_GDR_LEVEL"] if nic_paths else [])
    return [Cause(id=ID, title="a hang on PCIe peer-to-peer paths (ACS or the IOMMU)",
                  detail=detail, fix=_FIX, score=SCORE if gpu_paths else NIC_ONLY_SCORE,
                  hosts=hosts(gpu_paths + nic_paths), settings=settings,
                  evidence=evidence(lines))]


def defer(causes: list[Cause]) -> list[Cause]:
    """With this cause named, the watchdog timeout's own P2P advice points at it instead of repeating it."""
    reason = next((c for c in causes if c.id == ID), None)
    if reason is None:
        return causes
    return [rules_torch.deferred(c, reason) if c.id == "collective-timeout" else c for c in causes]
