"""`sh -s` fed here as a host's shell is fed by the controller: the script, then a tick (a newline) on
standard input every batch.TICK seconds until it exits, as transport.run(ticks=...) does."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from dataclasses import dataclass

from provisioner.facts import batch


@dataclass
class Ran:
    stdout: bytes
    stderr: bytes
    returncode: int


def run_ticking(script: str | bytes, *, env: dict[str, str] | None = None, timeout: float = 60,
                isolate: bool = False) -> Ran:
    proc = start_ticking(script, env=env, isolate=isolate)
    chunks: dict[int, list[bytes]] = {1: [], 2: []}

    def drain(fd: int, stream: int) -> None:
        while data := os.read(fd, 65536):
            chunks[stream].append(data)

    assert proc.stdout and proc.stderr
    readers = [threading.Thread(target=drain, args=(proc.stdout.fileno(), 1), daemon=True),
               threading.Thread(target=drain, args=(proc.stderr.fileno(), 2), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        code = proc.wait(timeout=timeout)
    finally:
        proc.kill()
    for reader in readers:
        reader.join(timeout=10)
    return Ran(b"".join(chunks[1]), b"".join(chunks[2]), code)


def start_ticking(script: str | bytes, *, env: dict[str, str] | None = None,
                  isolate: bool = False) -> subprocess.Popen[bytes]:
    """The running shell; its standard input ticks until it exits (or the caller closes it). With
    `isolate` (root only), in a PID namespace of its own: what the script sees of the machine's
    processes is then its own, whatever other tests start and stop meanwhile."""
    prefix = ["unshare", "--pid", "--fork", "--mount-proc"] if isolate and os.geteuid() == 0 else []
    proc = subprocess.Popen([*prefix, "sh", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    data = script.encode() if isinstance(script, str) else script

    def feed() -> None:
        assert proc.stdin
        try:
            proc.stdin.write(data)
            proc.stdin.flush()
            while proc.poll() is None:
                time.sleep(batch.TICK)
                proc.stdin.write(b"\n")
                proc.stdin.flush()
        except (OSError, ValueError):  # the shell is gone, or the caller closed its input
            pass

    threading.Thread(target=feed, daemon=True).start()
    return proc
