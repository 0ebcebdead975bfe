"""Start-up: each command imports only what it needs. `--help` and `parse` never load SSH or crypto
libraries, and `--help` not even rich or pydantic. The garbage collector is off while fabnet starts and
back on, with start-up's objects frozen, once loading is done."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner import startup

SAMPLES = Path(__file__).parents[1] / "samples"
PROBE = """
import json, sys
from provisioner import cli
try:
    cli.main(sys.argv[1:])
except SystemExit:
    pass
sys.stderr.write("\\n" + json.dumps(sorted({m.split('.')[0] for m in sys.modules})) + "\\n")
"""
HEAVY = {"fabric", "paramiko", "invoke", "cryptography", "nacl", "bcrypt"}


def loaded(*argv: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=60,
                          check=False)
    return set(json.loads(proc.stderr.strip().splitlines()[-1]))


def test_help_loads_no_ssh_crypto_rich_or_pydantic() -> None:
    modules = loaded("--help")
    assert "click" in modules
    assert not modules & (HEAVY | {"rich", "pydantic", "yaml", "jinja2"})


@pytest.mark.parametrize("kind", ["ofed_info", "mlnx_qos"])
def test_parse_loads_its_parser_only(kind: str) -> None:
    sample = next(SAMPLES.glob(f"{kind}*.txt"))
    modules = loaded("parse", kind, str(sample))
    assert "pydantic" in modules
    assert not modules & HEAVY


def test_parsers_are_imported_on_first_use() -> None:
    code = ("import sys; from provisioner import parsers; a = len([m for m in sys.modules if m.startswith("
            "'provisioner.parsers.')]); parsers.parse('ofed_info', 'MLNX_OFED_LINUX-23.10-1.1.9.0:\\n'); "
            "print(a, 'provisioner.parsers.ofed_info' in sys.modules, 'provisioner.parsers.mlnx_qos' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["0", "True", "False"]


def test_release_turns_the_collector_back_on_with_what_was_loaded_frozen() -> None:
    assert gc.isenabled()
    try:
        startup.hold()
        assert not gc.isenabled()
        loaded = [[] for _ in range(1000)]  # stands for the modules and plans start-up builds
        startup.release()
        assert gc.isenabled()
        assert gc.get_freeze_count() >= len(loaded)
        startup.release()  # a second release (another fan-out in the same command) changes nothing
        assert gc.isenabled()
    finally:
        gc.unfreeze()
        gc.enable()


def test_release_without_hold_leaves_a_callers_collector_alone() -> None:
    gc.disable()
    try:
        startup.release()
        assert not gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.enable()
