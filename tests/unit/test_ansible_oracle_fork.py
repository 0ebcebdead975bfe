"""The oracle's Ansible programs run forked from one Python that imported them (tests/unit/ansible_oracle.py):
each answer, exit status and warning is the installed script's, byte for byte."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.unit.ansible_oracle import Ansible, available
from tests.unit.oracle_corpus import CASES

pytestmark = pytest.mark.skipif(not available(), reason="ansible-core (a test extra) is not installed")

# Output whose order Ansible fixes (a host pattern's order can follow memory addresses: see test_inventory_oracle).
QUESTIONS = [
    ("ansible-inventory", ["kolla-multinode"], ["--list"]),
    ("ansible-inventory", ["core-hash-two-sources"], ["--graph", "--vars"]),
    ("ansible-inventory", ["deepops-virtual-large-slurm"], ["--host", "virtual-gpu01"]),
    ("ansible", ["core-complex"], ["all", "--list-hosts", "--limit", "nonexistent_host"]),  # exit 1, a warning
    ("ansible-inventory", ["kubespray-sample"], ["--list", "--yaml"]),
]


def _ask(ansible: Ansible, tool: str, case: list[str], extra: list[str]) -> tuple[int, str, str]:
    args = [arg for name in case for source in CASES[name] for arg in ("-i", str(source))]
    done = ansible.run(tool, *args, *extra)
    return done.returncode, done.stdout, done.stderr


def test_the_forked_programs_answer_what_the_installed_scripts_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ansible = Ansible(tmp_path / "ansible")
    forked = [_ask(ansible, *question) for question in QUESTIONS]
    monkeypatch.setenv("FABNET_ORACLE_FORK", "0")
    installed = [_ask(ansible, *question) for question in QUESTIONS]
    assert forked == installed
    codes = [code for code, _out, _err in installed]
    assert 0 in codes and any(codes), codes  # both a success and a failure were compared
    assert all(out or err for _code, out, err in installed)


def test_a_program_that_outlives_the_timeout_is_killed_with_what_it_started(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An inventory script that never ends: the call raises TimeoutExpired, as subprocess.run's did, and the
    next call gets a fresh forking Python."""
    import subprocess

    import tests.unit.ansible_oracle as oracle

    script = tmp_path / "hang.sh"
    marker = tmp_path / "started"
    script.write_text(f"#!/bin/sh\necho $$ > {marker}\nexec sleep 600\n")
    script.chmod(0o755)
    # Long enough for Ansible to reach the script on a loaded machine (0.6 s on an idle one).
    monkeypatch.setattr(oracle, "TIMEOUT", 10.0)
    ansible = Ansible(tmp_path / "ansible")
    with pytest.raises(subprocess.TimeoutExpired):
        ansible.run("ansible-inventory", "-i", str(script), "--list")
    pid = int(marker.read_text())
    for _ in range(50):  # killed with the forking Python's group; gone once reaped
        stat = Path(f"/proc/{pid}/stat")
        if not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the inventory script {pid} outlived the timeout")
    code, out, _err = _ask(ansible, "ansible-inventory", ["core-hash-two-sources"], ["--graph"])
    assert code == 0 and "@all:" in out
