"""What `explain` reads from a network plugin's failure quoted alone on its line (without NCCL's prefix or
level) and from the completion errors rdma-core's mlx5 provider prints itself (`mlx5: host: got completion with
error:` and the CQE's words). The logs' top causes are in test_field_logs_3.py's table."""

from __future__ import annotations

from provisioner.parsers.nccl_debug import parse_nccl_debug
from tests.unit.explain._field import causes_of


def test_a_bare_net_message_is_read_only_when_it_is_a_failure() -> None:
    text = "NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>\nNET/IBP:Got completion from peer 10.0.0.2<1> " \
           "with status=12 opcode=0 len=0 vendor err 129 (Send)\n"
    parsed = parse_nccl_debug(text)
    assert [e.status for e in parsed.completion_errors] == [12]
    assert parsed.warnings == ["NET/IBP:Got completion from peer 10.0.0.2<1> with status=12 opcode=0 len=0 "
                               "vendor err 129 (Send)"]


def test_the_provider_names_the_node_not_its_placeholder() -> None:
    top = causes_of("ray-mlx5-provider-completion-error-1.txt")[0]
    # libmlx5 says `host_unknown` when gethostname failed: the node is the one Ray's prefix names.
    assert top.hosts == ["172.19.24.110"]
    assert "repeated" not in top.evidence[0].text
    dump = causes_of("ucx-mlx5-provider-cqe-dump-1.txt")[0]
    assert dump.hosts == ["hpc-test-node2"]
    assert "vendor syndrome 0x8a" in dump.detail
    assert [e.text for e in dump.evidence][-1] == "00000000 00008a12 1002a8af 0001a2d2"
    assert "hca-firmware-fault" not in [c.id for c in causes_of("ucx-mlx5-provider-cqe-dump-1.txt")]
