"""Job logs as numbered lines with the host each line came from, plus what the parsers read in them.

A log may be one rank's output, several ranks interleaved, or a launcher's collection where every line
carries its host (`gpu07: ...`, pdsh/clush style); NCCL's own prefix `host:pid:tid [dev]` names the host
too. Lines keep their numbers in the file so evidence can be found again.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from provisioner.errors import ParseError
from provisioner.parsers._text import split_lines
from provisioner.parsers.nccl_debug import NcclDebug, parse_nccl_debug
from provisioner.parsers.nccl_tests import NcclTests, parse_nccl_tests

_HOST_LABEL = re.compile(r"^\s*(?P<host>[A-Za-z][A-Za-z0-9.-]*[0-9][A-Za-z0-9.-]*):(?: |$)")
_NCCL_PREFIX = re.compile(r"(?:^|\s)(?P<host>[^\s:\[\]]+):(?P<pid>[0-9]+):(?P<tid>[0-9]+)\s+\[[^\]]*\]")
_TORCH_RANK = re.compile(r"^\[(?:rank|Rank )(?P<rank>[0-9]+)\]")


@dataclass(frozen=True)
class LogLine:
    file: str
    number: int
    text: str  # without launcher/logger prefixes
    host: str | None  # the host this line came from, when the log says

    @property
    def rank(self) -> int | None:
        m = _TORCH_RANK.match(self.text)
        return int(m.group("rank")) if m else None


@dataclass
class Log:
    name: str
    lines: list[LogLine]
    nccl: NcclDebug | None
    tests: NcclTests | None

    def grep(self, pattern: re.Pattern[str]) -> Iterator[tuple[LogLine, re.Match[str]]]:
        for line in self.lines:
            if m := pattern.search(line.text):
                yield line, m

    def line(self, number: int) -> LogLine | None:
        return next((line for line in self.lines if line.number == number), None)


def _host(raw: str, text: str) -> str | None:
    label = _HOST_LABEL.match(raw)
    if label and not raw.lstrip().startswith(text.lstrip()[:20] or "\0"):
        return label.group("host")
    prefix = _NCCL_PREFIX.search(text)
    return prefix.group("host") if prefix else None


def read_log(name: str, text: str) -> Log:
    lines = [LogLine(name, line.number, line.text.strip(), _host(line.raw, line.text))
             for line in split_lines(text) if line.text.strip()]
    nccl = tests = None
    try:
        nccl = parse_nccl_debug(text)
    except ParseError:
        pass
    try:
        parsed = parse_nccl_tests(text)
        tests = parsed if parsed.rows or parsed.columns or parsed.parameters or parsed.nccl_tests_version else None
    except ParseError:
        pass
    return Log(name, lines, nccl, tests)
