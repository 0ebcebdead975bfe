"""Line handling common to every parser: line endings, decorations, 1-based line numbers, completeness.

Every parser works on `Line` objects so that an error can always say which line of the output it is about.
Before a parser sees a line, `split_lines` takes away what terminals, launchers and people add to real
output (see `clean_lines`); `Line.raw` keeps the line as printed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from provisioner.errors import ParseError
from provisioner.parsers._live import host_output
from provisioner.parsers._loggers import (
    ARROW,
    COMPOSE,
    EVERY_LINE,
    HOST_LABEL,
    LABEL_HOST,
    LABEL_NAME,
    RAY,
    RAY_REPEATED,
    STERN,
    TSL,
    arrow_hosts,
    prefix_host,
)
from provisioner.parsers._markup import unmark

# Only real line breaks: str.splitlines() would also split on form feeds, \x1c.. and U+2028,
# which would make our line numbers disagree with what an editor shows.
_EOL = re.compile(r"\r\n|\r|\n")

# An echoed shell command (`$ ibstat | grep mlx5`, `user@host:~$ cmd`, `[root@node ~]# cmd`, SUSE's
# `host:~ # cmd` without a user), or the next prompt with no command that a paste ends with
# (`root@host:~# `: `user@host` makes it a prompt; without a user, the `:~` or `:/` of a working directory).
# A bare `# ...` is deliberately not a prompt: nccl-tests prints its own comments that way.
PROMPT_SIGN = r"(?:[\w.-]+@[\w.-]+(?::\S*)?\s*[$#]|[\w.-]+:[~/]\S*\s*[$#]|\[[^\]\s]+@[^\]]+\]\s*[$#])"
PROMPT = re.compile(rf"^\s*(?:\$\s+\S|{PROMPT_SIGN}(?:\s+\S|\s*$))", re.ASCII)
_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)


class Fact(BaseModel):
    """Base of every parsed result: immutable, and no field that the parser did not declare."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Unplaced(Fact):
    """A line the parser could not place in the tool's structure: kept, never silently dropped."""

    line: int
    text: str
    reason: str | None = None


class Parsed(Fact):
    """Base of what a `parse_<kind>` returns: the facts plus how complete the output was.

    `complete` is False when the output stops before its structure does (a table without its last rows,
    a record without its required lines, a run without its footer); `missing` then says what is absent.
    `unplaced` lists the lines that fit nowhere. Callers that need a fact must check `complete`.
    """

    complete: bool = True
    missing: list[str] = Field(default_factory=list)
    unplaced: list[Unplaced] = Field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Line:
    """One line of tool output. `text` has trailing whitespace removed; `raw` is the line as printed."""

    number: int
    text: str
    raw: str
    prefix: str = ""  # what clean_lines took off the front: a launcher's label, a timestamp, a pane border
    note: str = ""  # what clean_lines took off the end as a person's `# note`; the tool's own text may end so

    @property
    def stripped(self) -> str:
        return self.text.strip()

    @property
    def blank(self) -> bool:
        return not self.text.strip()

    @property
    def indent(self) -> int:
        """Width of the leading whitespace with tabs expanded to 8 columns, as a terminal shows it."""
        body = self.text.lstrip()
        return len(self.text[: len(self.text) - len(body)].expandtabs(8))


def split_lines(text: str) -> list[Line]:
    """Split on CRLF, CR or LF (a final line break does not start another, empty, line); clean a paste."""
    parts = _EOL.split(text.removeprefix("\ufeff"))
    if parts and parts[-1] == "":
        parts.pop()
    lines = [Line(number, part.rstrip(), part) for number, part in enumerate(parts, start=1)]
    # A tool's own output, read from the host, has nothing pasted around it (_live.py): escapes only.
    return [Line(ln.number, _ANSI.sub("", ln.text).rstrip(), ln.raw) if "\x1b" in ln.text else ln
            for ln in lines] if host_output() else clean_lines(lines)


# Terminal escapes: CSI sequences (colours, `nvidia-smi`'s underline on/off around its header), OSC
# titles/links, and lone two-character escapes. nvidia-smi writes them even into files and pipes.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# Prefixes that loggers and launchers put before every line, in the order they nest (outermost first).
# A timestamp (a date and a time, to the minute or finer, indented or not, a collector's `...Z: ` colon
# after it or not) or an Open MPI `--tag-output` tag
# cannot be mistaken for tool output, so they go wherever they appear. The others are ambiguous one line at a
# time and go only when most lines carry them.
_TIMESTAMP = re.compile(
    r"^(?:[ \t]*\[?(?:\d{4}[-/]\d{2}[-/]\d{2}[ T]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?: ?(?:Z|[+-]\d{2}:?\d{2}|UTC))?"
    r"|[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2})\]?:?|\[\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\])(?:[ \t]|$)",
    re.ASCII,
)
# A CI console's clock alone (`19:34:56 ` before every line, as Jenkins' timestamper prints): without a date
# it could be a tool's own column, so it goes only when most lines carry it.
_CLOCK = re.compile(r"^\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?: |$)", re.ASCII)
# The same clock directly before a prefix no tool output starts with (torch's `[rank4]:`, an NCCL line's
# `host:pid:tid [dev] `, a c10 or glog `[E205 10:00:00.123456 file.cpp:616] ` / `E0205 10:00:00.123 1 f.cc:1] `)
# is a paste's clock even on a lone line: only the clock goes, the prefix is read as usual.
_CLOCK_BEFORE = re.compile(
    r"^\d{2}:\d{2}:\d{2}(?:[.,]\d+)? (?=\[rank\d+\]:|[A-Za-z0-9][\w.-]*:\d+:\d+ \[\d+\] "
    r"|\[?[IWEF]\d{3,4} \d{2}:\d{2}:\d{2}\.\d+ )", re.ASCII)
_MPI_TAG_BODY = r"\[\d+,\d+\](?:<\w+>)?:"
_MPI_TAG = re.compile("^" + _MPI_TAG_BODY, re.ASCII)  # Open MPI --tag-output: no blank after
_MPI_TAG_ANYWHERE = re.compile(_MPI_TAG_BODY, re.ASCII)
_TORCH_RANK = re.compile(r"^\[rank\d+\]:", re.ASCII)  # torch's c10 log prefix: the global rank
_RANK_TAG = re.compile(r"^\[\d{1,6}\](?: |$)", re.ASCII)            # mpirun -prepend-rank, torchrun-style tags
# srun --label pads the task id on the left; a heterogeneous job's step puts its component before it (`P1  3: `,
# _build_label in Slurm's src/common/write_labelled_message.c: `P%u %*d: `).
SRUN_LABEL = re.compile(r"^(?:P\d{1,3} )? {0,5}\d{1,6}:(?: |$)", re.ASCII)
# A pdsh/clush label that every line carries goes by name only (`gpu07: `): an address's (`10.0.0.7: `) is
# left to what reads the lines, explain's log reader taking it off where most lines carry one (with any label
# nested in it, as it does a name's).
_NAME_LABEL = re.compile(rf"^{LABEL_NAME}:(?: |$)", re.ASCII)
# A pdsh/clush label (`gpu07: `, `10.0.0.7: `) anywhere among what was taken off a line.
_ANY_LABEL = re.compile(rf"(?<![\w.-])(?P<host>{LABEL_HOST}):(?= |$)", re.ASCII)
# A paste quoted in markdown (`> ` before every line, as a reply quoting a log does): the quote is outermost.
_QUOTE = re.compile(r"^>(?: |$)", re.ASCII)
# A person's note after the output (`  # the slow one`): whitespace, `#`, whitespace. nccl-tests' own
# comments start the line, and a shell prompt ends in `#` without a blank before it: both stay.
_TRAILING_COMMENT = re.compile(r"(?<=\S)\s+#(?:\s.*)?$")


def _strip(line: Line, pattern: re.Pattern[str]) -> Line:
    m = pattern.match(line.text)
    if not m:
        return line
    return Line(line.number, line.text[m.end():].rstrip(), line.raw, line.prefix + m.group(0))


def _strip_common(lines: list[Line], pattern: re.Pattern[str], share: float, least: int = 1,
                  taken: bool = False) -> list[Line]:
    """`taken`: a line whose prefix already starts with the pattern (taken off one line at a time) counts too."""
    body = [line for line in lines if line.text.strip()]
    if len(body) < least:
        return lines
    hits = sum(1 for line in body if pattern.match(line.text) or (taken and pattern.match(line.prefix)))
    if hits < len(body) * share:
        return lines
    return [_strip(line, pattern) for line in lines]


# A terminal multiplexer's pane (tmux, screen) or a boxed paste: border lines of box-drawing characters,
# and text lines framed by a vertical bar on both sides. Only box-drawing characters make a border
# line: a row of dashes may be a tool's own table rule.
_BOX = "\u2500-\u257f"
_BORDER_LINE = re.compile(rf"^\s*[{_BOX}+|]*[{_BOX}][{_BOX}+|\s]*$")
_FRAMED = re.compile(r"^\s*[│┃║|](?P<body>.*?)[│┃║|]\s*$")


def _unframe(lines: list[Line]) -> list[Line]:
    body = [line for line in lines if line.text.strip() and not _BORDER_LINE.match(line.text)]
    borders = any(line.text.strip() and _BORDER_LINE.match(line.text) for line in lines)
    framed = sum(1 for line in body if _FRAMED.match(line.text))
    # One framed line alone could be a table row; with a box border around it, it is a pane.
    if not body or framed < len(body) * 0.6 or framed < (1 if borders else 2):
        return lines
    out = []
    for line in lines:
        if _BORDER_LINE.match(line.text):
            out.append(Line(line.number, "", line.raw, line.prefix + line.text))
        elif m := _FRAMED.match(line.text):
            inner = m.group("body")
            inner = inner[1:] if inner.startswith(" ") else inner  # the pane's one-column padding
            out.append(Line(line.number, inner.rstrip(), line.raw, line.prefix + line.text[: m.start("body")]))
        else:
            out.append(line)
    return out


def clean_lines(lines: list[Line]) -> list[Line]:
    """Lines without terminal escapes, pane borders, launcher/logger prefixes and trailing `# notes`;
    numbers kept, and what was taken off the front of each line kept in `prefix`."""
    cleaned: list[Line] = []
    for line in lines:
        text = _ANSI.sub("", line.text) if "\x1b" in line.text else line.text
        text = unmark(text)
        cleaned.append(Line(line.number, text.rstrip(), line.raw))
    cleaned = _strip_common(cleaned, _QUOTE, 0.6)
    cleaned = _unframe(cleaned)
    # What collects the output of many containers names each one first (docker compose, stern).
    cleaned = _strip_common(cleaned, COMPOSE, 0.6)
    cleaned = _strip_common(cleaned, STERN, 0.6, least=2)
    cleaned = [strip_prefixes(line) for line in cleaned]
    # Most lines of a labelled run carry the label; a wrapped line or a traceback may not.
    cleaned = _strip_common(cleaned, _CLOCK, 0.6, least=2, taken=True)
    cleaned = _strip_common(cleaned, SRUN_LABEL, 0.6)
    cleaned = _strip_common(cleaned, _RANK_TAG, 0.6)
    # A host label is the most ambiguous (`Rate: 100` has the same shape): only when every line has one. pdsh
    # running `srun --label` puts the task's label after its own (`node2: 0: ...`), taken off as srun's is.
    labelled = _strip_common(cleaned, _NAME_LABEL, 1.0, least=2)
    cleaned = labelled if labelled is cleaned else _strip_common(labelled, SRUN_LABEL, 0.6)
    # `0: [2026-01-02 03:04:05] ...`: a label outside a timestamp or a logger's prefix. A host label directly
    # before such a prefix (`gpu07: I0101 12:00:00.123456 1234 distributed.py:56] `) is one on any line.
    cleaned = [strip_prefixes(_label_before_prefix(line)) for line in cleaned]
    # A collector's `worker-9 >> ` where most lines carry one before NCCL's prefix with an empty host, and a
    # clock after it (`worker-9 >> [2025-08-12 01:37:03] :166:1226 [0] ...`).
    arrows = arrow_hosts([line.text for line in cleaned])
    cleaned = [strip_prefixes(_strip(line, ARROW)) if arrow else line
               for line, arrow in zip(cleaned, arrows, strict=True)]
    # A prompt's own `#` (`host:~ # ibstat`) is not a person's note: taking it off would hide the prompt.
    return [_strip_note(line) if "#" in line.text and not line.text.lstrip().startswith("#")
            and not PROMPT.match(line.text) else line
            for line in cleaned]


# The prefixes that are unmistakable one line at a time, in the order tried at each step.
# TensorFlow's `2024-11-25 10:00:00.123456: E file.cc:12] ` before the bare timestamp, whose colon form would
# leave its level and source behind.
_EVERY_LINE = (*EVERY_LINE[:2], TSL, _TIMESTAMP, _CLOCK_BEFORE, _MPI_TAG, _TORCH_RANK, *EVERY_LINE[2:])


def strip_prefixes(line: Line) -> Line:
    """`line` without the launcher and logger prefixes that no tool output could start with, however they
    nest (`(VllmWorker rank=1 pid=7) INFO 11-25 ...`, `[pod/a/b] 2024-... I1125 ...`)."""
    while True:
        stripped = _strip_ray(line)
        for pattern in _EVERY_LINE:
            if stripped is not line:
                break
            stripped = _strip(line, pattern)
        if stripped is line:
            return line
        line = stripped


def _label_before_prefix(line: Line) -> Line:
    labelled = _strip(line, HOST_LABEL)
    return labelled if labelled is not line and strip_prefixes(labelled) is not labelled else line


def prefix_label(prefix: str) -> str | None:
    """The host a pdsh/clush label names in what was taken off a line: the last label that only what comes off
    one line at a time follows (a logger's `I0101 12:00:00.123456 1234 f.py:56] `, a timestamp, torch's
    `[rank3]:`, a launcher's tag in brackets) or srun's task label (`node2: 0: `), since line cleaning takes
    the label off before those."""
    for m in reversed(list(_ANY_LABEL.finditer(prefix))):
        after = SRUN_LABEL.sub("", prefix[m.end():].lstrip(), count=1)
        if not re.sub(r"\[[^\]]*\]:?|<\w+>:", "", strip_prefixes(Line(0, after, "")).text).strip():
            # A syslog host, a pod or a Ray worker's address after the label names where the line was logged.
            return None if prefix_host(after) else m.group("host")
    return None


def _strip_ray(line: Line) -> Line:
    stripped = _strip(line, RAY)
    if stripped is line:
        return line
    return Line(stripped.number, RAY_REPEATED.sub("", stripped.text), stripped.raw, stripped.prefix)


def _strip_note(line: Line) -> Line:
    m = _TRAILING_COMMENT.search(line.text)
    if not m:
        return line
    return Line(line.number, line.text[: m.start()], line.raw, line.prefix, line.text[m.start():])


def after_mpi_tag(text: str) -> str:
    """`text` after the last Open MPI `--tag-output` tag in it (`[1,0]<stdout>:`), stripped; `text` itself
    when it has none. For a line the shared cleaning left a tag on: one behind a label that only some lines
    carry (`0: [1,0]<stderr>: ...`), or behind a prefix it does not know."""
    ends = [m.end() for m in _MPI_TAG_ANYWHERE.finditer(text)]
    return text[ends[-1]:].strip() if ends else text


def content_lines(text: str) -> list[Line]:
    """The non-blank lines, with their original line numbers."""
    return [line for line in split_lines(text) if not line.blank]


class Collector:
    """Keeps a parse going past lines it cannot place: each one is recorded in `unplaced` with the reason.

    `attempt(line, handler)` runs a handler that may raise ParseError for a line it does not understand.
    `result()` gives the completeness fields for the Parsed model, or raises the first error when no line
    at all was recognised: only output with nothing recognisable is an error.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.recognised = 0
        self.unplaced: list[Unplaced] = []
        self.missing: list[str] = []
        self.first_error: ParseError | None = None
        self.first_line: Line | None = None

    def attempt(self, line: Line, handler: Callable[[Line], object]) -> bool:
        if self.first_line is None:
            self.first_line = line
        try:
            handler(line)
        except ParseError as err:
            self.place_nowhere(line, err)
            return False
        self.recognised += 1
        return True

    def place_nowhere(self, line: Line, err: ParseError | str) -> None:
        if isinstance(err, str):
            err = ParseError(self.kind, err, line=line.number, text=line.raw)
        if self.first_error is None:
            self.first_error = err
        self.unplaced.append(Unplaced(line=line.number, text=line.text, reason=err.message))

    def lack(self, what: str) -> None:
        """Record that the output stops before `what` (it is then incomplete)."""
        if what not in self.missing:
            self.missing.append(what)

    def result(self, empty_message: str = "empty output") -> dict[str, object]:
        if not self.recognised:
            if self.first_error is not None:
                raise self.first_error
            fail(self.kind, empty_message, self.first_line)
        return {"complete": not self.missing, "missing": self.missing, "unplaced": self.unplaced}


P = TypeVar("P", bound=Parsed)


def require_complete(fact: P, kind: str) -> P:
    """`fact` itself, or ParseError when the output was cut short: a check never passes on half a fact."""
    if not fact.complete:
        raise ParseError(kind, f"output is incomplete; missing {'; '.join(fact.missing)}")
    return fact


def fail(kind: str, message: str, line: Line | None = None) -> NoReturn:
    """Raise ParseError for `kind`, pointing at `line` when there is one."""
    if line is None:
        raise ParseError(kind, message)
    raise ParseError(kind, message, line=line.number, text=line.raw)


def to_int(kind: str, value: str, line: Line, what: str) -> int:
    """`value` as an int, or a ParseError naming `what` and the line."""
    value = value.strip()
    if not _INT.fullmatch(value):
        fail(kind, f"{what} is not an integer: {value!r}", line)
    return int(value)


def to_float(kind: str, value: str, line: Line, what: str) -> float:
    """`value` as a float (plain or exponent notation), or a ParseError naming `what` and the line."""
    value = value.strip()
    if not _FLOAT.fullmatch(value):
        fail(kind, f"{what} is not a number: {value!r}", line)
    return float(value)


def is_int(value: str) -> bool:
    return bool(_INT.fullmatch(value.strip()))


def number(value: str) -> int | float | None:
    """An int when the text is integral, else a float; None when it is not a number at all."""
    value = value.strip()
    if _INT.fullmatch(value):
        return int(value)
    if _FLOAT.fullmatch(value):
        result = float(value)
        return int(result) if result.is_integer() and "e" not in value.lower() else result
    return None


def unique(items: list[str]) -> list[str]:
    """`items` without repeats, first occurrence kept: logs repeat the same fact once per rank."""
    return list(dict.fromkeys(items))
