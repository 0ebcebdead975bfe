"""Lets lab nodes run torch (for `fabnet smoke`) without installing it into every node.

The host virtualenv's site-packages (where the test extras put torch) is bound read-only into each
node behind a minimal virtualenv: a `pyvenv.cfg` and a `bin/python3` link to the node's own
interpreter. The node's system Python stays untouched; only programs started with that interpreter
see the shared packages. It needs the node's Python to be the same minor version as the host venv's.
"""

from __future__ import annotations

import importlib.util
import sys
import sysconfig
from pathlib import Path

from provisioner.lab.system import write_atomic

VENV_IN_NODE = "/opt/fabnet-lab/venv"
PYTHON_IN_NODE = f"{VENV_IN_NODE}/bin/python3"


def _version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def site_in_node() -> str:
    return f"{VENV_IN_NODE}/lib/python{_version()}/site-packages"


def host_site_packages(rootfs: Path) -> Path | None:
    """The host venv's site-packages to share, or None when there is nothing useful to share: not
    running from a virtualenv, torch not installed there, or the node's Python is another version."""
    if sys.prefix == sys.base_prefix or importlib.util.find_spec("torch") is None:
        return None
    site = Path(sysconfig.get_paths()["purelib"])
    if not (site / "torch").is_dir() or not (rootfs / "usr/bin" / f"python{_version()}").exists():
        return None
    return site


def prepare_root(root: Path) -> None:
    """Write the virtualenv skeleton into a node's root (the site-packages mount point included)."""
    venv = root / VENV_IN_NODE.lstrip("/")
    write_atomic(venv / "pyvenv.cfg", f"home = /usr/bin\ninclude-system-site-packages = false\n"
                                      f"version = {sys.version.split()[0]}\n")
    (root / site_in_node().lstrip("/")).mkdir(parents=True, exist_ok=True)
    link = venv / "bin" / "python3"
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(f"/usr/bin/python{_version()}")


def nspawn_args(site: Path) -> list[str]:
    return [f"--bind-ro={site}:{site_in_node()}"]
