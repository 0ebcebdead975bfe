"""A cause before any rank ran: the container runtime Slurm starts each task in (pyxis, a SPANK plugin, with
enroot under it) could not import the image or start the container, so the task never ran its program.

pyxis says which step failed (`pyxis: failed to import docker image`, `pyxis: container start failed with error
code: 1`, `pyxis: couldn't start container`, `pyxis: failed to create container filesystem`) and then prints
enroot's own log, each line indented under `pyxis:` (`pyxis:     [ERROR] ...`); slurmstepd adds `spank: required
plugin spank_pyxis.so: task_init() failed` and srun only `task 0: Exited with exit code 1`, which reads like a
rank that failed by itself. enroot run directly prints the same lines without pyxis (`enroot-switchroot: failed
to execute: /bin/sh: ...`, `[ERROR] /etc/enroot/hooks.d/98-nvidia.sh exited with return code 1`).

What enroot said is sorted into the usual reasons, each with its own fix: the file system the image is written
to is full (pyxis writes its squashfs under its runtime_path, /run by default, a tmpfs), the GPU hook
(nvidia-container-cli of libnvidia-container) failed, the image has no shell or entrypoint enroot can run, the
registry refused the image, or a directory enroot needs is not writable.
"""

from __future__ import annotations

import re

from provisioner.explain.evidence import evidence, grep
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.parsers._text import unique

# pyxis's own verdicts (pyxis_slurmstepd.c across its releases).
_VERDICT = re.compile(r"\bpyxis: (?:container start failed with error code: \d+|failed to import docker image"
                      r"|couldn't start container|failed to create container filesystem"
                      r"|child \d+ failed with error code: \d+)")
# enroot's log as pyxis prints it: indented under `pyxis:`; progress and [INFO] lines say nothing of the failure.
_ENROOT_LINE = re.compile(r"\bpyxis:\s{2,}(?P<msg>\S.*)")
_PROGRESS = re.compile(r"^\[INFO\]|^Parallel (?:un)?squashfs|^Creating \d|^\d+% |^\[=|^$")
# enroot's words run by hand, with no pyxis in front.
_ENROOT_OWN = re.compile(r"(?P<msg>enroot-switchroot: failed to execute: .*|\[ERROR\] /\S*/enroot/hooks\.d/.*)")

_REASONS: list[tuple[re.Pattern[str], str, str, str]] = [
    (re.compile(r"No space left on device|Disk quota exceeded|Failed to write to output filesystem", re.I),
     "space", "the file system enroot writes the image to is full",
     "pyxis writes the image's squashfs under its runtime_path (/run/pyxis by default, a tmpfs the size of part "
     "of memory) and enroot unpacks it under ENROOT_DATA_PATH and ENROOT_CACHE_PATH: point them at a local disk "
     "with room for the image (`runtime_path=` in pyxis's plugstack line, the ENROOT_* paths in "
     "/etc/enroot/enroot.conf), or free space there; `df -h` on the node shows which is full."),
    (re.compile(r"nvidia-container-cli|hooks\.d/\S*nvidia", re.I),
     "gpu-hook", "enroot's GPU hook (nvidia-container-cli) failed",
     "The hook that mounts the driver and GPUs into the container failed on that node: install "
     "libnvidia-container (nvidia-container-cli) there, at a version that suits the driver; where slurmd itself "
     "runs in a container (Slurm on Kubernetes), that container needs the host's driver libraries, ldconfig and "
     "device files too. `nvidia-container-cli -k -d /dev/tty info` on the node shows the failure alone."),
    (re.compile(r"failed to execute: (?P<exe>\S+?):? No such file or directory"),
     "shell", "the image has no shell or entrypoint enroot can start",
     "enroot starts the container through a shell in the image: use an image with /bin/sh (a distroless or "
     "`FROM scratch` image has none), give the program's full path in the image, or pass "
     "--no-container-entrypoint when the image's entrypoint is what is missing."),
    (re.compile(r"returned error code: 4\d\d|Unauthorized|authentication (?:failed|required)|manifest unknown",
                re.I),
     "registry", "the registry refused the image",
     "Check the image name (pyxis reads `registry#image:tag`; a path must start with / or ./ to be a squashfs "
     "file) and the credentials enroot uses for that registry (~/.config/enroot/.credentials, or "
     "ENROOT_CONFIG_PATH's), on the node the task runs on."),
    (re.compile(r"Permission denied|Operation not permitted|cannot create directory", re.I),
     "permission", "enroot could not create or use a directory it needs",
     "The user's enroot directories must be writable on every node: ENROOT_RUNTIME_PATH (often /run/user/UID, "
     "which only a login session creates), ENROOT_DATA_PATH and ENROOT_CACHE_PATH in /etc/enroot/enroot.conf; "
     "point them at directories the user owns, or have the node create them."),
]
_GENERIC = ("the container runtime could not start the task's container",
            "Run the same image with `enroot import`/`enroot create`/`enroot start` on that node to see the step "
            "that fails alone, and read the lines enroot printed under pyxis's.")
_SRUN_EXIT = re.compile(r"srun: error: (?P<host>[\w.-]+): tasks? [0-9,\-\[\]]+: Exited with exit code")


def _reason(lines: list[tuple[LogLine, str]]) -> tuple[str, str, str, list[LogLine]]:
    """The first of enroot's lines that names a known reason: (what it is, its fix, what enroot said, lines)."""
    for pattern, _, what, fix in _REASONS:
        said = [(line, msg) for line, msg in lines if pattern.search(msg)]
        if said:
            return what, fix, said[0][1].strip().rstrip("."), [line for line, _ in said]
    return _GENERIC[0], _GENERIC[1], lines[0][1].strip().rstrip(".") if lines else "", [ln for ln, _ in lines[:1]]


def container_start(logs: list[Log]) -> list[Cause]:
    verdicts = [line for line, _ in grep(logs, _VERDICT)]
    said = [(line, m["msg"]) for line, m in grep(logs, _ENROOT_LINE) if not _PROGRESS.match(m["msg"].strip())]
    said += [(line, m["msg"]) for line, m in grep(logs, _ENROOT_OWN) if "pyxis:" not in line.text]
    if not verdicts and not said:
        return []
    said.sort(key=lambda item: (item[0].file, item[0].number))
    what, fix, words, lines = _reason(said)
    where = unique([line.host for line in lines + verdicts if line.host]
                   + [m["host"] for _, m in grep(logs, _SRUN_EXIT)])
    on = f" on {', '.join(where)}" if where else ""
    return [Cause(
        id="container-start-failed", title=f"{what}{on}: the task's container never started",
        detail=(f"enroot said `{words}`. " if words else "")
        + ("pyxis (Slurm's container plugin) and enroot failed before the task's program ran, so no rank "
           "started there; srun's `Exited with exit code` for that task is this failure, not the program's."
           if verdicts or any("pyxis:" in line.text for line in lines)
           else "enroot failed before the container's program ran: nothing in it started."),
        fix=fix, score=92, hosts=where, evidence=evidence(lines + verdicts[:2]))]
