"""Constants, errors, state paths and atomic files shared by every emulated tool."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

LAB_INFO = "fabnet lab emulation"
DEFAULT_ROOT = "/var/lib/fabnet-lab"
DEFAULT_NET_SYSFS = "/sys/class/net"
INIT_COMMAND = "fabnet-lab-init"

DEFAULT_OFED = "MLNX_OFED_LINUX-23.10-1.1.9.0"
DEFAULT_GPU_MODEL = "NVIDIA H100 80GB HBM3"
DEFAULT_GPU_PCI = ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                   "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"]
DEFAULT_CPU_AFFINITY = ["0-51,104-155", "52-103,156-207"]

# name: (size in bytes as lsmod shows it, modules it needs). Sizes are those of a typical 6.x kernel.
MODULES: dict[str, tuple[int, tuple[str, ...]]] = {
    "mlx5_core": (2437120, ()),
    "ib_core": (491520, ()),
    "mlx5_ib": (495616, ("mlx5_core", "ib_core")),
    "ib_uverbs": (196608, ("ib_core",)),
    "ib_umad": (45056, ("ib_core",)),
    "rdma_cm": (147456, ("ib_core",)),
    "rdma_ucm": (36864, ("rdma_cm", "ib_uverbs", "ib_core")),
    "nvidia": (56705024, ()),
    "nvidia_uvm": (1794048, ("nvidia",)),
    "nvidia_peermem": (16384, ("nvidia", "ib_core")),
}
DEFAULT_LOADED = {name: name != "nvidia_peermem" for name in MODULES}

IB_MTUS = [(4096, 5), (2048, 4), (1024, 3), (512, 2), (256, 1)]
ROCE_V2_OVERHEAD = 96
# Gb/s -> (width, IB speed name); the names drive ibstatus, the enums below ibv_devinfo -v.
RATES = {10: ("4X", "SDR"), 20: ("4X", "DDR"), 40: ("4X", "QDR"), 56: ("4X", "FDR"), 25: ("1X", "EDR"),
         50: ("1X", "HDR"), 100: ("4X", "EDR"), 200: ("4X", "HDR"), 400: ("4X", "NDR"), 800: ("4X", "XDR")}
WIDTH_ENUM = {"1X": 1, "4X": 2, "8X": 4, "12X": 8, "2X": 16}
SPEED_ENUM = {"SDR": (1, "2.5 Gbps"), "DDR": (2, "5.0 Gbps"), "QDR": (4, "10.0 Gbps"),
              "FDR": (16, "14.0 Gbps"), "EDR": (32, "25.0 Gbps"), "HDR": (64, "50.0 Gbps"),
              "NDR": (128, "100.0 Gbps"), "XDR": (256, "200.0 Gbps")}
CA_NAMES = {"MT4099": "ConnectX-3", "MT4115": "ConnectX-4", "MT4117": "ConnectX-4 Lx", "MT4119": "ConnectX-5",
            "MT4121": "ConnectX-5 Ex", "MT4123": "ConnectX-6", "MT4125": "ConnectX-6 Dx",
            "MT4127": "ConnectX-6 Lx", "MT4129": "ConnectX-7", "MT4131": "ConnectX-8"}
TSA_VALUES = ("ets", "strict", "vendor")
BUFFER_TOTAL = 524160


class ToolExit(Exception):
    """Ends a command: `message` goes to stderr (when not empty) and `code` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class HwError(ToolExit):
    """hw.json (or a live state file) holds something this emulation cannot use."""

    def __init__(self, message: str) -> None:
        super().__init__(f"{LAB_INFO}: {message}", 1)


# ---------------------------------------------------------------------------------------------------
# Paths and files


@dataclass(frozen=True)
class Env:
    root: Path
    net: Path

    @classmethod
    def from_environ(cls) -> Env:
        return cls(Path(os.environ.get("FABNET_LAB_HW_ROOT") or DEFAULT_ROOT),
                   Path(os.environ.get("FABNET_LAB_NET_SYSFS") or DEFAULT_NET_SYSFS))

    @property
    def hw_file(self) -> Path:
        return self.root / "hw.json"

    @property
    def qos_dir(self) -> Path:
        return self.root / "qos"

    @property
    def modules_file(self) -> Path:
        return self.root / "modules.json"

    @property
    def sys(self) -> Path:
        return self.root / "sys"

    def ecn_dir(self, netdev: str) -> Path:
        return self.sys / "class/net" / netdev / "ecn"

    def pci_function_links(self, netdev: str, dev: str) -> tuple[Path, Path]:
        """The two sysfs entries that tie a netdev and its RDMA device to the PCI function behind both."""
        return (self.sys / "class/net" / netdev / "device/infiniband" / dev,
                self.sys / "class/infiniband" / dev / "device/net" / netdev)

    def nic_stats_dir(self, netdev: str) -> Path:
        """The lab's stand-in for the driver's statistics (`ethtool -S`): a file per counter. Real sysfs has
        no such directory; the driver answers an ioctl."""
        return self.sys / "class/net" / netdev / "ethtool_stats"

    def traffic_class_file(self, dev: str, port: int) -> Path:
        return self.sys / "class/infiniband" / dev / "tc" / str(port) / "traffic_class"

    def roce_tos_file(self, dev: str, port: int) -> Path:
        return self.sys / "kernel/config/rdma_cm" / dev / "ports" / str(port) / "default_roce_tos"


def write_atomic(path: Path, text: str) -> None:
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def state_lock(env: Env) -> Iterator[None]:
    """Serialises read-modify-write of live state: two setters at once must not lose an update."""
    env.root.mkdir(parents=True, exist_ok=True)
    with open(env.root / ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_json(path: Path) -> Any:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise HwError(f"cannot read {path}: {exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise HwError(f"{path}: not valid JSON: {exc}") from exc


def read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None



def real_binary(name: str) -> str | None:
    """The distribution's own binary, never one of the lab's wrappers in /usr/local."""
    for directory in ("/usr/sbin", "/sbin", "/usr/bin", "/bin"):
        path = os.path.join(directory, name)
        if os.access(path, os.X_OK) and not os.path.realpath(path).startswith("/usr/local/"):
            return path
    return None


def exec_real(name: str, args: list[str], missing: str) -> NoReturn:
    binary = real_binary(name)
    if binary is None:
        raise ToolExit(missing, 1)
    sys.stdout.flush()
    os.execv(binary, [name, *args])
