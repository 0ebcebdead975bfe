"""watch and a whole counters folder the host could not read: the counters it held turn unreadable (said once,
with what was printed), and read again later they are said once more; the probe names such a folder to grep."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from provisioner.watch import links
from provisioner.watch.changes import HostTrack, snapshot

READ = ("mlx5_0/ports/1/counters/link_downed:0", "mlx5_0/ports/1/counters/symbol_error:3",
        "mlx5_0/ports/1/hw_counters/out_of_sequence:1")
FOLDER = "grep: mlx5_0/ports/1/counters: Permission denied"


def host() -> dict[str, Any]:
    return {"name": "gpu01", "status": "in_sync", "error": None, "resources": []}


def reading(*lines: str) -> links.LinkReading:
    return links.parse("\n".join(lines) + f"\n{links.NET_MARK}\n")


def test_a_folder_that_turns_unreadable_and_back() -> None:
    track = HostTrack()
    track.advance(snapshot(host(), reading(*READ), 0.0))
    gone = reading(FOLDER, READ[2])
    assert gone.unreadable_folders == {"mlx5_0/1 counters": "Permission denied"}
    assert gone.why_unreadable("mlx5_0/1 symbol_error") == "Permission denied"
    assert gone.why_unreadable("mlx5_0/1 out_of_sequence") is None
    turned = track.advance(snapshot(host(), gone, 60.0))
    assert [(c.kind, c.subject) for c in turned] == [("counter_unreadable", "mlx5_0/1 link_downed"),
                                                     ("counter_unreadable", "mlx5_0/1 symbol_error")]
    assert "was 3" in turned[1].detail and "'Permission denied'" in turned[1].detail
    assert track.advance(snapshot(host(), reading(FOLDER, READ[2]), 120.0)) == []
    back = track.advance(snapshot(host(), reading(READ[0], "mlx5_0/ports/1/counters/symbol_error:7", READ[2]), 180.0))
    assert [(c.kind, c.subject, c.delta) for c in back] == [("counter_readable", "mlx5_0/1 link_downed", None),
                                                            ("counter_readable", "mlx5_0/1 symbol_error", None)]


def test_a_folder_unreadable_from_the_start_is_in_the_first_summary() -> None:
    [first] = HostTrack().advance(snapshot(host(), reading(FOLDER, READ[2]), 0.0))
    assert first.kind == "watching"
    assert "1 RDMA ports" in first.detail
    assert "1 counter folder unreadable (mlx5_0/1 counters: the host printed 'Permission denied')" in first.detail


def test_the_probe_names_a_folder_it_cannot_enter(tmp_path: Path) -> None:
    # counters/ is a link to itself: the shell cannot enter it (ELOOP, for root too), so its names stay unmatched.
    port = tmp_path / "class/infiniband/mlx5_0/ports/1"
    (port / "hw_counters").mkdir(parents=True)
    (port / "hw_counters/out_of_sequence").write_text("1\n")
    os.symlink("counters", port / "counters")
    proc = subprocess.run(["sh", "-c", links.probe(str(tmp_path)).command], capture_output=True, text=True,
                          check=True, timeout=30)
    assert "grep: mlx5_0/ports/1/counters: Too many levels of symbolic links" in proc.stdout.splitlines()
    got = links.parse(proc.stdout)
    assert got.counters == {"mlx5_0/1 out_of_sequence": 1}
    assert got.unreadable_folders == {"mlx5_0/1 counters": "Too many levels of symbolic links"}
    assert got.problem is None
