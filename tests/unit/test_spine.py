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


# Where printing and exiting belong: the report layer, the commands, the entry points, and the lab (a tool of
# its own). The smoke rank and the pre-flight's Python line run on nodes, not in fabnet; `load/docs.py` is
# also a script (`python -m provisioner.load.docs`), and exits only under `if __name__ == "__main__"`.
_MAY_PRINT_OR_EXIT = ("output/", "commands/", "cli.py", "__main__.py", "lab/")
_NODE_SCRIPTS = {"smoke/node_script.py", "smoke/preflight_probe.py"}


def test_library_code_never_prints_and_never_exits() -> None:
    found = set()
    for path in ROOT.rglob("*.py"):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(_MAY_PRINT_OR_EXIT) or relative in _NODE_SCRIPTS:
            continue
        text = path.read_text()
        if relative == "load/docs.py":
            text = text.split('\nif __name__ == "__main__":', 1)[0]
        if re.search(r"(?<![\w.])print\(|SystemExit|sys\.exit\(|os\._exit\(|sys\.std(out|err)\.write", text):
            found.add(relative)
    assert found == set()
