"""YAML loading that remembers where every value came from.

Validation happens long after parsing; to say `site.yml:14: plays[0].resources[2].mtu: ...` it needs the
line of each mapping key and sequence item. `load_yaml` returns plain Python data plus that line map.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from provisioner.errors import ConfigError

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


def load_yaml(path: str | Path, *, root: str = "") -> Sourced:
    """Read one YAML document safely; a missing file, bad YAML or a duplicate key is a ConfigError."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError("file not found", file=file) from exc
    except IsADirectoryError as exc:
        raise ConfigError("is a directory, expected a YAML file", file=file) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text: {exc.reason}", file=file) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=file) from exc
    return parse_yaml(text, file=file, root=root)


def parse_yaml(text: str, *, file: str, root: str = "") -> Sourced:
    """Like `load_yaml` for text already in memory; `file` is only used in messages."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        lines: dict[KeyPath, int] = {}
        data = None
        if node is not None:
            lines[()] = node.start_mark.line + 1
            data = _Builder(loader, file, lines, root).build(node, ())
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
    """Turns a composed node graph into plain data, recording lines and refusing duplicate keys."""

    def __init__(self, loader: yaml.SafeLoader, file: str, lines: dict[KeyPath, int], root: str) -> None:
        self.root = root
        self.loader = loader
        self.file = file
        self.lines = lines
        self.active: set[int] = set()  # nodes being built: an alias back into one is a loop

    def build(self, node: yaml.Node, path: KeyPath) -> Any:
        if id(node) in self.active:
            raise ConfigError(
                "recursive YAML alias",
                file=self.file,
                line=node.start_mark.line + 1,
                key=format_path(path, self.root) or None,
            )
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
                    self.lines[(*path, index)] = item.start_mark.line + 1
                    items.append(self.build(item, (*path, index)))
                return items
            finally:
                self.active.discard(id(node))
        # Scalars and explicitly tagged collections (!!set, !!omap...): PyYAML's own constructors.
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
                result.update(self._mapping(sub, path))
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
            if key in seen:
                raise ConfigError(
                    f"duplicate key {key!r} (first defined on line {seen[key]})",
                    file=self.file,
                    line=line,
                    key=format_path((*path, str(key)), self.root),
                )
            seen[key] = line
            sub = (*path, str(key))
            self.lines[sub] = line
            result[key] = self.build(value_node, sub)
        return result
