"""Shared by the unit tests: the host-side locations of the change and rollback scripts (lock, journal,
backups), pointed at a temporary directory so that the scripts run for real under /bin/sh."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.apply import changes


@pytest.fixture
def host_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(changes, "LOCK_DIR", str(tmp_path / "run/fabnet.lock"))
    monkeypatch.setattr(changes, "JOURNAL_DIR", str(tmp_path / "log"))
    monkeypatch.setattr(changes, "JOURNAL", str(tmp_path / "log/journal.jsonl"))
    monkeypatch.setattr(changes, "BACKUP_ROOT", str(tmp_path / "backups"))
    (tmp_path / "run").mkdir()
    return tmp_path
