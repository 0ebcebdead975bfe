"""`explain` on a fourth set of field logs (tests/samples/logs/, sources in tests/samples/INDEX.md): a network
plugin's failure quoted alone on its line, without NCCL's prefix or level."""

from __future__ import annotations

import pytest

from provisioner.parsers.nccl_debug import parse_nccl_debug
from tests.unit.explain._field import LOGS, causes_of, check_top_cause

# file -> (the top cause's id, text its first evidence line starts with, text its title/detail/fix/settings hold)
CASES: dict[str, tuple[str, str, str]] = {
    "nccl-bare-net-plugin-completion-12-1.txt": ("ib-completion-error", "NET/IBP:Got completion from peer",
                                                 "towards 7.6.13.83"),
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
