"""Causes from the asynchronous events an HCA raises while a job runs (NCCL's `NET/IB : ... async event`
WARNs, read by parsers/nccl_errors): a port that went down, a queue pair or completion queue that went to
error, and the state changes that are no failure by themselves (port active, LID / SM / P_Key change,
client reregistration, GID table change) but explain a failure beside them. Device-level events (local
catastrophic error) are the firmware rule's, in rules_verbs.
"""

from __future__ import annotations

from provisioner.explain.evidence import evidence, signal, warning_lines
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.parsers._text import unique
from provisioner.parsers.nccl_errors import AsyncEvent

Event = tuple[Log, AsyncEvent]


def _events(logs: list[Log], *kinds: str) -> list[Event]:
    return [(log, e) for log in logs for e in (log.nccl.async_events if log.nccl else []) if e.kind in kinds]


def _where(e: AsyncEvent) -> str:
    port = f"{e.device}:{e.port}" if e.device and e.port is not None else e.device
    return " on ".join(part for part in (port, e.host) if part) or "a host"


def _lines(events: list[Event]) -> list[LogLine]:
    return [line for log, e in events for line in warning_lines(log, e.line)]


def port_down(logs: list[Log]) -> list[Cause]:
    """`port error`: the HCA's port left the ACTIVE state mid-job; a later `port active` on the same port
    makes it a flap."""
    down = _events(logs, "port")
    if not down:
        return []
    up = _events(logs, "state")
    flapped = unique([_where(e) for _, e in down
                      if any(u.event.lower() == "port active" and (u.host, u.device) == (e.host, e.device)
                             and u.line > e.line for _, u in up)])
    where = unique([_where(e) for _, e in down])
    detail = f"{', '.join(unique([e.event for _, e in down]))} on {', '.join(where)}: the link went down during the job"
    detail += f", and came back (a flap) on {', '.join(flapped)}." if flapped else "."
    detail += " Every connection through that port failed with it; the errors on its peers follow from it."
    return [Cause(
        id="ib-port-event",
        title=f"an HCA port went down during the job ({', '.join(where[:3])})",
        detail=detail,
        fix="Check the link on the host named (`ibstat` / `ibv_devinfo` state, port counters link_downed and "
            "symbol_error), the cable or optic, and the switch port; on RoCE the switch port's log for flaps.",
        score=80, hosts=unique([e.host for _, e in down if e.host]),
        evidence=evidence(_lines(down + [(log, u) for log, u in up if u.event.lower() == "port active"])),
        signal=signal(_lines(down)),
    )]


def queue_errors(logs: list[Log]) -> list[Cause]:
    """A queue pair or completion queue the HCA put in error outside a work completion: an access violation
    is a request the responder could not take (an MTU the two ends disagree on, or a memory registration
    that no longer holds), an invalid request a malformed or mismatched queue pair,
    a CQ error an overrun completion queue."""
    events = _events(logs, "queue")
    if not events:
        return []
    names = unique([e.event for _, e in events])
    text = " ".join(names).lower()
    if "access" in text:
        # The responder raises it for a request it cannot take: a buffer whose registration no longer holds,
        # or a packet longer than its queue pair's MTU. NCCL 2.20.3 stopped lowering the receive side's MTU
        # to the peer's (NVIDIA/nccl#1524: two servers with different MTUs), so a mismatch can fail this way;
        # later releases changed the negotiation again, so the advice says "can", not "does".
        fix = ("Compare the port MTU on both ends first (`ibv_devinfo` active_mtu; on RoCE the interface MTU, "
               "`ip link`): from NCCL 2.20.3 on, ports of different MTUs can fail this way, so set the same "
               "MTU on every node. Then check the memory registration on the host named: GPUDirect RDMA "
               "(`lsmod | grep nvidia_peermem`, or dma-buf with the open GPU kernel module), IOMMU/ATS settings "
               "for the HCA and GPU, and that the application does not free buffers still in flight.")
    else:
        fix = ("Compare the queue-pair setup on both ends (same NCCL on every node, NCCL_IB_* settings alike, "
               "`ibv_devinfo` active_mtu) and read dmesg for mlx5_core errors on the host named.")
    return [Cause(
        id="ib-queue-error",
        title=f"the HCA put a queue in error: {', '.join(names[:2])}",
        detail=f"{'; '.join(unique([f'{e.event} ({_where(e)})' for _, e in events])[:4])}: the connections on that "
               "queue failed, whatever the fabric did.",
        fix=fix, score=88, hosts=unique([e.host for _, e in events if e.host]), evidence=evidence(_lines(events)),
        signal=signal(_lines(events)),
    )]


def gid_changes(logs: list[Log]) -> tuple[str, list[LogLine]]:
    """A sentence and the lines for GID table changes in the logs, to join to a failure they may explain
    (a GID index that now names another address, or none). Alone they are no failure."""
    events = [(log, e) for log, e in _events(logs, "state") if "gid" in e.event.lower()]
    if not events:
        return "", []
    where = unique([_where(e) for _, e in events])
    return (f" The GID table changed during the job on {', '.join(where)}: an address on that RoCE interface "
            "was added or removed (DHCP, a bond or VLAN reconfigured), which moves or empties GID indexes; "
            "compare `show_gids` now with NCCL_IB_GID_INDEX.", _lines(events))
