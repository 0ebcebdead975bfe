"""Causes in a host's shared memory: NCCL keeps the buffers of its SHM transport (ranks of one host that
cannot use P2P) and of its proxies in files under /dev/shm, so a /dev/shm too small for them (a container's
64 MB default), a segment a peer cannot open, or a segment CUDA cannot pin stops the job before any network
is used. Named as what it is, so the fabric is not chased.

Wording read (NVIDIA/nccl at the tags): include/shm.h `failed to register host buffer %p : %s` (v2.3.7),
SYSCHECK's `Call to posix_fallocate failed : %s` and `Error while %s shared memory segment %s (size %d)`
with `creating` / `attaching to` (v2.4.8 to v2.11; `nccl-shm-recv-...` names, no /dev/shm); misc/shmutils.cc
`Error: failed to extend %s to %d bytes` (v2.12.12 on), `Could not map %s` (v2.12.12), `Call to open
failed: %s` before `attaching to`, and from v2.23.4 `, error: %s (%d)` after both, `Error: failed to create
shared memory file %p, error %s (%d)` and `Error: Could not map %s size %zu, error: %s (%d)`. A segment CUDA
could not pin reads `Cuda failure 'X'` at include/shm.h or misc/shmutils.cc (cudaHostRegister).
"""

from __future__ import annotations

import re

from provisioner.explain.evidence import evidence, grep, hosts
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.parsers._text import unique

_SEGMENT = re.compile(
    r"Error while (?P<op>creating|attaching to) shared memory segment (?P<path>\S+) \(size (?P<size>[0-9]+)\)"
    r"(?:,\s*error:\s*(?P<why>[^(]+?)\s*(?:\([0-9]+\))?)?\s*$")
_EXTEND = re.compile(r"failed to extend (?P<path>\S+) to (?P<size>[0-9]+) bytes(?:,\s*error:\s*(?P<why>[^(]+))?"
                     r"|Call to posix_fallocate failed\s*:\s*(?P<why2>.+)"
                     r"|failed to create shared memory file \S+, error (?P<why3>[^(]+)"
                     r"|Could not map (?P<path2>/dev/shm/\S+|nccl-\S+)(?: size [0-9]+)?"
                     r"(?:,\s*error:\s*(?P<why4>[^(]+))?")
# CUDA refusing to pin a segment: NCCL 2.3's own wording, or a CUDA failure whose WARN comes from the shm code.
_REGISTER = re.compile(r"failed to register host buffer \S+ : (?P<why>.+)"
                       r"|(?:include/shm\.h|shmutils\.cc|transport/shm\.cc?u?):[0-9]+\s+(?:NCCL\s+)?WARN\s+"
                       r"Cuda failure\s+(?:[0-9]+\s+)?'(?P<why2>[^']+)'")
# A system call the shm code wraps (SYSCHECK): `misc/shmutils.cc:93 NCCL WARN Call to open failed: ...`.
_CALL = re.compile(r"(?:include/shm\.h|shmutils\.cc):[0-9]+\s+(?:NCCL\s+)?WARN\s+Call to (?!posix_fallocate)\w+ "
                   r"failed\s*:?\s*(?P<why>.+)")
SHM_SOURCE = re.compile(r"(?:include/shm\.h|shmutils\.cc|transport/shm\.cc?u?):[0-9]+")
_MISSING = re.compile(r"No such file or directory|\(2\)\s*$")
_FULL = re.compile(r"No space left on device|\(28\)|ENOSPC")
# The system refused the file itself, whatever the room: EACCES, EPERM or EROFS (`Call to shm_open failed :
# Permission denied`, 2.4; `error: Permission denied (13)` from 2.23).
_DENIED = re.compile(r"Permission denied|Operation not permitted|Read-only file system")

_FIX_SPACE = ("Give the job's /dev/shm room: in Docker `--shm-size=8g` (or `--ipc=host`), in Kubernetes an "
              "emptyDir with `medium: Memory` mounted at /dev/shm, on the host a larger tmpfs (`mount -o "
              "remount,size=50% /dev/shm`); check with `df -h /dev/shm` where the ranks run, and remove stale "
              "`/dev/shm/nccl-*` files that crashed jobs left. NCCL_SHM_DISABLE=1 only to confirm: it moves the "
              "traffic to slower paths.")
_FIX_ATTACH = ("The segment another rank of this host created was not there to open: give all ranks of one host "
               "the same /dev/shm (one container per node, or `--ipc=host` / a shared IPC namespace; a pod's "
               "containers share it only with an emptyDir at /dev/shm), keep systemd-logind from deleting a "
               "user's IPC files when the session ends (RemoveIPC=no in /etc/systemd/logind.conf), and run the "
               "same NCCL on every rank of the host; from NCCL 2.23, NCCL_CUMEM_HOST_ENABLE=0 on every rank makes "
               "them all use /dev/shm (or try the release before). NCCL_SHM_DISABLE=1 to confirm.")
_FIX_DENIED = ("NCCL was not allowed to create or open its files in /dev/shm: check where the ranks run that "
               "/dev/shm is a tmpfs of mode 1777 (`ls -ld /dev/shm`; `chmod 1777 /dev/shm`), writable and not mounted "
               "read-only into the container, that no `/dev/shm/nccl-*` file of another user's crashed job holds the "
               "name (remove it), and, under SELinux or AppArmor, the audit log for a denial. NCCL_SHM_DISABLE=1 "
               "only to confirm.")
_FIX_REGISTER = ("CUDA could not pin the shared-memory segment (cudaHostRegister): check that /dev/shm has room "
                 "for it (`df -h /dev/shm`; Docker `--shm-size`), the locked-memory limit (`ulimit -l unlimited`; "
                 "Docker `--ulimit memlock=-1`), and that every rank of the host sees the same /dev/shm. "
                 "NCCL_SHM_DISABLE=1 to confirm.")


# Before 2.5 NCCL told hosts apart by their hostname: ranks on two machines that both call themselves `localhost`
# were taken for one host and tried CUDA IPC and shared memory across machines, which fail as above.
_LOCAL_NAMES = {"localhost", "localhost.localdomain"}


def same_name_hint(lines: list[LogLine]) -> str:
    """A hint when the failing ranks' host calls itself localhost."""
    if not any(line.host in _LOCAL_NAMES for line in lines):
        return ""
    return (" The host calls itself `localhost`: if more than one machine does, NCCL before 2.5 (which told "
            "hosts apart by hostname) took ranks on different machines for ranks of one host and tried CUDA IPC "
            "and shared memory between them; give every node its own hostname.")


def _what(logs: list[Log]) -> tuple[list[LogLine], list[str], list[str]]:
    """The lines, the failed operations (create, attach, register) and the system's reasons."""
    lines: list[LogLine] = []
    ops: list[str] = []
    why: list[str] = []
    for line, m in grep(logs, _SEGMENT):
        lines.append(line)
        ops.append("attach" if m["op"] == "attaching to" else "create")
        why += [m["why"].strip()] if m["why"] else []
    for line, m in grep(logs, _EXTEND):
        lines.append(line)
        ops.append("create")
        why += [w.strip() for w in (m["why"], m["why2"], m["why3"], m["why4"]) if w]
    for line, m in grep(logs, _CALL):
        lines.append(line)
        why.append(m["why"].strip())
    for line, m in grep(logs, _REGISTER):
        lines.append(line)
        ops.append("register")
        why += [w.strip() for w in (m["why"], m["why2"]) if w]
    return sorted(set(lines), key=lambda ln: (ln.file, ln.number)), unique(ops), unique(why)


def shared_memory(logs: list[Log]) -> list[Cause]:
    lines, ops, why = _what(logs)
    if not lines:
        return []
    text = " ".join(line.text for line in lines)
    # The op the evidence settles, most telling first: a full /dev/shm explains a failed pin or attach after it.
    if not _FULL.search(text) and _DENIED.search(" ".join(why)):
        kind, fix = "denied", _FIX_DENIED
        title = "NCCL was not allowed to create its shared-memory segments in /dev/shm"
    elif _FULL.search(text) or ("create" in ops and "register" not in ops and "attach" not in ops):
        kind, fix = "space", _FIX_SPACE
        title = "/dev/shm had no room for NCCL's shared-memory segments"
    elif "attach" in ops and _MISSING.search(text):
        kind, fix = "attach", _FIX_ATTACH
        title = "a rank could not open the shared-memory segment a peer on its host created"
    elif "register" in ops:
        kind, fix = "register", _FIX_REGISTER
        title = "CUDA could not pin NCCL's shared-memory segment"
    else:
        kind, fix = "space", _FIX_SPACE
        title = "NCCL could not set up its shared-memory segments"
    paths = unique([p for line in lines for pattern in (_EXTEND, _SEGMENT) if (m := pattern.search(line.text))
                    and (p := m.groupdict().get("path") or m.groupdict().get("path2"))])
    detail = (f"{', '.join(why[:3]) or 'the segment could not be set up'}"
              + (f" ({', '.join(paths[:3])})" if paths else "")
              + f" on {', '.join(hosts(lines)) or 'a host'}: ranks of one host exchange data through files in "
                "/dev/shm, and "
              + {"space": "a container's /dev/shm is 64 MB unless the runtime is told otherwise, less than a few "
                          "ranks' buffers need.",
                 "attach": "the file its peer created was gone or in another /dev/shm (another container or IPC "
                           "namespace), removed when the user's session ended, or never made: from NCCL 2.23 a rank "
                           "may keep host buffers in cuMem host memory instead, and two ranks of one host that "
                           "chose differently do not find each other's segment.",
                 "denied": "the system refused the file itself (its permissions, a read-only mount, a security "
                           "policy, or a file of that name another user owns), whatever room /dev/shm has.",
                 "register": "CUDA refused to pin the mapped file: /dev/shm too small to back it, a low memlock "
                             "limit, or a /dev/shm the ranks do not share."}[kind]
              + " Not a network fault: the errors after it on other ranks follow from it." + same_name_hint(lines))
    return [Cause(
        id="shared-memory", title=title, detail=detail, fix=fix, score=93, hosts=hosts(lines),
        settings=["NCCL_SHM_DISABLE"] + (["--ipc=host", "NCCL_CUMEM_HOST_ENABLE"] if kind == "attach"
                                         else [] if kind == "denied" else ["--shm-size"]),
        evidence=evidence(lines),
    )]
