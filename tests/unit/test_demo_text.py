"""`fabnet demo`'s closing lines point only at a lab that is still there."""

from __future__ import annotations

from provisioner.commands.demo import closing_text
from provisioner.lab.state import LabState, NodeRecord


def _state() -> LabState:
    nodes = [NodeRecord(i, f"gpu0{i}", f"fabnet-tx-gpu0{i}", f"198.18.9.{i}", f"198.19.9.{i}") for i in (1, 2, 3)]
    return LabState(name="tx", slot=9, profile="default.yml", nodes=nodes, complete=True)


def test_kept_lab_gets_next_steps_on_it() -> None:
    text = closing_text(_state(), keep=True)
    assert "Next steps:" in text
    assert "root@198.18.9.3 mlnx_qos -i eth1" in text
    assert "fabnet lab down --name tx" in text


def test_removed_lab_gets_no_commands_for_it() -> None:
    text = closing_text(_state(), keep=False)
    assert "removed" in text
    assert "fabnet audit" not in text and "ssh " not in text and "lab down" not in text
