"""AMD GPUs in a job's log: telling an RCCL/ROCm log by its structure, reading the failures only HIP, the
HSA runtime and the amdgpu kernel driver print, and the AMD wording of each GPU-side cause, so that an
operator of an AMD cluster is sent to `amd-smi` and `dmesg | grep amdgpu`, not to `nvidia-smi` and Xids.

RCCL is NCCL's fork and logs in NCCL's format. What marks it (read in RCCL's init.cc, checks.h, p2p.cc):
its banner `RCCL version 2.x.y+hipA.B` (2020 on; `RCCL version : 2.x.y-HASH` with `HIP version  :` and
`ROCm version :` lines from 2.22), source paths under `hipify/` or `rccl/`, `HIP failure 'X'` (until late 2022, when
hipify moved into the build and the same macro prints `Cuda failure 'X'` with hipGetErrorString's text),
`hipIpcGetMemHandle failed : X` (`cudaIpcGetMemHandle` in RCCL's source, renamed by hipify), its own INFO
and WARN lines (`Hipruntime version`, `ROCr version`, `Missing "iommu=pt"`, `HSA_FORCE_FINE_GRAIN_PCIE`,
`librccl-net.so`), and from 2.2x `[FATAL ERROR]: HIP failure: 'X'` after the WARN of the call that failed (read
as that failure again, `fold_echoes`), a date before the NCCL prefix on WARN lines (the shared cleaning takes it
off), `ROCr failure 'X'` (rocmwrap.h: an HSA runtime call) and `ROCm SMI init failure ...` / `rocm_smi_lib: X
device index not found` (rocm_smi_wrap.cc: the GPUs unreadable), `Add XGMI error : could not find GPU X` (graph/topo.cc:
an xGMI link to a GPU it cannot see, and init ends). HIP's error names are `hipErrorX`; the HSA
runtime reports a kernel's bad access as `Memory access fault by GPU node-N (Agent handle: ...) on address X.
Reason: ...`; amdgpu logs `amdgpu 0000:03:00.0: amdgpu: GPU reset begin!`, `[drm:amdgpu_job_timedout
[amdgpu]] *ERROR* ring gfx timeout`, `[gfxhub] page fault` / `VM fault`, and RAS lines for uncorrectable ECC errors.
"""

from __future__ import annotations

import re

from provisioner.explain.evidence import grep
from provisioner.explain.logs import Log, LogLine
from provisioner.parsers.nccl_line import nccl_log

_ROCM = re.compile(
    r"\bRCCL version\b|NCCL version \S*\+hip|/hipify/|/rccl(?:-tests)?/\S+:[0-9]+|\bHIP failure\b"
    r"|\bhipError[A-Z]\w*|\bhip[A-Z]\w+ failed\b"
    r"|\bamdgpu\b|\+rocm[0-9]|\bROCm version\b|\bHIP version\s*:|\blibrccl|\bHSA_[A-Z_]+=|Hipruntime version"
    r"|\bROCr version\b|Memory access fault by GPU node|AMD Instinct|Missing \"(?:amd_)?iommu"
    r"|\bROCr failure\b|\bROCm SMI\b|\brocm_smi_lib\b|\bARSMI|Add XGMI error",
    re.I,
)

# What RCCL, HIP and the HSA runtime print on their own, none of it in NVIDIA's stack.
_HIP = re.compile(
    r"HIP failure:?\s*(?:[0-9]+\s+)?'(?P<a>[^']+)'?"
    r"|(?P<b>hipError[A-Za-z]+)(?:\s*[:(]\s*(?P<b2>[^)\n]+))?"
    r"|(?:hip|cuda)Ipc(?:Get|Open)MemHandle failed\s*:\s*(?P<c>.+)"
    r"|Memory access fault by GPU node-(?P<node>[0-9]+).*? on address (?P<addr>\S+?)\.?\s+Reason:\s*(?P<why>.+)"
    r"|ROCr failure\s*'(?P<rocr>[^']+)'?"
    r"|Add XGMI error\s*:\s*(?P<xgmi>.+)"
    r"|(?P<smi>ROCm SMI init failure|ARSMI failure|rocm_smi_lib:|ARSMI_lib:)\s*(?P<smi2>.*)",
    re.I,
)
# RCCL 2.2x on follow a failed HIP call's WARN with `[FATAL ERROR]: HIP failure: 'X'`: the same failure again.
FATAL = re.compile(r"\[FATAL ERROR\]:?\s*HIP failure", re.I)
# The amdgpu kernel driver (dmesg, journalctl -k, a syslog line with its host).
_AMDGPU = re.compile(
    r"amdgpu(?P<pci> [0-9a-fA-F]{4}:[0-9a-fA-F:.]+)?:?.*?(?P<reset>\bGPU reset begin\b)"
    r"|amdgpu.*?(?P<ring>\bring \S+ timeout)"
    r"|amdgpu(?P<pci2> [0-9a-fA-F]{4}:[0-9a-fA-F:.]+)?:.*?"
    r"(?P<fault>\[\w+hub\] page fault|VM fault|VM_L2_PROTECTION_FAULT)"
    r"|amdgpu(?P<pci3> [0-9a-fA-F]{4}:[0-9a-fA-F:.]+)?:.*?(?P<ras>uncorrectable (?:hardware )?errors?|RAS poison|"
    r"poison consumption|ECC errors? detected)",
    re.I,
)

# HIP's error strings (hipGetErrorString) and names read before the shared classes; the names are HIP's,
# some strings are too (`invalid kernel file`: the library holds no code object for this GPU's gfx target).
CLASSES: list[tuple[str, re.Pattern[str]]] = [
    ("hardware", re.compile(r"ECCNotCorrectable|uncorrectable|poison|GPU reset|ring \S+ timeout", re.I)),
    ("p2p", re.compile(r"PeerAccess|IpcMemHandle|xGMI", re.I)),
    ("driver", re.compile(r"invalid kernel file|InvalidKernelFile|no kernel image|NoBinaryForGpu|InvalidImage|"
                          r"invalid device function|InvalidDeviceFunction|no ROCm-capable device|hipErrorNoDevice|"
                          r"InvalidDevice\b|NotInitiali[sz]ed|InsufficientDriver|SharedObjectInitFailed", re.I)),
    ("memory", re.compile(r"OutOfMemory|MemoryAllocation", re.I)),
    ("kernel", re.compile(r"IllegalAddress|LaunchFailure|Memory access fault|page fault|VM fault|Assert\b", re.I)),
]

# kind -> id, title, fix, score: the ids and scores are the NVIDIA causes', the words AMD's (no fabric
# manager: an AMD `system not ready` is read as the driver).
CAUSES: dict[str, tuple[str, str, str, int]] = {
    "hardware": ("gpu-hardware-fault", "an AMD GPU hung, was reset or reported a hardware fault",
                 "Drain the host: read `dmesg | grep amdgpu` (GPU reset, ring timeout, RAS/ECC errors), `amd-smi "
                 "metric --ecc` (or `rocm-smi --showrasinfo all`) for ECC counts and `amd-smi xgmi` for xGMI link "
                 "errors; reset the GPU (`amd-smi reset -G -g N`, `rocm-smi --gpureset -d N`) or reboot, and "
                 "replace the GPU or fix its seating if it recurs.", 94),
    "p2p": ("gpu-p2p-failure", "GPU peer-to-peer (P2P/xGMI) access failed",
            "Check P2P between the GPUs on the host named (`amd-smi topology`, `rocm-smi --showtopo`, xGMI links "
            "with `amd-smi xgmi`): the amdgpu-dkms driver rather than the distribution's kernel module, "
            "`iommu=pt` on the kernel command line, PCIe ACS blocking peer traffic (`lspci -vvv | grep ACSCtl`), a "
            "container that does not see every GPU's /dev/dri node or the same HIP_VISIBLE_DEVICES; "
            "NCCL_P2P_DISABLE=1 (or NCCL_P2P_LEVEL) makes RCCL run through host memory meanwhile.", 86),
    "driver": ("cuda-driver", "HIP could not use the GPU (driver, device visibility, or no code for this GPU)",
               "On the host named: `amd-smi list` / `rocm-smi` (amdgpu loaded, GPUs listed), `rocminfo | grep "
               "gfx` against the targets RCCL and the framework were built for (`invalid kernel file` or `no "
               "kernel image`: the library has no code object for this GPU; use a build for it or build RCCL "
               "with GPU_TARGETS set), that the ROCm user space fits the amdgpu driver, HIP_VISIBLE_DEVICES / "
               "ROCR_VISIBLE_DEVICES and ranks per node against the GPUs present, and `dmesg | grep amdgpu`.", 86),
    "memory": ("cuda-failure", "GPU memory ran out (HIP out of memory)",
               "Check what holds GPU memory on the host named (`amd-smi process`, `rocm-smi --showmeminfo vram`: "
               "other processes, a leftover job); lower the job's memory use (batch size, activation "
               "checkpointing) or RCCL's buffers (NCCL_BUFFSIZE, fewer channels). Not a network problem.", 72),
    "kernel": ("cuda-failure", "a GPU kernel faulted (memory access fault or launch failure)",
               "Usually the application or a library (rerun with AMD_SERIALIZE_KERNEL=3 and AMD_LOG_LEVEL=3 to "
               "see the failing call); if `dmesg | grep amdgpu` shows RAS/ECC errors or a GPU reset for that GPU "
               "at the same time, it is the GPU: check `amd-smi metric --ecc` on the host named.", 70),
    "other": ("cuda-failure", "a HIP call failed",
              "Check the GPU on the host named (`amd-smi list` / `rocm-smi`, `dmesg | grep amdgpu` for resets, VM "
              "faults and RAS errors) and the job's GPU memory use; rerun with NCCL_DEBUG=INFO (AMD_LOG_LEVEL=3 "
              "for HIP's own log) to see the call that failed.", 68),
}
SUMMARY = "unhandled cuda error (RCCL's summary; the HIP call's own error is not in the log)"
# A CUDACHECK in RCCL's P2P transport is an IPC handle or peer mapping failing, whatever the error says.
P2P_SOURCE = re.compile(r"transport/p2p\.cc:[0-9]+", re.I)


def is_rocm(logs: list[Log]) -> bool:
    """Whether the job ran on AMD GPUs: any line in RCCL's, HIP's or amdgpu's own wording."""
    return any(True for _ in grep(logs, _ROCM))


def kind(what: str) -> str | None:
    """The class of a HIP error by HIP's own wording, None where the shared classes must say."""
    return next((k for k, pattern in CLASSES if pattern.search(what)), None)


def found(logs: list[Log]) -> list[tuple[str | None, LogLine, str]]:
    """(kind, line, what failed) for every failure in HIP's, the HSA runtime's or amdgpu's wording; the kind
    is None where HIP's error string is CUDA's and the shared classes must say."""
    out: list[tuple[str | None, LogLine, str]] = []
    for line, m in grep(logs, _HIP):
        if m["c"] is not None:
            out.append(("p2p", line, f"IPC handle: {m['c'].strip().rstrip('.')}"))
        elif m["xgmi"] is not None:  # RCCL's topology names an xGMI peer it cannot see: init stops there
            out.append(("driver", line, f"xGMI topology: {m['xgmi'].strip()} (a GPU hidden from this process, or "
                                         "NCCL_TOPO_FILE from another machine)"))
        elif m["rocr"] is not None or m["smi"] is not None:
            if (log := nccl_log(line.text)) is not None and log.level == "INFO":
                continue  # a ROCr error RCCL ignored and went on
            if m["rocr"] is not None:
                out.append((kind(m["rocr"]), line, f"ROCr (HSA runtime): {m['rocr'].strip().rstrip('.')}"))
            else:  # rocm_smi could not read the GPUs: the driver's sysfs, or a container that hides it
                out.append(("driver", line, f"{m['smi'].rstrip(':')} {m['smi2'].strip()}".strip()))
        elif m["node"] is not None:
            out.append(("kernel", line, f"memory access fault on GPU node-{m['node']} at {m['addr']} "
                                        f"({m['why'].strip().rstrip('.')})"))
        else:
            what = (m["a"] or " ".join(g for g in (m["b"], m["b2"]) if g)).strip().rstrip(".'")
            out.append((kind(what), line, what))
    for line, m in grep(logs, _AMDGPU):
        pci = (m["pci"] or m["pci2"] or m["pci3"] or "").strip()
        at = f" on {pci}" if pci else ""
        if m["reset"]:
            out.append(("hardware", line, f"amdgpu reset the GPU{at}"))
        elif m["ring"]:
            out.append(("hardware", line, f"GPU hang: {m['ring']}"))
        elif m["fault"]:
            out.append(("kernel", line, f"GPU page fault{at}"))
        else:
            out.append(("hardware", line, f"{m['ras']}{at}"))
    return out


def fold_echoes(found: dict[str, list[tuple[LogLine, str]]]) -> None:
    """A `[FATAL ERROR]: HIP failure: 'X'` line joins the failure it repeats (a WARN whose error is X, in
    another class), so one failed call is one cause; alone, it keeps its own class."""
    for kind_, items in list(found.items()):
        keep: list[tuple[LogLine, str]] = []
        for line, what in items:
            home = next(((k, w) for k, others in found.items() if k != kind_ for other, w in others
                         if not FATAL.search(other.text) and w.lower().endswith(what.lower())), None) \
                if FATAL.search(line.text) else None
            if home is None:
                keep.append((line, what))
            else:
                found[home[0]].append((line, home[1]))
        if keep:
            found[kind_] = keep
        else:
            del found[kind_]
