"""One watch per inventory: an flock on a file named after the inventory's resolved path.

The lock is the kernel's: it goes with the process however it ends (SIGKILL included), so a stale file
never blocks the next watch. The file holds the holder's pid, for the message a second watch gives.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path

from provisioner.errors import FabnetError


class AlreadyWatched(FabnetError):
    """Another process holds the inventory's watch lock."""


def lock_path(inventory: Path, state_dir: Path) -> Path:
    digest = hashlib.sha256(str(inventory.resolve()).encode()).hexdigest()[:16]
    return state_dir / f"watch-{digest}.lock"


class WatchLock:
    def __init__(self, inventory: Path, state_dir: Path) -> None:
        self.inventory = inventory
        self.path = lock_path(inventory, state_dir)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or AlreadyWatched naming the pid that holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise AlreadyWatched(f"{self.inventory} is already watched by fabnet watch (pid {holder}); "
                                 f"lock {self.path}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> WatchLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
