"""The lines of nccl-tests output that say a run failed: its own failure traces, the errors that stop it before its
table, and a rank killed by a signal as the shell or the launcher reports it."""

from __future__ import annotations

import re

_FAILURE = re.compile(r"\bTest (?:NCCL |CUDA )?failure\b|\bTest failure\b|: Test timeout \(", re.IGNORECASE)
# Lines that end a run before its table: 2017-2018 builds' `NCCL failure common.cu:393 '...'` and `Cuda
# failure ...`, nccl-tests' `Invalid number of GPUs: 16 requested but only 8 were found.` (and the advice line
# after it) and `Incompatible NCCL versions. ...`, rccl-tests' `[ERROR] The number of requested GPUs (16) is
# greater than ...`.
_STOPPED = re.compile(
    r"^(?:NCCL|Cuda) failure \S+:[0-9]+ |^Invalid number of GPUs: |^Incompatible NCCL versions\. "
    r"|^Please check the number of processes and GPUs per process"
    r"|^\[ERROR\] The number of requested GPUs "
)
# A rank killed by a signal, as the launching shell reports it (strsignal's name, then `(core dumped)` when
# it dumped: `Segmentation fault (core dumped)`, bash's `line 3: 4711 Bus error  (core dumped) ./x`), as
# Open MPI's mpirun reports it (`exited on signal 7 (Bus error)`) or Slurm's srun (`task 0: Bus error`).
_KILLED = re.compile(
    r"^(?:.*\b[0-9]+\s+)?(?:Segmentation fault|Bus error|Aborted|Killed|Floating point exception|Illegal instruction)"
    r"(?:\s+\(core dumped\))?(?:\s+\S.*)?$"
    r"|\bexited on signal [0-9]+ \([A-Za-z ]+\)|^srun: error: .*: tasks? [0-9,-]+: "
    r"(?:Segmentation fault|Bus error|Aborted|Killed|Floating point exception|Illegal instruction)"
)


def is_failure(body: str) -> bool:
    """Whether a line (stripped) says the run failed."""
    return bool(_FAILURE.search(body) or _KILLED.search(body) or _STOPPED.search(body))
