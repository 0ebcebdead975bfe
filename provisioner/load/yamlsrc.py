"""YAML loading that remembers where every value came from.

Validation happens long after parsing; to say `site.yml:14: plays[0].resources[2].mtu: ...` it needs the
line of each mapping key and sequence item. `load_yaml` returns plain Python data plus that line map.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from provisioner.errors import ConfigError

# Limits on what a user's file may make fabnet do. Each is far above any real inventory or playbook
# (a 10,000-host inventory is well under 1 MiB and a few hundred thousand values) and below what
# exhausts a control machine: a YAML alias bomb of a few hundred bytes expands to billions of values,
# and pure-Python YAML needs about 5 s and 90 MB per MiB of dense inventory.
MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_VALUES = 500_000  # values in one file once every alias is expanded
MAX_ALIASES = 10_000  # uses of an anchor (`*name`, `<<: *name`)
MAX_DEPTH = 100  # nesting of mappings and sequences

# A path into loaded data: mapping keys are str (int keys are stringified), sequence indices are int.
PathPart = str | int
KeyPath = tuple[PathPart, ...]

_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MERGE_TAG = "tag:yaml.org,2002:merge"


def format_path(path: Iterable[PathPart], root: str = "") -> str:
    """`("a", 0, "b")` -> `a[0].b`; with `root="plays"`: `plays[0].b` for `(0, "b")`."""
    text = root
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


@dataclass(frozen=True)
class Origin:
    """Where a value was written: file, 1-based line (None if unknown) and dotted key path."""

    file: str
    line: int | None
    key: str = ""

    def __str__(self) -> str:
        return self.file + (f":{self.line}" if self.line else "")

    def error(self, message: str, key: str | None = None) -> ConfigError:
        return ConfigError(message, file=self.file, line=self.line, key=key if key is not None else self.key)


@dataclass(frozen=True)
class Sourced:
    """Plain data loaded from one YAML file, with the line of every key and item.

    `root` names the top of the document in key paths (e.g. "plays"), so messages read naturally.
    """

    data: Any
    file: str
    lines: Mapping[KeyPath, int] = field(default_factory=dict)
    root: str = ""

    def line(self, path: Sequence[PathPart] = ()) -> int | None:
        """Line of `path`, or of its nearest ancestor the file spelled out (e.g. a templated list)."""
        parts = tuple(_norm(p) for p in path)
        while True:
            if parts in self.lines:
                return self.lines[parts]
            if not parts:
                return None
            parts = parts[:-1]

    def key(self, path: Sequence[PathPart]) -> str:
        return format_path((_norm(p) for p in path), self.root)

    def origin(self, path: Sequence[PathPart] = ()) -> Origin:
        return Origin(self.file, self.line(path), self.key(path))

    def error(self, message: str, path: Sequence[PathPart] = ()) -> ConfigError:
        return ConfigError(message, file=self.file, line=self.line(path), key=self.key(path) or None)


def _norm(part: PathPart) -> PathPart:
    return part if isinstance(part, int) and not isinstance(part, bool) else str(part)


_KIND_OF_FILE = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def read_text(path: str | Path, *, what: str = "YAML file", limit: int | None = None) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes (MAX_FILE_BYTES by default).

    A FIFO, socket or device is refused without reading it (a FIFO would block until a writer comes),
    and a file that is too large is refused after reading one byte more than the limit, never whole.
    """
    file = str(path)
    limit = MAX_FILE_BYTES if limit is None else limit
    try:
        # O_NONBLOCK: opening a FIFO for reading must not wait for a writer; fstat then refuses it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as exc:
        raise ConfigError("file not found", file=file) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=file) from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise ConfigError(f"is a directory, expected a {what}", file=file)
        kind = next((name for test, name in _KIND_OF_FILE if test(mode)), "not a regular file")
        raise ConfigError(f"is {kind}, expected a regular {what}", file=file)
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise ConfigError(f"cannot read: {exc.strerror}", file=file) from exc
    if len(data) > limit:
        raise ConfigError(f"larger than the limit of {_size(limit)} for a {what}", file=file)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - data.rfind(b"\n", 0, exc.start)
        raise ConfigError(
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} at column {column} cannot be decoded "
            "(save the file as UTF-8)",
            file=file,
            line=line,
        ) from None


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit % (1024 * 1024) == 0 else f"{limit} bytes"


# Characters YAML 1.1 does not allow in a stream (tab, LF and CR aside), as PyYAML's reader defines them.
_FORBIDDEN = re.compile("[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010FFFF]")


def check_characters(text: str, *, file: str) -> None:
    """Refuse NUL, other control characters and lone surrogates, naming the line and the character."""
    found = _FORBIDDEN.search(text)
    if found is None:
        return
    start = found.start()
    line = text.count("\n", 0, start) + 1
    column = start - text.rfind("\n", 0, start)
    char = found.group()
    name = "a NUL byte" if char == "\0" else f"the control character U+{ord(char):04X}"
    raise ConfigError(
        f"{name} at column {column}; YAML files may hold only printable text, tabs and newlines",
        file=file,
        line=line,
    )


def load_yaml(path: str | Path, *, root: str = "") -> Sourced:
    """Read one YAML document safely; a missing or unreadable file, bad YAML, a duplicate key or a
    limit exceeded (size, aliases, nesting) is a ConfigError."""
    file = str(path)
    return parse_yaml(read_text(path), file=file, root=root)


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader with the nesting depth and the number of alias uses capped while composing
    (its composer recurses once per level, so a deep document would otherwise end in RecursionError)."""

    def __init__(self, stream: str, file: str) -> None:
        super().__init__(stream)
        self.fabnet_file = file
        self.fabnet_depth = 0
        self.fabnet_aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.ScalarEvent):
            return super().compose_node(parent, index)
        if self.check_event(yaml.AliasEvent):
            self.fabnet_aliases += 1
            if self.fabnet_aliases > MAX_ALIASES:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]  # unannotated in types-PyYAML
                raise ConfigError(
                    f"more than {MAX_ALIASES} alias uses (*name); refusing a document that may expand without bound",
                    file=self.fabnet_file,
                    line=mark.line + 1,
                )
            return super().compose_node(parent, index)
        self.fabnet_depth += 1
        try:
            if self.fabnet_depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]  # unannotated in types-PyYAML
                raise ConfigError(
                    f"nested more than {MAX_DEPTH} levels deep", file=self.fabnet_file, line=mark.line + 1
                )
            return super().compose_node(parent, index)
        finally:
            self.fabnet_depth -= 1


def parse_yaml(text: str, *, file: str, root: str = "", duplicates: list[str] | None = None) -> Sourced:
    """Like `load_yaml` for text already in memory; `file` is only used in messages.

    With a `duplicates` list, a key given twice in one mapping is not an error: the last one is used
    and a warning goes to the list, as Ansible does for inventories and variable files.
    """
    if len(text) > MAX_FILE_BYTES:
        raise ConfigError(f"larger than the limit of {_size(MAX_FILE_BYTES)} for a YAML file", file=file)
    check_characters(text, file=file)
    loader = _BoundedLoader(text, file)
    try:
        node = loader.get_single_node()
        lines: dict[KeyPath, int] = {}
        data = None
        if node is not None:
            lines[()] = node.start_mark.line + 1
            data = _Builder(loader, file, lines, root, duplicates).build(node, ())
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or "invalid YAML"
        if exc.context:
            problem = f"{exc.context}: {problem}"
        raise ConfigError(
            f"invalid YAML: {problem}", file=file, line=mark.line + 1 if mark is not None else None
        ) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", file=file) from exc
    finally:
        loader.dispose()
    return Sourced(data=data, file=file, lines=lines, root=root)


class _Builder:
    """Turns a composed node graph into plain data, recording lines and refusing duplicate keys (or,
    given a `duplicates` list, keeping the last and noting each there)."""

    def __init__(self, loader: yaml.SafeLoader, file: str, lines: dict[KeyPath, int], root: str,
                 duplicates: list[str] | None = None) -> None:
        self.duplicates = duplicates
        self.root = root
        self.loader = loader
        self.file = file
        self.lines = lines
        self.active: set[int] = set()  # nodes being built: an alias back into one is a loop
        self.values = 0  # values built so far, every alias expanded
        self.merges = 0  # merge keys being followed: `<<: *a` inside `a`'s source, and so on
        self.built: set[int] = set()  # nodes built at least once: building one again expands an alias
        self.alias_at: KeyPath | None = None  # where the alias being expanded is used

    def _limit(self, node: yaml.Node, path: KeyPath, message: str) -> ConfigError:
        if self.alias_at is not None:
            # The alias's own line is its anchor's; the collection that uses it is where it was written.
            line = self.lines.get(self.alias_at[:-1], node.start_mark.line + 1)
            return ConfigError(message, file=self.file, line=line, key=format_path(self.alias_at, self.root) or None)
        return ConfigError(
            message, file=self.file, line=node.start_mark.line + 1, key=format_path(path, self.root) or None
        )

    def _count(self, node: yaml.Node, path: KeyPath) -> None:
        self.values += 1
        if self.values > MAX_VALUES:
            raise self._limit(
                node, path, f"expands to more than {MAX_VALUES:,} values (YAML aliases used as a bomb?)"
            )
        # Aliases can nest a document deeper than it is written; the count is of the expanded depth.
        if len(path) > MAX_DEPTH:
            raise self._limit(node, path, f"nested more than {MAX_DEPTH} levels deep once aliases are expanded")

    def _count_tree(self, node: yaml.Node, path: KeyPath) -> None:
        """Count a tagged collection (!!set, !!omap...) that PyYAML's own constructor builds."""
        todo: list[tuple[yaml.Node, int]] = [(node, 0)]
        while todo:
            current, depth = todo.pop()
            self._count(current, path + ("",) * depth)
            if isinstance(current, yaml.SequenceNode):
                todo.extend((item, depth + 1) for item in current.value)
            elif isinstance(current, yaml.MappingNode):
                todo.extend((part, depth + 1) for pair in current.value for part in pair)

    def build(self, node: yaml.Node, path: KeyPath) -> Any:
        if id(node) in self.active:
            raise ConfigError(
                "recursive YAML alias",
                file=self.file,
                line=node.start_mark.line + 1,
                key=format_path(path, self.root) or None,
            )
        self._count(node, path)
        if id(node) in self.built and self.alias_at is None:
            # A node built before is an alias being expanded: limits are reported where it is used.
            self.alias_at = path
            try:
                return self._build(node, path)
            finally:
                self.alias_at = None
        self.built.add(id(node))
        return self._build(node, path)

    def _build(self, node: yaml.Node, path: KeyPath) -> Any:
        if isinstance(node, yaml.MappingNode) and node.tag == _MAP_TAG:
            self.active.add(id(node))
            try:
                return self._mapping(node, path)
            finally:
                self.active.discard(id(node))
        if isinstance(node, yaml.SequenceNode) and node.tag == _SEQ_TAG:
            self.active.add(id(node))
            try:
                items = []
                for index, item in enumerate(node.value):
                    if self.alias_at is None:  # inside an alias, lines are the anchor's: use the alias's
                        self.lines[(*path, index)] = item.start_mark.line + 1
                    items.append(self.build(item, (*path, index)))
                return items
            finally:
                self.active.discard(id(node))
        # Scalars and explicitly tagged collections (!!set, !!omap...): PyYAML's own constructors.
        if not isinstance(node, yaml.ScalarNode):
            self._count_tree(node, path)
        return self.loader.construct_object(node, deep=True)

    def _mapping(self, node: yaml.MappingNode, path: KeyPath) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        merges = [value for key, value in node.value if key.tag == _MERGE_TAG]
        # `<<: [*a, *b]`: earlier sources win, and explicit keys win over all of them.
        for source in reversed(merges):
            sources = source.value if isinstance(source, yaml.SequenceNode) else [source]
            for sub in reversed(sources):
                if not isinstance(sub, yaml.MappingNode) or id(sub) in self.active:
                    raise ConfigError(
                        "a merge key (<<) needs a mapping or a list of mappings",
                        file=self.file,
                        line=sub.start_mark.line + 1,
                        key=format_path(path, self.root) or None,
                    )
                self.merges += 1
                try:
                    if self.merges > MAX_DEPTH:
                        raise self._limit(sub, path, f"merge keys (<<) nested more than {MAX_DEPTH} levels deep")
                    result.update(self._mapping(sub, path))
                finally:
                    self.merges -= 1
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self.loader.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                hash(key)
            except TypeError:
                raise ConfigError(
                    "a mapping key must be a plain value, not a list or mapping",
                    file=self.file,
                    line=line,
                    key=format_path(path, self.root) or None,
                ) from None
            sub = (*path, str(key))
            if key in seen:
                error = ConfigError(
                    f"duplicate key {key!r} (first defined on line {seen[key]})",
                    file=self.file,
                    line=line,
                    key=format_path(sub, self.root),
                )
                if self.duplicates is None:
                    raise error
                self.duplicates.append(f"{error}; the last one is used (Ansible warns the same)")
                for stale in [known for known in self.lines if known[: len(sub)] == sub]:
                    del self.lines[stale]  # the first value's lines: it is gone
            seen[key] = line
            if self.alias_at is None:
                self.lines[sub] = line
            result[key] = self.build(value_node, sub)
        return result
