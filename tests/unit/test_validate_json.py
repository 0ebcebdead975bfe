"""`fabnet validate --json`: a CI job reads every problem with its file, line and key, and the exit code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = ROOT / "inventories/example/hosts.yml"
SITE = ROOT / "playbooks/site.yml"


def _validate(*args: str, cwd: Path = ROOT) -> tuple[int, dict, str]:
    done = subprocess.run([sys.executable, "-m", "provisioner", "validate", *args, "--json"], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)
    return done.returncode, json.loads(done.stdout), done.stderr


def test_a_valid_pair_says_so_with_its_counts() -> None:
    code, doc, err = _validate(str(INVENTORY), "-p", str(SITE))
    assert code == 0, err
    assert (doc["schema"], doc["valid"], doc["errors"], doc["hosts"]) == ("fabnet/validate/v1", True, [], 6)
    assert doc["resources"] > doc["hosts"] and doc["playbook"] == str(SITE)


def test_each_problem_has_its_file_line_and_key(tmp_path: Path) -> None:
    playbook = tmp_path / "bad.yml"
    playbook.write_text("- hosts: all\n  resources:\n    - interface: {name: eth1, mtu: \"{{ nope }}\"}\n"
                        "    - sysctl: {name: \"a b\", value: 1}\n")
    code, doc, err = _validate("gpu01,gpu02,", "-p", str(playbook))
    assert code == 3 and not doc["valid"] and err == ""
    located = {(e["file"], e["line"], e["key"]) for e in doc["errors"]}
    assert located == {(str(playbook), 3, "plays[0].resources[0].interface.mtu"),
                       (str(playbook), 4, "plays[0].resources[1].sysctl.name")}
    assert all(e["text"].startswith(f"{playbook}:{e['line']}: {e['key']}: ") for e in doc["errors"])
    assert any("'nope' is undefined" in e["message"] for e in doc["errors"])


def test_no_playbook_found_is_a_problem_in_the_document_too(tmp_path: Path) -> None:
    code, doc, _ = _validate("gpu01,", cwd=tmp_path)
    assert code == 3 and doc["playbook"] is None
    assert [e["message"] for e in doc["errors"]] == [
        "no playbook given, and none found at playbooks/site.yml; pass one with -p PLAYBOOK"]
