"""The smoke rank itself, run here on loopback with gloo: the rendezvous names a rank that never came.

NCCL builds its communicator only at the first collective and then waits for a missing rank without a
timeout, so the rank must find the missing one in the store before the process group exists (the same
code runs for both backends)."""
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

NODE_SCRIPT = Path(__file__).resolve().parents[3] / "provisioner" / "smoke" / "node_script.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank(tmp_path: Path, rank: int, world: int, port: int, timeout: float) -> "subprocess.Popen[str]":
    return subprocess.Popen(
        [sys.executable, str(NODE_SCRIPT), "--rank", str(rank), "--world", str(world), "--master", "127.0.0.1",
         "--port", str(port), "--backend", "gloo", "--sizes", "1024", "--iters", "1", "--warmup", "0",
         "--timeout", str(timeout), "--deadline", "60", "--events", str(tmp_path / f"rank{rank}.jsonl")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _events(tmp_path: Path, rank: int) -> "list[dict[str, object]]":
    return [json.loads(line) for line in (tmp_path / f"rank{rank}.jsonl").read_text().splitlines()]


def test_rank_zero_names_the_rank_that_never_joined(tmp_path: Path) -> None:
    proc = _rank(tmp_path, 0, 3, _free_port(), timeout=3)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, out
    last = _events(tmp_path, 0)[-1]
    assert last["event"] == "error" and last["stage"] == "rendezvous", last
    assert last["missing"] == [1, 2]
    # Found by the wait on the ranks' marks, before any process group: the step NCCL's path depends on.
    assert "fabnet/joined" in str(last["message"])


def test_ranks_that_all_join_run_the_sweep(tmp_path: Path) -> None:
    port = _free_port()
    procs = [_rank(tmp_path, r, 2, port, timeout=30) for r in (0, 1)]
    for proc in procs:
        out, _ = proc.communicate(timeout=90)
        assert proc.returncode == 0, out
    for r in (0, 1):
        events = _events(tmp_path, r)
        assert [e["event"] for e in events][-1] == "done"
        assert any(e["event"] == "size" and e["bytes"] == 1024 and e["wrong"] == 0 for e in events)
