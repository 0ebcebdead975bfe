"""`explain` on a CUDA error and a network error logged by the same process: the one it logged first ranks first,
and a CUDA error that came after the network failure is not named as what the other errors follow from.

The real case is nccl-tests#24 (tests/samples/logs/, source in tests/samples/INDEX.md): retry-exceeded on both
hosts, then `Cuda failure 'an illegal memory access was encountered'` on gpu5 after its communicator was
destroyed. The other logs are built from the same sample's wording (`init.cu:194 NCCL WARN Cuda failure '...'`,
`Got completion with error 12, opcode 1, len 0, vendor err 129`) and NCCL 2.12 to 2.18's `Got completion from peer
A<port> with error 5, ... vendor err 249 (Recv)` (NVIDIA/nccl-tests#252 prints the same format)."""

from __future__ import annotations

from provisioner.explain import explain
from provisioner.explain.model import Cause
from tests.unit.explain._field import causes_of

_CUDA = "init.cu:194 NCCL WARN Cuda failure 'an illegal memory access was encountered'"
_RETRY = "transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0, vendor err 129"
_FLUSH = ("transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<43211> with error 5, "
          "opcode 0, len 0, vendor err 249 (Recv)")
_ROOT = "the errors of other ranks and connections after it follow from it"


def _causes(*lines: tuple[str, str]) -> list[Cause]:
    """The causes for one log of (NCCL prefix, text) lines."""
    return explain([("job.log", "\n".join(f"{prefix} {text}" for prefix, text in lines))]).causes


def _ids(causes: list[Cause]) -> list[str]:
    return [c.id for c in causes]


def _cuda(causes: list[Cause]) -> Cause:
    return next(c for c in causes if c.id == "cuda-failure")


def test_the_illegal_access_after_retry_exceeded_in_nccl_tests_24_is_a_consequence() -> None:
    causes = causes_of("nccl-tests-2.4-completion-error-12-gid-index-cu-form-1.txt")
    assert _ids(causes).index("ib-completion-error") < _ids(causes).index("cuda-failure"), _ids(causes)
    cuda = _cuda(causes)
    assert _ROOT not in cuda.detail and "consequence" in cuda.detail and "line 1:" in cuda.detail, cuda.detail


def test_a_network_error_first_ranks_first_even_when_it_ranks_lower_alone() -> None:
    """A flushed request alone ranks below a kernel fault; logged first by the same process, it comes first."""
    causes = _causes(("gpu-a:1234:1300 [0]", _FLUSH), ("gpu-a:1234:1234 [0]", _CUDA))
    assert _ids(causes)[:2] == ["ib-completion-error", "cuda-failure"], _ids(causes)
    assert _ROOT not in _cuda(causes).detail and "consequence" in _cuda(causes).detail, _cuda(causes).detail


def test_a_cuda_error_first_stays_the_root_and_ranks_first() -> None:
    """The other order on the same process: the network errors follow the GPU's, as its text says."""
    for network in (_RETRY, _FLUSH):
        causes = _causes(("gpu-a:1234:1234 [0]", _CUDA), ("gpu-a:1234:1300 [0]", network))
        assert _ids(causes)[:2] == ["cuda-failure", "ib-completion-error"], _ids(causes)
        assert _ROOT in _cuda(causes).detail and "consequence" not in _cuda(causes).detail, _cuda(causes).detail


def test_another_process_s_network_error_leaves_the_cuda_error_as_it_was() -> None:
    """Another rank's network error says nothing about this process's order: the ranking and text are kept."""
    causes = _causes(("gpu-a:1234:1300 [0]", _RETRY), ("gpu-a:5678:5678 [1]", _CUDA))
    alone = _causes(("gpu-a:5678:5678 [1]", _CUDA))
    assert _ids(causes)[:2] == ["ib-completion-error", "cuda-failure"], _ids(causes)
    assert _cuda(causes).detail == _cuda(alone).detail and _ROOT in _cuda(causes).detail
    assert _cuda(causes).score == _cuda(alone).score


def test_a_network_error_past_the_evidence_shown_still_orders_its_process() -> None:
    """Ten ranks on gpu-a give up retrying; the cause shows the first eight lines, and the tenth rank's CUDA error
    follows its own retry-exceeded error, the tenth in the log: still read as that error's consequence."""
    retries = [(f"gpu-a:{1000 + n}:{1100 + n} [{n}]", _RETRY) for n in range(10)]
    causes = _causes(*retries, ("gpu-a:1009:1009 [9]", _CUDA))
    network = next(c for c in causes if c.id == "ib-completion-error")
    assert len(network.evidence) == 8 and all(e.line < 10 for e in network.evidence), network.evidence
    assert "signal" not in network.model_dump(), "the signal is not part of the report"
    assert _ROOT not in _cuda(causes).detail and "(line 10:" in _cuda(causes).detail, _cuda(causes).detail
    assert _ids(causes)[:2] == ["ib-completion-error", "cuda-failure"], _ids(causes)


def test_a_cuda_error_first_in_its_process_stays_the_root_past_the_evidence_shown() -> None:
    """The same ten ranks, the tenth's CUDA error logged before its own network error: no consequence."""
    retries = [(f"gpu-a:{1000 + n}:{1100 + n} [{n}]", _RETRY) for n in range(9)]
    causes = _causes(*retries, ("gpu-a:1009:1009 [9]", _CUDA), ("gpu-a:1009:1109 [9]", _RETRY))
    assert _ROOT in _cuda(causes).detail and "consequence" not in _cuda(causes).detail, _cuda(causes).detail
