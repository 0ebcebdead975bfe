"""`explain` on the memory manager's suspend/resume warnings (NCCL 2.29.7 on). No field log holding these lines
was found, so each case is a single line built from NCCL's source wording (mem_manager.cc, init.cc)."""

from __future__ import annotations

import pytest

from tests.unit.explain._field import line_top as _top


@pytest.mark.parametrize(("line", "holds", "program"), [
    ("mem_manager.cc:397 NCCL WARN MemManager: Suspend failed, memory manager is disabled",
     "NCCL_DISABLE_MEM_MANAGER=1", True),
    ("init.cc:982 NCCL WARN MemManager: Resume not supported, memory manager is disabled",
     "NCCL_DISABLE_MEM_MANAGER=1", True),
    ("init.cc:946 NCCL WARN Memory suspend not supported with split_share communicators (refCount=2)",
     "NCCL_COMM_SPLIT_SHARE_RESOURCES=1", True),
    ("mem_manager.cc:405 NCCL WARN MemManager: Already suspended", "Pair every ncclCommSuspend", True),
    ("mem_manager.cc:537 NCCL WARN MemManager: Not in suspended state", "Pair every ncclCommSuspend", True),
    ("mem_manager.cc:463 NCCL WARN MemManager: Failed to allocate CPU backup for offload", "memory limit", False),
    ("mem_manager.cc:473 NCCL WARN MemManager: Failed to copy to CPU backup: invalid argument", "(invalid argument)",
     False),
    ("mem_manager.cc:612 NCCL WARN MemManager: Failed to restore from CPU backup: an illegal memory access was "
     "encountered (backup preserved)", "(an illegal memory access was encountered)", False),
    ("mem_manager.cc:653 NCCL WARN MemManager: Barrier failed during resume", "Every rank of the communicator",
     False),
    ("mem_manager.cc:690 NCCL WARN MemManager: AllGather counts failed", "must call ncclCommResume", False),
    ("mem_manager.cc:902 NCCL WARN MemManager: Final barrier failed during resume", "bootstrap connection", False),
    ("mem_manager.cc:766 NCCL WARN MemManager: Send to rank 5 failed - handle exchange incomplete",
     "read that rank's own log", False),
])
def test_each_suspend_resume_warning_names_its_cause(line: str, holds: str, program: bool) -> None:
    got, said, hosts = _top(line)
    assert got == "memory-suspend-failed"
    assert holds in said, said
    assert ("The program's use of the call" in said) is program
    assert hosts == ["gpu-a"]
