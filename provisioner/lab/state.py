"""What a lab has created, kept on disk so `lab down` can remove it even after a crash or a kill.

The state is written before each thing is created, never after: a lab killed half-way still has a
record of everything that may exist.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from provisioner.errors import LabError
from provisioner.lab.naming import MAX_SLOT, LabNames, node_name
from provisioner.lab.system import write_atomic


def labs_root() -> Path:
    return Path(os.environ.get("FABNET_LAB_ROOT", "/var/lib/fabnet/labs"))


@contextmanager
def machine_lock() -> Iterator[None]:
    """Held while a lab takes its slot and the shared caches are built: two labs started at once (the
    test suite's parallel groups) must not pick one slot or build one rootfs together."""
    root = labs_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass
class NodeRecord:
    index: int
    name: str
    netns: str
    mgmt_ip: str
    data_ip: str
    data_iface: str = "eth1"
    mgmt_iface: str = "eth0"
    pid: int | None = None


@dataclass
class LabState:
    name: str
    slot: int
    profile: str
    nodes: list[NodeRecord] = field(default_factory=list)
    inotify_before: int | None = None
    complete: bool = False
    slurm: bool = False  # `lab up --slurm`: slurmctld on the first node, slurmd on every node

    @property
    def dir(self) -> Path:
        return labs_root() / self.name

    @property
    def names(self) -> LabNames:
        return LabNames(self.name, self.slot)

    @property
    def inventory_path(self) -> Path:
        return self.dir / "inventory.yml"

    @property
    def key_path(self) -> Path:
        return self.dir / "id_ed25519"

    @property
    def known_hosts_path(self) -> Path:
        return self.dir / "known_hosts"

    # The management delay line (lab up --rtt) keeps its own files beside state.json, whose fields stay
    # as they are: code that predates a field could not load the state of a lab that has it.
    @property
    def delay_config_path(self) -> Path:
        return self.dir / "delay.json"

    @property
    def delay_pid_path(self) -> Path:
        return self.dir / "delay.pid"

    @property
    def delay_pid(self) -> int | None:
        try:
            return int(self.delay_pid_path.read_text())
        except (OSError, ValueError):
            return None

    @property
    def rtt_ms(self) -> float:
        try:
            return float(json.loads(self.delay_config_path.read_text())["rtt_ms"])
        except (OSError, ValueError, KeyError, TypeError):
            return 0.0

    def node_dir(self, index: int) -> Path:
        return self.dir / "nodes" / node_name(index)

    def save(self) -> None:
        write_atomic(self.dir / "state.json", json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, name: str) -> LabState | None:
        path = labs_root() / name / "state.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        # Fields a newer fabnet added are ignored: a lab made by another version must not break `down`.
        node_fields, lab_fields = {f.name for f in fields(NodeRecord)}, {f.name for f in fields(cls)}
        nodes = [NodeRecord(**{k: v for k, v in node.items() if k in node_fields}) for node in data.pop("nodes", [])]
        return cls(**{k: v for k, v in data.items() if k in lab_fields and k != "nodes"}, nodes=nodes)


def all_labs() -> list[LabState]:
    root = labs_root()
    if not root.is_dir():
        return []
    found = (LabState.load(child.name) for child in sorted(root.iterdir()) if child.is_dir())
    return [lab for lab in found if lab is not None]


def free_slot() -> int:
    """The lowest slot no other lab holds (and whose addresses no host route already uses)."""
    taken = {lab.slot for lab in all_labs()}
    routes = Path("/proc/net/route").read_text() if Path("/proc/net/route").exists() else ""
    for slot in range(1, MAX_SLOT + 1):
        names = LabNames("probe", slot)
        # A bridge of that name on the host means a lab this machine's records do not show holds the slot.
        if slot in taken or f"{names.prefix}-mgmt" in routes or Path(f"/sys/class/net/{names.mgmt_bridge}").exists():
            continue
        return slot
    raise LabError(f"no free lab slot: {MAX_SLOT} labs exist; remove one with `fabnet lab down --name NAME`")
