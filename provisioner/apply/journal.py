"""The local journal of changes: one JSON line per step (run id, host, resource, command as shown,
outcome, time), appended as each happens. Never holds file contents or secrets: steps carry a shown
form for that. The hosts keep their own journal (changes.JOURNAL)."""

from __future__ import annotations

import json
import os
import threading
from datetime import UTC, datetime
from pathlib import Path


def default_path() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "fabnet" / "journal.jsonl"


class Journal:
    """Appends records to a JSON-lines file; safe to call from several worker threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)

    def __call__(self, record: dict[str, object]) -> None:
        line = json.dumps({"time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"), **record}) + "\n"
        with self._lock:
            # O_APPEND: each line lands whole even if another fabnet appends to the same file.
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode())
                os.fsync(fd)
            finally:
                os.close(fd)

    def records(self) -> list[dict[str, object]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]
