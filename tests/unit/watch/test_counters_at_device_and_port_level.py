"""watch on an older EFA kernel, which serves the same counters as the device's and as its one port's: a rise there
is reported once, as the port's; a device counter that is the device's own is still reported as the device's."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from provisioner.watch import links
from provisioner.watch.changes import HostTrack, snapshot

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
# The recorded device-level listing, and the same lines under port 1, as an EFA driver before the stats split
# lays them out.
DEVICE = (SAMPLES / "port-counters-sysfs-4-efa-device-hw-counters.txt").read_text()
BOTH = DEVICE + DEVICE.replace("efa_0/hw_counters/", "efa_0/ports/1/hw_counters/")


def host() -> dict[str, Any]:
    return {"name": "gpu01", "status": "in_sync", "error": None, "resources": []}


def _bumped(text: str, counter: str, value: int) -> str:
    return "".join(f"{line.rpartition(':')[0]}:{value}\n" if line.rpartition(":")[0].endswith(f"/{counter}")
                   else f"{line}\n" for line in text.splitlines())


def test_a_counter_listed_at_both_levels_is_read_once_as_the_ports() -> None:
    counters = links.parse(BOTH + links.NET_MARK + "\n").counters
    assert counters["efa_0/1 rx_drops"] == 0 and counters["efa_0/1 rdma_read_wr_err"] == 0
    assert "efa_0 rx_drops" not in counters and "efa_0 rdma_read_wr_err" not in counters
    # What only the device keeps (admin commands, failed verbs) stays the device's.
    assert counters["efa_0 cmds_err"] == 0 and counters["efa_0 create_qp_err"] == 0


def test_one_rise_on_an_older_efa_kernel_is_reported_once() -> None:
    track = HostTrack()
    track.advance(snapshot(host(), links.parse(BOTH + links.NET_MARK + "\n"), 0.0))
    later = links.parse(_bumped(BOTH, "rx_drops", 12) + links.NET_MARK + "\n")
    rose = [c for c in track.advance(snapshot(host(), later, 60.0)) if c.kind == "counter_rose"]
    assert [(c.subject, c.delta) for c in rose] == [("efa_0/1 rx_drops", 12)]


def test_copies_that_differ_are_both_reported() -> None:
    text = "efa_0/hw_counters/rx_drops:5\nefa_0/ports/1/hw_counters/rx_drops:3\n" + links.NET_MARK + "\n"
    assert links.parse(text).counters == {"efa_0 rx_drops": 5, "efa_0/1 rx_drops": 3}


def test_a_device_with_several_ports_keeps_its_own_counter() -> None:
    # mlx5 in switchdev mode: the device's out_of_buffer is not any one port's, even where the values agree.
    text = ("mlx5_0/hw_counters/out_of_buffer:4\nmlx5_0/ports/1/hw_counters/out_of_buffer:4\n"
            "mlx5_0/ports/2/hw_counters/out_of_buffer:0\n" + links.NET_MARK + "\n")
    assert links.parse(text).counters == {"mlx5_0 out_of_buffer": 4, "mlx5_0/1 out_of_buffer": 4,
                                          "mlx5_0/2 out_of_buffer": 0}


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_the_probe_on_an_older_efa_tree_reads_each_rise_once(tmp_path: Path) -> None:
    efa = tmp_path / "class/infiniband/efa_0"
    for folder in ("hw_counters", "ports/1/hw_counters"):
        (efa / folder).mkdir(parents=True)
        for name, value in {"rx_drops": 7, "cmds_err": 1, "tx_pkts": 40}.items():
            (efa / folder / name).write_text(f"{value}\n")
    proc = subprocess.run(["sh", "-c", links.probe(str(tmp_path)).command], capture_output=True, text=True,
                          check=True, timeout=10)
    assert links.parse(proc.stdout).counters == {"efa_0/1 rx_drops": 7, "efa_0 cmds_err": 1}
