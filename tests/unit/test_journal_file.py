"""The local journal: a host's records land in one append, whole lines, readable back, private."""

from __future__ import annotations

import threading
from pathlib import Path

from provisioner.apply.journal import Journal


def test_records_of_one_call_land_together_and_read_back(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "state" / "journal.jsonl")
    journal([{"host": "gpu01", "outcome": "started"}, {"host": "gpu01", "outcome": "ok"}])
    journal([])
    records = journal.records()
    assert [(r["host"], r["outcome"]) for r in records] == [("gpu01", "started"), ("gpu01", "ok")]
    assert records[0]["time"] == records[1]["time"]  # one write, one moment
    assert (tmp_path / "state" / "journal.jsonl").stat().st_mode & 0o777 == 0o600


def test_threads_never_interleave_lines(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.jsonl")

    def host(name: str) -> None:
        for number in range(50):
            journal([{"host": name, "step": number, "pad": "x" * 5000}, {"host": name, "step": -number}])

    threads = [threading.Thread(target=host, args=(f"gpu{i:02d}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    records = journal.records()  # every line parses: none was cut by another thread's
    assert len(records) == 4 * 50 * 2
    for first, second in zip(records[::2], records[1::2], strict=True):
        assert first["host"] == second["host"] and second["step"] == -first["step"]
