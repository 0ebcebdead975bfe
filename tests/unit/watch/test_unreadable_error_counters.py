"""watch and the error counters a host has but cannot read: one that turns unreadable is reported once, naming
the host, the port and what was printed, and once more when it reads again; one that never could be read is never
reported as a change."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any, get_args

from provisioner.output.html_report import COLORS
from provisioner.output.watch_report import LABELS, change_line
from provisioner.watch import links
from provisioner.watch.changes import HostTrack, snapshot
from provisioner.watch.events import ChangeKind


def host() -> dict[str, Any]:
    return {"name": "gpu01", "status": "in_sync", "error": None, "resources": []}


def reading(*lines: str) -> links.LinkReading:
    return links.parse("\n".join(lines) + f"\n{links.NET_MARK}\n")


READ = "mlx5_0/ports/1/counters/symbol_error:0"
DENIED = "grep: mlx5_0/ports/1/counters/symbol_error: Permission denied"
OTHER = "mlx5_0/ports/1/counters/link_downed:1"


def test_an_unreadable_counter_is_in_the_reading_with_what_was_printed() -> None:
    got = reading(DENIED, OTHER, "i40iw0/ports/1/counters/link_downed:N/A (no PMA)",
                  "grep: efa_0/hw_counters/cmds_err: Input/output error",
                  "grep: */ports/*/*counters/out_of_buffer: No such file or directory")
    assert got.counters == {"mlx5_0/1 link_downed": 1}
    assert got.unreadable == {"mlx5_0/1 symbol_error": "Permission denied", "i40iw0/1 link_downed": "N/A (no PMA)",
                              "efa_0 cmds_err": "Input/output error"}


def test_a_counter_that_turns_unreadable_is_reported_once() -> None:
    track = HostTrack()
    [first] = track.advance(snapshot(host(), reading(READ, OTHER), 0.0))
    assert first.kind == "watching" and "unreadable" not in first.detail
    [change] = track.advance(snapshot(host(), reading(DENIED, OTHER), 60.0))
    assert (change.host, change.kind, change.subject, change.bad) == ("gpu01", "counter_unreadable",
                                                                      "mlx5_0/1 symbol_error", True)
    assert "'Permission denied'" in change.detail and "was 0" in change.detail
    assert "gpu01 COUNTER UNREADABLE mlx5_0/1 symbol_error: can no longer be read" in change_line(change)
    # Still unreadable: not a change.
    assert track.advance(snapshot(host(), reading(DENIED, OTHER), 120.0)) == []
    # Readable again (said once), then refused again: a new change each time it turns.
    [back] = track.advance(snapshot(host(), reading(READ, OTHER), 180.0))
    assert (back.kind, back.subject, back.bad, back.delta, back.rate) == ("counter_readable", "mlx5_0/1 symbol_error",
                                                                          False, None, None)
    assert "now 0" in back.detail and "'Permission denied'" in back.detail
    assert "gpu01 counter readable mlx5_0/1 symbol_error: can be read again, now 0" in change_line(back)
    assert track.advance(snapshot(host(), reading(READ, OTHER), 200.0)) == []
    assert [c.kind for c in track.advance(snapshot(host(), reading(DENIED, OTHER), 240.0))] == ["counter_unreadable"]


def test_a_counter_never_readable_is_said_in_the_first_summary_only() -> None:
    track = HostTrack()
    no_pma = ("i40iw0/ports/1/counters/link_downed:N/A (no PMA)", "i40iw0/ports/1/counters/symbol_error:N/A (no PMA)")
    [first] = track.advance(snapshot(host(), reading(*no_pma), 0.0))
    assert "1 RDMA ports" in first.detail
    assert "2 error counters unreadable (i40iw0/1 link_downed: the host printed 'N/A (no PMA)', ...)" in first.detail
    for at in (60.0, 120.0, 180.0):
        assert track.advance(snapshot(host(), reading(*no_pma), at)) == []


def test_a_value_before_and_after_the_gap_is_no_rise() -> None:
    # 5 before the gap and 9 after it: what happened in between is unknown (the cause of the gap may have reset it),
    # so no rise and no rate; the next rise is counted from 9.
    track = HostTrack()
    track.advance(snapshot(host(), reading("mlx5_0/ports/1/counters/symbol_error:5", OTHER), 0.0))
    assert [c.kind for c in track.advance(snapshot(host(), reading(DENIED, OTHER), 60.0))] == ["counter_unreadable"]
    [back] = track.advance(snapshot(host(), reading("mlx5_0/ports/1/counters/symbol_error:9", OTHER), 120.0))
    assert (back.kind, back.delta, back.rate) == ("counter_readable", None, None)
    [rose] = track.advance(snapshot(host(), reading("mlx5_0/ports/1/counters/symbol_error:12", OTHER), 180.0))
    assert (rose.kind, rose.delta, rose.rate) == ("counter_rose", 3, 0.05)


def test_a_counter_unreadable_from_the_start_that_reads_later_is_said_once() -> None:
    track = HostTrack()
    no_pma = "i40iw0/ports/1/counters/link_downed:N/A (no PMA)"
    [first] = track.advance(snapshot(host(), reading(no_pma), 0.0))
    assert first.kind == "watching"  # no false alarm in the first cycle, either way
    [back] = track.advance(snapshot(host(), reading("i40iw0/ports/1/counters/link_downed:2"), 60.0))
    assert (back.kind, back.subject) == ("counter_readable", "i40iw0/1 link_downed")
    assert "'N/A (no PMA)'" in back.detail and "now 2" in back.detail
    assert track.advance(snapshot(host(), reading("i40iw0/ports/1/counters/link_downed:2"), 120.0)) == []


def test_a_host_first_seen_readable_has_no_readable_change() -> None:
    assert [c.kind for c in HostTrack().advance(snapshot(host(), reading(READ, OTHER), 0.0))] == ["watching"]


def test_every_change_kind_has_a_label_and_a_colour() -> None:
    kinds = set(get_args(ChangeKind))
    assert kinds <= set(LABELS)
    assert kinds - {"watching"} <= set(COLORS)


def test_a_device_counter_that_turns_unreadable_names_the_device() -> None:
    track = HostTrack()
    track.advance(snapshot(host(), reading("efa_0/hw_counters/cmds_err:4"), 0.0))
    [change] = track.advance(snapshot(host(), reading("grep: efa_0/hw_counters/cmds_err: Input/output error"), 60.0))
    assert (change.kind, change.subject) == ("counter_unreadable", "efa_0 cmds_err")
    assert "'Input/output error'" in change.detail


def test_the_probe_keeps_a_refused_counter(tmp_path: Path, refused_file: str) -> None:
    # The probe's own shell code, run by sh on a sysfs-like tree; the refused counter is a write-only sysfs
    # attribute, which root cannot read either.
    counters = tmp_path / "class/infiniband/mlx5_0/ports/1/counters"
    counters.mkdir(parents=True)
    (counters / "link_downed").write_text("2\n")
    os.symlink(refused_file, counters / "symbol_error")
    proc = subprocess.run(["sh", "-c", links.probe(str(tmp_path)).command], capture_output=True, text=True,
                          check=True, timeout=30)
    assert "grep: mlx5_0/ports/1/counters/symbol_error: Permission denied" in proc.stdout.splitlines()
    got = links.parse(proc.stdout)
    assert got.counters == {"mlx5_0/1 link_downed": 2}
    assert got.unreadable == {"mlx5_0/1 symbol_error": "Permission denied"}
    assert got.problem is None


def test_the_probe_keeps_a_counter_that_fails_with_an_io_error(tmp_path: Path) -> None:
    # A driver's EIO: the shell's own read takes it for the end of the file, so grep reads the counters instead
    # and names it. /proc/self/mem refuses a read at offset 0 with EIO, whoever reads it.
    counters = tmp_path / "class/infiniband/mlx5_0/ports/1/counters"
    counters.mkdir(parents=True)
    (counters / "link_downed").write_text("2\n")
    os.symlink("/proc/self/mem", counters / "symbol_error")
    proc = subprocess.run(["sh", "-c", links.probe(str(tmp_path)).command], capture_output=True, text=True,
                          check=True, timeout=30)
    got = links.parse(proc.stdout)
    assert got.counters == {"mlx5_0/1 link_downed": 2}
    assert got.unreadable == {"mlx5_0/1 symbol_error": "Input/output error"}


def test_the_probe_reads_counters_and_carriers_as_grep_does(tmp_path: Path) -> None:
    port = tmp_path / "class/infiniband/mlx5_0/ports/1"
    (port / "counters").mkdir(parents=True)
    (port / "hw_counters").mkdir()
    (port / "counters/link_downed").write_text("2\n")
    (port / "counters/symbol_error").write_text("0")  # no final line break
    (port / "counters/port_rcv_data").write_text("77\n")  # traffic: not read
    (port / "hw_counters/out_of_sequence").write_text("5\n")
    proc = subprocess.run(["sh", "-c", links.probe(str(tmp_path)).command], capture_output=True, text=True,
                          check=True, timeout=30)
    counters, _, rest = proc.stdout.partition(links.RDMA_MARK)
    assert counters.splitlines() == ["mlx5_0/ports/1/counters/link_downed:2",  # in the order of the names' list
                                     "mlx5_0/ports/1/hw_counters/out_of_sequence:5",
                                     "mlx5_0/ports/1/counters/symbol_error:0"]
    # This machine's own netdevs, as grep prints them (a netdev that is down refuses `carrier`: left out by both).
    net = sorted(str(p) for p in Path("/sys/class/net").glob("*/carrier_changes"))
    net += sorted(str(p) for p in Path("/sys/class/net").glob("*/carrier"))
    net += sorted(str(p) for p in Path("/sys/class/net").glob("*/ifindex"))
    theirs = subprocess.run(["grep", "-H", ".", *net], capture_output=True, text=True, check=False)
    net_text, _, hardware = rest.partition(links.NET_MARK)[2].partition(links.HW_MARK)
    assert net_text.lstrip("\n") == theirs.stdout
    assert hardware.split() == [links.BOUND_MARK, links.END_MARK]  # the tree above has no class/net, no bus/pci
    assert links.parse(proc.stdout).counters == {"mlx5_0/1 link_downed": 2, "mlx5_0/1 symbol_error": 0,
                                                 "mlx5_0/1 out_of_sequence": 5}
    assert links.parse(proc.stdout).ifindex == {p.parent.name: int(p.read_text()) for p in
                                                Path("/sys/class/net").glob("*/ifindex") if p.parent.name != "lo"}
