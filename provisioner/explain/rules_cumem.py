"""GPU memory NCCL maps through CUDA's virtual memory API (cuMem) and shares between processes: handles it could
not export or import, an NCCL built against a CUDA without the cuMem feature in use, and symmetric memory (windows
registered on every rank at one offset) that the communicator cannot offer, a buffer it cannot take, or a
reserved address range that is full. None is the network: each is named as the node, library or program setting
it is.

Wording read (NCCL's source, by release): the memory manager behind memory suspend and resume (2.29.7 on) prefixes
its warnings `MemManager:`; those read here name the shareable handle it could not make or use, FABRIC (shared
through IMEX on multi-node NVLink) or a POSIX file descriptor (passed between the processes of one node). The stub
allocators of a library compiled against an older CUDA say `CUMEM not supported prior to CUDA 11.3` (2.18 on) and
`CUMEM Host is not supported prior to CUDA 12.2` (2.23 on). Symmetric memory (2.27 on): a device communicator or
GPU-initiated networking asked of a communicator that cannot serve it (`Communicator does not support symmetric
memory!`, 2.28 on, after an INFO line giving the settings that decided it, 2.29 on); a registered buffer spread
over several physical cuMem segments or backed by host memory (2.30 on: put-with-signal, window registration);
and the allocator of the reserved window range finding no room (`Allocation failed. No suitable space found to
accommodate size=0x.. within limit=0x..`, 2.28 on). Suspend and resume themselves (2.29.7 on) are refused with
the manager off (NCCL_DISABLE_MEM_MANAGER), with split-share communicators (a WARN without the prefix), and out of
order (`Already suspended`, `Not in suspended state`); they fail copying buffers to or from pinned host memory, or
in the barrier and exchange every rank makes on resume, or mapping a peer's buffer again. The manager also keeps
the books of every cuMem buffer it maps and the peers it exports each to: an entry missing, of the wrong kind or
exported twice, a call after the manager was torn down, a peer's buffer without the handle its owner should have
sent on resume, or an unknown handle type is its bookkeeping gone wrong; a small host allocation of its own
failing is the process out of host memory; statistics asked of a disabled manager are refused. Each WARN returns
an error to the program; its INFO lines (initialised, suspended, resumed, an untrack size mismatch) name nothing.
"""

from __future__ import annotations

import re

from provisioner.explain.evidence import evidence, grep, multi_node
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.parsers._text import unique

# The memory manager's handle warnings: which handle type each one names.
_HANDLES: list[tuple[str, re.Pattern[str]]] = [
    ("fabric", re.compile(r"MemManager: (?:cuMemExportToShareableHandle \(FABRIC\) failed|FABRIC handle not valid)")),
    ("cross-node-fd", re.compile(r"MemManager: Cannot re-import peer buffer from rank (?P<rank>[0-9]+) \(different "
                                 r"node\) using POSIX FD")),
    ("fd", re.compile(r"MemManager: Failed to get FD from rank (?P<rank>[0-9]+)")),
    ("import", re.compile(r"MemManager: cuMemImportFromShareableHandle failed\b.*?(?:\(curet=(?P<code>[0-9]+)\))?$")),
]
# CUresult codes an import gives back, in the driver API's own names.
_CURESULT = {1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY", 3: "CUDA_ERROR_NOT_INITIALIZED",
             101: "CUDA_ERROR_INVALID_DEVICE", 201: "CUDA_ERROR_INVALID_CONTEXT", 304: "CUDA_ERROR_OPERATING_SYSTEM",
             400: "CUDA_ERROR_INVALID_HANDLE", 500: "CUDA_ERROR_NOT_FOUND", 800: "CUDA_ERROR_NOT_PERMITTED",
             801: "CUDA_ERROR_NOT_SUPPORTED", 999: "CUDA_ERROR_UNKNOWN"}
_FABRIC_FIX = ("FABRIC handles (multi-node NVLink, GB200/GB300 racks) are shared through IMEX: on the hosts named "
               "`ls /dev/nvidia-caps-imex-channels/` shows `channel0` inside the job's container, `systemctl status "
               "nvidia-imex` and `nvidia-imex-ctl -N` show every node of the NVLink domain Connected, and "
               "`nvidia-smi -q | grep -A4 Fabric` shows State Completed with one ClusterUUID/CliqueId (the fabric "
               "manager running). ")
_FD_FIX = ("POSIX file-descriptor handles pass between the ranks of one node over abstract Unix sockets, which "
           "do not cross network namespaces: ranks of one node in separate containers need one container, or the "
           "host's network and IPC namespaces (`--network=host --ipc=host`, hostNetwork/hostIPC in Kubernetes); "
           "NCCL_IPC_USE_ABSTRACT_SOCKET=0 (2.29.2 on) with one /tmp for the containers is the other way. ")

# Memory suspend and resume refused or failed, by what went wrong.
_SUSPEND: list[tuple[str, re.Pattern[str]]] = [
    ("disabled", re.compile(r"MemManager: (?:Suspend|Resume) (?:failed|not supported), memory manager is disabled")),
    ("shared", re.compile(r"Memory (?:suspend|resume) not supported with split_share communicators")),
    ("order", re.compile(r"MemManager: (?:Already suspended|Not in suspended state)")),
    ("host", re.compile(r"MemManager: Failed to (?:allocate CPU backup|copy to CPU backup: (?P<err>.+))")),
    ("restore", re.compile(r"MemManager: Failed to restore from CPU backup: (?P<err>.+?)(?: \(backup preserved\))?$")),
    ("peers", re.compile(r"MemManager: (?:(?:Final b|B)arrier failed during resume|AllGather counts failed"
                         r"|(?:Send to|Recv from) rank [0-9]+ failed - handle exchange incomplete)")),
    ("remap", re.compile(r"MemManager: ncclCuMemMapAndSetAccess failed for re-imported ptr=")),
]
_SUSPEND_SAY = {
    "disabled": ("the memory manager is off", "NCCL_DISABLE_MEM_MANAGER=1 turns the memory manager off: unset it "
                 "where the program suspends communicators. "),
    "shared": ("the communicator shares its resources with others (split_share)", "Communicators made with "
               "splitShare (NCCL_COMM_SPLIT_SHARE_RESOURCES=1, or the config field) share one memory manager and "
               "cannot be suspended: create them without it. "),
    "order": ("the program suspended a communicator twice or resumed one not suspended", "Pair every "
              "ncclCommSuspend with one ncclCommResume on the same communicator (the framework's sleep/wake_up). "),
    "host": ("the copy of GPU buffers into pinned host memory failed", "Leave host memory for the backup: the "
             "node's free RAM and the container's memory limit must hold the communicator's buffers (pinned). "),
    "restore": ("copying the buffers back to the GPU failed", "The GPU must have room again before resume: free "
                "what the program allocated while suspended; a CUDA error here may be the GPU itself. "),
    "peers": ("a rank did not join the exchange every rank makes on resume", "Every rank of the communicator must "
              "call ncclCommResume: a rank that did not, or that died or lost its bootstrap connection, stops "
              "the others; read that rank's own log. "),
    "remap": ("mapping a peer's buffer into this GPU again failed", "The peer's memory is mapped again at its old "
              "address on resume: the CUDA error before this line says why (GPU memory the program took while "
              "suspended, peer access between the two GPUs lost). "),
}
# The manager's books of the buffers it maps and exports: which entry or peer a warning names, where it does.
_BOOKS = re.compile(
    r"MemManager: (?:(?P<gone>Cannot (?:track allocation|untrack allocation|mark export for) ptr=\S+,? manager not "
    r"initialized)|Cannot mark export for ptr=\S+ - (?:not found in tracked entries|this is an imported buffer)"
    r"|Buffer ptr=\S+ already exported to peer rank (?P<peer>[0-9]+)"
    r"|Could not find matching handle info for ptr=\S+ from rank (?P<owner>[0-9]+)"
    r"|Unknown handle type -?[0-9]+ for peer import)")
_HOST_ALLOC = re.compile(r"MemManager: Failed to (?:allocate memory entry|grow exportedPeerRanks array|allocate "
                         r"allCounts)")
_STATS_OFF = re.compile(r"MemManager: MemStats not supported, memory manager is disabled")

_CUMEM_CUDA = re.compile(r"CUMEM (?P<host>Host )?(?:is )?not supported prior to CUDA (?P<cuda>[0-9]+\.[0-9]+)")

_SYM_UNSUPPORTED = re.compile(r"Communicator does not support symmetric memory")
_SYM_WHY = re.compile(r"Symmetric memory is not supported\. cuMemEnable (?P<cumem>-?[0-9]+),\s*globalGinSupport "
                      r"(?P<gin>-?[0-9]+)(?:,\s*cuMemGdrSupport (?P<gdr>-?[0-9]+))?")
# A buffer symmetric memory cannot take: several physical segments behind one address range, host memory behind it
# where that is not allowed, or memory of a kind it does not handle.
_SYM_LAYOUT = re.compile(
    r"(?P<multi>(?:currently )?does not support VAs backed by multiple physical cuMem segments"
    r"|span multiple physical segments requires DMABUF)"
    r"|(?P<host>does not support VAs with host-backed cuMem segments|contains CPU-backed physical segments)"
    r"|(?P<kind>Segment [0-9]+ has unsupported location type)")
_SYM_SPACE = re.compile(r"Allocation failed\. No suitable space found to accommodate size=(?P<size>0x[0-9a-fA-F]+) "
                        r"within limit=(?P<limit>0x[0-9a-fA-F]+)")


def _where(lines: list[LogLine]) -> list[str]:
    return unique([h for line in lines if (h := line.host)])


def _on(where: list[str]) -> str:
    return f" on {', '.join(where)}" if where else ""


def _gib(hex_bytes: str) -> str:
    return f"{int(hex_bytes, 16) / 2**30:.1f} GiB"


def _handles(logs: list[Log]) -> list[Cause]:
    kinds: list[str] = []
    lines: list[LogLine] = []
    codes: list[str] = []
    for kind, pattern in _HANDLES:
        for line, m in grep(logs, pattern):
            kinds.append(kind)
            lines.append(line)
            if kind == "import" and m["code"]:
                codes.append(_CURESULT.get(int(m["code"]), f"CUresult {m['code']}"))
    if not lines:
        return []
    lines.sort(key=lambda line: (line.file, line.number))
    where = _where(lines)
    fabric = "fabric" in kinds or "cross-node-fd" in kinds
    fd = "fd" in kinds
    handle = "FABRIC handles (IMEX)" if fabric and not fd else "file-descriptor handles" if fd and not fabric \
        else "shareable handles"
    fix = _FABRIC_FIX if fabric and not fd else _FD_FIX if fd and not fabric else _FABRIC_FIX + _FD_FIX
    if "cross-node-fd" in kinds:
        fix = ("Ranks of other nodes shared memory with POSIX file descriptors, which do not cross nodes: on "
               "multi-node NVLink the driver must offer FABRIC handles (a driver and CUDA of 12.3 or later, the "
               "fabric manager and IMEX running). " + fix)
    returned = f" (the import returned {', '.join(unique(codes))})" if codes else ""
    return [Cause(
        id="cumem-handle-sharing", title=f"GPU memory could not be shared between ranks again: {handle}",
        detail=f"NCCL's memory manager{_on(where)} could not export or import the cuMem handles of the memory its "
               f"ranks share{returned}, as it does when a suspended communicator resumes (NCCL 2.29.7 on, "
               "ncclCommMemSuspend/ncclCommMemResume): the buffers it skipped are not mapped and the "
               "communicator does not come back whole. The node's memory sharing is at fault, not the network.",
        fix=fix + "NCCL_CUMEM_ENABLE=0 only to confirm that the handles are the cause: without cuMem there is no "
                  "memory suspend and resume.",
        score=84, hosts=where, evidence=evidence(lines),
        settings=["NCCL_CUMEM_ENABLE", *(["NCCL_IPC_USE_ABSTRACT_SOCKET"] if fd else [])],
    )]


def _cumem_cuda(logs: list[Log]) -> list[Cause]:
    found = grep(logs, _CUMEM_CUDA)
    if not found:
        return []
    lines = [line for line, _ in found]
    where = _where(lines)
    host = any(m["host"] for _, m in found)
    need = max((m["cuda"] for _, m in found), key=lambda v: tuple(int(p) for p in v.split(".")))
    built = unique([v for log in logs if log.nccl and (v := log.nccl.cuda_version)])
    against = f" (its version line says it was built for CUDA {', '.join(built)})" if built else ""
    what = "cuMem host memory" if host else "cuMem"
    setting = "NCCL_CUMEM_HOST_ENABLE" if host else "NCCL_CUMEM_ENABLE"
    return [Cause(
        id="cumem-cuda-too-old", title=f"the NCCL library was built against a CUDA older than {need}, while "
        f"{what} is in use",
        detail=f"The NCCL the job loaded{_on(where)}{against} was compiled without {what}, which needs CUDA {need} "
               "at build time, and was asked to use it anyway, so the allocation failed. The driver on the node may "
               "be newer: what counts is the CUDA the library was built for.",
        fix=f"Use an NCCL build for CUDA {need} or later that matches the job's CUDA (`NCCL version X+cudaY` in "
            "the log; the framework's bundled NCCL, or LD_LIBRARY_PATH/LD_PRELOAD picking an older libnccl.so.2 "
            f"from the system), and a driver that supports that CUDA (`nvidia-smi`). {setting}=0 only to confirm.",
        score=86, hosts=where, evidence=evidence(lines), settings=[setting],
    )]


def _sym_unsupported(logs: list[Log]) -> list[Cause]:
    found = grep(logs, _SYM_UNSUPPORTED)
    if not found:
        return []
    why = grep(logs, _SYM_WHY)
    lines = [line for line, _ in found] + [line for line, _ in why[:1]]
    where = _where(lines)
    reasons: list[str] = []
    if why:
        m = why[0][1]
        if m["cumem"] == "0":
            reasons.append("cuMem is off (NCCL_CUMEM_ENABLE=0 in the environment, or a driver, CUDA or container "
                           "without it)")
        if m["gin"] == "0" and multi_node(logs):
            reasons.append("the ranks span nodes and the network offers no GPU-initiated networking (GIN"
                           + (": the NICs cannot reach cuMem memory by GPUDirect RDMA" if m["gdr"] == "0" else "")
                           + ")")
    said = f" NCCL's own reason: {'; '.join(reasons)}." if reasons else ""
    return [Cause(
        id="symmetric-memory-unsupported", title="symmetric memory asked of a communicator that cannot offer it",
        detail=f"The program asked NCCL{_on(where)} for symmetric memory (a device communicator, GPU-initiated "
               "networking or a symmetric window) and NCCL had decided when the communicator was created that it "
               f"cannot serve it.{said} It needs cuMem on, NCCL_WIN_ENABLE not 0, every rank reaching every other "
               "through CUDA peer-to-peer, and either all ranks in one NVLink domain or a GIN-capable network "
               "(before NCCL 2.29: one node only).",
        fix="Check `NCCL_CUMEM_ENABLE` and `NCCL_WIN_ENABLE` are not set to 0 by the job or the container image; "
            "`nvidia-smi topo -m` on each node (every GPU pair NV# or a P2P-capable PCIe path, NCCL_P2P_DISABLE "
            "unset); across nodes, a multi-node NVLink domain with IMEX, or NICs and a network plugin with GIN and "
            "GPUDirect RDMA of cuMem memory (`lsmod | grep nvidia_peermem`, or DMA-BUF: a 5.12+ kernel). "
            "NCCL_DEBUG=INFO prints `Symmetric memory is not supported.` with the settings that decided it. "
            "Turning the framework's symmetric-memory option off runs the job without it.",
        score=82, hosts=where, evidence=evidence(lines), settings=["NCCL_CUMEM_ENABLE", "NCCL_WIN_ENABLE"],
    )]


def _sym_layout(logs: list[Log]) -> list[Cause]:
    found = grep(logs, _SYM_LAYOUT)
    if not found:
        return []
    lines = [line for line, _ in found]
    where = _where(lines)
    multi = any(m["multi"] for _, m in found)
    host = any(m["host"] for _, m in found)
    shape = ("spread over several physical memory segments" if multi and not host else "backed by host memory"
             if host and not multi else "not one allocation of GPU memory")
    return [Cause(
        id="symmetric-buffer-layout", title=f"a buffer registered for symmetric memory is {shape}",
        detail=f"NCCL{_on(where)} refused a buffer the program registered as a symmetric window or passed to a "
               "put-with-signal: its address range is not one physical cuMem allocation in GPU memory as that "
               "operation needs. The program's allocator decides this, not the node or the network.",
        fix="Allocate the buffers given to symmetric memory with ncclMemAlloc (or the framework's NCCL memory "
            "pool) as one allocation each; PyTorch's PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True can lay one "
            "tensor over several segments, so leave it off for these buffers. For host-backed buffers NCCL asks "
            "for NCCL_ELASTIC_BUFFER_REGISTER=1, and on multi-node NVLink without multi-node IPC of host memory "
            "NCCL_MNNVL_ENABLE=0; registering such buffers across nodes over the network needs DMA-BUF.",
        score=80, hosts=where, evidence=evidence(lines),
        settings=["PYTORCH_CUDA_ALLOC_CONF", "NCCL_ELASTIC_BUFFER_REGISTER"],
    )]


def _sym_space(logs: list[Log]) -> list[Cause]:
    found = grep(logs, _SYM_SPACE)
    if not found:
        return []
    lines = [line for line, _ in found]
    where = _where(lines)
    m = found[0][1]
    return [Cause(
        id="symmetric-space-exhausted", title=f"no room left for a symmetric window: {_gib(m['size'])} asked of "
        f"{_gib(m['limit'])}",
        detail=f"Registering a symmetric window{_on(where)} needed {_gib(m['size'])} of the address range NCCL "
               f"reserves for a communicator's windows ({_gib(m['limit'])}: the largest GPU memory of its ranks, "
               "rounded up), and the windows already registered left no free stretch that large. The windows the "
               "program keeps registered add up past what fits: windows never deregistered, or one buffer "
               "registered again and again (NCCL 2.30.7 counts every registration of the same buffer anew: "
               "NVIDIA/nccl#2331). Not the network.",
        fix="Keep the symmetric windows a communicator holds at once below one GPU's memory: deregister windows "
            "no longer used (ncclCommWindowDeregister; the framework frees them with its symmetric tensors), "
            "register each buffer once, and size the framework's symmetric-memory pool with that headroom; the "
            "maintainers fixed counting a buffer registered twice after 2.30.7. Turn the framework's "
            "symmetric-memory option off only to confirm.",
        score=82, hosts=where, evidence=evidence(lines),
    )]


def _suspend(logs: list[Log]) -> list[Cause]:
    kinds: list[str] = []
    lines: list[LogLine] = []
    errors: list[str] = []
    for kind, pattern in _SUSPEND:
        for line, m in grep(logs, pattern):
            kinds.append(kind)
            lines.append(line)
            if "err" in pattern.groupindex and m["err"]:
                errors.append(m["err"].strip())
    if not lines:
        return []
    kinds = unique(kinds)
    lines.sort(key=lambda line: (line.file, line.number))
    where = _where(lines)
    said = f" ({', '.join(unique(errors))})" if errors else ""
    program = set(kinds) <= {"disabled", "shared", "order"}
    return [Cause(
        id="memory-suspend-failed", title=f"suspending or resuming a communicator's memory failed: "
        f"{_SUSPEND_SAY[kinds[0]][0]}",
        detail=f"NCCL's memory manager{_on(where)} refused or failed to release or restore a communicator's GPU "
               "memory (ncclCommSuspend/ncclCommResume, NCCL 2.29.7 on): "
               f"{'; '.join(_SUSPEND_SAY[k][0] for k in kinds)}{said}. "
               + ("The program's use of the call, not the node or the network." if program
                  else "The communicator is not usable until a resume succeeds."),
        fix="".join(_SUSPEND_SAY[k][1] for k in kinds) + "Turning the framework's communicator sleep off confirms it.",
        score=70 if program else 80, hosts=where, evidence=evidence(lines),
        settings=unique([s for k in kinds for s in {"disabled": ["NCCL_DISABLE_MEM_MANAGER"],
                                                     "shared": ["NCCL_COMM_SPLIT_SHARE_RESOURCES"]}.get(k, [])]),
    )]


def _books(logs: list[Log]) -> list[Cause]:
    found = grep(logs, _BOOKS)
    if not found:
        return []
    lines = [line for line, _ in found]
    where = _where(lines)
    ranks = unique([r for _, m in found for r in (m["peer"], m["owner"]) if r])
    gone = any(m["gone"] for _, m in found)
    return [Cause(
        id="mem-manager-bookkeeping", title="NCCL's memory manager lost track of a GPU buffer it maps",
        detail=f"NCCL's memory manager{_on(where)} (2.29.7 on) keeps an entry for every cuMem buffer a communicator "
               "maps and the ranks it exports each to, so that it can release and restore them on suspend and "
               "resume; here an entry was missing, of the wrong kind or exported twice"
               + (", or the manager had already been torn down" if gone else "")
               + (f" (rank{'s' if len(ranks) > 1 else ''} {', '.join(ranks)})" if ranks else "")
               + ". NCCL returned an internal error. Neither the node nor the network is at fault: the library's "
               "state, or a communicator used while it is being destroyed.",
        fix=("Check that the program does not allocate, register or free through a communicator after "
             "ncclCommDestroy/ncclCommAbort began on it (another thread, a framework's shutdown). " if gone else "")
            + "Move to the latest NCCL release; if it persists, report it to NVIDIA/nccl with the NCCL_DEBUG=INFO "
            "log (NCCL_DEBUG_SUBSYS=INIT,ALLOC). A job that never suspends communicators can run with "
            "NCCL_DISABLE_MEM_MANAGER=1, which turns the bookkeeping off.",
        score=72, hosts=where, evidence=evidence(lines), settings=["NCCL_DISABLE_MEM_MANAGER"],
    )]


def _host_alloc(logs: list[Log]) -> list[Cause]:
    found = grep(logs, _HOST_ALLOC)
    if not found:
        return []
    lines = [line for line, _ in found]
    where = _where(lines)
    return [Cause(
        id="mem-manager-host-memory", title="the process ran out of host memory (NCCL's memory manager)",
        detail=f"NCCL's memory manager{_on(where)} could not allocate a few bytes of host memory for its own "
               "records of the GPU buffers it maps: the process, or its container, had no host memory left. "
               "NCCL returned a system error; the GPU and the network are not the cause.",
        fix="Look at the host memory on the hosts named: `free -g`, `dmesg | grep -i -e oom -e 'out of memory'`, the "
            "container's or the job's memory limit (cgroup `memory.max`, the scheduler's --mem), and what else "
            "the process holds in host memory (data loader workers, pinned buffers, CPU offload).",
        score=78, hosts=where, evidence=evidence(lines),
    )]


def _stats_off(logs: list[Log]) -> list[Cause]:
    found = grep(logs, _STATS_OFF)
    if not found:
        return []
    lines = [line for line, _ in found]
    where = _where(lines)
    return [Cause(
        id="memory-stats-disabled", title="memory statistics asked of NCCL with its memory manager off",
        detail=f"The program called ncclCommMemStats{_on(where)} while NCCL_DISABLE_MEM_MANAGER=1 turned the "
               "memory manager off, so NCCL keeps no statistics and returned an invalid-usage error. The "
               "program's setting, not the node or the network.",
        fix="Unset NCCL_DISABLE_MEM_MANAGER where the program reads NCCL's memory statistics, or stop it asking "
            "for them.",
        score=60, hosts=where, evidence=evidence(lines), settings=["NCCL_DISABLE_MEM_MANAGER"],
    )]


def cumem(logs: list[Log]) -> list[Cause]:
    return (_handles(logs) + _suspend(logs) + _books(logs) + _host_alloc(logs) + _stats_off(logs)
            + _cumem_cuda(logs) + _sym_unsupported(logs) + _sym_layout(logs) + _sym_space(logs))
