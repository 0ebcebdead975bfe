"""`fabnet demo`: the drifted lab, its audit, the fix, a clean audit and a smoke test, in one command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from provisioner.lab import manager
from tests.e2e.conftest import lab_name

ROOT = Path(__file__).resolve().parents[2]


def test_demo_shows_drift_the_fix_and_a_clean_audit() -> None:
    name = lab_name("demo")
    manager.down(name)
    try:
        proc = subprocess.run([sys.executable, "-m", "provisioner", "demo", "--name", name, "--no-keep"],
                              capture_output=True, text=True, timeout=600, cwd=ROOT)
    finally:
        manager.down(name)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    first, fixed = out.index("drifted=5"), out.index("PLAY RECAP")
    clean = out.index("in sync=6")
    assert first < fixed < clean
    assert "failed=0" in out[fixed:clean] and "changed=1" in out[fixed:clean]
    # It ends with an all-reduce across every converged node that passes.
    smoke = out.index("All-reduce smoke test across 6 nodes")
    assert clean < smoke and "PASS: average busbw" in out[smoke:]
    # Its last act: a new node joins, its key trusted on first use (said so), and is proven with the fleet.
    joined = out.index("fabnet lab add")
    assert smoke < joined and "--accept-new" in out[joined:] and "trusted on first use" in out[joined:]
    assert "all-reduce, new and fleet hosts (gpu07, " in out[joined:]
    assert "recap: 1 of 1 new hosts joined the fleet" in out[joined:]
    # --no-keep: the lab is gone, so no "next steps" point at it.
    assert f"lab '{name}' removed (--no-keep)" in out[joined:] and "Next steps" not in out
