"""End-to-end fixtures: a real lab of SSH-reachable nodes, always torn down, and independent oracles.

The oracle is pytest-testinfra over the system `ssh` client with strict host-key checking: it shares
no code with fabnet's own transport, so a bug there cannot hide itself.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import testinfra
import yaml

from provisioner.lab import manager
from provisioner.lab.profile import DEFAULT_PROFILE
from provisioner.lab.state import LabState, NodeRecord

# FABNET_TEST_LAB_PREFIX keeps the labs of two test runs on one machine (two checkouts) apart; the
# worker's number keeps apart those of the suite's parallel groups (pytest-xdist: gw0, gw1...).
LAB_PREFIX = os.environ.get("FABNET_TEST_LAB_PREFIX", "") + os.environ.get("PYTEST_XDIST_WORKER", "").replace("gw", "w")


def lab_name(base: str) -> str:
    """The name of a test lab, with this run's prefix (lab names are at most 16 characters)."""
    return f"{LAB_PREFIX}{base}"


E2E_LAB = lab_name("e2e")


def healthy_profile(folder: Path, nodes: int) -> Path:
    """A lab profile of `nodes` nodes in sync: the default profile without its per-node drifts (which
    would fail a smoke test's pre-flight or show as changes in a watch)."""
    profile = yaml.safe_load(DEFAULT_PROFILE.read_text())
    profile["nodes"] = {}
    profile["nodes_default"] = nodes
    path = folder / "healthy.yml"
    path.write_text(yaml.safe_dump(profile))
    return path


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="end-to-end tests need root to build the lab")
        for item in items:
            if "e2e" in str(item.fspath):
                item.add_marker(skip)


@dataclass
class Lab:
    state: LabState

    @property
    def nodes(self) -> list[NodeRecord]:
        return self.state.nodes

    def ssh_args(self, record: NodeRecord) -> list[str]:
        return [
            "ssh", "-i", str(self.state.key_path),
            "-o", f"UserKnownHostsFile={self.state.known_hosts_path}",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
            f"root@{record.mgmt_ip}",
        ]

    def ssh(self, record: NodeRecord, command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a command on a node with the system ssh client (not fabnet's transport)."""
        proc = subprocess.run([*self.ssh_args(record), command], capture_output=True, text=True, timeout=60)
        if check and proc.returncode != 0:
            raise AssertionError(f"{record.name}: {command!r} failed: {proc.stderr}")
        return proc

    def host(self, record: NodeRecord) -> testinfra.host.Host:
        extra = (f"-o UserKnownHostsFile={self.state.known_hosts_path} -o StrictHostKeyChecking=yes "
                 "-o BatchMode=yes")
        # One SSH connection per node carries all of a test's commands (testinfra logs in anew for each one
        # without a ControlPath): a converged-node check is tens of commands on every node.
        return testinfra.get_host(
            f"ssh://root@{record.mgmt_ip}", ssh_identity_file=str(self.state.key_path), ssh_extra_args=extra,
            controlpath=str(self.state.key_path.parent / "cm-%%C"), controlpersist=30,  # testinfra %-formats it
        )

    def node(self, name: str) -> NodeRecord:
        return next(r for r in self.nodes if r.name == name)

    def add_sudo_user(self, user: str, password: str) -> None:
        """On every node, a login user (the lab's key) whose sudo asks for `password`."""
        for node in self.nodes:
            self.ssh(node, f"useradd --create-home --shell /bin/bash {user} && "
                           f"install -d -m 0700 -o {user} -g {user} /home/{user}/.ssh && "
                           f"install -m 0600 -o {user} -g {user} /root/.ssh/authorized_keys /home/{user}/.ssh/ && "
                           f"echo '{user} ALL=(ALL) ALL' > /etc/sudoers.d/{user} && chmod 0440 /etc/sudoers.d/{user}")
            # On stdin, so the password is on no command line, not even the test's.
            subprocess.run([*self.ssh_args(node), "chpasswd"], input=f"{user}:{password}\n", text=True,
                           check=True, timeout=60)


@pytest.fixture(scope="session")
def lab() -> Iterator[Lab]:
    """The default drifted lab (6 nodes), shared by the whole session and always removed."""
    manager.down(E2E_LAB)
    try:
        state = manager.up(E2E_LAB)
        yield Lab(state)
    finally:
        manager.down(E2E_LAB)
