"""`fabnet audit` with worker processes finds exactly what it finds with threads alone, on the lab."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import Lab

SITE = Path(__file__).parents[2] / "playbooks" / "site.yml"


def audit(lab: Lab, workers: str) -> dict:
    env = {**os.environ, "FABNET_WORKERS": workers}
    proc = subprocess.run([sys.executable, "-m", "provisioner", "audit", str(lab.state.inventory_path), "-p",
                           str(SITE), "--json", "--forks", "4"], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 2, proc.stderr
    return json.loads(proc.stdout)


def essence(report: dict) -> list[tuple[str, str, str]]:
    return [(h["name"], h["status"], json.dumps(h["resources"], sort_keys=True)) for h in report["hosts"]]


def test_worker_processes_report_the_same_as_threads(lab: Lab) -> None:
    threads, processes = audit(lab, "1"), audit(lab, "3")
    assert [h["name"] for h in processes["hosts"]] == [r.name for r in lab.nodes]
    assert essence(processes) == essence(threads)
    assert all(h["execs"] == 1 for h in processes["hosts"])
