"""Emulated NIC, RDMA and GPU tools for the lab's virtual nodes, which have no such hardware.

`labhw/` (next to this file) is a stdlib-only package, one module per tool, that the lab copies to
INSTALL_PATH on each node. `labhw-run.c` is its fast path, compiled once per host (`fast_path_binary`)
and installed as RUNNER, so a read-only call costs what a real C tool costs (one to two milliseconds);
only calls whose inputs changed, setters and `mlnx_qos` run Python. Each command in WRAPPER_DIR is a
two-line wrapper running RUNNER (or, without a C compiler, `python3 INSTALL_PATH --as COMMAND "$@"`).
INIT_COMMAND writes a node's sysfs-style files from its `hw.json` at build time. The package's docstring
holds the `hw.json` schema and what each command does.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import threading
from pathlib import Path

from provisioner.errors import LabError

LABHW_SOURCE = Path(__file__).with_name("labhw")
FAST_PATH_SOURCE = Path(__file__).with_name("labhw-run.c")
INSTALL_PATH = "/usr/local/lib/fabnet-lab/labhw"
RUNNER = "/usr/local/lib/fabnet-lab/labhw-run"
WRAPPER_DIR = "/usr/local/sbin"
NODE_PYTHON = "/usr/bin/python3"
HW_ROOT_ENV = "FABNET_LAB_HW_ROOT"
NET_SYSFS_ENV = "FABNET_LAB_NET_SYSFS"
DEFAULT_HW_ROOT = "/var/lib/fabnet-lab"
_COMPILING = threading.Lock()

COMMANDS: tuple[str, ...] = (
    "ofed_info",
    "mlnx_qos",
    "dcb",
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
    "ethtool",
)
INIT_COMMAND = "fabnet-lab-init"
# nccl-tests' all_reduce_perf, emulated with a real gloo all-reduce (all_reduce_perf.py next to this file).
ALL_REDUCE_PERF_SOURCE = Path(__file__).with_name("all_reduce_perf.py")
ALL_REDUCE_PERF_LIB = "/usr/local/lib/fabnet-lab/all_reduce_perf.py"
ALL_REDUCE_PERF = "/usr/local/bin/all_reduce_perf"


def all_reduce_perf_wrapper(shared_python: str) -> str:
    """The command on PATH: the shared Python that has torch when the lab shares one, else the node's."""
    return ("#!/bin/sh\n# fabnet lab emulation of nccl-tests all_reduce_perf (gloo over TCP, not NCCL)\n"
            f"py={shlex.quote(shared_python)}\n[ -x \"$py\" ] || py={NODE_PYTHON}\n"
            f"exec \"$py\" {ALL_REDUCE_PERF_LIB} \"$@\"\n")


def wrapper_script(command: str, *, python: str = NODE_PYTHON, script: str = INSTALL_PATH) -> str:
    """The text of the `/usr/local/sbin/<command>` wrapper that runs the emulation as `command`."""
    if command not in (*COMMANDS, INIT_COMMAND):
        raise LabError(f"no emulated command {command!r}; known: {', '.join(COMMANDS)}, {INIT_COMMAND}")
    # -I -S: no site-packages or user paths to scan; start-up time is most of what these commands cost.
    run = " ".join(shlex.quote(part) for part in (python, "-I", "-S", script, "--as", command))
    return f'#!/bin/sh\nexec {run} "$@"\n'


def fast_wrapper_script(command: str, *, runner: str = RUNNER) -> str:
    """The `/usr/local/sbin/<command>` wrapper that runs the compiled fast path as `command`.

    A file per tool, not a link to one binary: `chmod -x` of one tool (a test of a broken tool) must
    leave the others working, as on a real node. The shell adds about half a millisecond.
    """
    if command not in COMMANDS:
        raise LabError(f"no emulated command {command!r}; known: {', '.join(COMMANDS)}")
    return f'#!/bin/sh\nexec {shlex.quote(runner)} --as {shlex.quote(command)} "$@"\n'


def fast_path_binary(cache_dir: Path) -> Path | None:
    """The compiled fast path for this source, built into `cache_dir` on first use; None without a compiler.

    Linked statically: the nodes' C library need not be the host's.
    """
    digest = hashlib.sha256(FAST_PATH_SOURCE.read_bytes()).hexdigest()[:16]
    target = cache_dir / f"labhw-run-{digest}"
    with _COMPILING:
        if target.exists():
            return target
        return _compile(cache_dir, target)


def _compile(cache_dir: Path, target: Path) -> Path | None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = cache_dir / f".{target.name}.{os.getpid()}"
    proc = subprocess.run([compiler, "-O2", "-static", "-Wall", "-o", str(partial), str(FAST_PATH_SOURCE)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        partial.unlink(missing_ok=True)
        raise LabError(f"compiling {FAST_PATH_SOURCE.name} failed:\n{proc.stderr.strip()}")
    os.replace(partial, target)
    return target
