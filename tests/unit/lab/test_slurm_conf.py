"""The lab's slurm.conf: every node listed at its management address, the first one the controller."""

from __future__ import annotations

from provisioner.lab import slurm
from provisioner.lab.state import NodeRecord


def _nodes(count: int) -> list[NodeRecord]:
    return [NodeRecord(index=i, name=f"gpu{i:02d}", netns=f"ns{i}", mgmt_ip=f"198.18.7.{i}", data_ip=f"198.19.7.{i}")
            for i in range(1, count + 1)]


def test_conf_lists_every_node_and_names_the_first_the_controller() -> None:
    conf = slurm.slurm_conf("s1", _nodes(3), cpus=4)
    lines = conf.splitlines()
    assert "SlurmctldHost=gpu01(198.18.7.1)" in lines
    assert "ReturnToService=2" in lines
    assert "ProctrackType=proctrack/linuxproc" in lines
    assert [line for line in lines if line.startswith("NodeName=")] == [
        f"NodeName=gpu0{i} NodeAddr=198.18.7.{i} CPUs=4 RealMemory={slurm.REAL_MEMORY_MB} State=UNKNOWN"
        for i in (1, 2, 3)
    ]
    assert lines[-1].startswith("PartitionName=gpu Nodes=ALL Default=YES")


def test_daemon_ports_are_the_controller_then_every_slurmd() -> None:
    assert slurm.ports(_nodes(2)) == [("198.18.7.1", 6817), ("198.18.7.1", 6818), ("198.18.7.2", 6818)]


def test_the_layer_key_follows_the_base_rootfs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert slurm.layer_key(tmp_path / "rootfs-a") != slurm.layer_key(tmp_path / "rootfs-b")
