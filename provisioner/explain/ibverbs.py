"""What an ibverbs work-completion status (as NCCL prints `error 12` / `status=12`) usually means."""

from __future__ import annotations

# enum ibv_wc_status (infiniband/verbs.h), with what operators find behind each on a GPU fabric.
WC_STATUS: dict[int, tuple[str, str]] = {
    1: ("IBV_WC_LOC_LEN_ERR", "local length error: a message larger than the receive buffer"),
    2: ("IBV_WC_LOC_QP_OP_ERR", "local QP operation error"),
    4: ("IBV_WC_LOC_PROT_ERR", "local protection error: memory registration (GPUDirect/peermem) problem"),
    5: ("IBV_WC_WR_FLUSH_ERR", "work request flushed: the queue pair was already in error (look for the "
                               "first error before it)"),
    9: ("IBV_WC_REM_INV_REQ_ERR", "remote invalid request: the peer's QP rejected the request (MTU or "
                                  "configuration mismatch between the two ends)"),
    10: ("IBV_WC_REM_ACCESS_ERR", "remote access error: the peer's memory key or registration is invalid"),
    11: ("IBV_WC_REM_OP_ERR", "remote operation error on the peer"),
    12: ("IBV_WC_RETRY_EXC_ERR", "transport retry counter exceeded: packets to the peer were lost and "
                                "retransmissions gave up. On RoCE this is a lossy path: PFC/ECN off or "
                                "mismatched on a hop, a flapping or erroring link, or an MTU mismatch; on "
                                "IB a bad cable or port"),
    13: ("IBV_WC_RNR_RETRY_EXC_ERR", "receiver-not-ready retries exceeded: the peer did not post receive "
                                    "buffers in time (peer process stuck or dead)"),
}


def describe(status: int) -> tuple[str, str]:
    """(symbol, meaning) for a work-completion status."""
    return WC_STATUS.get(status, (f"status {status}", "see enum ibv_wc_status in infiniband/verbs.h"))
