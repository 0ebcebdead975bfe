"""What an ibverbs work-completion status (as NCCL prints `error 12` / `status=12`) means, and what to do.

Statuses fall into classes that point at different places, so the advice follows the class: a local
length or access error is the local memory registration (GPUDirect: nvidia_peermem or dma-buf), a local
protection error that or PCIe ACS between NIC and GPU, never the fabric; a retry-exceeded error is the
fabric path; a flushed request is only the echo of an earlier error on the same queue pair.
"""

from __future__ import annotations

from dataclasses import dataclass

# enum ibv_wc_status (infiniband/verbs.h).
SYMBOLS: dict[int, str] = {
    1: "IBV_WC_LOC_LEN_ERR", 2: "IBV_WC_LOC_QP_OP_ERR", 3: "IBV_WC_LOC_EEC_OP_ERR", 4: "IBV_WC_LOC_PROT_ERR",
    5: "IBV_WC_WR_FLUSH_ERR", 6: "IBV_WC_MW_BIND_ERR", 7: "IBV_WC_BAD_RESP_ERR", 8: "IBV_WC_LOC_ACCESS_ERR",
    9: "IBV_WC_REM_INV_REQ_ERR", 10: "IBV_WC_REM_ACCESS_ERR", 11: "IBV_WC_REM_OP_ERR",
    12: "IBV_WC_RETRY_EXC_ERR", 13: "IBV_WC_RNR_RETRY_EXC_ERR", 14: "IBV_WC_LOC_RDD_VIOL_ERR",
    15: "IBV_WC_REM_INV_RD_REQ_ERR", 16: "IBV_WC_REM_ABORT_ERR", 17: "IBV_WC_INV_EECN_ERR",
    18: "IBV_WC_INV_EEC_STATE_ERR", 19: "IBV_WC_FATAL_ERR", 20: "IBV_WC_RESP_TIMEOUT_ERR",
    21: "IBV_WC_GENERAL_ERR",
}

_REGISTRATION_FIX = (
    "This is the local host's memory registration, not the fabric: check that GPUDirect RDMA works there "
    "(`lsmod | grep nvidia_peermem`, else `modprobe nvidia_peermem`; or dma-buf with the open GPU kernel "
    "module and NCCL_DMABUF_ENABLE=1), that the locked-memory limit is unlimited (`ulimit -l`), and rerun "
    "with NCCL_NET_GDR_LEVEL=LOC to confirm: if the error goes, GPUDirect registration is the cause.")
# A protection error on a buffer that registered fine is, by NCCL's maintainers' account (NVIDIA/nccl#214,
# #304, #928), most often PCIe ACS on a bridge between NIC and GPU: the NIC's peer-to-peer reads and writes of GPU
# memory are redirected up to the root complex and refused there, while the same transfers staged in host memory
# work. Registration (the module, the memlock limit) is the other cause; turning GPUDirect off tells them apart
# from registration problems only when the error also goes with it, so the ACS check comes first.
_PROTECTION_FIX = (
    "This is the local host's PCIe path or memory registration, not the fabric. Most often PCIe ACS is on "
    "between NIC and GPU and redirects the NIC's GPUDirect reads and writes to the root complex: `sudo lspci "
    "-vvv | grep ACSCtl` must show SrcValid- (and ReqRedir-/CmpltRedir-) on every bridge above the NIC and "
    "GPU; turn ACS off in the BIOS (or `setpci -s BDF ECAP_ACS+6.w=0000` on each bridge until the next "
    "boot) and boot with iommu=pt. Otherwise check that GPUDirect RDMA is registered (`lsmod | grep "
    "nvidia_peermem`, or dma-buf with NCCL_DMABUF_ENABLE=1) and that the locked-memory limit is unlimited "
    "(`ulimit -l`). Rerun with NCCL_NET_GDR_LEVEL=LOC to confirm: if the error goes, the GPUDirect path (ACS "
    "or registration) is the cause.")
_PEER_REGISTRATION_FIX = (
    "Check the peer host's memory registration: GPUDirect RDMA there (`lsmod | grep nvidia_peermem` or "
    "dma-buf), its locked-memory limit (`ulimit -l`), and that both ends run the same NCCL.")
_CONFIG_FIX = (
    "The two ends disagree on the queue pair's setup: compare MTU (`ibv_devinfo` active_mtu), the GID index "
    "(NCCL_IB_GID_INDEX) and RoCE version on both hosts, and that both run the same NCCL.")
_FABRIC_FIX = (
    "Audit the network path the failed connections took: link state and flaps, port error counters (symbol_error, "
    "link_downed, out_of_buffer), a bad cable or optic, MTU end to end, and on RoCE PFC/ECN and trust "
    "on every hop (roce_qos). Congestion from other jobs gives the same error. On RoCE, when it fails from "
    "the first transfer, suspect the GID index first: NCCL_IB_GID_INDEX must name a routable RoCE v2 "
    "address (not the link-local fe80:: one) in the peers' subnet on every host (`show_gids`). When it fails only "
    "under load on a path that is otherwise clean, a longer NCCL_IB_TIMEOUT (the exponent: 22 and up) and "
    "NCCL_IB_RETRY_CNT (7 at most) ride out congestion while the fabric's own fault is found.")
_PEER_FIX = (
    "The peer stopped posting receives: find that rank's own log (it usually died or hung first) and its "
    "host; raise NCCL_IB_TIMEOUT only after the peer is known healthy.")
_FLUSH_FIX = (
    "A flushed request only follows an earlier error on the same queue pair: look for the first completion "
    "error, async event or failed call before it.")
_DEVICE_FIX = (
    "The HCA reported an internal failure: check `dmesg` for mlx5_core health/syndrome messages and the "
    "firmware version (`ibv_devinfo`, `mlxfwmanager`); reset or replace the device and drain the host.")


@dataclass(frozen=True)
class Status:
    symbol: str
    meaning: str
    kind: str  # registration, protection, peer-registration, config, fabric, peer, flush, device
    fix: str
    first_cause: bool  # False for a status that only follows another error


_CLASSES: dict[int, tuple[str, str]] = {
    1: ("local length error: a message did not fit the posted buffer or registered region", "registration"),
    2: ("local queue-pair operation error: a malformed work request or a queue pair in a bad state", "config"),
    4: ("local protection error: the buffer is not (or no longer) registered for this access, typically a "
        "GPU buffer whose GPUDirect registration failed, or GPUDirect traffic that PCIe ACS redirects",
        "protection"),
    5: ("work request flushed: the queue pair was already in error", "flush"),
    6: ("memory-window bind error", "registration"),
    7: ("bad response from the peer", "config"),
    8: ("local access error: the local registration does not allow this access", "registration"),
    9: ("remote invalid request: the peer's queue pair rejected the request (MTU or setup mismatch)", "config"),
    10: ("remote access error: the peer's memory key or registration is invalid for this access",
         "peer-registration"),
    11: ("remote operation error on the peer", "peer-registration"),
    12: ("transport retry counter exceeded: packets to the peer were lost and retransmissions gave up",
          "fabric"),
    13: ("receiver-not-ready retries exceeded: the peer did not post receive buffers in time", "peer"),
    15: ("remote invalid read request", "config"),
    16: ("remote abort", "peer"),
    19: ("fatal error in the HCA", "device"),
    20: ("response timeout: the peer did not answer", "fabric"),
}
_FIXES = {"registration": _REGISTRATION_FIX, "protection": _PROTECTION_FIX, "peer-registration": _PEER_REGISTRATION_FIX,
          "config": _CONFIG_FIX,
          "fabric": _FABRIC_FIX, "peer": _PEER_FIX, "flush": _FLUSH_FIX, "device": _DEVICE_FIX}


def status(code: int) -> Status:
    """What a work-completion status means and what to do about it."""
    meaning, kind = _CLASSES.get(code, ("see enum ibv_wc_status in infiniband/verbs.h", "fabric"))
    return Status(SYMBOLS.get(code, f"status {code}"), meaning, kind, _FIXES[kind], kind != "flush")


def score(found: Status) -> int:
    """How a completion error of this class ranks among causes: the ones that stop a job by themselves first."""
    return {"fabric": 90, "peer": 85, "registration": 88, "protection": 88, "peer-registration": 85,
            "config": 85,
            "device": 90}.get(found.kind, 55)


def describe(code: int) -> tuple[str, str]:
    """(symbol, meaning) for a work-completion status."""
    found = status(code)
    return found.symbol, found.meaning
