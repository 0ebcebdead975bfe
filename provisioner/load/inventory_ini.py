"""Ansible's INI inventory format read into an `InventoryGraph`, line for line as Ansible's ini plugin
reads it: `[group]`, `[group:vars]`, `[group:children]`, host lines with `key=value` vars whose values are
Python literals where Python can read them (`port=22` is an int, `'x'` a string), ranges and `host:port`.
"""

from __future__ import annotations

import ast
import re
import shlex
import warnings
from typing import Any

from provisioner.errors import ConfigError
from provisioner.load.hostrange import HostRangeError, expand_host_range, split_host_port
from provisioner.load.invgraph import InventoryGraph, check_name
from provisioner.load.yamlsrc import Origin

_SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:\#.*)?$")
_GROUP_NAME = re.compile(r"^([^:\]\s]+)\s*(?:\#.*)?$")
_COMMENT = (";", "#")


def parse_ini_value(text: str) -> Any:
    """A value as Ansible's ini plugin reads it: a Python literal where `ast.literal_eval` accepts it (tuples
    and sets become lists, complex numbers and `...` stay text), else the text itself."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text
    return _coerce(value)


def _coerce(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list | tuple | set | frozenset):
        return [_coerce(v) for v in value]
    if isinstance(value, dict):
        return {_coerce(k): _coerce(v) for k, v in value.items()}
    if value is ... or isinstance(value, complex):
        return "..." if value is ... else str(value)
    return value


class _IniReader:
    def __init__(self, graph: InventoryGraph, file: str) -> None:
        self.graph = graph
        self.file = file
        self.line = 0
        self.pending: dict[str, dict[str, Any]] = {}

    def error(self, message: str, key: str | None = None, line: int | None = None) -> ConfigError:
        return ConfigError(message, file=self.file, line=line or self.line, key=key)

    def origin(self, key: str = "") -> Origin:
        return Origin(self.file, self.line, key)

    def read(self, lines: list[str]) -> None:
        group, state = "ungrouped", "hosts"
        for number, raw in enumerate(lines, 1):
            self.line = number
            line = raw.strip()
            if not line or line[0] in _COMMENT:
                continue
            if any("\udc80" <= c <= "\udcff" for c in line):
                raise self.error("not UTF-8 text")
            section = _SECTION.match(line)
            if section:
                group, state = section.group(1), section.group(2) or "hosts"
                if state not in ("hosts", "children", "vars"):
                    raise self.error(f"section [{group}:{state}] has an unknown type {state!r}; "
                                     "allowed: [group], [group:vars], [group:children]")
                self._section(group, state)
                continue
            if line.startswith("[") and line.endswith("]"):
                raise self.error(f"invalid section {line!r}: no spaces or other characters may follow the name "
                                 "except :vars or :children")
            if state == "hosts":
                self._host_line(group, line)
            elif state == "vars":
                if "=" not in line:
                    raise self.error(f"expected key=value, got {line!r}", key=f"[{group}:vars]")
                key, value = (part.strip() for part in line.split("=", 1))
                self.graph.set_group_var(group, key, parse_ini_value(value), self.origin(f"[{group}:vars].{key}"))
            else:
                child = _GROUP_NAME.match(line)
                if not child:
                    raise self.error(f"expected a group name, got {line!r}", key=f"[{group}:children]")
                name = child.group(1)
                if name not in self.graph.groups:
                    entry = self.pending.setdefault(name, {"line": number, "state": "children", "parents": []})
                    entry.setdefault("parents", []).append(group)
                else:
                    self.graph.add_child(group, name, self.origin(f"[{group}:children]"))
        for name, entry in self.pending.items():
            if entry["state"] == "vars":
                raise self.error(f"section [{name}:vars] is for a group that is never defined", line=entry["line"])
            parent = entry["parents"][-1]
            raise self.error(f"section [{parent}:children] names group {name!r}, which is never defined "
                             f"(add a [{name}] section)", line=entry["line"])

    def _section(self, group: str, state: str) -> None:
        if group not in self.graph.groups:
            if state == "vars" and group not in self.pending:
                self.pending[group] = {"line": self.line, "state": "vars"}
            self.graph.add_group(group, self.origin(f"[{group}]"))
        if group in self.pending and state != "vars":
            if self.pending[group]["state"] == "children":
                self._add_pending(group)
            else:
                del self.pending[group]

    def _add_pending(self, group: str) -> None:
        for parent in self.pending[group]["parents"]:
            self.graph.add_child(parent, group, self.origin(f"[{parent}:children]"))
            if parent in self.pending and self.pending[parent]["state"] == "children":
                self._add_pending(parent)
        del self.pending[group]

    def _host_line(self, group: str, line: str) -> None:
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError as exc:
            raise self.error(f"cannot read host line {line!r}: {exc}") from None
        if not tokens:
            return
        pattern = tokens[0]
        check_name("host name", pattern, self.origin(pattern))
        base, port = split_host_port(pattern)
        if pattern.endswith(":") and port is None:
            raise self.error(f"host {pattern!r} ends in ':'; a ':' must be followed by a port")
        if base.strip() == "---":
            raise self.error("'---' is not a host name; is this a YAML file with a syntax error?")
        try:
            names = expand_host_range(base)
        except HostRangeError as exc:
            raise self.error(str(exc), key=pattern) from None
        variables: dict[str, Any] = {}
        for token in tokens[1:]:
            if "=" not in token:
                raise self.error(f"expected key=value after the host name, got {token!r}", key=pattern)
            key, value = token.split("=", 1)
            variables[key] = parse_ini_value(value)
        for name in names:
            self.graph.add_host(name, group, port, self.origin(name))
            for key, value in variables.items():
                self.graph.set_host_var(name, key, value, self.origin(f"{name}.{key}"))


def looks_like_ini(text: str) -> bool:
    """Whether text has an INI section header line (used to hint when YAML fails)."""
    return re.search(r"^\s*\[[^\]\[]+\]\s*$", text, re.MULTILINE) is not None


def read_ini_inventory(graph: InventoryGraph, text: str, file: str) -> None:
    """Add one INI inventory's groups, hosts and vars to `graph`. Raises ConfigError naming file:line."""
    _IniReader(graph, file).read(text.splitlines())


__all__ = ["looks_like_ini", "parse_ini_value", "read_ini_inventory"]
