"""`explain` on a fourth set of field logs (tests/samples/logs/, sources in tests/samples/INDEX.md): a network
plugin's failure quoted alone on its line, without NCCL's prefix or level, and the completion errors rdma-core's
mlx5 provider prints itself (`mlx5: host: got completion with error:` and the CQE's words), behind Ray's prefixes
or a CI console's clock."""

from __future__ import annotations

import pytest

from provisioner.parsers.nccl_debug import parse_nccl_debug
from tests.unit.explain._field import LOGS, causes_of, check_top_cause

# file -> (the top cause's id, text its first evidence line starts with, text its title/detail/fix/settings hold)
CASES: dict[str, tuple[str, str, str]] = {
    "nccl-bare-net-plugin-completion-12-1.txt": ("ib-completion-error", "NET/IBP:Got completion from peer",
                                                 "towards 7.6.13.83"),
    # Only the provider's line names the failure; NCCL saw the peer go away and Ray saw the worker die.
    "ray-mlx5-provider-completion-error-1.txt": ("ib-completion-error", "mlx5: host_unknown: got completion",
                                                 "memory registration"),
    # The CQE's syndrome 0x12 is a remote invalid request (vendor syndrome 0x8a), not an HCA fault.
    "ucx-mlx5-provider-cqe-dump-1.txt": ("ib-completion-error", "mlx5: hpc-test-node2: got completion",
                                         "error 9 (IBV_WC_REM_INV_REQ_ERR)"),
}


_causes = causes_of


def test_every_log_of_this_set_has_a_case() -> None:
    assert all((LOGS / name).is_file() for name in CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_top_cause_of_each_field_log(name: str) -> None:
    check_top_cause(name, CASES[name], evidence_starts=True)


def test_a_bare_net_message_is_read_only_when_it_is_a_failure() -> None:
    text = "NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>\nNET/IBP:Got completion from peer 10.0.0.2<1> " \
           "with status=12 opcode=0 len=0 vendor err 129 (Send)\n"
    parsed = parse_nccl_debug(text)
    assert [e.status for e in parsed.completion_errors] == [12]
    assert parsed.warnings == ["NET/IBP:Got completion from peer 10.0.0.2<1> with status=12 opcode=0 len=0 "
                               "vendor err 129 (Send)"]


def test_the_provider_names_the_node_not_its_placeholder() -> None:
    top = _causes("ray-mlx5-provider-completion-error-1.txt")[0]
    # libmlx5 says `host_unknown` when gethostname failed: the node is the one Ray's prefix names.
    assert top.hosts == ["172.19.24.110"]
    assert "repeated" not in top.evidence[0].text
    dump = _causes("ucx-mlx5-provider-cqe-dump-1.txt")[0]
    assert dump.hosts == ["hpc-test-node2"]
    assert "vendor syndrome 0x8a" in dump.detail
    assert [e.text for e in dump.evidence][-1] == "00000000 00008a12 1002a8af 0001a2d2"
    assert "hca-firmware-fault" not in [c.id for c in _causes("ucx-mlx5-provider-cqe-dump-1.txt")]
