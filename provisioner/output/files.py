"""Local file writes that never leave a half-written file behind, and never replace what is not a file."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path

from provisioner.errors import FabnetError

# Report files may hold hosts' error messages, command output and hashes of secrets (a saved plan holds
# file contents): readable by their owner only, whichever command writes them.
REPORT_MODE = 0o600


class OutputError(FabnetError):
    """A report could not be written (a file or standard output); the message is one line that says why."""


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_target(path: Path) -> None:
    """OutputError unless `path` can be written by `write_atomic`: absent or a regular file, in a
    directory that exists and can be written. Lets a command refuse a bad path before doing work."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror}") from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise OutputError(f"refusing to write {path}: it is {_kind(info.st_mode)}, not a regular file")
    parent = path.parent
    if not parent.is_dir():
        raise OutputError(f"cannot write {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write {path}: directory {parent} is not writable")


def write_atomic(path: Path, content: str | bytes, mode: int = 0o644) -> None:
    """Write through a temporary file and rename, so readers never see half a file.

    The temporary file has a random name, is created exclusively and never through a link, and has
    `mode` from its first byte (a secret-bearing report is never readable by others, even briefly).
    A symlink, FIFO, device or directory at `path` is refused, never replaced. OutputError on failure.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror}") from None
    check_target(path)
    data = content.encode() if isinstance(content, str) else content
    try:
        handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(handle, "wb") as out:
            os.fchmod(out.fileno(), mode)
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        check_target(path)  # again, just before the rename: the path may have changed meanwhile
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise OutputError(f"cannot write {path}: {exc.strerror}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def open_private(path: Path, flags: int) -> int:
    """A descriptor of the state file `path` (the journal, the history) opened with `flags`, created with
    REPORT_MODE from the start (never the umask's mode, then a chmod) and never through a symbolic link;
    an existing file's looser mode is tightened on the descriptor (os.chmod would follow a link placed
    there meanwhile). A symlink, FIFO, device or directory at `path` is an OutputError."""
    try:
        # O_NONBLOCK: a FIFO put there must not hang the open; fstat then refuses it.
        fd = os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, REPORT_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutputError(f"refusing to open {path}: it is a symbolic link (fabnet keeps its state in "
                              "regular files only; remove the link)") from None
        if exc.errno == errno.ENXIO:  # a FIFO with no reader, opened for writing
            raise OutputError(f"refusing to open {path}: it is a FIFO, not a regular file") from None
        raise OutputError(f"cannot open {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OutputError(f"refusing to open {path}: it is {_kind(info.st_mode)}, not a regular file")
        if info.st_mode & 0o777 != REPORT_MODE:
            os.fchmod(fd, REPORT_MODE)
    except OSError as exc:
        os.close(fd)
        raise OutputError(f"cannot open {path}: {exc.strerror}") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_report(path: Path, content: str | bytes) -> None:
    """A report file (JUnit, Prometheus textfile, saved plan) of any command: atomic, mode 0600."""
    write_atomic(path, content, mode=REPORT_MODE)
