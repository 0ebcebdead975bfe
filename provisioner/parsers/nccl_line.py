"""What makes a line an NCCL log line, in the wording of every release: the level and the message.

NCCL 2.3 on print `host:pid:tid [dev] NCCL INFO msg` (a WARN with the `file.cc:line` it came from before
`NCCL`). The closed-source releases 2.0 to 2.2 printed the level without `NCCL`: `host:pid:tid [dev] INFO
msg` and `host:pid:tid [dev] include/socket.h:185 WARN msg` (`.cu`/`.h` sources). A bare `INFO` or `WARN`
is any logger's, so there the level counts only after that prefix, or, for a WARN whose host a paste
left out, after `[dev] file.cu:line`.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from provisioner.parsers._loggers import LABEL_HOST

_LOG = re.compile(r"(?:^|\s)NCCL (?P<level>INFO|WARN|TRACE|ABORT)\b ?(?P<message>.*)$")
_LEGACY = re.compile(
    r"(?:(?:^|\s)[^\s:]+:[0-9]+:[0-9]+\s+\[[0-9]+\]\s+(?:[\w./-]+\.(?:cu|cc|cpp|h):[0-9]+\s+)?"
    r"|(?:^|\s)\[[0-9]+\]\s+[\w./-]+\.(?:cu|cc|cpp|h):[0-9]+\s+(?=WARN))"
    r"(?P<level>INFO|WARN|TRACE) (?P<message>.*)$"
)

# A launcher's host label alone before the level (pdsh/clush `gpu07: NCCL WARN ...`, or an address). Wider than
# a label elsewhere on purpose: right before NCCL's level a word and a colon can only be a label, so the name
# needs no digit (`master: NCCL WARN ...`) and may carry `_`; what a logger or a traceback puts there is
# ruled out by name below.
# The match ends after the label's blank, where what the label stood before starts.
_LABEL = re.compile(rf"^\s*(?P<host>{LABEL_HOST}|[A-Za-z][\w.-]*):\s+(?=(?:NCCL\s+)?$)")
# Words a logger or a traceback puts before a colon: never a host. torch's `Last error:` needs no entry: a label
# has no blank in it.
_NOT_HOSTS = {"error", "warning", "warn", "info", "note", "stdout", "stderr", "debug", "trace", "runtimeerror",
              "exception"}


class LogMatch(NamedTuple):
    level: str
    message: str
    prefix: str  # what stands before the level: the `host:pid:tid [dev]` prefix and a WARN's location


def nccl_log(body: str) -> LogMatch | None:
    """The level and message of an NCCL log line (any release's wording), or None."""
    m = _LOG.search(body) or _LEGACY.search(body)
    if m is None:
        return None
    return LogMatch(m.group("level"), m.group("message"), body[: m.start("level")])


def is_log_line(body: str) -> bool:
    return nccl_log(body) is not None


# NCCL's own source location (`ibvwrap.cc:`) left alone before the level when a paste lost its line number.
_SOURCE_FILE = re.compile(r"\.(?:cc|c|cpp|cu|h|hpp)$", re.I)


def label_match(prefix: str) -> re.Match[str] | None:
    """A launcher's label when it is all that stands before an NCCL line's level: its `host`, and its end in
    `prefix` (the line itself, where the prefix starts it)."""
    m = _LABEL.match(prefix)
    if not m or m.group("host").lower() in _NOT_HOSTS or _SOURCE_FILE.search(m.group("host")):
        return None
    return m


def label_host(prefix: str) -> str | None:
    """The host a launcher's label names when it is all that stands before an NCCL line's level."""
    return m.group("host") if (m := label_match(prefix)) else None
