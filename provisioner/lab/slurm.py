"""A real Slurm cluster in the lab (`fabnet lab up --slurm`): Debian's slurm-wlm and munge on every node.

The packages live in a second cached layer over the node rootfs, built only when a Slurm lab is asked
for, so other labs boot as fast as before. Layout: `slurmctld` on the first node (the controller),
`slurmd` on every node, the first included, so a 3-node lab is a 3-node partition. One munge key per
lab, made at `lab up` and shared by all nodes. The nodes' own systemd starts munge, slurmctld and slurmd.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from provisioner.lab.rootfs import cache_dir, debian_mirror
from provisioner.lab.state import NodeRecord
from provisioner.lab.system import mounts_under, run, write_atomic

PACKAGES = ("slurm-wlm", "munge")
# Bump when the layer's build changes, so caches rebuild.
LAYER_VERSION = "1"
WANTS = "etc/systemd/system/multi-user.target.wants"
CONTROLLER_VAR = "fabnet_slurm_controller"
PARTITION = "gpu"
# Slurm refuses a node whose configured memory exceeds what slurmd finds; every lab node sees the host's.
REAL_MEMORY_MB = 1024


def layer_key(base: Path) -> str:
    material = "|".join([base.name, LAYER_VERSION, *PACKAGES])
    return hashlib.sha256(material.encode()).hexdigest()[:12]


def layer_path(base: Path) -> Path:
    return cache_dir() / f"slurm-layer-{layer_key(base)}"


def ensure_layer(base: Path, log: Callable[[str], None] = lambda m: None) -> Path:
    """The cached layer (an overlay upper directory) holding slurm-wlm and munge over `base`."""
    final = layer_path(base)
    if (final / ".fabnet-slurm-complete").exists():
        return final
    building = final.with_name(final.name + f".building-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    upper, work, merged = building / "upper", building / "work", building / "merged"
    for path in (upper, work, merged):
        path.mkdir(parents=True)
    log(f"installing {' '.join(PACKAGES)} into a cached layer of the node root filesystem (once; {final})")
    run(["mount", "-t", "overlay", "overlay", "-o", f"lowerdir={base},upperdir={upper},workdir={work}", str(merged)])
    try:
        _install(merged)
    finally:
        for target in mounts_under(merged):
            run(["umount", target], check=False)
    shutil.rmtree(work, ignore_errors=True)
    write_atomic(upper / ".fabnet-slurm-complete", layer_key(base) + "\n")
    try:
        upper.rename(final)
    except OSError:
        pass  # another `lab up` finished the same layer meanwhile; either copy is good
    shutil.rmtree(building, ignore_errors=True)
    for stale in cache_dir().glob("slurm-layer-*"):
        if stale != final and ".building-" not in stale.name:
            shutil.rmtree(stale, ignore_errors=True)
    return final


def _install(root: Path) -> None:
    # Debian's mirror only while the layer is built: nodes see the lab's own repository alone afterwards.
    sources = root / "etc/apt/sources.list.d/fabnet-slurm-build.list"
    keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
    write_atomic(sources, f"deb [signed-by={keyring}] {debian_mirror()} bookworm main\n")
    resolv = root / "etc/resolv.conf"
    saved = resolv.read_bytes() if resolv.is_file() and not resolv.is_symlink() else None
    resolv.unlink(missing_ok=True)
    shutil.copyfile("/etc/resolv.conf", resolv)
    # Packages must not start daemons in the build root: the nodes' own systemd starts them.
    policy = root / "usr/sbin/policy-rc.d"
    write_atomic(policy, "#!/bin/sh\nexit 101\n", mode=0o755)
    apt = ["chroot", str(root), "apt-get", "-o", "Acquire::Check-Valid-Until=false", "-o", "Acquire::Check-Date=false"]
    env = {"DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"}
    try:
        run([*apt, "update", "-qq"], env=env, timeout=300)
        run([*apt, "install", "-y", "-qq", "--no-install-recommends", *PACKAGES], env=env, timeout=900)
    finally:
        sources.unlink(missing_ok=True)
        policy.unlink(missing_ok=True)
        resolv.unlink(missing_ok=True)
        if saved is not None:
            resolv.write_bytes(saved)
    run([*apt, "clean"], env=env)
    run([*apt, "update", "-qq"], env=env, timeout=120)  # drops the mirror's package lists


def munge_key() -> bytes:
    """A lab's munge key: 1024 random bytes, as `mungekey` makes."""
    return os.urandom(1024)


def slurm_conf(lab: str, nodes: Sequence[NodeRecord], cpus: int) -> str:
    controller = nodes[0]
    lines = [
        "# Written by `fabnet lab up --slurm`.",
        f"ClusterName=fabnet-{lab}",
        f"SlurmctldHost={controller.name}({controller.mgmt_ip})",
        "AuthType=auth/munge",
        "SlurmUser=slurm",
        "StateSaveLocation=/var/lib/slurm/slurmctld",
        "SlurmdSpoolDir=/var/lib/slurm/slurmd",
        "SlurmctldPidFile=/run/slurmctld.pid",
        "SlurmdPidFile=/run/slurmd.pid",
        "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
        "SlurmdLogFile=/var/log/slurm/slurmd.log",
        # Containers share the host's cgroup tree: process tracking by /proc, no task confinement.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "MpiDefault=none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        # A node that rebooted or lost contact comes back by itself; a drained one stays drained.
        "ReturnToService=2",
        "SlurmdTimeout=60",
        "InactiveLimit=0",
        "KillWait=5",
        # Power saving on, so a node can be powered down by hand (`scontrol update ... State=POWER_DOWN`) and
        # read as `idle~`, but never on its own: a year idle (INFINITE would turn power saving off, and with it
        # the power states). A lab node cannot power up again (Slurm waits for a boot after the resume
        # request, and a lab node shares this machine's kernel), so it must never be powered down unasked.
        # The programs do nothing: a lab node stays up, as a node whose power-off failed would.
        "SuspendProgram=/bin/true",
        "ResumeProgram=/bin/true",
        "SuspendTime=31536000",
        "SuspendTimeout=5",
        "ResumeTimeout=60",
    ]
    lines += [f"NodeName={n.name} NodeAddr={n.mgmt_ip} CPUs={cpus} RealMemory={REAL_MEMORY_MB} State=UNKNOWN"
              for n in nodes]
    lines.append(f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def prepare_root(root: Path, record: NodeRecord, nodes: Sequence[NodeRecord], conf: str, key: bytes) -> None:
    """Slurm's configuration, the lab's munge key, and which daemons this node's systemd starts."""
    write_atomic(root / "etc/slurm/slurm.conf", conf, mode=0o644)
    uid, gid = _ids(root, "munge")
    key_path = root / "etc/munge/munge.key"
    write_atomic(key_path, "", mode=0o400)
    key_path.write_bytes(key)
    os.chown(key_path, uid, gid)
    # srun on one node tells the others where to reach it by its host name: it must resolve to the
    # management address, not the 127.0.1.1 a Debian host gives its own name.
    hosts = ["127.0.0.1\tlocalhost"] + [f"{n.mgmt_ip}\t{n.name}" for n in nodes]
    hosts += [f"{n.data_ip}\t{n.name}-data" for n in nodes]
    write_atomic(root / "etc/hosts", "\n".join(hosts) + "\n")
    controller = record.name == nodes[0].name
    wants = root / WANTS
    wants.mkdir(parents=True, exist_ok=True)
    for unit, enabled in (("munge.service", True), ("slurmd.service", True), ("slurmctld.service", controller)):
        link = wants / unit
        if link.is_symlink() or link.exists():
            link.unlink()
        if enabled:
            link.symlink_to(f"/lib/systemd/system/{unit}")


def _ids(root: Path, user: str) -> tuple[int, int]:
    for line in (root / "etc/passwd").read_text().splitlines():
        fields = line.split(":")
        if fields[0] == user:
            return int(fields[2]), int(fields[3])
    raise KeyError(f"no user {user} in the node root (is the Slurm layer installed?)")


def ports(nodes: Sequence[NodeRecord]) -> list[tuple[str, int]]:
    """Where the daemons listen once up: slurmctld on the controller, slurmd on every node."""
    return [(nodes[0].mgmt_ip, 6817)] + [(n.mgmt_ip, 6818) for n in nodes]
