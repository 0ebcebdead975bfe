"""Driving fabnet through a terminal, as a person at its prompt does."""

from __future__ import annotations

import os
import select
import time


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
