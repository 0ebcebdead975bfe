"""lazy_module: a module read from several threads at its first use is whole in every thread.

watch reports each host's changes from that host's own thread, through a lazily loaded printer; with
importlib's LazyLoader (Python 3.11) one of the first reads now and then found the module empty and the
watch stopped with an AttributeError.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SLOW_MODULE = """\
import time
time.sleep(0.2)  # the import takes a while: other threads arrive during it
def hello():
    return "hello"
"""

RACE = """\
import sys, threading
sys.path.insert(0, {where!r})
from provisioner.lazy import lazy_module
mod = lazy_module("slowmod")
assert "slowmod" not in sys.modules  # nothing is imported before the first use
start = threading.Barrier(16)
got, errors = [], []
def use():
    start.wait()
    try:
        got.append(mod.hello())
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=use) for _ in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len(got), errors)
"""


def test_first_use_from_many_threads_at_once_sees_the_whole_module(tmp_path: Path) -> None:
    (tmp_path / "slowmod.py").write_text(SLOW_MODULE)
    root = Path(__file__).resolve().parents[2]
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", textwrap.dedent(RACE.format(where=str(tmp_path)))], cwd=root,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "16 []"


def test_a_loaded_module_is_returned_as_it_is() -> None:
    from provisioner.lazy import lazy_module

    assert lazy_module("json") is __import__("json")
