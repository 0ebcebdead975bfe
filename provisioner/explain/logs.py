"""Job logs as numbered lines with the host and rank each line came from, plus what the parsers read.

A log may be one rank's output, several ranks interleaved, or a launcher's collection where every line
carries its host (`gpu07: ...`, pdsh/clush style) or its task (`srun --label`: `3: ...`, Open MPI
`--tag-output`: `[1,3]<stdout>:`, torch: `[rank3]:`); NCCL's own prefix `host:pid:tid [dev]` names the
host too, and so do a syslog line's host and a Kubernetes pod's name (`kubectl logs --prefix`, stern).
The parsers' line cleaning (pane borders, escapes, timestamps, labels, framework loggers) is shared, so a
framed or labelled paste reads like the plain log. Lines keep their numbers in the file so evidence can be
found again.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from provisioner.errors import ParseError
from provisioner.parsers._loggers import HOST_LABEL, LABEL_HOST, prefix_arrow, prefix_host
from provisioner.parsers._text import SRUN_LABEL, Line, prefix_label, split_lines, strip_prefixes
from provisioner.parsers.nccl_debug import NcclDebug, parse_nccl_debug
from provisioner.parsers.nccl_line import label_match, nccl_log
from provisioner.parsers.nccl_tests import NcclTests, parse_nccl_tests

# A rank tag may be glued to it (`[15]worker-23:83:2526 [0]`, mpirun -prepend-rank in some pastes).
# Never all digits, and no pid or thread id 0: a time before a bracket (`10:00:00 [file.py:12]`) is not one.
_NCCL_PREFIX = re.compile(
    r"(?:^|\s|(?<=\]))(?P<host>(?![0-9]+:)[^\s:\[\]]+):(?P<pid>[1-9][0-9]*):(?P<tid>[1-9][0-9]*)\s+\[[^\]]*\]")
# The task a launcher's prefix names: torch `[rank3]:`, Open MPI `[1,3]<stdout>:`, srun `3: ` (first, or after
# the pdsh label of a pdsh running srun: `node2: 3: `), a heterogeneous job's `P1 3: ` (its component, then the
# task's id within it), `[3] `.
# A paste's clock (`18:11:06.680 `) is not an srun label: no digit follows the label's colon.
_PREFIX_RANK = re.compile(
    rf"\[rank(?P<a>[0-9]+)\]:|\[[0-9]+,(?P<b>[0-9]+)\]|(?:^\s*|(?<![\w.-]){LABEL_HOST}:\s+)"
    r"(?:P(?P<p>[0-9]+) +)?(?P<c>[0-9]+):(?![0-9])|^\[(?P<d>[0-9]+)\]")
# nccl-tests `#  Rank  3 Group 0 Pid 1234 on gpu02 device 3 ...`: which host each rank ran on.
_RANK_LINE = re.compile(r"^#\s*Rank\s+(?P<rank>[0-9]+)\s.*?\bon\s+(?P<host>\S+)\s+device\b")


@dataclass(frozen=True)
class LogLine:
    file: str
    number: int
    text: str  # without launcher/logger prefixes
    host: str | None  # the host this line came from, when the log says
    rank: int | None = None  # the global rank (launcher task) this line came from, when the log says
    # The component of a heterogeneous Slurm job it came from (srun's `P1 3: `): `rank` is then the task's id
    # within that component, so two components each have a task 0.
    component: int | None = None


@dataclass
class Log:
    name: str
    lines: list[LogLine]
    nccl: NcclDebug | None
    tests: NcclTests | None
    rank_hosts: dict[int, str] = field(default_factory=dict)
    # Names and addresses the caller knows to be one host ({name or address: host}, from an inventory):
    # a rule that must tell whether two errors point at the same node reads a host's name and its
    # address as one.
    aliases: dict[str, str] = field(default_factory=dict)

    def grep(self, pattern: re.Pattern[str]) -> Iterator[tuple[LogLine, re.Match[str]]]:
        for line in self.lines:
            if m := pattern.search(line.text):
                yield line, m

    def line(self, number: int) -> LogLine | None:
        return next((line for line in self.lines if line.number == number), None)

    def surrounding_host(self, line: LogLine) -> str | None:
        """The host a line without a prefix came from, when the nearest prefixed lines before and after it both
        name that host (a process's bare stdout line among its own prefixed ones); otherwise unknown."""
        at = self.lines.index(line)
        before = next((ln.host for ln in reversed(self.lines[:at]) if ln.host), None)
        after = next((ln.host for ln in self.lines[at + 1:] if ln.host), None)
        return before if before is not None and before == after else None


def _rank(prefix: str) -> tuple[int | None, int | None]:
    """The rank a line's prefix names, and the heterogeneous job's component it names before it."""
    # torch's own `[rank3]:` names the global rank whatever stands before it (a viewer's line counter
    # `[80746] `, a launcher's task).
    if torch := re.search(r"\[rank(?P<rank>[0-9]+)\]:", prefix):
        return int(torch.group("rank")), None
    m = _PREFIX_RANK.search(prefix)
    if not m:
        return None, None
    return int(next(m[k] for k in "abcd" if m[k] is not None)), int(m["p"]) if m["p"] else None


def _host(prefix: str, text: str) -> str | None:
    # NCCL's own prefix names the process's hostname, the name NCCL's other lines, the rank lines and the
    # inventory use; a collector's label names the machine it collected from (an address, a launcher node
    # running mpirun), so it names only a line NCCL's prefix does not.
    if nccl := _NCCL_PREFIX.search(text):
        return nccl.group("host")
    if label := prefix_label(prefix):
        return label
    # A syslog line's host, a Kubernetes pod, a Ray worker's node: where any other line was logged.
    return prefix_host(prefix)


def _labelled(lines: list[Line]) -> list[tuple[Line, str | None, str]]:
    """Each line without the label a pdsh/clush collection left on it, the host that label names, and what was
    taken off with it. Most lines of such a collection carry the label (a wrapped line or a traceback, a
    launcher's own lines may not); in any log, a label alone before an NCCL line's level (`gpu07: NCCL WARN ...`)
    names the host too. What the label stood before goes too: a logger's prefix (DeepSpeed's `worker-1:
    [2024-...] [INFO] [engine.py:12:...] `), and the task's label of a pdsh running `srun --label` (`node2: 0: `)
    where most labelled lines carry one, as srun's own goes where most lines do."""
    body = [line for line in lines if line.text.strip()]
    # The shared cleaning takes labels off only when every line has one; here most lines will do. A label it
    # already took off (one before a logger's prefix) counts as one.
    common = len(body) >= 2 and sum(1 for line in body if HOST_LABEL.match(line.text) or prefix_label(line.prefix)
                                    ) >= 0.6 * len(body)
    found: list[tuple[Line, str, str | None, int]] = []  # the line, its text, the label's host, where it ends
    for line in lines:
        text = line.text.strip()
        host, end = None, 0
        # A label nested in another (pdsh running pdsh: `10.0.87.143: 10.0.87.143: `) comes off with it, an
        # address's as a name's; the innermost names the host, as `prefix_label` reads it.
        while common and (m := HOST_LABEL.match(text[end:])):
            host, end = m.group("host"), end + m.end()
        # The NCCL line's prefix starts the line, so the label's end there is its end in the line.
        if host is None and (log := nccl_log(text)) is not None and (m := label_match(log.prefix)):
            host, end = m.group("host"), m.end()
        found.append((line, text, host, end))
    rests = [rest for _, text, host, end in found if host and (rest := text[end:].strip())]
    tasks = bool(rests) and sum(1 for rest in rests if SRUN_LABEL.match(rest)) >= 0.6 * len(rests)
    out: list[tuple[Line, str | None, str]] = []
    for line, text, host, end in found:
        if host is None:
            out.append((Line(line.number, text, line.raw, line.prefix), None, ""))
            continue
        rest = text[end:].strip()
        task = SRUN_LABEL.match(rest) if tasks else None
        after = strip_prefixes(Line(line.number, rest[task.end():].strip() if task else rest, line.raw))
        taken = text[:end] + (task.group(0) if task else "")
        out.append((Line(line.number, after.text.strip(), line.raw, after.prefix), host, taken))
    return out


def read_log(name: str, text: str, host: str | None = None) -> Log:
    """`host`: where the whole log came from, when that is known apart from its lines (one rank's output
    that `fabnet smoke` kept with its host); a line's own label still wins."""
    split = [line for line in split_lines(text) if line.text.strip()]
    lines = [LogLine(name, line.number, body.text, _host(body.prefix, body.text) or label or prefix_arrow(line.prefix)
                     or host, *_rank(line.prefix + taken))
             for line, (body, label, taken) in zip(split, _labelled(split), strict=True)]
    # A line with a rank but no host takes the host that rank ran on, where the log says it; a heterogeneous
    # job's task ids count within each component.
    rank_hosts = {int(m.group("rank")): m.group("host") for line in lines if (m := _RANK_LINE.match(line.text))}
    hosts: dict[tuple[int | None, int], str] = {(None, rank): h for rank, h in rank_hosts.items()}
    for line in lines:
        if line.host is not None and line.rank is not None:
            hosts.setdefault((line.component, line.rank), line.host)
            if line.component is None:
                rank_hosts.setdefault(line.rank, line.host)
    lines = [LogLine(ln.file, ln.number, ln.text, hosts[(ln.component, ln.rank)], ln.rank, ln.component)
             if ln.host is None and ln.rank is not None and (ln.component, ln.rank) in hosts else ln for ln in lines]
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
    return Log(name, lines, nccl, tests, rank_hosts)
