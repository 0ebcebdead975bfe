"""Causes on the GPU side that reach a job's log through NCCL, nccl-tests or the framework: these are no
fabric faults, so each is named as what it is (GPU memory, peer-to-peer access, the NVSwitch fabric
manager, the driver, a GPU hardware fault) and the operator is not sent after the network.

Wording read: NCCL's `Cuda failure 'X'` (every release) and `Cuda failure N 'X'` (2.19 on, checks.h), `failed to
open CUDA IPC handle : N X` and `cudaIpcGetMemHandle failed : X` (transport/p2p.cc), `P2P is disabled between
NVLINK connected GPUs A and B ...` (2.12 on, graph/paths.cc); nccl-tests' `HOST: Test CUDA failure common.cu:N 'X'`
and `HOST: Test NCCL failure common.cu:N 'unhandled cuda error ...'`; torch's `CUDA error: X` and `CUDA out of
memory.`; `cuda runtime error (N) : X`; CUDA driver-API names such as `CUDA_ERROR_TOO_MANY_PEERS: X`; the kernel's
`NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus.` and `NVRM: GPU 0000:b3:00.0 ... has fallen
off the bus`; NVLink SHARP (NVLS) setup, a `Cuda failure` on a line naming transport/nvls.cc (2.17 on) and
`Failed to bind NVLink SHARP (NVLS) Multicast memory of size N : CUDA error N 'X'` (2.27 on); a `Cuda failure` on
a line naming transport/p2p.cc, a peer GPU's memory mapped (its cuMem handle imported, 2.19 on, or CUDA IPC).
The error strings are cudaGetErrorString's.

On AMD GPUs (RCCL, told by its own lines: explain/rocm.py) the same causes keep their ids and scores, read
HIP's, the HSA runtime's and amdgpu's wordings as well, and speak of AMD's tools.
"""

from __future__ import annotations

import re

from provisioner.explain import rocm
from provisioner.explain.evidence import evidence, grep
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.explain.rules_job import TEST_HOST
from provisioner.explain.rules_shm import SHM_SOURCE, same_name_hint
from provisioner.parsers._text import unique
from provisioner.parsers.nccl_line import nccl_log

_CUDA = re.compile(
    r"Cuda failure\s+(?:[\w./-]+:[0-9]+\s+)?(?:[0-9]+\s+)?'(?P<a>[^']+)'?"
    r"|CUDA error(?: [0-9]+ at \S+)?:\s*(?P<b>[^.\n]+)"
    r"|cuda runtime error \([0-9]+\)\s*:\s*(?P<c>.+?)(?: at \S+)?$"
    r"|(?:failed to open CUDA IPC handle|cudaIpcGetMemHandle failed)\s*:\s*(?:[0-9]+\s+)?(?P<d>.+)"
    r"|(?P<e>CUDA out of memory)"
    r"|CUDA_ERROR_\w+:\s*(?P<f>.+)"
    r"|NVLS\)? Multicast memory .*?CUDA error [0-9]+ '(?P<g>[^']+)'",
    re.I,
)
# NVLink SHARP (NVLS) setup: NCCL's source file (transport/nvls.cc) on a `Cuda failure` line, or its own bind
# failure (2.27 on: `Failed to bind NVLink SHARP (NVLS) Multicast memory of size N : CUDA error N 'X'`).
_NVLS = re.compile(r"transport/nvls\.cc|\(NVLS\) Multicast", re.I)
# A `Cuda failure` NCCL's P2P transport reports (transport/p2p.cc) comes from mapping a peer GPU's memory: the
# cuMem import of its handle (P2P/CUMEM, 2.19 on) or CUDA IPC (P2P/IPC).
_P2P_SOURCE = re.compile(r"transport/p2p\.cc")
# The peer's GPU not visible to the process that imports its memory.
_UNSEEN_PEER = re.compile(r"invalid device ordinal|invalid device\b", re.I)
# NCCL's summary of a CUDA failure, as NCCL, nccl-tests and frameworks print it.
_UNHANDLED = re.compile(r"unhandled cuda error|ncclUnhandledCudaError", re.I)
_P2P_DISABLED = re.compile(r"P2P is disabled between NVLINK connected GPUs (?P<a>[0-9]+) and (?P<b>[0-9]+)")
# The driver may split `fallen off the bus` over several NVRM lines, the GPU's address on the first.
_XID = re.compile(r"NVRM: Xid \((?P<pci>[^)]*)\):\s*(?P<code>[0-9]+)|NVRM:(?: (?:The NVIDIA )?GPU (?:at )?"
                  r"(?P<pci2>[0-9a-fA-F:.]+))?.*(?P<bus>fallen off the bus)", re.I)

# Xid codes (NVIDIA's Xid catalogue) that are the GPU, its memory or its links failing, not the program.
_XID_HARDWARE = {48: "double-bit ECC error", 61: "internal micro-controller breakpoint", 62: "internal "
                 "micro-controller halt", 63: "ECC page retirement or row remapping", 64: "row remapping failure",
                 74: "NVLink error", 79: "GPU has fallen off the bus", 92: "high single-bit ECC error rate",
                 94: "contained ECC error", 95: "uncontained ECC error", 119: "GSP RPC timeout", 120: "GSP error"}
_XID_PROGRAM = {13: "graphics engine exception", 31: "GPU memory page fault", 43: "GPU stopped processing",
                45: "preemptive cleanup after another error"}

# No GPU visible to the process, or fewer than it asked for: torch's `No CUDA GPUs are available` (torch/cuda) and
# `ProcessGroupNCCL is only supported with GPUs, no GPUs found!`, nccl-tests' `Invalid number of GPUs: N
# requested but only M were found.`; CUDA's own words (`no CUDA-capable device is detected`, `invalid device
# ordinal`) reach _CUDA and are classed below.
_NO_GPU = re.compile(r"(?P<none>No CUDA GPUs are available|only supported with GPUs, no GPUs found)"
                     r"|Invalid number of GPUs: (?P<asked>[0-9]+) requested but only (?P<seen>[0-9]+) were found")

_CLASSES: list[tuple[str, re.Pattern[str]]] = [
    ("hardware", re.compile(r"uncorrectable ECC|ECC error|fallen off the bus|GPU is lost|hardware stack error|"
                            r"unrecoverable", re.I)),
    ("fabric", re.compile(r"system not yet initiali[sz]ed|system not ready", re.I)),
    ("p2p", re.compile(r"peer access|peer mapping resources|TOO_MANY_PEERS|mapping of buffer object failed|"
                       r"CUDA IPC", re.I)),
    ("visibility", re.compile(r"no CUDA-capable device|invalid device ordinal|No CUDA GPUs|no GPUs found|"
                              r"GPUs requested", re.I)),
    ("driver", re.compile(r"driver version is insufficient|initiali[sz]ation error|"
                          r"forward compatibility|unsupported display driver|busy or unavailable|"
                          r"driver shutting down|no kernel image is available|named symbol not found", re.I)),
    ("memory", re.compile(r"out of memory", re.I)),
    ("kernel", re.compile(r"illegal memory access|unspecified launch failure|illegal instruction|misaligned "
                          r"address|device-side assert|launch timed out", re.I)),
]

_CAUSES: dict[str, tuple[str, str, str, int]] = {  # kind -> id, title, fix, score
    "hardware": ("gpu-hardware-fault", "a GPU reported a hardware fault",
                 "Drain the host: read the Xid lines in `dmesg` / `journalctl -k`, `nvidia-smi -q -d ECC,"
                 "ROW_REMAPPER` for ECC and row-remapping state; reset the GPU (`nvidia-smi -r`) or reboot, and "
                 "replace the GPU or fix its PCIe/NVLink seating if it recurs.", 94),
    "fabric": ("gpu-fabric-manager", "the NVSwitch fabric was not ready (fabric manager)",
               "On NVSwitch systems (HGX/DGX): `systemctl status nvidia-fabricmanager` on the host named and "
               "`nvidia-smi -q | grep -A2 Fabric` (State Completed, Status Success); enable and start it with the "
               "same version as the driver (`nvidia-smi` driver version, fabric manager package), then reset the "
               "GPUs or reboot. NVLink SHARP (NVLS) multicast failing while plain NVLink works is the same service "
               "or the NVSwitches (its log, `/var/log/fabricmanager.log`); set NCCL_NVLS_ENABLE=0 only to confirm.",
               88),
    "p2p": ("gpu-p2p-failure", "GPU peer-to-peer (P2P/NVLink) access failed",
            "Check P2P between the GPUs on the host named (`nvidia-smi topo -p2p r`, `nvidia-smi topo -m`): PCIe ACS "
            "or the IOMMU blocking peer traffic (`lspci -vvv | grep ACSCtl`, iommu=pt), a VM without P2P, consumer "
            "GPUs without P2P, or more peers than the driver maps (more than 8 GPUs in one process); "
            "NCCL_P2P_DISABLE=1 (or NCCL_P2P_LEVEL) makes the job run through host memory meanwhile.", 86),
    "driver": ("cuda-driver", "CUDA could not use the GPU (driver, build, device visibility or mode)",
               "On the host named: `nvidia-smi` (driver loaded, GPUs listed, Compute Mode Default, no stale "
               "processes), that the CUDA runtime the job ships fits the driver (`nvidia-smi` CUDA version), "
               "that its libraries were built for this GPU (`no kernel image` or, from NCCL's kernels, `named symbol "
               "not found`: the build lacks the GPU's compute capability, `nvidia-smi --query-gpu=compute_cap "
               "--format=csv`, NCCL's NVCC_GENCODE), CUDA_VISIBLE_DEVICES and ranks "
               "per node against the GPUs present, and dmesg for Xid errors.", 86),
    "visibility": ("gpu-not-visible", "a process saw fewer GPUs than it asked for",
                   "On the host named, in the job's own environment: `nvidia-smi -L` (the GPUs the host has; none "
                   "listed is the driver) and `env | grep VISIBLE_DEVICES` (set but empty: none; unset: all). "
                   "Start at most as many ranks per host as it has GPUs (torchrun --nproc-per-node, mpirun "
                   "-npernode, nccl-tests -g), give each rank its GPUs (srun --gpus-per-task or --gres=gpu:N, a "
                   "container's --gpus / NVIDIA_VISIBLE_DEVICES, a pod's nvidia.com/gpu limit) and pick the "
                   "device by the local rank, not the global one; where each rank's CUDA_VISIBLE_DEVICES holds "
                   "only its own GPU, that GPU is device 0 to it.", 87),
    "memory": ("cuda-failure", "GPU memory ran out (CUDA out of memory)",
               "Check what holds GPU memory on the host named (`nvidia-smi`: other processes, a leftover job); "
               "lower the job's memory use (batch size, activation checkpointing) or NCCL's buffers "
               "(NCCL_BUFFSIZE, fewer channels). Not a network problem.", 72),
    "kernel": ("cuda-failure", "a GPU kernel faulted (illegal access or launch failure)",
               "Usually the application or a library (rerun with CUDA_LAUNCH_BLOCKING=1, compute-sanitizer); if "
               "dmesg shows Xid 48/63/64/74/79/94/95 for that GPU at the same time, it is the GPU: check `nvidia-smi` "
               "and the Xid lines on the host named.", 70),
    "other": ("cuda-failure", "a CUDA call failed",
              "Check the GPU on the host named (`nvidia-smi`, Xid errors in dmesg) and the job's GPU memory use; "
              "rerun with NCCL_DEBUG=INFO to see the CUDA call that failed.", 68),
}


_ROOT = " This is the GPU side, not the network: the errors of other ranks and connections after it follow from it."


def _host(line: LogLine) -> str | None:
    m = TEST_HOST.match(line.text)
    return line.host or (m["host"] if m else None)


def _kind(what: str, amd: bool = False) -> str:
    hip = rocm.kind(what) if amd else None
    return hip or next((kind for kind, pattern in _CLASSES if pattern.search(what)), "other")


def _found(logs: list[Log], amd: bool) -> dict[str, list[tuple[LogLine, str]]]:
    """kind -> (line, what it says failed) for every CUDA (or, with `amd`, HIP) failure in the logs."""
    found: dict[str, list[tuple[LogLine, str]]] = {}

    def add(kind: str, line: LogLine, what: str) -> None:
        found.setdefault(kind, []).append((line, what))

    for line, m in grep(logs, _CUDA):
        if (log := nccl_log(line.text)) is not None and log.level == "INFO":
            continue  # an error NCCL ignored (CUDACHECKIGNORE logs it at INFO)
        if SHM_SOURCE.search(line.text):
            continue  # pinning a /dev/shm segment: rules_shm names it
        what = next(g for g in m.groups() if g is not None).strip().rstrip(".'")
        # NVLink SHARP setup failing on a multicast call (`invalid argument`, `operation not supported`, 401
        # `the operation cannot be performed in the present state`, 800-series codes) is the NVSwitch fabric: the
        # fabric manager restarted under live GPUs, not running, or at another version than the driver. What
        # names its own class (out of memory, the driver not initialised) keeps it. A CUDA IPC handle that does
        # not open is peer access failing whatever the error (`invalid argument` when the peer is in another
        # container or machine).
        kind = ("p2p" if m["d"] is not None or (amd and rocm.P2P_SOURCE.search(line.text))
                else _kind(what, amd))
        if kind == "other" and not amd and _NVLS.search(line.text):
            kind = "fabric"
        elif (kind in ("other", "driver", "visibility") and not amd and _P2P_SOURCE.search(line.text)
              and _kind(what) != "memory"):
            kind = "p2p"  # mapping a peer GPU's memory (P2P/CUMEM, P2P/IPC): the peer, not this GPU's driver
        what = f"NVLS multicast: {what}" if kind == "fabric" and _NVLS.search(line.text) else what
        add(kind, line, what if m["d"] is None else f"CUDA IPC handle: {what}")
    for line, m in grep(logs, _NO_GPU):
        add("visibility", line, "no GPU visible" if m["none"] else f"{m['asked']} GPUs asked, {m['seen']} found")
    for line, m in grep(logs, _P2P_DISABLED):
        add("p2p", line, f"P2P disabled between NVLink-connected GPUs {m['a']} and {m['b']}")
    for line, m in grep(logs, _XID):
        if m["bus"]:
            add("hardware", line, f"GPU {m['pci2'] or ''} has fallen off the bus".replace("  ", " "))
            continue
        code = int(m["code"])
        name = _XID_HARDWARE.get(code) or _XID_PROGRAM.get(code) or "see NVIDIA's Xid catalogue"
        add("hardware" if code in _XID_HARDWARE else "kernel", line, f"Xid {code} ({name}) on {m['pci']}")
    if amd:
        for hip_kind, line, what in rocm.found(logs):
            add(hip_kind or _kind(what), line, what)
        rocm.fold_echoes(found)
    if not found and (summary := grep(logs, _UNHANDLED)):
        for line, _ in summary:
            add("other", line, rocm.SUMMARY if amd else
                "unhandled cuda error (NCCL's summary; the CUDA call's own error is not in the log)")
    return found


def _unseen_peer_hint(what: list[str]) -> str:
    if not any(_UNSEEN_PEER.search(w) for w in what):
        return ""
    return (" The process could not see the peer's GPU whose memory it maps: ranks of one node given one GPU each "
            "(srun --gpus-per-task=1, one GPU per container or pod) cannot import each other's memory. Give every "
            "rank of a node all its GPUs (srun --gpus-per-node with --gpu-bind=none, or one container holding the "
            "node's GPUs) and pick the rank's GPU in the job; across containers the memory handle passes as a file "
            "descriptor, which needs the pidfd rights (--cap-add SYS_PTRACE, a shared PID namespace). "
            "NCCL_CUMEM_ENABLE=0 (legacy CUDA IPC) or NCCL_P2P_DISABLE=1 only to confirm.")


def gpu_causes(logs: list[Log]) -> list[Cause]:
    amd = rocm.is_rocm(logs)
    found = _found(logs, amd)
    if amd and "fabric" in found:  # no fabric manager on AMD: the driver's
        found.setdefault("driver", []).extend(found.pop("fabric"))
    by_id: dict[str, Cause] = {}
    summary = [line for line, _ in grep(logs, _UNHANDLED)]
    for kind in [k for k, _ in _CLASSES] + ["other"]:
        items = found.get(kind)
        if not items:
            continue
        cause_id, title, fix, score = (rocm.CAUSES if amd else _CAUSES)[kind]
        if cause_id in by_id:  # one cuda-failure cause: the most telling class found names it
            continue
        what = unique([w.strip().rstrip(":").strip() for _, w in items])
        lines = [line for line, _ in items]
        where = unique([h for line in lines + summary if (h := _host(line))])
        # A title that already says what failed (`CUDA out of memory`) is not followed by the same words again.
        shown = [w for w in what[:2] if w.lower() not in title.lower()]
        if not where:  # no host in the log: the fix cannot point at one by name
            fix = fix.replace("On the host named", "On the host that wrote this log").replace(
                "on the host named", "on the host that wrote this log")
        by_id[cause_id] = Cause(
            id=cause_id, title=f"{title}: {', '.join(shown)}" if shown else title,
            detail=f"{'; '.join(what[:4])}" + (f" on {', '.join(where)}" if where else "") + "." + _ROOT
                   + (same_name_hint(lines) + _unseen_peer_hint(what) if kind == "p2p" else ""),
            fix=fix, score=score, hosts=where, evidence=evidence(lines + summary[:2]),
            settings=(["NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"] if kind == "p2p"
                      else ["NCCL_NVLS_ENABLE"] if kind == "fabric" and not amd else []),
        )
    return list(by_id.values())



# A kernel fault or an unnamed CUDA failure can follow a network error on the same process (NCCL aborting the
# communicator under a running kernel): then the order in the log tells which came first. Setup failures (driver,
# visibility, P2P, fabric manager), memory and GPU hardware faults name their own cause whatever came before.
_FOLLOWERS = {_CAUSES[kind][1] for kind in ("kernel", "other")} | {rocm.CAUSES[kind][1] for kind in ("kernel", "other")}
# Causes that are a failure of the network or its transport, each with the lines that show it.
NETWORK = {"ib-completion-error", "ib-port-event", "ib-queue-error", "hca-firmware-fault", "verbs-resource-failure",
           "ofi-failure", "peer-unreachable"}
_PROCESS = re.compile(r"(?:^|\s)[^\s:]+:(?P<pid>[1-9][0-9]*):[1-9][0-9]*\s+\[")


def _process(line: LogLine) -> tuple[str, str | None, int | None, str | None]:
    """Where a line came from: its file, host, rank and (NCCL's prefix) process id, as far as the log says."""
    m = _PROCESS.search(line.text)
    return line.file, _host(line), line.rank, m["pid"] if m else None


def _same(a: tuple[str, str | None, int | None, str | None], b: tuple[str, str | None, int | None, str | None]
          ) -> bool:
    return a[:2] == b[:2] and all(x is None or y is None or x == y for x, y in zip(a[2:], b[2:], strict=True))


def _lines(cause: Cause, logs: dict[tuple[str, int], LogLine]) -> list[LogLine]:
    return [line for e in cause.evidence if (line := logs.get((e.file, e.line))) is not None]


def _firsts(cause: Cause, logs: dict[tuple[str, int], LogLine]) -> list[LogLine]:
    """The first line of a network cause's signal in each process that logged it: its evidence stops at a few lines,
    so a process whose first error comes later in the log is read from the signal (the evidence where a rule
    keeps none)."""
    lines = [line for at in cause.signal if (line := logs.get(at)) is not None] or _lines(cause, logs)
    first: dict[tuple[str, str | None, int | None, str | None], LogLine] = {}
    for line in lines:
        if (where := _process(line)) not in first or line.number < first[where].number:
            first[where] = line
    return list(first.values())


def _follows(later: list[LogLine], earlier: list[LogLine]) -> LogLine | None:
    """The first of `earlier` that some line of the same process printed before each of `later`, when every line
    of `later` has one (else None)."""
    found = []
    for line in later:
        before = [e for e in earlier if e.number < line.number and _same(_process(e), _process(line))]
        if not before:
            return None
        found.append(min(before, key=lambda e: e.number))
    return min(found, key=lambda e: e.number) if found else None


def in_log_order(causes: list[Cause], logs: list[Log]) -> list[Cause]:
    """A kernel fault or CUDA failure and a network error on the same process: the one the process logged first
    ranks first. A CUDA error after the network error is its consequence, and its text says so instead of naming
    the GPU as what the other errors follow from."""
    by_line = {(line.file, line.number): line for log in logs for line in log.lines}
    network = [(c, _firsts(c, by_line)) for c in causes if c.id in NETWORK]
    out = []
    for cause in causes:
        if cause.id != "cuda-failure" or cause.title.split(":")[0] not in _FOLLOWERS or _ROOT not in cause.detail:
            out.append(cause)
            continue
        gpu = _lines(cause, by_line)
        after = [(c, first) for c, lines in network if gpu and (first := _follows(gpu, lines))]
        before = [c for c, lines in network if lines and _follows(lines, gpu)]
        if after:
            net, first = min(after, key=lambda item: item[1].number)
            note = (f" The same process logged a network error first (line {first.number}: {net.title}); this CUDA "
                    "error came after it and is likely a consequence of that failure, not its cause.")
            cause = cause.model_copy(update={"detail": cause.detail.replace(_ROOT, note),
                                             "score": min([cause.score] + [c.score - 1 for c, _ in after])})
        elif before:
            cause = cause.model_copy(update={"score": max([cause.score] + [c.score + 1 for c in before])})
        out.append(cause)
    return out
