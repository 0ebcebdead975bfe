"""Change steps: what a resource's remedy returns, and the command builders remedies share.

A step is one shell command that removes one piece of drift, the command that undoes it, and what
the engine needs to order and report it. Building steps is pure: no step is run here. Commands are
built from quoted parts only; the one unquoted word they may use is `"$FABNET_BACKUP_DIR"`, which the
engine's change script sets to this run's backup directory on the host.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from provisioner.resources.base import sh
from provisioner.resources.sensitive import line_count, sensitive_content, sensitive_path

# Phases order a host's steps: packages and drivers, then modules, then runtime network and QoS,
# then kernel parameters, then files, then services (which read the files), then handlers.
PHASE_PACKAGES = 10
PHASE_MODULES = 20
PHASE_NETWORK = 30
PHASE_QOS = 40
PHASE_SYSCTL = 50
PHASE_FILES = 60
PHASE_SERVICES = 70
PHASE_HANDLERS = 80

DIFF_LINES = 20  # of a write's unified diff in plan/apply --diff; the rest is counted
BACKUP_DIR_VAR = '"$FABNET_BACKUP_DIR"'
ABSENT = "absent"


@dataclass(frozen=True)
class Expect:
    """What a step's target held when the plan was made, checked again on the host under its lock.

    A file: `path` and `value`, the sha256 (hex) of its content or "absent". A runtime setting: `read`,
    a command printing it, and `value`, what it printed (whitespace runs compare as one space); `path`
    then only names the setting in messages. A step whose target no longer matches is not run.
    """

    path: str
    value: str
    read: str | None = None

    @classmethod
    def file(cls, path: str, content: bytes | str | None) -> Expect:
        if content is None:
            return cls(path, ABSENT)
        data = content.encode() if isinstance(content, str) else content
        return cls(path, hashlib.sha256(data).hexdigest())

    @classmethod
    def setting(cls, name: str, read: str, value: str) -> Expect:
        return cls(name, " ".join(value.split()), read)


def read_setting(read: str) -> str:
    """A command substitution printing what `read` prints with whitespace runs as one space (word
    splitting, no globbing), as `Expect.setting` keeps a value."""
    return f"$( (set -f; set -- $({read}); printf '%s' \"$*\") 2>/dev/null)"


def setting_undo(name: str, read: str, was_set: str, old: str, undo: str, *, unchanged: str | None = None) -> str:
    """Undo of a runtime setting (a sysctl, an MTU, a link state, a QoS value, a module, a unit's
    state): `undo` puts back `old` only while `read` still prints what the run set (`was_set`), or still
    `old` (the step never took effect; then `unchanged` runs instead where given, for an undo that
    fails with nothing to do, as `modprobe -r` of a module not loaded does). A value changed since, by
    hand or by another run, is left as it is and the undo fails saying so, as `restore_file` does for a
    file. Values compare with whitespace runs as one space. No `exit`: the revert timer runs several
    undos in one shell."""
    now = f"__fn_u={read_setting(read)}"
    set_word, old_word = shlex.quote(" ".join(was_set.split())), shlex.quote(" ".join(old.split()))
    changed = shlex.quote(f"{name} changed since this run set it: not restored (set {' '.join(was_set.split())}, now ")
    same = "" if unchanged is None else f"if [ \"$__fn_u\" = {old_word} ]; then {unchanged}; el"
    return (f"{now}; {same}if [ \"$__fn_u\" != {set_word} ] && "
            f"[ \"$__fn_u\" != {old_word} ]; then "
            f"printf '%s%s)\\n' {changed} \"$__fn_u\" >&2; false; else {undo}; fi")


# Edit functions by name: (a file's text, the edit's arguments) -> the text with that edit made. Kinds
# register theirs (sysctl: set one key), so that every step editing one file can become one write.
EDITS: dict[str, Callable[..., str]] = {}


@dataclass(frozen=True)
class FileEdit:
    """A write that is an edit of a file's text as read at gather time (`base`, None: no file), so that
    the planner can fold several steps' edits of one file into one write (see plan.merge_writes)."""

    function: str  # a key of EDITS
    args: tuple[str, ...]
    base: str | None
    mode: str | None = None


@dataclass(frozen=True)
class Step:
    """One change on one host.

    `shown` is what plans, reports and journals print: it never carries file contents (which may be
    secret). `needs` names resources (targets) whose steps must all succeed before this one runs;
    earlier steps of the same resource are always needed. `notify` lists service units to restart
    once, after everything else, if this step ran. `writes` lists host files the step replaces (each
    is backed up first). `lockout` marks a change that can cut the management path.
    """

    resource: str
    action: str
    command: str
    shown: str
    undo: str | None = None
    phase: int = PHASE_FILES
    needs: tuple[str, ...] = ()
    notify: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    lockout: bool = False
    diff: str | None = None  # a unified diff of a file change, for --diff (None for secret paths)
    possible: bool = True  # False: no automatic fix; the step only reports why (see `impossible`)
    netdev: str | None = None  # the interface a runtime link change touches (guarded if it carries SSH)
    expect: tuple[Expect, ...] = ()  # what must still be there under the host lock for the step to run
    edit: FileEdit | None = None  # set when the step's write is an edit that composes with others

    @property
    def id(self) -> str:
        return f"{self.resource}:{self.action}"

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Step:
        """A step back from `dataclasses.asdict` (a saved plan)."""
        values = {f.name: raw[f.name] for f in fields(cls) if f.name in raw}
        for name in ("needs", "notify", "writes"):
            values[name] = tuple(values.get(name) or ())
        values["expect"] = tuple(Expect(**e) for e in values.get("expect") or ())
        edit = values.get("edit")
        if edit is not None:
            values["edit"] = FileEdit(**{**edit, "args": tuple(edit["args"])})
        return cls(**values)


def impossible(resource: str, action: str, reason: str, phase: int = PHASE_FILES) -> Step:
    """A step that cannot be done automatically: it fails on the host with `reason`, so the report says it."""
    return Step(resource, action, f"echo {shlex.quote(reason)} >&2; exit 3", f"cannot fix: {reason}", phase=phase,
                possible=False)


def backup_path(path: str) -> str:
    """Where the engine's backup of `path` goes, below the run's backup directory (a shell word)."""
    return BACKUP_DIR_VAR + shlex.quote(path)


def fingerprint(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()[:12]} ({len(data)} bytes)"


def _resolve(path: str) -> str:
    """Shell setting `f` to the file a write of `path` replaces: the file itself, or the one a symlink
    at `path` points to. The probe reads through the link and chmod/chown change the file it points
    to; writing there too keeps the link, so a rollback puts back exactly what was there."""
    p = shlex.quote(path)
    cannot = shlex.quote(f"{path} is a symlink that cannot be resolved: not written")
    return f"f={p}; if [ -L \"$f\" ]; then f=$(readlink -f -- {p}) || {{ echo {cannot} >&2; exit 1; }}; fi; "


def write_file(path: str, data: bytes, *, mode: str | None = None, owner: str | None = None,
               group: str | None = None) -> str:
    """Replace `path` atomically with `data`, after a backup of what was there.

    A temporary file in the same directory gets the content, owner and mode, is fsynced and renamed
    over the target, then the directory is fsynced: a reader (or a crash) sees the old file or the new
    one, never a part. Without `mode`/`owner`, an existing file's are kept (new files: 0644 root).
    The backup is `$FABNET_BACKUP_DIR/PATH`, or `PATH.absent` when there was no file (rollback removes it).
    No backup, no write: a backup that fails (a full disk) stops the step before the file is touched,
    since its undo could not restore it. A symlink is written through (`_resolve`); a directory at
    `path` is refused (a rename would move the new file into it).
    """
    encoded = base64.b64encode(data).decode()
    return write_file_from(path, f"printf %s {shlex.quote(encoded)} | base64 -d", mode=mode, owner=owner,
                           group=group)


def write_file_from(path: str, content: str, *, mode: str | None = None, owner: str | None = None,
                    group: str | None = None, record: bool = False) -> str:
    """`write_file` of what the shell command `content` prints, for content known only on the host (a
    version an install picked): the same backup, atomic rename and checks. A `content` that fails
    stops the step with the file untouched. With `record`, the sha256 of what is written is kept
    beside the backup (`PATH.written`), before the rename, for `restore_file(path, recorded=True)`."""
    keep_meta = (
        "if [ -e \"$f\" ]; then chown --reference=\"$f\" \"$t\"; chmod --reference=\"$f\" \"$t\"; "
        "else chmod 0644 \"$t\"; fi; "
    )
    meta = ""
    if owner is not None or group is not None:
        meta += f"chown {shlex.quote((owner or '') + ':' + (group or ''))} \"$t\"; "
    if mode is not None:
        meta += f"chmod {shlex.quote(mode)} \"$t\"; "
    is_dir = shlex.quote(f"{path} is a directory: not replaced")
    return (
        _resolve(path)
        + f"if [ -d \"$f\" ]; then echo {is_dir} >&2; exit 1; fi; "
        f"d=$(dirname -- \"$f\"); mkdir -p -- \"$d\"; "
        + _backup(path, "written")
        + f"t=$(mktemp \"$d/.fabnet.XXXXXXXX\"); trap 'rm -f -- \"$t\"' EXIT; "
        f"{{ {content}; }} > \"$t\"; "
        + keep_meta + meta
        + ("sha256sum < \"$t\" | cut -c1-64 > \"$b.written\"; " if record else "")
        + "sync -- \"$t\"; mv -fT -- \"$t\" \"$f\"; trap - EXIT; sync -- \"$d\""
    )


def _backup(path: str, done: str) -> str:
    """Shell backing up the file "$f" (of `path`) as `b`, unless this run already did: the true original
    is the one kept. `done` names what would have been lost in the message of a failed backup."""
    no_backup = shlex.quote(f"{path} could not be backed up: not {done}")
    return (
        f"b={backup_path(path)}; mkdir -p -- \"$(dirname -- \"$b\")\"; "
        f"if [ -e \"$b\" ] || [ -e \"$b.absent\" ]; then :; "
        # The backup appears whole or not at all: an undo may run after a kill at any point of this step.
        # Not an `a && b` list: `sh -e` ignores a failure of its first command.
        f"elif [ -e \"$f\" ]; then if ! {{ cp -p -- \"$f\" \"$b.part\" && mv -f -- \"$b.part\" \"$b\"; }}; then "
        f"rm -f -- \"$b.part\"; echo {no_backup} >&2; exit 1; fi; "
        f"else : > \"$b.absent\"; fi; "
    )


def backed_up(paths: Sequence[str], command: str) -> str:
    """`command`, which edits `paths` itself (a package tool's own files, such as dnf's versionlock list),
    after a backup of each as a write takes it, and with what it left recorded beside the backup: undo
    with `restore_file(path, recorded=True)`, which puts each back unless it was changed by hand since."""
    before = "".join(_resolve(path) + _backup(path, "changed") for path in paths)
    after = "".join(_resolve(path) + f"b={backup_path(path)}; "
                    'if [ -e "$f" ]; then sha256sum < "$f" | cut -c1-64; else echo absent; fi > "$b.written"; '
                    for path in paths)
    return before + "{ " + command + "; }; " + after.rstrip("; ")


def restore_file(path: str, written: bytes | None = None, *, recorded: bool = False) -> str:
    """Undo of `write_file`: put the backup back (atomically, through a symlink as the write went), or
    remove a file that did not exist. Nothing to do where the write never began (no backup).

    With `written` (what the step wrote), the file must still hold that, or what was there before (the
    step was cut off before its rename): a file changed by hand since the run wrote it is left as it
    is and the undo fails saying so, rather than the edit being lost to a backup older than it. With
    `recorded`, what the step wrote is known only on the host: the hash `write_file_from(record=True)`
    kept there is compared instead (none kept: the write never reached its rename).
    """
    backup = backup_path(path)
    guard = ""
    if written is not None or recorded:
        sha = hashlib.sha256(written).hexdigest() if written is not None else '"$(cat -- "$b.written" 2>/dev/null)"'
        changed = shlex.quote(f"{path} changed since this run wrote it: not restored (its edit is kept)")
        now = 'h=absent; if [ -e "$f" ]; then h=$(sha256sum < "$f" | cut -c1-64); fi; '
        guard = (now + 'o=absent; if [ -e "$b" ]; then o=$(sha256sum < "$b" | cut -c1-64); fi; '
                 f'if [ "$h" != {sha} ] && [ "$h" != "$o" ]; then echo {changed} >&2; exit 1; fi; ')
    return (
        f"b={backup}; " + _resolve(path)
        + "if [ -e \"$b\" ] || [ -e \"$b.absent\" ]; then " + guard + ":; fi; "
        + "if [ -e \"$b\" ]; then t=$(mktemp \"$(dirname -- \"$f\")/.fabnet.XXXXXXXX\") || exit 1; "
        "if ! { cp -p -- \"$b\" \"$t\" && sync -- \"$t\" && mv -fT -- \"$t\" \"$f\"; }; then "
        "rm -f -- \"$t\"; exit 1; fi; "
        "elif [ -e \"$b.absent\" ]; then rm -f -- \"$f\"; fi"
    )


def _lines(data: bytes) -> str:
    count = line_count(data)
    return f"{count} line" + ("" if count == 1 else "s")


def text_diff(path: str, old: bytes | str | None, new: bytes | str, *, sensitive: bool = False) -> str:
    """A unified diff of a file write, for --diff: `old` is what the host held (None: no file). A file
    that is `sensitive`, or whose path or either content looks secret-bearing (a netplan file with a
    Wi-Fi password, a WireGuard key), is shown by line counts only; binary content is only said to differ."""
    before_data = old.encode() if isinstance(old, str) else old
    after_data = new.encode() if isinstance(new, str) else new
    if sensitive or sensitive_path(path) or any(
            data is not None and sensitive_content(data) for data in (before_data, after_data)):
        have = _lines(before_data) if before_data is not None else "no file"
        return (f"content differs (sensitive, not shown): {have} on the host, {_lines(after_data)} desired; "
                "compare the sha256 values")
    try:
        before = old.decode() if isinstance(old, bytes) else (old or "")
        after = new.decode() if isinstance(new, bytes) else new
    except UnicodeDecodeError:
        return "content differs (binary)"
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(),
                                      f"{path} (on host)" if old is not None else "/dev/null (no file on host)",
                                      f"{path} (desired)", n=1, lineterm=""))
    if len(lines) > DIFF_LINES:
        lines = [*lines[:DIFF_LINES], f"... {len(lines) - DIFF_LINES} more diff lines"]
    return "\n".join(lines) or "content differs (line endings or final newline)"


def file_step(resource: str, action: str, path: str, data: bytes, *, phase: int = PHASE_FILES,
              mode: str | None = None, owner: str | None = None, group: str | None = None,
              notify: tuple[str, ...] = (), needs: tuple[str, ...] = (), diff: str | None = None,
              lockout: bool = False, expect: tuple[Expect, ...] = (), edit: FileEdit | None = None) -> Step:
    """A step writing `path`. `expect` is what the plan read there (`Expect.file`); with `edit`, the
    content is that edit of the text read, and it is what the planner folds with other edits of `path`."""
    meta = " ".join(x for x in (mode, f"{owner or ''}:{group or ''}" if owner or group else None) if x)
    shown = f"write {path} ({fingerprint(data)}{', ' + meta if meta else ''}; atomic, backed up)"
    return Step(resource, action, write_file(path, data, mode=mode, owner=owner, group=group), shown,
                undo=restore_file(path, data), phase=phase, notify=notify, needs=needs, writes=(path,), diff=diff,
                lockout=lockout, expect=expect, edit=edit)


def rewrite_step(resource: str, action: str, path: str, data: bytes, before: str | None, **options: Any) -> Step:
    """A write of `path` planned against `before`, the text read there at gather time (None: no file):
    guarded by it (`Expect.file`) and diffed from it. `options` are file_step's."""
    return file_step(resource, action, path, data, expect=(Expect.file(path, before),),
                     diff=text_diff(path, before, data), **options)


def edit_step(resource: str, action: str, path: str, edit: FileEdit, *, phase: int = PHASE_FILES,
              notify: tuple[str, ...] = (), needs: tuple[str, ...] = ()) -> Step:
    """A step writing `path` as `edit` of its text read at gather time, guarded by that text's hash."""
    text = EDITS[edit.function](edit.base or "", *edit.args)
    return rewrite_step(resource, action, path, text.encode(), edit.base, phase=phase, mode=edit.mode,
                        notify=notify, needs=needs, edit=edit)


def command_step(resource: str, action: str, parts: tuple[str, ...] | list[str], *, undo: list[str] | None = None,
                 phase: int, needs: tuple[str, ...] = (), notify: tuple[str, ...] = (),
                 lockout: bool = False, netdev: str | None = None) -> Step:
    """A step running one command given as parts (each quoted)."""
    command = sh(*parts)
    return Step(resource, action, command, command, undo=sh(*undo) if undo else None, phase=phase, needs=needs,
                 notify=notify, lockout=lockout, netdev=netdev)
