"""The PMIx library's error event as Slurm's mpi/pmix plugin logs it (pmixp_client_v2.c `_errhandler`), and what
its status means: read both by the wire-up rule (a peer unreachable) and the launcher's (a task's client gone,
the plugin then killing the step)."""

from __future__ import annotations

import re

# `Error handler invoked: status = -61, source = [slurm.pmix.50357.0:199]` (20.11.1 on; `: Success (0)` before).
HANDLER = re.compile(r"Error handler invoked: status = (?P<status>-?\d+)(?:, source = \[[^\]]*:(?P<rank>-?\d+)\])?")
# PMIx statuses (include/pmix_common.h, v2 to v6; the values are fixed for compatibility): those that say a peer
# or node could not be reached are the exchange failing; the others say a rank of this node went away, which
# other causes explain, and are only named beside the exchange's failure.
REACH = {"-24": "PMIX_ERR_TIMEOUT, an operation timed out", "-25": "PMIX_ERR_UNREACH, a peer could not be reached",
         "-49": "PMIX_ERR_COMM_FAILURE, communication failed",
         "-102": "PMIX_ERR_LOST_PEER_CONNECTION, the connection to a peer was lost",
         "-231": "PMIX_ERR_NODE_DOWN, a node went down", "-232": "PMIX_ERR_NODE_OFFLINE, a node went offline"}
LOCAL = {"-7": "PMIX_ERR_PROC_ABORTED", "-8": "PMIX_ERR_PROC_REQUESTED_ABORT", "-9": "PMIX_ERR_PROC_ABORTING",
         "-61": "PMIX_ERR_LOST_CONNECTION, a rank's connection to its stepd was lost",
         "-101": "PMIX_ERR_LOST_CONNECTION_TO_SERVER", "-103": "PMIX_ERR_LOST_CONNECTION_TO_CLIENT",
         "-111": "PMIX_PROC_TERMINATED", "-200": "PMIX_ERR_PROC_TERM_WO_SYNC, a rank exited without finalizing"}


def status(code: str) -> str:
    """`PMIx status -25 (PMIX_ERR_UNREACH, a peer could not be reached)`."""
    name = REACH.get(code) or LOCAL.get(code)
    return f"PMIx status {code}" + (f" ({name})" if name else "")


def named(code: str, rank: str | None) -> str:
    """The status with the rank it came from, where the line names one."""
    return status(code) + (f" from rank {rank}" if rank else "")
