"""`explain` on GPU memory NCCL maps with cuMem and shares between ranks: the field log (tests/samples/logs/,
sources in tests/samples/INDEX.md) of a symmetric window that no longer fits the reserved range; single lines
built from NCCL's source wording (no field log found) test the memory manager's handle warnings (2.29.7 on), the
CUDA-version stubs and the symmetric-memory refusals."""

from __future__ import annotations

import pytest

from tests.unit.explain._field import line_top as _top
from tests.unit.explain._field import table

# file -> (the top cause's id, text its first evidence line holds, text its title/detail/fix hold)
CASES: dict[str, tuple[str, str, str]] = {
    # Registering one buffer again and again (NCCL 2.30.7) until the window range of the communicator is full.
    "nccl-symmetric-window-space-exhausted-1.txt": (
        "symmetric-space-exhausted", "No suitable space found to accommodate size=0x2171600000",
        "133.8 GiB asked of 180.0 GiB"),
}
# file -> the hosts the top cause names (the lines carry none)
HOSTS: dict[str, list[str]] = {
    "nccl-symmetric-window-space-exhausted-1.txt": [],
}

test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, test_the_hosts_each_names = table(
    CASES, HOSTS)



# Lines as NCCL prints them (mem_manager.cc, include/alloc.h, dev_runtime.cc, gin_host.cc, enqueue.cc,
# dev_runtime_segments.cc, gin_host.cc), each with the cause it names and a word its fix must hold.
@pytest.mark.parametrize(("line", "want", "holds"), [
    ("mem_manager.cc:627 NCCL WARN MemManager: cuMemExportToShareableHandle (FABRIC) failed for ptr=0x7f3a00000000",
     "cumem-handle-sharing", "nvidia-imex-ctl -N"),
    ("mem_manager.cc:734 NCCL WARN MemManager: FABRIC handle not valid for entry ptr=0x7f3a00000000",
     "cumem-handle-sharing", "/dev/nvidia-caps-imex-channels"),
    ("mem_manager.cc:845 NCCL WARN MemManager: Failed to get FD from rank 3 for ptr=0x7f3a00000000",
     "cumem-handle-sharing", "--network=host --ipc=host"),
    ("mem_manager.cc:832 NCCL WARN MemManager: Cannot re-import peer buffer from rank 9 (different node) using "
     "POSIX FD - skipping", "cumem-handle-sharing", "FABRIC handles"),
    ("mem_manager.cc:864 NCCL WARN MemManager: cuMemImportFromShareableHandle failed for ptr=0x7f3a00000000 "
     "(curet=800)", "cumem-handle-sharing", "CUDA_ERROR_NOT_PERMITTED"),
    ("include/alloc.h:418 NCCL WARN CUMEM not supported prior to CUDA 11.3", "cumem-cuda-too-old",
     "NCCL_CUMEM_ENABLE=0 only to confirm"),
    ("include/alloc.h:134 NCCL WARN CUMEM Host is not supported prior to CUDA 12.2", "cumem-cuda-too-old",
     "NCCL_CUMEM_HOST_ENABLE=0"),
    ("dev_runtime.cc:1523 NCCL WARN Communicator does not support symmetric memory!",
     "symmetric-memory-unsupported", "NCCL_WIN_ENABLE"),
    ("enqueue.cc:2875 NCCL WARN ncclPutSignal currently does not support VAs backed by multiple physical cuMem "
     "segments", "symmetric-buffer-layout", "expandable_segments"),
    ("enqueue.cc:2879 NCCL WARN ncclPutSignal currently does not support VAs with host-backed cuMem segments",
     "symmetric-buffer-layout", "NCCL_ELASTIC_BUFFER_REGISTER=1"),
    ("gin/gin_host.cc:383 NCCL WARN Window registration of addresses that span multiple physical segments "
     "requires DMABUF support with GIN.", "symmetric-buffer-layout", "ncclMemAlloc"),
])
def test_each_cumem_line_names_its_cause(line: str, want: str, holds: str) -> None:
    got, said, hosts = _top(line)
    assert got == want
    assert holds in said, said
    assert hosts == ["gpu-a"]


def test_handles_named_by_their_type() -> None:
    _, fabric, _ = _top("mem_manager.cc:734 NCCL WARN MemManager: FABRIC handle not valid for entry ptr=0x1")
    assert "FABRIC handles (IMEX)" in fabric and "abstract Unix sockets" not in fabric
    # An import alone does not say which handle type it was: both are checked.
    _, either, _ = _top("mem_manager.cc:864 NCCL WARN MemManager: cuMemImportFromShareableHandle failed for "
                        "ptr=0x1 (curet=1)")
    assert "nvidia-imex" in either and "abstract Unix sockets" in either and "CUDA_ERROR_INVALID_VALUE" in either


def test_the_cuda_the_library_was_built_for_is_quoted() -> None:
    _, said, _ = _top("NCCL INFO NCCL version 2.18.1+cuda11.0", "include/alloc.h:418 NCCL WARN CUMEM not supported "
                      "prior to CUDA 11.3")
    assert "built for CUDA 11.0" in said and "older than 11.3" in said


def test_the_reason_nccl_gives_for_no_symmetric_memory() -> None:
    # 2.29 on: an INFO line at init says what decided it.
    _, said, _ = _top("NCCL INFO Symmetric memory is not supported. cuMemEnable 0, globalGinSupport 0, "
                      "cuMemGdrSupport 0", "dev_runtime.cc:1523 NCCL WARN Communicator does not support symmetric "
                      "memory!")
    assert "cuMem is off" in said
