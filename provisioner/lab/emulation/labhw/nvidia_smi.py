"""`nvidia-smi`: `topo -m`, `-L`, `--query-gpu` and the default table, from the profile's GPUs."""

from __future__ import annotations

from .context import Ctx
from .core import ToolExit
from .hw import Hca, Hw
from .kmod import gpus_present

LEGEND = """Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks"""

NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
             "Make sure that the latest NVIDIA driver is installed and running.\n")


def _pci_device(address: str) -> str:
    return address.rsplit(".", 1)[0]


def topo_matrix(hw: Hw, hcas: list[Hca]) -> str:
    gpus = hw.gpus
    items: list[tuple[str, str, int]] = [(f"GPU{i}", "gpu", gpus.numa(i)) for i in range(gpus.count)]
    items += [(f"NIC{i}", "nic", hca.numa) for i, hca in enumerate(hcas)]

    def cell(a: int, b: int) -> str:
        (name_a, kind_a, numa_a), (name_b, kind_b, numa_b) = items[a], items[b]
        if a == b:
            return " X "
        override = hw.topo.get(f"{name_a}/{name_b}") or hw.topo.get(f"{name_b}/{name_a}")
        if override:
            return override
        if kind_a == kind_b == "gpu" and gpus.nvlink:
            return gpus.nvlink
        if kind_a == kind_b == "nic":
            pa, pb = hcas[a - gpus.count].pci, hcas[b - gpus.count].pci
            if _pci_device(pa) == _pci_device(pb):
                return "PIX"
        return "NODE" if numa_a == numa_b else "SYS"

    header = ["", *(name for name, _, _ in items)]
    if gpus.count:
        header += ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    lines = ["\t".join(header)]
    for a, (name, kind, numa) in enumerate(items):
        row = [name, *(cell(a, b) for b in range(len(items)))]
        if kind == "gpu":
            affinity = gpus.cpu_affinity[numa] if numa < len(gpus.cpu_affinity) else "N/A"
            # nvidia-smi pads these values to their header's width before the tab.
            row += [f"{affinity:<12}", f"{numa:<13}", "N/A"]
        lines.append("\t".join(row).rstrip())
    lines += ["", LEGEND]
    if hcas:
        lines += ["", "NIC Legend:", ""] + [f"  NIC{i}: {hca.name}" for i, hca in enumerate(hcas)]
    return "\n".join(lines) + "\n"


QUERY_FIELDS = ("index", "name", "uuid", "driver_version", "pci.bus_id", "memory.total", "count",
                "persistence_mode", "compute_cap")


def _query_value(hw: Hw, index: int, name: str, units: bool) -> str:
    gpus = hw.gpus
    domain, rest = gpus.bus_id(index).split(":", 1)
    values = {
        "index": str(index), "name": gpus.model, "uuid": gpus.uuid(index), "driver_version": gpus.driver,
        "pci.bus_id": f"{int(domain, 16):08X}:{rest.upper()}", "count": str(gpus.count),
        "memory.total": f"{gpus.memory_mib} MiB" if units else str(gpus.memory_mib),
        "persistence_mode": "Enabled", "compute_cap": "9.0",
    }
    return values[name]


def _smi_table(hw: Hw) -> str:
    import time

    gpus = hw.gpus

    def row(*cells: tuple[str, str, int]) -> str:
        parts = []
        for left, right, width in cells:
            parts.append(left + " " * max(1, width - len(left) - len(right)) + right)
        return "|" + "|".join(parts) + "|"

    line = "+" + "-" * 41 + "+" + "-" * 22 + "+" + "-" * 22 + "+"
    full = "+" + "-" * 87 + "+"
    out = [time.strftime("%a %b %d %H:%M:%S %Y"), full,
           row((f" NVIDIA-SMI {gpus.driver}",
                f"Driver Version: {gpus.driver}   CUDA Version: {gpus.cuda:<8}", 87)),
           "|" + "-" * 41 + "+" + "-" * 22 + "+" + "-" * 22 + "+",
           row((" GPU  Name", "Persistence-M ", 41), (" Bus-Id", "Disp.A ", 22),
               (" Volatile", "Uncorr. ECC ", 22)),
           row((" Fan  Temp   Perf", "Pwr:Usage/Cap ", 41), ("", "Memory-Usage ", 22),
               (" GPU-Util", "Compute M. ", 22)),
           row(("", "", 41), ("", "", 22), ("", "MIG M. ", 22)),
           "|" + "=" * 41 + "+" + "=" * 22 + "+" + "=" * 22 + "|"]
    for i in range(gpus.count):
        name = gpus.model if len(gpus.model) <= 26 else gpus.model[:23] + "..."
        domain, rest = gpus.bus_id(i).split(":", 1)
        bus = f"{int(domain, 16):08X}:{rest.upper()}"
        out.append(row((f" {i:>3}  {name}", "On  ", 41), (f" {bus}", "Off ", 22), ("", "0 ", 22)))
        out.append(row((" N/A   31C    P0", "70W / 700W ", 41),
                       ("", f"0MiB / {gpus.memory_mib}MiB ", 22), ("      0%", "Default ", 22)))
        out.append(row(("", "", 41), ("", "", 22), ("", "Disabled ", 22)))
        out.append(line)
    out += ["", full, row((" Processes:", "", 87)),
            row(("  GPU   GI   CI        PID   Type   Process name", "GPU Memory ", 87)),
            row(("        ID   ID", "Usage      ", 87)),
            "|" + "=" * 87 + "|",
            row(("  No running processes found", "", 87)), full]
    return "\n".join(out) + "\n"


def cmd_nvidia_smi(ctx: Ctx, args: list[str]) -> int:
    hw = ctx.hw
    if not gpus_present(ctx.env, hw):
        raise ToolExit(NO_DRIVER.rstrip(), 9)
    if hw.gpus.count == 0:
        raise ToolExit("No devices were found", 6)
    if args[:1] == ["topo"]:
        if args[1:] not in (["-m"], ["--matrix"]):
            raise ToolExit(f"{ctx.name} topo: only -m/--matrix is available here", 2)
        ctx.out.append(topo_matrix(hw, ctx.hcas()))
        return 0
    if args in (["-L"], ["--list-gpus"]):
        for i in range(hw.gpus.count):
            ctx.print(f"GPU {i}: {hw.gpus.model} (UUID: {hw.gpus.uuid(i)})")
        return 0
    if not args:
        ctx.out.append(_smi_table(hw))
        return 0
    query = fmt = None
    indices: list[int] | None = None
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg.startswith("--query-gpu="):
            query = arg.split("=", 1)[1]
        elif arg.startswith("--format="):
            fmt = arg.split("=", 1)[1]
        elif arg in ("-i", "--id") and rest:
            indices = [int(x) for x in rest.pop(0).split(",") if x.isdigit()]
        elif arg.startswith("--id="):
            indices = [int(x) for x in arg.split("=", 1)[1].split(",") if x.isdigit()]
        else:
            raise ToolExit("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.", 2)
    if query is None or fmt is None:
        raise ToolExit("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.", 2)
    fields = [f.strip() for f in query.split(",") if f.strip()]
    for name in fields:
        if name not in QUERY_FIELDS:
            raise ToolExit(f'Field "{name}" is not a valid field to query.', 2)
    options = fmt.split(",")
    if options[0] != "csv" or any(o not in ("noheader", "nounits") for o in options[1:]):
        raise ToolExit(f'"{fmt}" is not a valid format.', 2)
    units = "nounits" not in options
    if "noheader" not in options:
        ctx.print(", ".join(f"{n} [MiB]" if n == "memory.total" and units else n for n in fields))
    for i in indices if indices is not None else range(hw.gpus.count):
        if not 0 <= i < hw.gpus.count:
            raise ToolExit("No devices were found", 6)
        ctx.print(", ".join(_query_value(hw, i, n, units) for n in fields))
    return 0
