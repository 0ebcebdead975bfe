"""Thin wrappers over the host commands the lab drives (ip, mount, ssh-keygen...): argument lists only."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from provisioner.errors import LabError
from provisioner.output.files import write_atomic

__all__ = ["mounts_under", "pid_alive", "require_root_and_tools", "run", "write_atomic"]

REQUIRED_TOOLS = ("ip", "systemd-nspawn", "debootstrap", "ssh-keygen", "dpkg-deb", "mount", "umount")


def run(args: list[str], *, check: bool = True, input: str | None = None, cwd: Path | None = None,
        env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run a host command without a shell; a failure raises LabError with its stderr."""
    try:
        proc = subprocess.run(args, input=input, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                              env=None if env is None else {**os.environ, **env})
    except FileNotFoundError as exc:
        raise LabError(f"{args[0]} is not installed (needed by the lab)") from exc
    except subprocess.TimeoutExpired as exc:
        raise LabError(f"{' '.join(args)} did not finish in {timeout:.0f} s") from exc
    if check and proc.returncode != 0:
        raise LabError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def require_root_and_tools() -> None:
    if os.geteuid() != 0:
        raise LabError("the lab needs root: it creates network namespaces, bridges, mounts and containers")
    missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    if missing:
        raise LabError(
            "missing host tools: " + ", ".join(missing)
            + " (apt-get install systemd-container debootstrap openssh-client iproute2)"
        )


def mounts_under(root: Path) -> list[str]:
    """Mount points at or below `root`, deepest first (the order to unmount them)."""
    root_str = str(root)
    found = []
    with open("/proc/self/mounts") as handle:
        for line in handle:
            target = line.split()[1].replace("\\040", " ")
            if target == root_str or target.startswith(root_str + "/"):
                found.append(target)
    return sorted(set(found), key=len, reverse=True)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); treat it as gone.
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
