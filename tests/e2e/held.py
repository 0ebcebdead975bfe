"""An apply held in the middle of its run, so the test can change the host while it runs: its OFED
install waits until the test releases it, on any machine's pace (no race on a busy machine)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from provisioner.lab.emulation.ofed_install import INSTALL_COMMAND
from provisioner.lab.state import NodeRecord
from tests.e2e.conftest import Lab

ROOT = Path(__file__).resolve().parents[2]
RELEASE = "/run/fabnet-test-release"  # the held install goes on once this file exists on the node


def held_inventory(inventory: Path, folder: Path) -> Path:
    """A copy of `inventory` in `folder` whose OFED install waits for RELEASE on the node."""
    (folder / "group_vars").mkdir(parents=True)
    (folder / "group_vars" / "all.yml").write_text(yaml.safe_dump(
        {"fabnet_ofed_install_command": f"while [ ! -e {RELEASE} ]; do sleep 0.2; done; {INSTALL_COMMAND}"}))
    copy = folder / "hosts.yml"
    copy.write_text(inventory.read_text())
    return copy


@contextmanager
def holding_the_lock(lab: Lab, node: NodeRecord, args: tuple[str, ...],
                     timeout: float = 60) -> Iterator[subprocess.Popen[str]]:
    """`fabnet *args` started and waited for until it holds the host's lock (its install then waits);
    on the way out the install is released and the run, if still going, killed."""
    run = subprocess.Popen([sys.executable, "-m", "provisioner", *args], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        deadline = time.monotonic() + timeout
        while lab.ssh(node, "test -d /run/fabnet.lock", check=False).returncode != 0:
            assert time.monotonic() < deadline and run.poll() is None, "the apply never took the lock"
            time.sleep(0.2)
        yield run
    finally:
        lab.ssh(node, f"touch {RELEASE}", check=False)
        if run.poll() is None:
            run.kill()
