"""`explain` on the memory manager's bookkeeping warnings (NCCL 2.29.7 to 2.30.7): the entries it keeps for the
cuMem buffers it maps and exports, its own host allocations, and statistics asked of a disabled manager. No field
log holding these lines was found, so each case is a single line built from NCCL's format strings
(mem_manager.cc), which read the same in every release from 2.29.7 to 2.30.7."""

from __future__ import annotations

import pytest

from tests.unit.explain._field import line_causes as _causes
from tests.unit.explain._field import line_top as _top


@pytest.mark.parametrize(("line", "holds"), [
    ("mem_manager.cc:136 NCCL WARN MemManager: Cannot track allocation ptr=0x7f3a40000000, manager not initialized",
     "already been torn down"),
    ("mem_manager.cc:236 NCCL WARN MemManager: Cannot untrack allocation ptr=0x7f3a40000000, manager not "
     "initialized", "ncclCommDestroy/ncclCommAbort"),
    ("mem_manager.cc:336 NCCL WARN MemManager: Cannot mark export for ptr=0x7f3a40000000, manager not initialized",
     "already been torn down"),
    ("mem_manager.cc:348 NCCL WARN MemManager: Cannot mark export for ptr=0x7f3a40000000 - not found in tracked "
     "entries. Only dynamic memory (scratch/offload) needs export tracking for suspend/resume.", "entry was missing"),
    ("mem_manager.cc:356 NCCL WARN MemManager: Cannot mark export for ptr=0x7f3a40000000 - this is an imported "
     "buffer, not a local one", "internal error"),
    ("mem_manager.cc:363 NCCL WARN MemManager: Buffer ptr=0x7f3a40000000 already exported to peer rank 3",
     "(rank 3)"),
    ("mem_manager.cc:816 NCCL WARN MemManager: Could not find matching handle info for ptr=0x7f3a40000000 from "
     "rank 5", "(rank 5)"),
    ("mem_manager.cc:858 NCCL WARN MemManager: Unknown handle type 4 for peer import", "NVIDIA/nccl"),
])
def test_the_managers_books_gone_wrong_name_bookkeeping(line: str, holds: str) -> None:
    got, said, hosts = _top(line)
    assert got == "mem-manager-bookkeeping"
    assert holds in said, said
    assert hosts == ["gpu-a"]


def test_a_torn_down_manager_points_at_the_communicators_lifetime_and_the_rest_does_not() -> None:
    _, gone, _ = _top("mem_manager.cc:136 NCCL WARN MemManager: Cannot track allocation ptr=0x7f3a40000000, "
                      "manager not initialized")
    _, twice, _ = _top("mem_manager.cc:363 NCCL WARN MemManager: Buffer ptr=0x7f3a40000000 already exported to "
                       "peer rank 3")
    assert "ncclCommDestroy" in gone and "ncclCommDestroy" not in twice


@pytest.mark.parametrize("line", [
    "mem_manager.cc:155 NCCL WARN MemManager: Failed to allocate memory entry",
    "mem_manager.cc:374 NCCL WARN MemManager: Failed to grow exportedPeerRanks array for ptr=0x7f3a40000000",
    "mem_manager.cc:680 NCCL WARN MemManager: Failed to allocate allCounts",
])
def test_the_managers_own_host_allocations_failing_name_host_memory(line: str) -> None:
    got, said, hosts = _top(line)
    assert got == "mem-manager-host-memory"
    assert "memory.max" in said and hosts == ["gpu-a"]


def test_mapping_a_peers_buffer_again_on_resume_is_a_failed_resume() -> None:
    got, said, _ = _top("mem_manager.cc:874 NCCL WARN MemManager: ncclCuMemMapAndSetAccess failed for re-imported "
                        "ptr=0x7f3a40000000")
    assert got == "memory-suspend-failed"
    assert "mapping a peer's buffer into this GPU again failed" in said


def test_statistics_asked_of_a_disabled_manager() -> None:
    got, said, _ = _top("mem_manager.cc:1018 NCCL WARN MemManager: MemStats not supported, memory manager is "
                        "disabled")
    assert got == "memory-stats-disabled"
    assert "NCCL_DISABLE_MEM_MANAGER" in said


# The manager's INFO lines tell what it did: none is a failure.
@pytest.mark.parametrize("line", [
    "NCCL INFO MemManager: Initialized for device 0",
    "NCCL INFO MemManager: Shared from parent, refCount=2",
    "NCCL INFO MemManager: Untrack size mismatch ptr=0x7f3a40000000 tracked=2097152 passed=1048576",
    "NCCL INFO MemManager: rank 0 suspended 3 local + 2 peer entries (scratch=4194304, offload=0, "
    "peerImport=2097152, cpuBackup=0)",
    "NCCL INFO MemManager: rank 0 resumed 3 local entries, waiting at barrier",
    "NCCL INFO MemManager: rank 0 resumed 3 local + 2 peer entries (4194304 + 2097152 bytes)",
    "NCCL INFO MemManager: Decremented refCount to 1",
    "NCCL INFO MemManager: Destroying (refCount=0)",
    "NCCL INFO MemManager: Destroyed",
])
def test_the_managers_info_lines_name_nothing(line: str) -> None:
    assert _causes("NCCL INFO NCCL version 2.30.7+cuda13.0", line) == []
