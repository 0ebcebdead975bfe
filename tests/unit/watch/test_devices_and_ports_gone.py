"""watch and an RDMA device, port or error counter that is no longer there: nothing is printed about it (its folder
went with it), so the listing of class/infiniband tells. It is reported once, with the last values read, and once
more when it is back, its counters then a new base; never in the first cycle, while the host is down, or from an
output that cannot say what is absent."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from provisioner.output.watch_report import change_line
from provisioner.watch import links
from provisioner.watch.changes import HostTrack, snapshot
from provisioner.watch.drainer import causes

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
# The recorded fixture of procfs' InfiniBand reader: hfi1_0 (one port), mlx4_0 (two) and mlx5_0 (one), as
# `grep -r -H .` run in class/infiniband prints them.
SAMPLE = (SAMPLES / "port-counters-sysfs-3-procfs-mlx5-hfi1-mlx4.txt").read_text().splitlines()
LISTING = ("hfi1_0", "mlx4_0", "mlx5_0", "hfi1_0/ports/1", "mlx4_0/ports/1", "mlx4_0/ports/2", "mlx5_0/ports/1")


def host() -> dict[str, Any]:
    return {"name": "gpu01", "status": "in_sync", "error": None, "resources": []}


def reading(counters: list[str], listing: tuple[str, ...] = LISTING) -> links.LinkReading:
    """What the probe prints: the counters, the mark, every device and port, then the netdevs."""
    return links.parse("\n".join([*counters, links.RDMA_MARK, *listing, links.NET_MARK]) + "\n")


def without(prefix: str, counters: list[str] = SAMPLE) -> list[str]:
    return [line for line in counters if not line.startswith(prefix)]


def test_the_listing_names_every_device_and_port() -> None:
    got = reading(SAMPLE)
    assert got.present == {"hfi1_0", "mlx4_0", "mlx5_0", "hfi1_0/1", "mlx4_0/1", "mlx4_0/2", "mlx5_0/1"}
    assert got.counters["mlx4_0/2 symbol_error"] == 0


def test_an_output_that_cannot_say_what_is_absent_has_no_listing() -> None:
    # No listing (an output from before it), one cut before the netdevs' mark, or counters that did not parse.
    assert links.parse("\n".join(SAMPLE) + f"\n{links.NET_MARK}\n").present is None
    assert links.parse("\n".join([*SAMPLE, links.RDMA_MARK, *LISTING[:3]])).present is None
    assert reading(["mlx5_0/ports/1/counters/symbol_error:lots"]).present is None
    # No class/infiniband at all (no RDMA, or ib_core unloaded): the mark alone, nothing present.
    assert reading([], ()).present == frozenset()


def test_the_first_cycle_reports_no_device_gone_or_back() -> None:
    assert [c.kind for c in HostTrack().advance(snapshot(host(), reading(without("mlx5_0"),
                                                                         LISTING[:2] + LISTING[3:6]), 0.0))] \
        == ["watching"]


def test_a_device_gone_is_reported_once_with_its_last_values_and_back_once_as_a_new_base() -> None:
    track = HostTrack()
    track.advance(snapshot(host(), reading(SAMPLE), 0.0))
    gone_listing = tuple(name for name in LISTING if not name.startswith("mlx5_0"))
    [gone] = track.advance(snapshot(host(), reading(without("mlx5_0"), gone_listing), 60.0))
    # One change for the device: none for its port or its counters, which went with it.
    assert (gone.host, gone.kind, gone.subject, gone.bad) == ("gpu01", "device_gone", "mlx5_0", True)
    assert "no longer in class/infiniband" in gone.detail
    assert "out_of_sequence 1" in gone.detail and "local_ack_timeout_err 131" in gone.detail
    assert "gpu01 DEVICE GONE mlx5_0: is gone" in change_line(gone)
    assert "device gone mlx5_0: is gone" in causes([gone])["gpu01"]
    assert "19 error counters, not 0: mlx5_0/1 local_ack_timeout_err 131, mlx5_0/1 out_of_sequence 1" in gone.detail
    # Still gone: not a change.
    assert track.advance(snapshot(host(), reading(without("mlx5_0"), gone_listing), 120.0)) == []
    # Back with its counters higher than before the gap: no rise and no rate across it.
    higher = [line.replace("out_of_sequence:1", "out_of_sequence:9") for line in SAMPLE]
    [back] = track.advance(snapshot(host(), reading(higher), 180.0))
    assert (back.kind, back.subject, back.bad, back.delta, back.rate) == ("device_back", "mlx5_0", False, None, None)
    assert "out_of_sequence 9" in back.detail and "rises are counted from these values" in back.detail
    assert "gpu01 device back mlx5_0: is present again" in change_line(back)
    assert causes([back]) == {}
    # The next rise is counted from the value it came back with.
    rose = [line.replace("out_of_sequence:1", "out_of_sequence:12") for line in SAMPLE]
    [change] = track.advance(snapshot(host(), reading(rose), 240.0))
    assert (change.kind, change.subject, change.delta) == ("counter_rose", "mlx5_0/1 out_of_sequence", 3)


def test_a_device_never_listed_before_is_new_not_back() -> None:
    # The watch began without mlx5_0 (not yet bound); when it appears it was never there to come back.
    track = HostTrack()
    first_listing = tuple(name for name in LISTING if not name.startswith("mlx5_0"))
    track.advance(snapshot(host(), reading(without("mlx5_0"), first_listing), 0.0))
    [new] = track.advance(snapshot(host(), reading(SAMPLE), 60.0))
    assert (new.kind, new.subject, new.bad, new.delta) == ("device_new", "mlx5_0", False, None)
    assert "never listed on this host since the watch began" in new.detail
    assert "out_of_sequence 1" in new.detail and "rises are counted from these values" in new.detail
    assert "gpu01 device new mlx5_0: is new" in change_line(new)
    # Once seen, it is gone and back like any other.
    assert [c.kind for c in track.advance(snapshot(host(), reading(without("mlx5_0"), first_listing), 120.0))] \
        == ["device_gone"]
    assert [c.kind for c in track.advance(snapshot(host(), reading(SAMPLE), 180.0))] == ["device_back"]
    # A port the device never had before is new as well.
    more = (*LISTING, "mlx5_0/ports/2")
    assert [(c.kind, c.subject) for c in track.advance(snapshot(host(), reading(SAMPLE, more), 240.0))] \
        == [("port_new", "mlx5_0/2")]


def test_a_port_gone_while_its_device_stays() -> None:
    track = HostTrack()
    track.advance(snapshot(host(), reading(SAMPLE), 0.0))
    listing = tuple(name for name in LISTING if name != "mlx4_0/ports/2")
    [gone] = track.advance(snapshot(host(), reading(without("mlx4_0/ports/2"), listing), 60.0))
    assert (gone.kind, gone.subject, gone.bad) == ("port_gone", "mlx4_0/2", True)
    assert "its device no longer lists it" in gone.detail and "all 0" in gone.detail
    assert "gpu01 PORT GONE mlx4_0/2:" in change_line(gone)
    [back] = track.advance(snapshot(host(), reading(SAMPLE), 120.0))
    assert (back.kind, back.subject, back.bad) == ("port_back", "mlx4_0/2", False)


def test_a_counter_gone_while_its_port_stays() -> None:
    track = HostTrack()
    track.advance(snapshot(host(), reading(SAMPLE), 0.0))
    [gone] = track.advance(snapshot(host(), reading(without("mlx5_0/ports/1/hw_counters/roce_adp_retrans")), 60.0))
    assert (gone.kind, gone.subject, gone.bad) == ("counter_gone", "mlx5_0/1 roce_adp_retrans", True)
    assert "while its port stays (was 99)" in gone.detail
    assert causes([gone]) == {}  # watch lost sight of a counter; the link may still be sound
    assert track.advance(snapshot(host(), reading(without("mlx5_0/ports/1/hw_counters/roce_adp_retrans")),
                                  120.0)) == []
    [back] = track.advance(snapshot(host(), reading(SAMPLE), 180.0))
    assert (back.kind, back.subject, back.delta, back.rate) == ("counter_back", "mlx5_0/1 roce_adp_retrans",
                                                                None, None)
    assert "now 99" in back.detail


def test_nothing_while_the_host_is_down_and_the_loss_is_said_once_it_is_back() -> None:
    track = HostTrack()
    track.advance(snapshot(host(), reading(SAMPLE), 0.0))
    down = {"name": "gpu01", "status": "unreachable", "error": "ssh: connect timed out", "resources": []}
    assert [c.kind for c in track.advance(snapshot(down, links.LinkReading(), 60.0))] == ["host_down"]
    assert track.advance(snapshot(down, links.LinkReading(), 120.0)) == []
    # Rebooted without one of its NICs: compared with its last cycle before it went down.
    gone_listing = tuple(name for name in LISTING if not name.startswith("hfi1_0"))
    found = track.advance(snapshot(host(), reading(without("hfi1_0"), gone_listing), 180.0))
    assert [(c.kind, c.subject) for c in found] == [("host_back", ""), ("device_gone", "hfi1_0")]


def test_an_output_without_its_listing_reports_nothing_gone() -> None:
    # A cycle whose output was cut: what it lacks is not what the host lost, at that cycle or the next.
    track = HostTrack()
    track.advance(snapshot(host(), reading(SAMPLE), 0.0))
    cut = links.parse("\n".join([*without("mlx5_0"), links.RDMA_MARK, *LISTING[:2]]))
    assert track.advance(snapshot(host(), cut, 60.0)) == []
    assert track.advance(snapshot(host(), reading(SAMPLE), 120.0)) == []


def test_a_device_lost_during_a_cycle_that_could_not_list_is_reported_at_the_next_that_can() -> None:
    # The cut cycle keeps the last whole listing as what the next cycle is compared with: mlx5_0 gone then is
    # still said once, at the next cycle that lists the host whole.
    track = HostTrack()
    track.advance(snapshot(host(), reading(SAMPLE), 0.0))
    cut = links.parse("\n".join([*without("mlx5_0"), links.RDMA_MARK, *LISTING[:2]]))
    assert track.advance(snapshot(host(), cut, 60.0)) == []
    gone = LISTING[:2] + LISTING[3:6]
    assert [(c.kind, c.subject) for c in track.advance(snapshot(host(), reading(without("mlx5_0"), gone), 120.0))] \
        == [("device_gone", "mlx5_0")]
    assert track.advance(snapshot(host(), reading(without("mlx5_0"), gone), 180.0)) == []


def test_every_device_gone_with_class_infiniband() -> None:
    track = HostTrack()
    track.advance(snapshot(host(), reading(SAMPLE), 0.0))
    found = track.advance(snapshot(host(), reading([], ()), 60.0))
    assert [(c.kind, c.subject) for c in found] == [("device_gone", "hfi1_0"), ("device_gone", "mlx4_0"),
                                                    ("device_gone", "mlx5_0")]


def test_an_old_efa_device_copy_left_out_is_no_counter_gone() -> None:
    # links.parse drops the device's copy of a counter while it equals its one port's: its coming and going is
    # the dedup's, not the driver's.
    listing = ("efa_0", "efa_0/ports/1")
    track = HostTrack()
    track.advance(snapshot(host(), reading(["efa_0/hw_counters/rx_drops:5", "efa_0/ports/1/hw_counters/rx_drops:3"],
                                           listing), 0.0))
    found = track.advance(snapshot(host(), reading(["efa_0/hw_counters/rx_drops:5",
                                                    "efa_0/ports/1/hw_counters/rx_drops:5"], listing), 60.0))
    assert [c.kind for c in found] == ["counter_rose"]
    found = track.advance(snapshot(host(), reading(["efa_0/hw_counters/rx_drops:6",
                                                    "efa_0/ports/1/hw_counters/rx_drops:5"], listing), 120.0))
    assert [c.kind for c in found] == []


def _probe(root: Path) -> links.LinkReading:
    proc = subprocess.run(["sh", "-c", links.probe(str(root)).command], capture_output=True, text=True, check=True,
                          timeout=30)
    return links.parse(proc.stdout)


def test_the_probe_lists_what_is_there_and_a_device_unbound_is_gone(tmp_path: Path) -> None:
    # The probe's own shell code, run by sh on a sysfs-like tree: class/infiniband holds links to the devices'
    # folders, as the kernel's does; unbinding a device removes its folder, and here leaves its link dangling.
    devices = tmp_path / "devices"
    for name, ports in (("mlx5_0", 1), ("mlx5_1", 2)):
        for port in range(1, ports + 1):
            (devices / name / f"ports/{port}/counters").mkdir(parents=True)
            (devices / name / f"ports/{port}/counters/symbol_error").write_text(f"{port}\n")
    (tmp_path / "class/infiniband").mkdir(parents=True)
    for name in ("mlx5_0", "mlx5_1"):
        os.symlink(devices / name, tmp_path / "class/infiniband" / name)
    track = HostTrack()
    first = _probe(tmp_path)
    assert first.present == {"mlx5_0", "mlx5_0/1", "mlx5_1", "mlx5_1/1", "mlx5_1/2"}
    assert first.counters == {"mlx5_0/1 symbol_error": 1, "mlx5_1/1 symbol_error": 1, "mlx5_1/2 symbol_error": 2}
    track.advance(snapshot(host(), first, 0.0))
    shutil.rmtree(devices / "mlx5_1")
    gone = _probe(tmp_path)
    assert gone.present == {"mlx5_0", "mlx5_0/1"} and gone.problem is None
    assert [(c.kind, c.subject) for c in track.advance(snapshot(host(), gone, 60.0))] == [("device_gone", "mlx5_1")]
    # No class/infiniband at all: every device gone.
    shutil.rmtree(tmp_path / "class")
    assert _probe(tmp_path).present == frozenset()
