"""The local journal of changes: one JSON line per step (run id, host, resource, command as shown,
outcome, time), appended as each happens. Never holds file contents or secrets: steps carry a shown
form for that. The hosts keep their own journal (changes.JOURNAL)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from provisioner.output.files import open_private


def default_path() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "fabnet" / "journal.jsonl"


class Journal:
    """Appends records to a JSON-lines file; safe to call from several worker threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        # Refused here, before any change runs, rather than at the first record: a symlink or FIFO at the
        # path, a file that cannot be written.
        os.close(open_private(path, os.O_WRONLY | os.O_APPEND))

    def __call__(self, records: Sequence[dict[str, object]]) -> None:
        """Append `records` (a host's steps at once) in one write and one fsync: an fsync can take seconds
        on a busy disk, and the records of a host interrupted by Ctrl-C must land within its grace."""
        if not records:
            return
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        data = "".join(json.dumps({"time": now, **record}) + "\n" for record in records).encode()
        with self._lock:
            # O_APPEND: the lines land whole even if another fabnet appends to the same file. Created 0600,
            # never through a symlink, an older file's mode tightened (output.files: the one policy).
            fd = open_private(self.path, os.O_WRONLY | os.O_APPEND)
            try:
                written = 0
                while written < len(data):
                    written += os.write(fd, data[written:])
                os.fsync(fd)
            finally:
                os.close(fd)

    def records(self) -> list[dict[str, object]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]
