"""Emulated NIC, RDMA and GPU tools for the lab's virtual nodes, which have no such hardware.

`labhw.py` (next to this file) is one stdlib-only script that the lab copies to INSTALL_PATH on each
node; every command in COMMANDS gets a two-line wrapper in WRAPPER_DIR that runs it as
`python3 INSTALL_PATH --as COMMAND "$@"` (explicit, so no symlink tricks on argv[0] are needed; a
symlink named after the command works as well). INIT_COMMAND writes a node's sysfs-style files from its
`hw.json` at build time. The script's docstring holds the `hw.json` schema and what each command does.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from provisioner.errors import LabError

LABHW_SOURCE = Path(__file__).with_name("labhw.py")
INSTALL_PATH = "/usr/local/lib/fabnet-lab/labhw.py"
WRAPPER_DIR = "/usr/local/sbin"
NODE_PYTHON = "/usr/bin/python3"
HW_ROOT_ENV = "FABNET_LAB_HW_ROOT"
NET_SYSFS_ENV = "FABNET_LAB_NET_SYSFS"
DEFAULT_HW_ROOT = "/var/lib/fabnet-lab"

COMMANDS: tuple[str, ...] = (
    "ofed_info",
    "mlnx_qos",
    "ibv_devinfo",
    "ibstat",
    "ibstatus",
    "ibdev2netdev",
    "show_gids",
    "rdma",
    "nvidia-smi",
    "cma_roce_tos",
    "lsmod",
    "modprobe",
)
INIT_COMMAND = "fabnet-lab-init"


def wrapper_script(command: str, *, python: str = NODE_PYTHON, script: str = INSTALL_PATH) -> str:
    """The text of the `/usr/local/sbin/<command>` wrapper that runs the emulation as `command`."""
    if command not in (*COMMANDS, INIT_COMMAND):
        raise LabError(f"no emulated command {command!r}; known: {', '.join(COMMANDS)}, {INIT_COMMAND}")
    # -I -S: no site-packages or user paths to scan; start-up time is most of what these commands cost.
    run = " ".join(shlex.quote(part) for part in (python, "-I", "-S", script, "--as", command))
    return f'#!/bin/sh\nexec {run} "$@"\n'
