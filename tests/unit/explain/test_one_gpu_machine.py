"""`explain` on logs recorded on one H200 machine with NCCL 2.28.9 and torch 2.11 (tests/samples/INDEX.md)."""

from __future__ import annotations

from provisioner.explain import explain
from tests.unit.parsers._samples import SAMPLES


def test_two_ranks_on_one_gpu_through_torch() -> None:
    result = explain([("job.log", (SAMPLES / "logs/nccl-duplicate-gpu-torch-2.28.txt").read_text())])
    first = result.causes[0]
    assert first.id == "duplicate-gpu"
    assert "ranks 0, 1 share CUDA device 60" in first.detail
    assert first.hosts == ["vm"]
    assert {3, 9} <= {e.line for e in first.evidence}  # NCCL's own timestamped WARN lines, one per rank

