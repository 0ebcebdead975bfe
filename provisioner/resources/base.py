"""What every resource kind provides: read commands (probes) and a pure evaluation of their output.

A resource never talks to a host. The engine collects the probes of every resource of a host, runs
them all in one SSH exec, and hands each resource the results of its own probes. Identical commands
(two resources reading `lsmod`, say) share one probe, because a probe's key is its command.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Generic, Literal, TypeVar

from provisioner.load.specs import Spec

Status = Literal["ok", "drift", "error"]


@dataclass(frozen=True)
class ProbeGroup:
    """How probes of one tool share a call (probejoin.py): `command` is the probe's command without its
    last argument (what names the group), `argument` that argument (unquoted), and `split(stdout, arguments)`
    cuts the output of the one call into the outputs the probes would have printed alone, one per argument
    (None: it cannot). The call is `command ARG1 .. ARGn`, or what `join(arguments)` builds."""

    command: str
    argument: str
    split: Callable[[str, Sequence[str]], list[str] | None]
    join: Callable[[Sequence[str]], str] | None = None


@dataclass(frozen=True)
class Probe:
    """One read-only shell command. Build `command` from quoted parts (`sh(...)`), never from raw input."""

    command: str
    timeout: float = 30.0
    group: ProbeGroup | None = None  # probes that may run as one call with others of their group
    # Shell words naming the files whose content and status decide the output (this package's own globs
    # unquoted, anything else quoted): watch runs the probe again only when one of them changed
    # (facts/fingerprint.py). Empty where anything else can change the output: kernel or driver state, a
    # tool's own state, files under /proc, /sys or /dev; unless `still` covers the rest.
    reads: tuple[str, ...] = ()
    # With `reads`, for output that also follows processes: from a reading's stdout, the further paths whose
    # status must stay the same for it to stay true (quoted: `/proc/PID`), or None where it can change with
    # no file changing (a unit starting): then the probe runs again next cycle.
    still: Callable[[str], tuple[str, ...] | None] | None = field(default=None, compare=False)

    @cached_property
    def key(self) -> str:
        # Looked up many times per probe (joining, the script, splitting, evaluating): hashed once.
        return hashlib.sha256(self.command.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ProbeResult:
    stdout: str
    stderr: str
    exit_code: int


@dataclass(frozen=True)
class HostContext:
    """Per-host facts about where things live, from inventory variables."""

    name: str
    sysfs_root: str = "/sys"  # fabnet_sysfs_root: where class/net/*/ecn and class/infiniband live
    package_manager: str = "apt"  # fabnet_package_manager: apt or dnf (for remedies)
    ofed_install_command: str | None = None  # fabnet_ofed_install_command: the site's OFED installer
    management_interfaces: tuple[str, ...] = ()  # netdevs the SSH session may arrive on (lockout guard)


@dataclass(frozen=True)
class Check:
    """One compared attribute of one resource on one host."""

    attribute: str
    desired: str
    actual: str | None
    status: Status
    message: str = ""


def shown_actual(check: Check) -> str:
    """A check's actual value for a sentence: never Python's `None`. No value is "(absent)" where the
    host was read (nothing there), "(not read)" where it could not be."""
    if check.actual is not None:
        return check.actual
    return "(not read)" if check.status == "error" else "(absent)"


@dataclass(frozen=True)
class Results:
    """The probe results of one host, looked up by probe."""

    by_key: Mapping[str, ProbeResult] = field(default_factory=dict)

    def __getitem__(self, probe: Probe) -> ProbeResult:
        return self.by_key[probe.key]

    def get(self, probe: Probe) -> ProbeResult | None:
        return self.by_key.get(probe.key)


S = TypeVar("S", bound=Spec)


@dataclass(frozen=True)
class ResourceType(Generic[S]):
    """A resource kind, everything about it in one value: the generic code reads only this.

    `spec` is the pydantic model a play's `{kind: ...}` is validated with (its docstring and field
    descriptions are the kind's documentation); `probes(spec, ctx)` lists what to read;
    `evaluate(spec, results, ctx)` compares; `remedy` (when the kind can change anything) says which
    steps remove the drift. A kind module exposes its ResourceType as `RESOURCE`; the registry
    (`provisioner.resources`) finds it there.
    """

    kind: str
    spec: type[S]
    probes: Callable[[S, HostContext], Sequence[Probe]]
    evaluate: Callable[[S, Results, HostContext], list[Check]]
    # `remedy(spec, results, ctx, checks)`: the steps removing the drift in `checks` (resources/steps.py).
    remedy: Callable[[S, Results, HostContext, list[Check]], list[Any]] | None = None
    # `fleet_checks(spec, values)`: for kinds comparing hosts with each other, called once every host is
    # gathered with each host's value (its first check's actual, as a number) -> the host's final check.
    fleet_checks: Callable[[S, dict[str, int | None]], dict[str, Check]] | None = None
    # Kinds whose steps on the same host must all have worked before this kind's steps run.
    needs: tuple[str, ...] = ()
    # `notified_unit(target)`: the systemd unit a resource of this kind is, when its own steps must wait
    # for the resources that notify (restart) that unit.
    notified_unit: Callable[[str], str] | None = None
    # Settings as a play writes them, for the playbook reference (docs/playbook.md, provisioner.load.docs):
    # together they set every key of `spec`, and each must validate.
    examples: tuple[Mapping[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.spec.kind != self.kind:
            raise ValueError(f"resource kind {self.kind!r} has the spec model of kind {self.spec.kind!r}")


def sh(*parts: str) -> str:
    """A command line from parts, each quoted for the remote POSIX shell."""
    return " ".join(shlex.quote(part) for part in parts)


def ok(attribute: str, desired: object, actual: object, message: str = "") -> Check:
    return Check(attribute, str(desired), None if actual is None else str(actual), "ok", message)


def drift(attribute: str, desired: object, actual: object, message: str = "") -> Check:
    return Check(attribute, str(desired), None if actual is None else str(actual), "drift", message)


def compare(attribute: str, desired: object, actual: object, message: str = "") -> Check:
    return (ok if desired == actual else drift)(attribute, desired, actual, message)


def error(attribute: str, desired: object, message: str) -> Check:
    return Check(attribute, str(desired), None, "error", message)


NOT_RUN_EXIT = -1  # a ProbeResult the engine made for a probe that never ran; its stderr says why


def failed_probe(result: ProbeResult | None, what: str) -> str | None:
    """A reason to report if a probe did not run cleanly, else None."""
    if result is None:
        return f"{what}: no output (the probe did not run)"
    if result.exit_code == NOT_RUN_EXIT:
        return f"{what}: {result.stderr}"
    if result.exit_code == 127:
        return f"{what}: command not found on the host"
    if result.exit_code == 124:
        return f"{what}: timed out"
    return None


def first_line(text: str) -> str:
    """The first non-blank line of `text`, stripped ('' when there is none)."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def probe_error(result: ProbeResult | None, what: str) -> str | None:
    """Like `failed_probe`, and also any other non-zero exit, with the first line of stderr."""
    reason = failed_probe(result, what)
    if reason is not None or result is None or result.exit_code == 0:
        return reason
    detail = first_line(result.stderr) or first_line(result.stdout)
    return f"{what}: exit code {result.exit_code}" + (f": {detail}" if detail else "")


# ------------------------------------------------------------------------------------------ single values

def read_value_command(path: str) -> str:
    """A command printing a small text file (a /proc/sys or sysfs value) as `cat -- PATH` would, except
    that a last line without a line break gets one.

    The shell's own `read` does it, so no program starts (a `cat` costs the node a process start per
    value). Where that reads nothing (no such file, no permission, an empty file, a read error), `cat`
    runs after all, so an error reads exactly as `cat`'s. `path` is one shell word: quote it first.
    """
    return (
        "__fn_n=; while IFS= read -r __fn_l || [ -n \"$__fn_l\" ]; do printf '%s\\n' \"$__fn_l\"; __fn_n=1; "
        f'done 2>/dev/null <{path}; [ -n "$__fn_n" ] || cat -- {path}'
    )


def read_lines_command(files: str, fallback: str) -> str:
    """A command printing `FILE:LINE` for each non-empty line of each of `files` (shell words: sysfs files
    of small values), as `grep -H .` prints them, with the shell's own `read`: no program starts.

    grep stays the authority: `fallback` (a grep of the same files) runs instead, and nothing of the shell's
    reading is printed, where a word is not a regular file or cannot be opened, or where a file gives no
    line at all: the shell reads an I/O error (a driver's EIO) as the end of the file, where grep names it.
    """
    return (
        f"__fn_o=; __fn_g=; for __fn_f in {files}; do __fn_h=; [ -f \"$__fn_f\" ] && "
        "{ while IFS= read -r __fn_l || [ -n \"$__fn_l\" ]; do [ -z \"$__fn_l\" ] || { __fn_h=1; "
        # The line break inside the quotes is the shell's own: printf's escapes would read the values' too.
        "__fn_o=\"$__fn_o$__fn_f:$__fn_l\n\"; }; done <\"$__fn_f\"; } 2>/dev/null && [ -n \"$__fn_h\" ] || "
        f"{{ __fn_g=1; break; }}; done; if [ -n \"$__fn_g\" ]; then {fallback}; else printf '%s' \"$__fn_o\"; fi"
    )


def read_tree_command(*folders: str) -> str:
    """A command printing `FILE:LINE` for each non-empty line of each file in `folders` (sysfs folders of
    small values), as `grep -r -H . -- FOLDERS` prints it, in another order (grep's is the folder's own).
    The shell reads them (read_lines_command); where a folder is missing, or anything in it is not a plain
    readable file, grep runs after all, so errors read exactly as grep's. Each of `folders` is one shell
    word: quote it first.
    """
    grep = f"grep -r -H . -- {' '.join(folders)}"
    exist = " && ".join(f"[ -d {folder} ]" for folder in folders)
    globs = " ".join(f"{folder}/*" for folder in folders)
    return f"if {exist}; then {read_lines_command(globs, grep)}; else {grep}; fi"


# ------------------------------------------------------------------------------- config file listings

_FILE_HEADER = re.compile(r"^==(?P<mark>[>!]) (?P<path>.+) <==$", re.MULTILINE)


def print_files_command(*patterns: str) -> str:
    """A command printing every existing file matching the glob `patterns`, each after a header line.

    `==> PATH <==` precedes a readable file's text, and one line break follows that text; an unreadable
    file gets `==! PATH <==` and no text. The patterns are fixed strings of this package (never user
    input): they stay unquoted so that the remote shell expands them. A pattern that matches nothing, or
    a missing directory, prints nothing. One `tail -v` prints every readable file in that format (it
    puts a line break before each header but the first; the final `echo` adds the last), which is one
    process for the lot instead of a `cat` each. It sets the positional parameters: a probe's own.
    """
    return (
        f"set --; for f in {' '.join(patterns)}; do "
        'if [ -d "$f" ] || ! [ -e "$f" ]; then :; '
        'elif [ -r "$f" ]; then set -- "$@" "$f"; '
        "else printf '==! %s <==\\n' \"$f\"; fi; done; "
        'if [ $# -gt 0 ]; then tail -v -n +1 -- "$@"; echo; fi; true'
    )


def files_probe(*patterns: str) -> Probe:
    """A probe printing the files matching `patterns` (print_files_command), which only reads them: a
    pattern and, for a glob, its folder (whose status changes when an entry comes, goes or is renamed).

    The listings of several kinds (boot network files, module lists, sysctl files) are one call for the
    lot (probejoin.py): each file comes under a header naming it, so the output goes back to each probe by
    its patterns. Patterns are words of `*` and `?` globs, no blanks or brackets."""
    reads: list[str] = []
    for pattern in patterns:
        if not pattern.startswith("/") or any(c in pattern for c in " \t\n[]"):
            raise ValueError(f"files_probe: {pattern!r} is not an absolute path of `*` and `?` globs")
        if any(c in pattern for c in "*?"):
            reads.append(pattern.rsplit("/", 1)[0] or "/")
        reads.append(pattern)
    words = " ".join(patterns)
    return Probe(print_files_command(*patterns), reads=tuple(reads),
                 group=ProbeGroup(_FILES_GROUP, words, split_file_listings, join=_join_file_listings))


_FILES_GROUP = "tail -v -n +1 --"  # what names the group in a message: the one call's tool


def _join_file_listings(arguments: Sequence[str]) -> str:
    return print_files_command(*dict.fromkeys(word for argument in arguments for word in argument.split()))


def _glob(pattern: str) -> re.Pattern[str]:
    """The shell's reading of a pattern of `*` and `?`: neither crosses a `/`."""
    return re.compile("".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in pattern))


def split_file_listings(text: str, arguments: Sequence[str]) -> list[str] | None:
    """The joined listing, back to each probe: the files its patterns match, as its own call prints them (a
    file two probes match goes to both). None when a path is listed twice with two texts: a header that a
    file's own text seemed to hold could not be told from the real one. (Twice with one text is one file two
    patterns matched.)"""
    blocks = _blocks(text)
    texts: dict[str, set[str | None]] = {}
    for mark, path, body in blocks:
        texts.setdefault(path, set()).add(None if mark == "!" else body)
    if any(len(seen) > 1 for seen in texts.values()):
        return None
    # One block per path, in the order listed (the unreadable first, as the call prints them).
    once = {path: (mark, body) for mark, path, body in blocks}
    parts = []
    for argument in arguments:
        globs = [_glob(word) for word in argument.split()]
        parts.append("".join(f"==! {path} <==\n" if mark == "!" else f"==> {path} <==\n{body}\n"
                             for path, (mark, body) in once.items() if _any_match(globs, path)))
    return parts


def _any_match(globs: Sequence[re.Pattern[str]], path: str) -> bool:
    return any(glob.fullmatch(path) for glob in globs)


@dataclass(frozen=True)
class FileListing:
    """What `print_files_command` printed: path -> text, and the paths that could not be read."""

    files: dict[str, str]
    unreadable: tuple[str, ...] = ()


def parse_file_listing(text: str) -> FileListing:
    files: dict[str, str] = {}
    unreadable: list[str] = []
    for mark, path, body in _blocks(text):
        if mark == "!":
            unreadable.append(path)
        else:
            files[path] = body
    return FileListing(files, tuple(unreadable))


def _blocks(text: str) -> list[tuple[str, str, str]]:
    """(mark, path, text) of each header of a listing, in order."""
    headers = list(_FILE_HEADER.finditer(text))
    blocks = []
    for number, header in enumerate(headers):
        after = headers[number + 1] if number + 1 < len(headers) else None
        body = "" if header["mark"] == "!" else text[header.end() + 1 : after.start() if after else len(text)]
        # The command adds one line break after each file's text: take exactly that one away.
        blocks.append((header["mark"], header["path"], body[:-1] if body.endswith("\n") else body))
    return blocks


class ProbeFailed(Exception):
    """A probe did not run cleanly, or printed something that cannot be used; the message says which."""


def stdout_of(results: Results, probe: Probe, what: str) -> str:
    """The probe's stdout, or ProbeFailed naming `what` failed and how (exit code, stderr's first line)."""
    result = results.get(probe)
    reason = probe_error(result, what)
    if reason is not None or result is None:
        raise ProbeFailed(reason or f"{what}: no output")
    return result.stdout


def errors_for(attributes: Sequence[tuple[str, object]], message: str) -> list[Check]:
    """One error Check per (attribute, desired): what a resource reports when it could not read a fact."""
    return [error(attribute, desired, message) for attribute, desired in attributes]
