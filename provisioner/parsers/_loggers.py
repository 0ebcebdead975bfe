"""What the frameworks that run collectives put before each line they log, and the host a prefix names.

Each pattern here is unmistakable one line at a time (a level, a date and a source location together, or
a syslog stamp with its host and program), so `clean_lines` takes it off wherever it stands; the shapes
that are not (stern's `pod container `, docker compose's `name-1  | `, a pdsh/clush label) go only when most
lines carry them.
Only a prefix that names the machine the line came from gives a host: a syslog host, a Kubernetes pod
(its name is the hostname its processes, NCCL included, report), a Ray worker's address, a pdsh/clush
label, or a collector's `WORD >> ` label where NCCL's own host is empty. A logger, file or program name
never does. Where NCCL's own `host:pid:tid` prefix names a host, it names the line before any of these: it is the
process's own hostname. The job log reader (explain) and the NCCL log parser both take hosts from here, so they
name the same ones.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)"

# vLLM's logger: `INFO 11-25 10:00:00 [file.py:12] ` (0.6 on), `INFO 11-25 10:00:00 file.py:12] ` before;
# the date has no year, the time may carry milliseconds.
VLLM = re.compile(
    rf"^{_LEVEL} \d{{2}}-\d{{2}} \d{{2}}:\d{{2}}:\d{{2}}(?:[.,]\d+)? (?:\[[\w.-]+:\d+\]|[\w.-]+:\d+\])(?: |$)",
    re.ASCII,
)
# glog and absl (JAX, XLA, TensorFlow, torch's C++ side): `I1125 10:00:00.123456  1234 file.cc:12] `:
# severity letter, month and day, time, thread id, source.
GLOG = re.compile(r"^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+ [^\s\]]+:\d+\](?: |$)", re.ASCII)
# torch's own c10 logger (no glog) puts the same in brackets: `[E ProcessGroupNCCL.cpp:563] ` (2.0 to 2.3),
# `[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] ` (2.4 on; the month is not zero-padded), with the
# thread id in some builds (`[E0612 10:41:07.512331 78122 torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:632] `).
C10 = re.compile(r"^\[[IWEF](?:\d{3,4} \d{2}:\d{2}:\d{2}\.\d+(?: +\d+)?)? [^\s\]]+\.\w+:\d+\](?: |$)", re.ASCII)
# TensorFlow/XLA's own logger: `2024-11-25 10:00:00.123456: E external/xla/xla/service/gpu/nccl.cc:12] `.
TSL = re.compile(
    r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?: [IWEF] [^\s\]]+:\d+\](?: |$)", re.ASCII)
# DeepSpeed's logger after its timestamp: `[INFO] [engine.py:12:__init__] ` (level, then file, line and function).
DEEPSPEED = re.compile(rf"^\[{_LEVEL}\] \[[\w.-]+:\d+:[\w<>.]+\](?: |$)", re.ASCII)
# `kubectl logs --prefix`: `[pod/train-worker-0/pytorch] `.
KUBECTL = re.compile(
    r"\[pod/(?P<pod>[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)/[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\](?: |$)", re.ASCII)
# A syslog or journal line: `Nov 25 10:00:00 gpu03 python[123]: `, or with an RFC 3339 stamp
# (rsyslog, `journalctl -o short-iso`). The program carries its pid (only the kernel logs without one), so
# a sentence after a time (`10:00:00 job started: ok`) is not read as a host and a program.
SYSLOG = re.compile(
    r"(?:[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2}))"
    r" (?P<host>[A-Za-z0-9][\w.-]*) (?:[\w./@-]+\[\d+\]|kernel): ", re.ASCII)
# stern: `pod container ` before each line. Two words alone could be a sentence's, so the pod must look
# like a controller's pod (a dash and a digit: `train-worker-0`, `vllm-6f7d9c8b5-x2k4p`), and most lines
# must carry the prefix.
STERN = re.compile(
    r"^(?P<pod>(?=[a-z0-9.-]*-)(?=[a-z0-9.-]*[0-9])[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)"
    r" [a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?: |$)", re.ASCII)
# docker compose: `vllm-1  | ` (v2) or `vllm_1  | ` (v1): the service and its replica number, then a bar.
COMPOSE = re.compile(r"^[A-Za-z0-9][\w.-]*[-_]\d+\s*\|(?: |$)", re.ASCII)

# Tried in this order at the start of what is left: a syslog stamp before the bare timestamp it begins with.
EVERY_LINE = (KUBECTL, SYSLOG, VLLM, TSL, GLOG, C10, DEEPSPEED)

# A pdsh/clush label's host, the name or address the launcher was given (`gpu07`, `10.0.0.7`). A name needs a
# digit, as node names have: a word before a colon (`Rate: 100`, `Warning: ...`) is no label. Every reader of
# such labels builds on this one shape; where one reads a wider or narrower one, it says why.
LABEL_NAME = r"[A-Za-z][A-Za-z0-9.-]*[0-9][A-Za-z0-9.-]*"
LABEL_HOST = rf"(?:{LABEL_NAME}|[0-9]{{1,3}}(?:\.[0-9]{{1,3}}){{3}})"
# The label at the start of a line: the host, a colon, and the blank pdsh puts after it (none on an empty line).
HOST_LABEL = re.compile(rf"^(?P<host>{LABEL_HOST}):(?: |$)", re.ASCII)

# Ray's driver prints every worker's output behind the worker's name: `(RayWorkerWrapper pid=92234,
# ip=172.19.24.110) `, `(pid=909597) `, `(raylet, ip=10.0.0.7) `, and names a line it folded from several
# workers at its end: ` [repeated 2x across cluster]`. A pid, an address or a Ray daemon's name makes it
# Ray's, so a sentence's `(1) ` stays. vLLM names its worker processes the same way, with a word or two
# more: `(VllmWorkerProcess pid=123) `, `(VllmWorker rank=1 pid=456) `, `(VllmWorker TP0 pid=7) `,
# `(EngineCore_DP0 pid=789) `, `(APIServer pid=1) `.
RAY = re.compile(
    r"^\((?:(?:[\w.:=-]+ ){0,3}pid=\d+(?:, ip=[0-9A-Fa-f.:]+)?|(?:raylet|gcs_server|autoscaler|monitor|dashboard\w*)"
    r"(?:, ip=[0-9A-Fa-f.:]+)?|[\w.:-]+, ip=[0-9A-Fa-f.:]+)(?:, \w+=[^,()]*)*\)(?: |$)", re.ASCII)
RAY_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]$", re.ASCII)


# That prefix names the worker's node by its address: `(RayWorkerWrapper pid=92234, ip=172.19.24.110) `.
_RAY_IP = re.compile(r"^\([^()]*\bip=(?P<host>[0-9A-Fa-f.:]+)[,)]")


def prefix_host(prefix: str) -> str | None:
    """The host a syslog stamp, a Kubernetes pod prefix or a Ray worker's address names in what was taken
    off a line."""
    if m := KUBECTL.search(prefix) or STERN.match(prefix):
        return m.group("pod")
    return m.group("host") if (m := SYSLOG.search(prefix) or _RAY_IP.match(prefix)) else None


# A collector's label before every line, `worker-9 >> ` (NVIDIA/nccl#1808), where NCCL's own prefix has an
# empty host (`:168:1228 [2] NCCL INFO`, a clock may stand between): the label is the host. Line cleaning
# (parsers/_text) takes it off where `arrow_hosts` finds it, so what is left starts with what the program said.
_ARROW_LABEL = re.compile(r"^(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*) >> ")
ARROW = re.compile(r"^\s*[A-Za-z0-9][A-Za-z0-9.-]* >> ")
_ARROW_TAKEN = re.compile(r"(?<![A-Za-z0-9.-])(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*) >> ")
_NO_HOST_NCCL = re.compile(r"^(?:\[[^\]]*\]\s*)?:[1-9][0-9]*:[1-9][0-9]*\s+\[")
# What such a label may be that is no host: a number, a file, a logger, a level.
_NOT_A_HOST = re.compile(
    r"^[0-9.-]+$|\.(?:py|log|txt|out|err|cc|cpp|cu|c|h|sh|json|ya?ml)$"
    r"|^(?:torch|nccl|root|deepspeed|vllm|ray|jax|transformers|accelerate|lightning|main)(?:\.|$)"
    rf"|^{_LEVEL}$", re.I)


def arrow_hosts(texts: Sequence[str]) -> list[str | None]:
    """Each line's host from its `WORD >> ` label, where most lines carry such a label before an NCCL prefix
    with an empty host (one label per host in a log of several), and the word can be a host name."""
    labels = [m.group("host") if (m := _ARROW_LABEL.match(text.strip())) and not _NOT_A_HOST.search(
        m.group("host")) else None for text in texts]
    empty = sum(1 for text, label in zip(texts, labels, strict=True)
                if label and _NO_HOST_NCCL.match(text.strip()[len(label) + 4:]))
    return labels if 2 * empty > sum(1 for text in texts if text.strip()) else [None] * len(texts)


def prefix_arrow(prefix: str) -> str | None:
    """The host a collector's `WORD >> ` label names in what line cleaning took off a line (it takes the
    label off only where `arrow_hosts` found it a host's)."""
    return m.group("host") if (m := _ARROW_TAKEN.search(prefix)) else None
