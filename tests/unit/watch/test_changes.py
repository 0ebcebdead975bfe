"""Change detection between watch cycles: changes once, never repeats; rates; down and back; link flaps."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from provisioner.watch import links
from provisioner.watch.changes import HostTrack, snapshot
from provisioner.watch.links import LinkReading


def host(status: str = "in_sync", drift: dict[str, str] | None = None, error: str | None = None) -> dict[str, Any]:
    checks = [{"attribute": "value", "desired": "1", "actual": actual, "status": "drift", "message": ""}
              for actual in (drift or {}).values()]
    resources = [{"kind": "sysctl", "target": name, "checks": [check]}
                 for name, check in zip(drift or {}, checks, strict=True)]
    return {"name": "gpu03", "status": status, "error": error, "resources": resources}


def reading(counters: dict[str, int] | None = None, changes: int = 2, carrier: int = 1) -> LinkReading:
    return LinkReading(counters=counters or {"mlx5_0/1 symbol_error": 0}, carrier_changes={"eth1": changes},
                       carrier={"eth1": carrier} if carrier else {})


def test_first_cycle_is_a_baseline_and_a_repeat_reports_nothing() -> None:
    track = HostTrack()
    first = track.advance(snapshot(host(drift={"net.x": "0"}), reading(), 100.0))
    assert [c.kind for c in first] == ["watching"]
    assert "1 drift items" in first[0].detail
    assert track.advance(snapshot(host(drift={"net.x": "0"}), reading(), 160.0)) == []


def test_drift_new_changed_and_gone_each_once() -> None:
    track = HostTrack()
    track.advance(snapshot(host(), reading(), 0.0))
    new = track.advance(snapshot(host(drift={"net.x": "0"}), reading(), 60.0))
    assert [(c.kind, c.subject, c.detail) for c in new] == [("drift_new", "sysctl net.x: value", "0 (want 1)")]
    assert track.advance(snapshot(host(drift={"net.x": "0"}), reading(), 120.0)) == []
    changed = track.advance(snapshot(host(drift={"net.x": "5"}), reading(), 180.0))
    assert [(c.kind, c.detail) for c in changed] == [("drift_changed", "0 -> 5 (want 1)")]
    gone = track.advance(snapshot(host(), reading(), 240.0))
    assert [(c.kind, c.subject, c.bad) for c in gone] == [("drift_gone", "sysctl net.x: value", False)]


def test_a_rising_counter_is_reported_with_its_rate_and_a_reset_as_news() -> None:
    track = HostTrack()
    track.advance(snapshot(host(), reading({"mlx5_0/1 symbol_error": 10}), 0.0))
    rose = track.advance(snapshot(host(), reading({"mlx5_0/1 symbol_error": 40}), 60.0))
    assert [(c.kind, c.subject, c.delta, c.rate) for c in rose] == [
        ("counter_rose", "mlx5_0/1 symbol_error", 30, 0.5)]
    assert "+30 in 60 s (0.5/s), now 40" in rose[0].detail
    [reset] = track.advance(snapshot(host(), reading({"mlx5_0/1 symbol_error": 0}), 120.0))  # a clear, a reboot
    assert (reset.kind, reset.subject, reset.bad) == ("counters_reset", "mlx5_0/1", False)
    assert "(symbol_error 40 -> 0)" in reset.detail and "perfquery -R" in reset.detail and "wrapped" not in reset.detail
    assert track.advance(snapshot(host(), reading({"mlx5_0/1 symbol_error": 0}), 180.0)) == []  # said once
    rose = track.advance(snapshot(host(), reading({"mlx5_0/1 symbol_error": 3}), 240.0))
    assert [(c.kind, c.delta) for c in rose] == [("counter_rose", 3)]  # counted from the value after the reset


def test_counters_that_went_back_are_one_change_per_port_or_device() -> None:
    track = HostTrack()
    before = {"mlx5_0/1 symbol_error": 9, "mlx5_0/1 link_downed": 4, "mlx5_1/1 symbol_error": 2, "efa_0 cmds_err": 5}
    track.advance(snapshot(host(), reading(before), 0.0))
    after = {"mlx5_0/1 symbol_error": 0, "mlx5_0/1 link_downed": 1, "mlx5_1/1 symbol_error": 3, "efa_0 cmds_err": 0}
    changes = track.advance(snapshot(host(), reading(after), 60.0))
    assert sorted((c.kind, c.subject) for c in changes) == [
        ("counter_rose", "mlx5_1/1 symbol_error"), ("counters_reset", "efa_0"), ("counters_reset", "mlx5_0/1")]
    reset = next(c for c in changes if c.subject == "mlx5_0/1")
    assert "(link_downed 4 -> 1, symbol_error 9 -> 0)" in reset.detail


def test_a_counter_that_rose_to_its_maximum_says_it_counts_no_more() -> None:
    """symbol_error is 16 bits wide and does not wrap: after this rise watch cannot see another."""
    track = HostTrack()
    track.advance(snapshot(host(), reading({"mlx5_0/1 symbol_error": 65000}), 0.0))
    [rose] = track.advance(snapshot(host(), reading({"mlx5_0/1 symbol_error": 65535}), 60.0))
    assert "now 65535, at its maximum" in rose.detail and "reset" in rose.detail
    other = HostTrack()
    other.advance(snapshot(host(), reading({"mlx5_0/1 symbol_error": 65000}), 0.0))
    [below] = other.advance(snapshot(host(), reading({"mlx5_0/1 symbol_error": 65534}), 60.0))
    assert "maximum" not in below.detail


def test_link_flap_and_link_down() -> None:
    track = HostTrack()
    track.advance(snapshot(host(), reading(changes=2), 0.0))
    flap = track.advance(snapshot(host(), reading(changes=4), 60.0))
    assert [(c.kind, c.subject, c.delta) for c in flap] == [("link_flap", "eth1", 2)]
    down = track.advance(snapshot(host(), reading(changes=5, carrier=0), 120.0))
    assert [(c.kind, c.subject) for c in down] == [("link_down", "eth1")]
    up = track.advance(snapshot(host(), reading(changes=6, carrier=1), 180.0))
    assert [(c.kind, c.subject, c.bad) for c in up] == [("link_up", "eth1", False)]


def net(changes: int, carrier: int = 1, ifindex: int | None = 5, hardware: bool = True,
        present: bool = True, bound: frozenset[str] = frozenset()) -> LinkReading:
    """eth1, backed by device 0000:3b:00.0 when `hardware`; `bound`: the PCI devices with a driver now."""
    if not present:
        return LinkReading(counters={"mlx5_0/1 symbol_error": 0}, hardware=frozenset(), bound=bound)
    return LinkReading(counters={"mlx5_0/1 symbol_error": 0}, carrier_changes={"eth1": changes},
                       carrier={"eth1": carrier} if carrier else {},
                       ifindex={"eth1": ifindex} if ifindex is not None else {},
                       hardware=frozenset({"eth1"}) if hardware else frozenset(),
                       devices={"eth1": "0000:3b:00.0"} if hardware else {}, bound=bound)


def test_a_netdev_registered_again_between_two_cycles_is_a_link_reset_not_a_flap() -> None:
    # A driver reload within one interval: the same name, a new ifindex, carrier changes counted again from zero
    # (here to the same number as before, which alone would read as calm).
    track = HostTrack()
    track.advance(snapshot(host(), net(2), 0.0))
    [reset] = track.advance(snapshot(host(), net(2, ifindex=9), 60.0))
    assert (reset.kind, reset.subject, reset.bad) == ("link_reset", "eth1", True)
    assert "(ifindex 5 -> 9)" in reset.detail and "it is up now" in reset.detail
    assert track.advance(snapshot(host(), net(2, ifindex=9), 120.0)) == []  # said once
    # Registered again and more carrier changes than before: still one reset, not a flap as well.
    [again] = track.advance(snapshot(host(), net(7, ifindex=12), 180.0))
    assert again.kind == "link_reset"


def test_a_carrier_count_that_went_back_is_a_link_reset_where_no_ifindex_was_read() -> None:
    track = HostTrack()
    track.advance(snapshot(host(), net(6, ifindex=None), 0.0))
    [reset] = track.advance(snapshot(host(), net(1, carrier=0, ifindex=None), 60.0))
    assert reset.kind == "link_reset" and "went back from 6 to 1" in reset.detail and "it is down now" in reset.detail
    up = track.advance(snapshot(host(), net(2, ifindex=None), 120.0))
    assert [c.kind for c in up] == ["link_up"]
    # A netdev with the same ifindex whose count went up is the flap it always was.
    track = HostTrack()
    track.advance(snapshot(host(), net(2), 0.0))
    assert [c.kind for c in track.advance(snapshot(host(), net(4), 60.0))] == ["link_flap"]


def test_a_reload_that_spans_a_cycle_is_a_nic_gone_then_registered_again() -> None:
    # A real driver reload takes seconds: one cycle finds no eth1 at all, the next finds it registered again.
    track = HostTrack()
    track.advance(snapshot(host(), net(2), 0.0))
    [gone] = track.advance(snapshot(host(), net(0, present=False), 60.0))
    assert (gone.kind, gone.subject, gone.bad) == ("link_gone", "eth1", True)
    assert "no longer in /sys/class/net" in gone.detail and "it was up at the last cycle" in gone.detail
    [reset] = track.advance(snapshot(host(), net(1, ifindex=8), 120.0))
    assert reset.kind == "link_reset" and "(ifindex 5 -> 8)" in reset.detail
    assert "since it was last seen" in reset.detail
    # Gone and back with the same index (its files were not read for a cycle): gone, then nothing more.
    assert [c.kind for c in track.advance(snapshot(host(), net(0, present=False), 180.0))] == ["link_gone"]
    assert track.advance(snapshot(host(), net(1, ifindex=8), 240.0)) == []


def test_a_nic_netdev_gone_while_its_device_keeps_its_driver_was_moved_and_is_news() -> None:
    # A host-device CNI moves the NIC's netdev into a pod's namespace; the pod ends and it comes back.
    bound = frozenset({"0000:3b:00.0", "0000:00:1f.0"})
    track = HostTrack()
    track.advance(snapshot(host(), net(2, bound=bound), 0.0))
    [moved] = track.advance(snapshot(host(), net(0, present=False, bound=bound), 60.0))
    assert (moved.kind, moved.subject, moved.bad) == ("link_moved", "eth1", False)
    assert "device 0000:3b:00.0 keeps its driver" in moved.detail
    assert track.advance(snapshot(host(), net(0, present=False, bound=bound), 120.0)) == []
    [back] = track.advance(snapshot(host(), net(1, ifindex=31, bound=bound), 180.0))
    assert (back.kind, back.subject, back.bad) == ("link_back", "eth1", False) and "it is up" in back.detail
    # Gone for good this time: its driver let go of the device.
    [gone] = track.advance(snapshot(host(), net(0, present=False, bound=frozenset({"0000:00:1f.0"})), 240.0))
    assert gone.kind == "link_gone" and "(device 0000:3b:00.0)" in gone.detail
    [reset] = track.advance(snapshot(host(), net(1, ifindex=32, bound=bound), 300.0))
    assert reset.kind == "link_reset" and "(ifindex 31 -> 32)" in reset.detail


def test_no_netdev_is_gone_from_an_output_cut_before_the_list_of_nics() -> None:
    track = HostTrack()
    track.advance(snapshot(host(), net(2), 0.0))
    cut = LinkReading(counters={"mlx5_0/1 symbol_error": 0})  # no carrier readings, no list of NICs: hardware None
    assert cut.hardware is None
    assert track.advance(snapshot(host(), cut, 60.0)) == []
    assert links.parse("mlx5_0/ports/1/counters/symbol_error:0\n" + links.NET_MARK + "\n").hardware is None
    cut = links.parse(links.NET_MARK + "\n" + links.HW_MARK + "\neth1 0000:3b:00.0\n")
    assert cut.hardware is None and cut.bound is None  # the NICs' list may have been cut
    whole = links.NET_MARK + "\n" + links.HW_MARK + "\neth1 0000:3b:00.0\n" + links.BOUND_MARK + "\n0000:3b:00.0\n"
    assert links.parse(whole).hardware == {"eth1"} and links.parse(whole).bound is None  # bound list not ended
    ended = links.parse(whole + links.END_MARK + "\n")
    assert ended.devices == {"eth1": "0000:3b:00.0"} and ended.bound == {"0000:3b:00.0"}


def test_a_virtual_netdev_made_again_under_its_name_is_no_link_reset() -> None:
    # A container runtime gives a restarted pod's veth the old name and a new index: no NIC lost its link.
    track = HostTrack()
    track.advance(snapshot(host(), net(2, hardware=False), 0.0))
    assert track.advance(snapshot(host(), net(2, ifindex=40, hardware=False), 60.0)) == []
    assert track.advance(snapshot(host(), net(1, ifindex=41, hardware=False), 120.0)) == []


def test_a_host_down_is_reported_once_and_compared_with_its_last_state_when_back() -> None:
    track = HostTrack()
    track.advance(snapshot(host(), reading(), 0.0))
    down = track.advance(snapshot(host("unreachable", error="timed out"), reading(), 60.0))
    assert [(c.kind, c.detail) for c in down] == [("host_down", "timed out")]
    assert track.advance(snapshot(host("unreachable", error="timed out"), reading(), 120.0)) == []
    back = track.advance(snapshot(host(drift={"net.x": "0"}), reading(changes=3), 180.0))
    assert [c.kind for c in back] == ["host_back", "drift_new", "link_flap"]


def test_an_exec_that_failed_without_results_counts_as_down() -> None:
    assert not snapshot({"name": "a", "status": "failed", "error": "lost", "resources": []}, reading(), 0).up
    assert snapshot(host("failed", drift={"x": "1"}), reading(), 0).up  # a resource unreadable: still up


def test_a_new_login_between_cycles_is_reported_as_reconnected() -> None:
    track = HostTrack()
    track.advance(snapshot(host(), reading(), 0.0, logins=1))
    assert [c.kind for c in track.advance(snapshot(host(), reading(), 60.0, logins=2))] == ["reconnected"]


def test_link_readings_parse_counters_and_carrier() -> None:
    text = ("mlx5_0/ports/1/counters/symbol_error:7\nmlx5_0/ports/1/counters/port_xmit_data:999\n"
            "mlx5_0/ports/1/hw_counters/out_of_buffer:3\n" + links.NET_MARK + "\n"
            "/sys/class/net/eth1/carrier_changes:4\n/sys/class/net/lo/carrier_changes:0\n"
            "/sys/class/net/eth1/carrier:1\n/sys/class/net/eth1/ifindex:3\n/sys/class/net/lo/ifindex:1\n"
            + links.HW_MARK + "\neth1 0000:3b:00.0\n" + links.BOUND_MARK + "\n" + links.END_MARK + "\n")
    parsed = links.parse(text)
    assert parsed.counters == {"mlx5_0/1 symbol_error": 7, "mlx5_0/1 out_of_buffer": 3}  # traffic left out
    assert parsed.carrier_changes == {"eth1": 4} and parsed.carrier == {"eth1": 1} and parsed.ifindex == {"eth1": 3}
    assert parsed.hardware == {"eth1"}
    assert links.parse("garbage line\n" + links.NET_MARK).problem is not None
    assert links.parse(links.NET_MARK + "\n").counters == {}


def test_a_down_host_backs_off_to_a_minute_or_the_interval() -> None:
    from provisioner.watch.loop import backoff

    assert [backoff(2.0, n) for n in range(0, 8)] == [2.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    assert backoff(300.0, 3) == 300.0  # never past the interval when that is longer


def test_the_link_probe_reads_only_error_counters_from_both_folders(tmp_path: Path) -> None:
    # The probe's own shell code, run by sh on a sysfs-like tree: traffic counters stay on the host.
    port = tmp_path / "class/infiniband/mlx5_0/ports/1"
    (port / "counters").mkdir(parents=True)
    (port / "hw_counters").mkdir()
    (port / "counters/symbol_error").write_text("7\n")
    (port / "counters/port_xmit_data").write_text("123456789\n")
    (port / "hw_counters/out_of_buffer").write_text("3\n")
    (port / "hw_counters/np_cnp_sent").write_text("42\n")
    (port / "hw_counters/rnr_nak_retry_err").write_text("2\n")  # RoCE transport trouble counts too
    proc = subprocess.run(["sh", "-c", links.probe(str(tmp_path)).command], capture_output=True, text=True,
                          check=True)
    # grep's complaints about names this driver lacks (unmatched patterns) are kept; they read as absent.
    counters_lines = [line for line in proc.stdout.partition(links.RDMA_MARK)[0].splitlines()
                      if not line.endswith(": No such file or directory")]
    assert sorted(counters_lines) == ["mlx5_0/ports/1/counters/symbol_error:7",
                                             "mlx5_0/ports/1/hw_counters/out_of_buffer:3",
                                             "mlx5_0/ports/1/hw_counters/rnr_nak_retry_err:2"]
    assert links.parse(proc.stdout).counters == {"mlx5_0/1 symbol_error": 7, "mlx5_0/1 out_of_buffer": 3,
                                                 "mlx5_0/1 rnr_nak_retry_err": 2}


def test_the_link_probe_names_the_netdevs_a_device_backs(tmp_path: Path) -> None:
    net = tmp_path / "class/net"
    (net / "eth9/device").mkdir(parents=True)
    (net / "veth0").mkdir()
    (tmp_path / "pci").mkdir()
    (net / "ib0").mkdir()
    (net / "ib0/device").symlink_to(tmp_path / "pci")
    (net / "gone0").mkdir()
    (net / "gone0/device").symlink_to(tmp_path / "nowhere")  # a dangling link backs nothing
    (net / "vf0/device/physfn").mkdir(parents=True)  # an SR-IOV virtual function: pods take it and give it back
    pci = tmp_path / "devices/pci0000:00"
    (pci / "0000:3b:00.0/driver").mkdir(parents=True)
    (pci / "0000:3c:00.0").mkdir(parents=True)  # no driver bound
    (net / "eth8").mkdir()
    (net / "eth8/device").symlink_to(pci / "0000:3b:00.0")
    (tmp_path / "bus/pci/devices").mkdir(parents=True)
    for device in ("0000:3b:00.0", "0000:3c:00.0"):
        (tmp_path / "bus/pci/devices" / device).symlink_to(pci / device)
    proc = subprocess.run(["sh", "-c", links.probe(str(tmp_path)).command], capture_output=True, text=True,
                          check=True, timeout=30)
    reading = links.parse(proc.stdout)
    assert reading.hardware == {"eth8", "eth9", "ib0"}
    assert reading.devices == {"eth8": "0000:3b:00.0", "eth9": "device", "ib0": "pci"}
    assert reading.bound == {"0000:3b:00.0"}
