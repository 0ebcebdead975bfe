"""Driving fabnet through a terminal, as a person at its prompt does."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


def read_until(fd: int, text: str, timeout: float) -> str:
    """What a terminal shows until `text` appears (or the program ends, or time runs out)."""
    seen = b""
    deadline = time.monotonic() + timeout
    while text.encode() not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    return seen.decode(errors="replace")


@dataclass
class Prompted:
    """A program waiting at its prompt: standard input and error on a terminal, standard output a pipe."""

    proc: subprocess.Popen[str]
    terminal: int

    def answer(self, text: str, timeout: float = 120) -> str:
        """Type `text` and Enter; the program's standard output once it ends."""
        os.write(self.terminal, text.encode() + b"\n")
        out, _ = self.proc.communicate(timeout=timeout)
        return out


@contextmanager
def at_prompt(args: list[str], cwd: Path, prompt: str = "Apply these changes?",
              timeout: float = 120) -> Iterator[Prompted]:
    """`args` started on a terminal and waiting at `prompt`; killed on the way out if still running."""
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(args, stdin=secondary, stdout=subprocess.PIPE, stderr=secondary, cwd=cwd, text=True,
                            start_new_session=True)
    os.close(secondary)
    try:
        shown = read_until(primary, prompt, timeout)
        assert prompt in shown, shown[-2000:]
        yield Prompted(proc, primary)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(primary)
