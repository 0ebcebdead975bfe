"""watch reads the error counters a driver keeps for the whole device (EFA, hfi1) and reports their rise."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from provisioner.watch import links
from provisioner.watch.changes import HostTrack, snapshot

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def host() -> dict[str, Any]:
    return {"name": "gpu01", "status": "in_sync", "error": None, "resources": []}


def test_the_recorded_efa_listing_gives_its_device_error_counters_only() -> None:
    text = (SAMPLES / "port-counters-sysfs-4-efa-device-hw-counters.txt").read_text() + links.NET_MARK + "\n"
    counters = links.parse(text).counters
    assert counters["efa_0 cmds_err"] == 0 and counters["efa_0 no_completion_cmds"] == 0
    assert counters["efa_0 reg_mr_err"] == 0 and counters["efa_0 rdma_read_wr_err"] == 0
    # Traffic and bookkeeping stay out: commands submitted, keep-alives, bytes, packets, the refresh period.
    for name in ("submitted_cmds", "completed_cmds", "keep_alive_rcvd", "tx_bytes", "rx_pkts", "lifespan"):
        assert f"efa_0 {name}" not in counters
    assert all(" " in key and "/" not in key.partition(" ")[0] for key in counters)  # named by device, no port


def test_a_rising_device_counter_is_reported_with_its_device_and_rate() -> None:
    def cycle(cmds_err: int, read_err: int) -> links.LinkReading:
        return links.parse(f"efa_0/hw_counters/cmds_err:{cmds_err}\nefa_0/hw_counters/submitted_cmds:9\n"
                           f"efa_0/ports/1/hw_counters/rdma_read_wr_err:{read_err}\n{links.NET_MARK}\n")

    track = HostTrack()
    [first] = track.advance(snapshot(host(), cycle(2, 0), 0.0))
    assert first.kind == "watching" and "1 RDMA ports, 1 RDMA devices" in first.detail
    changes = track.advance(snapshot(host(), cycle(8, 3), 60.0))
    rose = {c.subject: c for c in changes if c.kind == "counter_rose"}
    assert set(rose) == {"efa_0 cmds_err", "efa_0/1 rdma_read_wr_err"}
    assert rose["efa_0 cmds_err"].delta == 6 and rose["efa_0 cmds_err"].rate == 0.1
    assert rose["efa_0 cmds_err"].detail.startswith("+6 in 60 s (0.1/s), now 8")


def test_a_device_counter_that_went_down_was_reset_and_is_not_a_rise() -> None:
    track = HostTrack()
    track.advance(snapshot(host(), links.parse(f"hfi1_0/hw_counters/RcvOverflow,32:50\n{links.NET_MARK}\n"), 0.0))
    later = links.parse(f"hfi1_0/hw_counters/RcvOverflow,32:3\n{links.NET_MARK}\n")
    [reset] = track.advance(snapshot(host(), later, 60.0))
    assert (reset.kind, reset.subject, reset.bad) == ("counters_reset", "hfi1_0", False)
    assert "(RcvOverflow,32 50 -> 3)" in reset.detail and "32-bit counter wrapped" in reset.detail


def test_the_probe_reads_device_level_error_counters_by_name(tmp_path: Path) -> None:
    # The probe's own shell code, run by sh on a sysfs-like tree laid out as EFA's and hfi1's are.
    efa = tmp_path / "class/infiniband/efa_0"
    (efa / "hw_counters").mkdir(parents=True)
    (efa / "ports/1/hw_counters").mkdir(parents=True)
    (efa / "hw_counters/cmds_err").write_text("1\n")
    (efa / "hw_counters/submitted_cmds").write_text("500\n")
    (efa / "hw_counters/lifespan").write_text("10\n")
    (efa / "ports/1/hw_counters/rdma_write_wr_err").write_text("4\n")
    (efa / "ports/1/hw_counters/tx_bytes").write_text("99999\n")
    hfi = tmp_path / "class/infiniband/hfi1_0/hw_counters"
    hfi.mkdir(parents=True)
    (hfi / "RcvOverflow,32").write_text("7\n")
    (hfi / "DcXmitFlits").write_text("123456\n")
    proc = subprocess.run(["sh", "-c", links.probe(str(tmp_path)).command], capture_output=True, text=True,
                          check=True)
    lines = proc.stdout.partition(links.RDMA_MARK)[0].splitlines()
    # Names these drivers lack (unmatched patterns) are left out by the shell: no complaint comes for them.
    assert not [line for line in lines if line.startswith("grep: ")]
    assert sorted(lines) == [
        "efa_0/hw_counters/cmds_err:1", "efa_0/ports/1/hw_counters/rdma_write_wr_err:4",
        "hfi1_0/hw_counters/RcvOverflow,32:7"]
    reading = links.parse(proc.stdout)
    assert reading.counters == {"efa_0 cmds_err": 1, "efa_0/1 rdma_write_wr_err": 4, "hfi1_0 RcvOverflow,32": 7}
    assert reading.unreadable == {} and reading.problem is None
    # hfi1_0 has no ports folder here: it is listed as a device all the same.
    assert reading.present == {"efa_0", "efa_0/1", "hfi1_0"}
