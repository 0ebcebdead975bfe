"""The local journal: a host's records land in one append, whole lines, readable back, private."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from provisioner.apply.journal import Journal
from provisioner.history.store import History


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


# The journal and the history live in the user's state directory; both are private from their first byte.

def _history(path: Path) -> History:
    return History(path)


def test_state_files_are_created_0600_whatever_the_umask(tmp_path: Path) -> None:
    import os

    old = os.umask(0o000)
    try:
        Journal(tmp_path / "journal.jsonl")([{"host": "gpu01"}])
        history = _history(tmp_path / "history.sqlite")
        history.close()
    finally:
        os.umask(old)
    for name in ("journal.jsonl", "history.sqlite"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o600, name


def test_an_existing_state_file_is_tightened_to_0600(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    journal.write_text('{"host": "old"}\n')
    journal.chmod(0o644)
    Journal(journal)([{"host": "gpu01"}])
    assert journal.stat().st_mode & 0o777 == 0o600
    assert [r["host"] for r in Journal(journal).records()] == ["old", "gpu01"]
    history = tmp_path / "history.sqlite"
    _history(history).close()
    history.chmod(0o666)
    _history(history).close()
    assert history.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("name", ["journal.jsonl", "history.sqlite"])
def test_a_symlink_at_a_state_file_is_refused_and_its_target_untouched(tmp_path: Path, name: str) -> None:
    from provisioner.errors import FabnetError

    victim = tmp_path / "victim"
    victim.write_text("someone else's file\n")
    victim.chmod(0o644)
    link = tmp_path / "state" / name
    link.parent.mkdir()
    link.symlink_to(victim)
    with pytest.raises(FabnetError, match="symbolic link"):
        if name == "journal.jsonl":
            Journal(link)
        else:
            _history(link)
    assert victim.read_text() == "someone else's file\n"
    assert victim.stat().st_mode & 0o777 == 0o644  # a chmod through the link would have made it 0600
    dangling = tmp_path / "state" / f"dangling-{name}"
    dangling.symlink_to(tmp_path / "created-through-the-link")
    with pytest.raises(FabnetError, match="symbolic link"):
        Journal(dangling) if name == "journal.jsonl" else _history(dangling)
    assert not (tmp_path / "created-through-the-link").exists()


def test_a_fifo_at_the_journal_is_refused_without_hanging(tmp_path: Path) -> None:
    import os

    from provisioner.errors import FabnetError

    fifo = tmp_path / "journal.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(FabnetError, match="FIFO"):
        Journal(fifo)
