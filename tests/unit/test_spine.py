"""The spine stays one: host work gets its threads from run/pool.py alone, SSH connections are made in
run/transport.py alone and handed out by run/session.py alone (the lab, a tool of its own, is apart)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "provisioner"


def _modules_matching(pattern: str) -> set[str]:
    found = set()
    for path in ROOT.rglob("*.py"):
        relative = path.relative_to(ROOT)
        if relative.parts[0] == "lab":
            continue
        if re.search(pattern, path.read_text()):
            found.add(relative.as_posix())
    return found


def test_one_module_creates_worker_pools_or_threads() -> None:
    assert _modules_matching(r"ThreadPoolExecutor|ProcessPoolExecutor|threading\.Thread\(|multiprocessing\.Pool") \
        == {"run/pool.py"}


def test_one_module_opens_ssh_and_one_hands_out_connections() -> None:
    assert _modules_matching(r"SSHClient\(|[^a-zA-Z_.]Connection\(|paramiko\.Transport\(") == {"run/transport.py"}
    assert _modules_matching(r"transport\.connect\(") == {"run/session.py"}
