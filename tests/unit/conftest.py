"""Shared by the unit tests: the host-side locations of the change and rollback scripts (lock, journal,
backups), pointed at a temporary directory so that the scripts run for real under /bin/sh; and a file no reader
may read, to link into a temporary sysfs tree."""

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


# Write-only sysfs attributes, present on most Linux machines. kernfs refuses to open one for reading even for root
# (who reads any plain file whatever its mode), as it refuses a driver's write-only hw_counter.
_WRITE_ONLY = ("/sys/bus/pci/rescan", "/sys/bus/pci/drivers_probe", "/sys/bus/pci/uevent")


@pytest.fixture
def refused_file() -> str:
    """A file whose read fails with Permission denied, for root too; the test is skipped where none is found."""
    for path in _WRITE_ONLY:
        try:
            with open(path, "rb") as f:
                f.read(1)
        except PermissionError:
            return path
        except OSError:
            continue
    pytest.skip("no write-only sysfs attribute here to make a read fail")
