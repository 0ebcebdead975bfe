"""Completion errors the verbs provider itself reports, below NCCL: rdma-core's mlx5 provider prints
`mlx5: <hostname>: got completion with error:` and the error CQE as four lines of four 32-bit words when a
work request fails with anything but a flushed request or a transport retry exceeded. Such a line may be all
a job's log holds of the failure (NCCL then reports only that the peer went away), so it names the host
and, from the CQE's syndrome byte, the work-completion status.
"""

from __future__ import annotations

import re

from provisioner.explain import ibverbs
from provisioner.explain.evidence import evidence, signal
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause

_MLX5_ERROR = re.compile(r"\bmlx5: (?P<host>\S+): got completion with error\b")
_CQE_WORDS = re.compile(r"^[0-9a-fA-F]{8}(?: [0-9a-fA-F]{8}){3}$")
# The mlx5 CQE syndrome and the ibverbs status the provider turns it into (mlx5_handle_error_cqe).
_SYNDROME_STATUS = {0x01: 1, 0x02: 2, 0x04: 4, 0x05: 5, 0x06: 6, 0x10: 7, 0x11: 8, 0x12: 9, 0x13: 10, 0x14: 11,
                    0x15: 12, 0x16: 13, 0x22: 16}
# libmlx5 names the host with gethostname(), or this when that failed.
_NO_HOSTNAME = "host_unknown"
_UNKNOWN_FIX = (
    "libmlx5 prints this for a failed work request that was neither flushed nor lost on the fabric: mostly a "
    "memory registration refused on one end (local protection/access error: GPUDirect RDMA via nvidia_peermem "
    "or dma-buf, `ulimit -l`) or a queue-pair setup the peer rejected (remote access or invalid request: MTU, "
    "GID index, both ends on the same NCCL). Keep the four hex lines after the message (the CQE: its "
    "14th word ends with the vendor syndrome and the syndrome) or rerun with NCCL_DEBUG=INFO for NCCL's "
    "`Got completion ... status` line, which names the status and the peer.")


def _cqe(log: Log, line: LogLine) -> tuple[list[LogLine], int | None, int | None]:
    """The CQE dump's lines after the message, and its (syndrome, vendor syndrome) when the dump is whole."""
    after = [ln for ln in log.lines if line.number < ln.number <= line.number + 4]
    dump: list[LogLine] = []
    for ln in after:
        if not _CQE_WORDS.match(ln.text) or ln.number != line.number + len(dump) + 1:
            break
        dump.append(ln)
    if len(dump) < 4:
        return dump, None, None
    word = int(dump[3].text.split()[1], 16)  # the CQE's 14th 32-bit word
    return dump, word & 0xFF, (word >> 8) & 0xFF


def provider_completion_errors(logs: list[Log]) -> list[Cause]:
    causes = []
    for log in logs:
        for line, m in log.grep(_MLX5_ERROR):
            named = m.group("host")
            host = line.host or (named if named != _NO_HOSTNAME else None)
            dump, syndrome, vendor = _cqe(log, line)
            code = _SYNDROME_STATUS.get(syndrome) if syndrome is not None else None
            where = host or "a host"
            if code is None:
                title = f"RDMA completion error on {where}'s HCA (reported by libmlx5)"
                detail = ("The verbs provider reported a failed work request on this host's HCA: neither a flushed "
                          "request nor a retry-exceeded one.")
                fix, score = _UNKNOWN_FIX, 80
            else:
                found = ibverbs.status(code)
                title = f"RDMA completion error {code} ({found.symbol}) on {where}'s HCA (reported by libmlx5)"
                detail = (f"libmlx5's CQE dump: syndrome 0x{syndrome:02x}, vendor syndrome 0x{vendor:02x}: "
                          f"{found.meaning}.")
                fix, score = found.fix, ibverbs.score(found)
            causes.append(Cause(id="ib-completion-error", title=title, detail=detail, fix=fix, score=score,
                                hosts=[host] if host else [], evidence=evidence([line, *dump]), signal=signal([line])))
    return causes
