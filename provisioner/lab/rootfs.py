"""The shared, read-only Debian root filesystem that every lab node boots from (through an overlay).

Built once with debootstrap and cached: a cache key covers everything that goes into it, so a change
to the package list or to the lab's own additions builds a new one instead of reusing a stale one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from provisioner.lab.packages import build_repository
from provisioner.lab.profile import NCCL_VERSIONS
from provisioner.lab.system import run, write_atomic

SUITE = "bookworm"
PACKAGES = ("systemd", "systemd-sysv", "dbus", "openssh-server", "iproute2", "python3", "iputils-ping",
            "procps", "kmod", "apt", "ca-certificates", "sudo")
# Bump when the additions below change, so caches rebuild.
LAYOUT_VERSION = "4"
# A non-root operator account with passwordless sudo, as on fleets where tools log in unprivileged and
# become root (ansible_become).
OPERATOR = "ops"
REPO_IN_NODE = "/srv/fabnet-lab-repo"

# Units that only slow a container's boot or reach for the network.
MASKED_UNITS = ("apt-daily.timer", "apt-daily-upgrade.timer", "e2scrub_reap.service", "fstrim.timer",
                "systemd-timesyncd.service", "getty@tty1.service", "console-getty.service")

LAB_UNITS = {
    # Stand-ins with the real units' names and types, so systemctl on a node behaves as on a GPU node.
    "rdma_cm.service": (
        "[Unit]\nDescription=RDMA connection manager (fabnet lab emulation)\n\n"
        "[Service]\nType=simple\nExecStart=/bin/sleep infinity\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    ),
    "openibd.service": (
        "[Unit]\nDescription=openibd - configure Mellanox devices (fabnet lab emulation)\n\n"
        "[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\nExecStop=/bin/true\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    ),
}

SSHD_CONFIG = """\
# fabnet lab: key-only root login, many parallel sessions, quick logins.
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UseDNS no
MaxStartups 512
MaxSessions 64
LogLevel VERBOSE
"""


def cache_dir() -> Path:
    return Path(os.environ.get("FABNET_CACHE", "/var/cache/fabnet"))


def debian_mirror() -> str:
    """The mirror apt on this machine uses (so debootstrap works where only that mirror is reachable)."""
    for source in [*sorted(Path("/etc/apt/sources.list.d").glob("*")), Path("/etc/apt/sources.list")]:
        try:
            text = source.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            words = line.split()
            if words[:1] == ["URIs:"] and len(words) > 1 and "security" not in words[1]:
                return words[1]
            if words[:1] == ["deb"]:
                uri = next((w for w in words[1:] if "://" in w), None)
                if uri and "security" not in uri:
                    return uri
    return "http://deb.debian.org/debian"


def cache_key() -> str:
    material = "|".join([SUITE, *PACKAGES, LAYOUT_VERSION, *NCCL_VERSIONS, SSHD_CONFIG, *LAB_UNITS.values()])
    return hashlib.sha256(material.encode()).hexdigest()[:12]


def rootfs_path() -> Path:
    return cache_dir() / f"rootfs-{SUITE}-{cache_key()}"


def ensure_rootfs(log=lambda message: None) -> Path:
    """Return the cached rootfs, building it first if needed (about a minute, once)."""
    final = rootfs_path()
    if (final / ".fabnet-complete").exists():
        return final
    building = final.with_name(final.name + f".building-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    building.parent.mkdir(parents=True, exist_ok=True)
    log(f"building the node root filesystem with debootstrap (once; cached in {final})")
    run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(building),
         debian_mirror()], timeout=900)
    _add_lab_layer(building)
    write_atomic(building / ".fabnet-complete", cache_key() + "\n")
    # Another `lab up` may have finished the same build meanwhile; either copy is good.
    try:
        building.rename(final)
    except OSError:
        shutil.rmtree(building, ignore_errors=True)
    for stale in cache_dir().glob(f"rootfs-{SUITE}-*"):
        if stale != final and ".building-" not in stale.name:
            shutil.rmtree(stale, ignore_errors=True)
    return final


def _add_lab_layer(root: Path) -> None:
    # Each node gets its own host keys; shared ones would make every node the same host to SSH.
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    write_atomic(root / "etc/ssh/sshd_config.d/fabnet-lab.conf", SSHD_CONFIG)
    for unit in MASKED_UNITS:
        link = root / "etc/systemd/system" / unit
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to("/dev/null")
    for name, text in LAB_UNITS.items():
        write_atomic(root / "etc/systemd/system" / name, text)
    run(["chroot", str(root), "useradd", "--create-home", "--shell", "/bin/bash", OPERATOR])
    write_atomic(root / "etc/sudoers.d/fabnet-lab", f"{OPERATOR} ALL=(ALL) NOPASSWD: ALL\n", mode=0o440)
    # Nodes reach no outside mirror: apt sees only the lab's own repository.
    (root / "etc/apt/sources.list").unlink(missing_ok=True)
    repo = root / REPO_IN_NODE.lstrip("/")
    build_repository(repo, NCCL_VERSIONS)
    write_atomic(root / "etc/apt/sources.list.d/fabnet-lab.list", f"deb [trusted=yes] file:{REPO_IN_NODE} ./\n")
    run(["chroot", str(root), "apt-get", "update", "-qq"], timeout=120)
