"""Ansible's YAML inventory, read the way Ansible reads it, turned into hosts with their variables.

Covers `all`/`children`/`hosts`/`vars` nesting, host ranges (`gpu[01:16]`), `group_vars/` and
`host_vars/` beside the inventory file with Ansible's variable precedence, and the connection variables.
Host patterns are matched in `hostpatterns`; variables are rendered with Jinja2 in `templating`.
"""

from __future__ import annotations

import getpass
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provisioner.errors import ConfigError, ConfigErrors, did_you_mean
from provisioner.hostpatterns import match_hosts
from provisioner.templating import VarResolver, has_template, magic_vars_for
from provisioner.yamlsrc import KeyPath, Origin, Sourced, load_yaml

# ------------------------------------------------------------------------------------------------ hosts


@dataclass(frozen=True)
class Host:
    """One inventory host with its merged variables and how to reach it.

    `explicit` names the connection settings the inventory set (address, port, user, key_file); the SSH
    transport lets ~/.ssh/config supply the others, since `port` 22 and `user` are only defaults here.
    """

    name: str
    address: str
    port: int = 22
    user: str = ""
    key_file: Path | None = None
    become: bool = False
    become_user: str = "root"
    known_hosts: Path | None = None
    groups: tuple[str, ...] = ()
    vars: Mapping[str, Any] = field(default_factory=dict)
    var_origins: Mapping[str, Origin] = field(default_factory=dict, repr=False)
    explicit: frozenset[str] = frozenset()
    ignored_vars: tuple[str, ...] = ()

    def __hash__(self) -> int:
        return hash(self.name)

    @property
    def ssh_config_host(self) -> str:
        """The name to hand to ssh (and to look up in ~/.ssh/config): `ansible_host`, else the host's name."""
        return self.address


@dataclass
class Inventory:
    """All hosts in definition order; `groups` maps every group (with `all` and `ungrouped`) to its hosts,
    those of its child groups included."""

    source: Path
    hosts: dict[str, Host]
    groups: dict[str, set[str]]
    children: dict[str, set[str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    _shared: tuple[dict[str, list[str]], dict[str, Mapping[str, Any]]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def select(self, pattern: str | Sequence[str] | None, *, origin: Origin | None = None) -> list[str]:
        """Host names matching an Ansible host pattern, in inventory order. See `match_hosts`."""
        return match_hosts(self, pattern, origin=origin)

    def shared_vars(self) -> tuple[dict[str, list[str]], dict[str, Mapping[str, Any]]]:
        """Every group's hosts in inventory order and every host's vars (`groups` and `hostvars` in templates)."""
        if self._shared is None:  # built once: every host of a large fleet shares them
            groups = {g: [h for h in self.hosts if h in members] for g, members in self.groups.items()}
            self._shared = (groups, {name: h.vars for name, h in self.hosts.items()})
        return self._shared


# --------------------------------------------------------------------------------------------- loading

_GROUP_KEYS = ("children", "hosts", "vars")
_VARS_EXTENSIONS = ("", ".yml", ".yaml", ".json")
_IGNORED_VARS = {
    "ansible_ssh_common_args": "extra ssh arguments are not passed on; use ~/.ssh/config",
    "ansible_ssh_extra_args": "extra ssh arguments are not passed on; use ~/.ssh/config",
    "ansible_password": "password logins are not supported; use a key",
    "ansible_ssh_pass": "password logins are not supported; use a key",
    "ansible_become_password": "sudo passwords are not supported; use NOPASSWD sudo or log in as root",
    "ansible_become_pass": "sudo passwords are not supported; use NOPASSWD sudo or log in as root",
}


@dataclass
class _Vars:
    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, Origin] = field(default_factory=dict)

    def update(self, other: _Vars) -> None:
        self.values.update(other.values)
        self.origins.update(other.origins)


@dataclass
class _Group:
    name: str
    inline: _Vars = field(default_factory=_Vars)
    children: dict[str, Origin] = field(default_factory=dict)
    parents: set[str] = field(default_factory=set)
    hosts: list[str] = field(default_factory=list)
    priority: int = 1
    depth: int = 0


@dataclass
class _HostDecl:
    name: str
    inline: _Vars = field(default_factory=_Vars)
    groups: set[str] = field(default_factory=set)
    name_port: int | None = None
    origin: Origin | None = None


_RANGE_RE = re.compile(r"^(.*?)\[([a-zA-Z0-9]+):([a-zA-Z0-9]+)(?::(\d+))?\](.*)$", re.DOTALL)


def expand_host_range(name: str) -> list[str]:
    """`gpu[01:03]` -> gpu01, gpu02, gpu03; `[a:c]` letters; `[1:9:2]` a stride. Raises ValueError."""
    match = _RANGE_RE.match(name)
    if not match:
        return [name]
    head, beg, end, step_text, tail = match.groups()
    step = int(step_text) if step_text else 1
    if step < 1:
        raise ValueError(f"host range {name!r}: the stride must be at least 1")
    if beg.isdigit() and end.isdigit():
        width = len(beg) if beg.startswith("0") and len(beg) > 1 else 0
        if width and len(end) != width:
            raise ValueError(f"host range {name!r}: a zero-padded range needs begin and end of equal length")
        first, last = int(beg), int(end)
        values = [str(i).zfill(width) for i in range(first, last + 1, step)]
    elif len(beg) == 1 and len(end) == 1 and beg.isalpha() and end.isalpha():
        first, last = ord(beg), ord(end)
        values = [chr(i) for i in range(first, last + 1, step)]
    else:
        raise ValueError(f"host range {name!r}: use numbers ([01:16]) or single letters ([a:f])")
    if first > last:
        raise ValueError(f"host range {name!r}: the range runs backwards")
    return [expanded for value in values for expanded in expand_host_range(head + value + tail)]


def _split_host_port(name: str) -> tuple[str, int | None]:
    bracketed = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:(\d+)", name)
    if bracketed:
        return bracketed.group(1), int(bracketed.group(2))
    if re.sub(r"\[[^\]]*\]", "", name).count(":") == 1:
        host, _, port = name.rpartition(":")
        if port.isdigit() and host:
            return host, int(port)
    return name, None


class _Loader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.groups: dict[str, _Group] = {"all": _Group("all"), "ungrouped": _Group("ungrouped")}
        self.hosts: dict[str, _HostDecl] = {}
        self.warnings: list[str] = []

    # -- the inventory file

    def load(self) -> Inventory:
        try:
            src = load_yaml(self.path)
        except ConfigError as exc:
            if exc.message.startswith("invalid YAML") and _looks_like_ini(self.path):
                exc.message += "; this looks like an INI inventory: only YAML inventories are supported"
            raise
        data = src.data
        if data is None:
            self.warnings.append(f"{self.path}: the inventory is empty")
            data = {}
        if not isinstance(data, dict):
            raise src.error(
                "an inventory is a mapping of groups (all:, gpu:, ...) to their hosts, vars and "
                "children; INI inventories are not supported"
            )
        for name, body in data.items():
            if name in _GROUP_KEYS:
                raise src.error(f"top-level keys are group names; put {name}: under a group, e.g. all:", (str(name),))
            self._group(src, str(name), body, (str(name),), parent=None if name == "all" else "all")
        self._link_depths()
        return self._finish()

    def _group(self, src: Sourced, name: str, body: Any, path: KeyPath, parent: str | None) -> None:
        if not name:
            raise src.error("a group needs a name", path)
        group = self.groups.setdefault(name, _Group(name))
        if parent is not None and parent != name:
            self.groups[parent].children.setdefault(name, src.origin(path))
            group.parents.add(parent)
        elif parent == name:
            raise src.error(f"group {name!r} lists itself as a child", path)
        if body is None:
            return
        if not isinstance(body, dict):
            allowed = ", ".join(_GROUP_KEYS)
            raise src.error(f"a group is a mapping with {allowed}; got {_type_name(body)}", path)
        for key in body:
            if key not in _GROUP_KEYS:
                raise src.error(
                    f"unknown key in group {name!r}; allowed: {', '.join(_GROUP_KEYS)}"
                    + did_you_mean(str(key), _GROUP_KEYS),
                    (*path, str(key)),
                )
        hosts = body.get("hosts")
        if hosts is not None:
            if not isinstance(hosts, dict):
                raise src.error(
                    f"hosts of group {name!r} must be a mapping of host names to their vars (or "
                    f"nothing); got {_type_name(hosts)}",
                    (*path, "hosts"),
                )
            for host_key, host_vars in hosts.items():
                self._host(src, name, str(host_key), host_vars, (*path, "hosts", str(host_key)))
        group_vars = body.get("vars")
        if group_vars is not None:
            group.inline.update(self._vars(src, group_vars, (*path, "vars")))
            if "ansible_group_priority" in group_vars:
                priority = group_vars["ansible_group_priority"]
                try:
                    group.priority = int(priority)
                except (TypeError, ValueError):
                    raise src.error(
                        f"expected an integer, got {priority!r}", (*path, "vars", "ansible_group_priority")
                    ) from None
        children = body.get("children")
        if children is not None:
            if not isinstance(children, dict):
                raise src.error(
                    f"children of group {name!r} must be a mapping of group names; got {_type_name(children)}",
                    (*path, "children"),
                )
            for child, child_body in children.items():
                self._group(src, str(child), child_body, (*path, "children", str(child)), parent=name)

    def _host(self, src: Sourced, group: str, key: str, body: Any, path: KeyPath) -> None:
        if body is not None and not isinstance(body, dict):
            got = _type_name(body)
            raise src.error(f"a host entry is a mapping of its vars (or nothing); got {got}", path)
        base, port = _split_host_port(key)
        try:
            names = expand_host_range(base)
        except ValueError as exc:
            raise src.error(str(exc), path) from None
        host_vars = self._vars(src, body or {}, path)
        for name in names:
            decl = self.hosts.get(name)
            if decl is None:
                decl = self.hosts[name] = _HostDecl(name, origin=src.origin(path))
            decl.inline.update(host_vars)
            decl.groups.add(group)
            if port is not None:
                decl.name_port = port
            if name not in self.groups[group].hosts:
                self.groups[group].hosts.append(name)

    def _vars(self, src: Sourced, data: Any, path: KeyPath) -> _Vars:
        if not isinstance(data, dict):
            raise src.error(f"vars must be a mapping of names to values; got {_type_name(data)}", path)
        result = _Vars()
        for key, value in data.items():
            if not isinstance(key, str):
                raise src.error(f"a variable name must be a string, got {key!r}", (*path, str(key)))
            result.values[key] = value
            result.origins[key] = src.origin((*path, key))
        return result

    def _link_depths(self) -> None:
        for name, group in self.groups.items():
            if name != "all" and not group.parents:
                group.parents.add("all")
                self.groups["all"].children.setdefault(name, Origin(str(self.path), None, name))
        state: dict[str, int] = {}  # 1: on the current path, 2: done

        def visit(name: str, trail: list[str]) -> None:
            if state.get(name) == 1:
                loop = " -> ".join([*trail[trail.index(name) :], name])
                origin = self.groups[trail[-1]].children[name]
                raise origin.error(f"groups contain each other in a loop: {loop}")
            if state.get(name) == 2:
                return
            state[name] = 1
            for child in self.groups[name].children:
                visit(child, [*trail, name])
            state[name] = 2

        visit("all", [])
        order = self._topological()
        for name in order:
            group = self.groups[name]
            for child in group.children:
                self.groups[child].depth = max(self.groups[child].depth, group.depth + 1)

    def _topological(self) -> list[str]:
        seen: set[str] = set()
        order: list[str] = []

        def visit(name: str) -> None:
            if name in seen:
                return
            seen.add(name)
            for child in self.groups[name].children:
                visit(child)
            order.append(name)

        visit("all")
        return order[::-1]

    # -- group_vars/ and host_vars/

    def _vars_files(self, kind: str, name: str) -> list[Path]:
        """Ansible's lookup: the first of NAME, NAME.yml, NAME.yaml, NAME.json that exists (a directory
        NAME/ contributes its files, recursively, in name order)."""
        base = self.path.parent / kind
        found: list[Path] = []
        for ext in _VARS_EXTENSIONS:
            candidate = base / (name + ext)
            if candidate.is_dir() and not ext:
                found = self._dir_files(candidate)
            elif candidate.is_file():
                found = [candidate]
            else:
                continue
            for other in _VARS_EXTENSIONS[_VARS_EXTENSIONS.index(ext) + 1 :]:
                if (base / (name + other)).exists():
                    self.warnings.append(
                        f"{base / (name + other)}: ignored, {candidate} takes its place (Ansible reads only the first)"
                    )
            break
        return found

    def _dir_files(self, directory: Path) -> list[Path]:
        found: list[Path] = []
        for entry in sorted(directory.iterdir(), key=lambda p: p.name):
            if entry.name.startswith(".") or entry.name.endswith("~"):
                continue
            if entry.is_dir() and not entry.suffix:
                found.extend(self._dir_files(entry))
            elif entry.is_file() and entry.suffix in _VARS_EXTENSIONS:
                found.append(entry)
        return found

    def _file_vars(self, kind: str, name: str) -> _Vars:
        merged = _Vars()
        for path in self._vars_files(kind, name):
            src = load_yaml(path)
            if src.data is None:
                continue
            merged.update(self._vars(src, src.data, ()))
        return merged

    def _unknown_vars_files(self, kind: str, known: Iterable[str]) -> None:
        base = self.path.parent / kind
        if not base.is_dir():
            return
        known = set(known)
        for entry in sorted(base.iterdir()):
            if entry.name.startswith(".") or entry.name.endswith("~"):
                continue
            stem = entry.name
            for ext in _VARS_EXTENSIONS[1:]:
                if entry.is_file() and stem.endswith(ext):
                    stem = stem[: -len(ext)]
                    break
            if stem not in known:
                what = "group" if kind == "group_vars" else "host"
                hint = did_you_mean(stem, known) if kind == "group_vars" else ""
                self.warnings.append(f"{entry}: no {what} named {stem!r} in the inventory, not used{hint}")

    # -- merging

    def _finish(self) -> Inventory:
        for decl in self.hosts.values():
            if decl.groups <= {"all"}:
                decl.groups.add("ungrouped")
                self.groups["ungrouped"].hosts.append(decl.name)
        ancestors = {name: self._ancestors(name) for name in self.groups}
        members: dict[str, set[str]] = {name: set() for name in self.groups}
        host_groups: dict[str, set[str]] = {}
        for decl in self.hosts.values():
            groups = set()
            for direct in decl.groups:
                groups |= ancestors[direct] | {direct}
            groups.add("all")
            host_groups[decl.name] = groups
            for group in groups:
                members[group].add(decl.name)

        file_group_vars = {name: self._file_vars("group_vars", name) for name in self.groups}
        self._unknown_vars_files("group_vars", self.groups)
        self._unknown_vars_files("host_vars", self.hosts)

        merged_by_host: dict[str, _Vars] = {}
        for decl in self.hosts.values():
            ordered = sorted(
                (self.groups[g] for g in host_groups[decl.name] if g != "all"),
                key=lambda g: (g.depth, g.priority, g.name),
            )
            merged = _Vars()
            # Ansible's order: inventory-file group vars (all, then groups by depth), then group_vars/all,
            # then group_vars/<group> by depth, then inventory-file host vars, then host_vars/<host>.
            merged.update(self.groups["all"].inline)
            for group in ordered:
                merged.update(group.inline)
            merged.update(file_group_vars["all"])
            for group in ordered:
                merged.update(file_group_vars[group.name])
            merged.update(decl.inline)
            merged.update(self._file_vars("host_vars", decl.name))
            merged_by_host[decl.name] = merged

        group_lists = {g: [h for h in self.hosts if h in members[g]] for g in self.groups}
        hostvars = {name: merged.values for name, merged in merged_by_host.items()}
        hosts: dict[str, Host] = {}
        errors: list[ConfigError] = []
        for decl in self.hosts.values():
            merged = merged_by_host[decl.name]
            groups = tuple(sorted(host_groups[decl.name] - {"all"}))
            try:
                connection = dict(merged.values)
                templated = [
                    var
                    for var, value in merged.values.items()
                    if var in _CONNECTION_VARS and isinstance(value, str) and has_template(value)
                ]
                if templated:
                    magic = magic_vars_for(decl.name, groups, group_lists, hostvars, self.path)
                    resolver = VarResolver(decl.name, merged.values, merged.origins, magic)
                    for var in templated:
                        connection[var] = resolver.var(var)
                hosts[decl.name] = self._host_model(decl, connection, merged, groups)
            except ConfigError as exc:
                errors.extend(exc.errors if isinstance(exc, ConfigErrors) else [exc])
        if errors:
            unique = {str(e): e for e in errors}  # a bad group var fails every host the same way
            raise ConfigErrors(list(unique.values()))
        inventory = Inventory(
            source=self.path,
            hosts=hosts,
            groups=members,
            children={name: set(g.children) for name, g in self.groups.items()},
            warnings=self.warnings,
        )
        ignored: dict[tuple[str, str], list[str]] = {}
        for name, host in hosts.items():
            for var in host.ignored_vars:
                origin = host.var_origins.get(var)
                ignored.setdefault((str(origin) if origin else "", var), []).append(name)
        for (where, var), names in ignored.items():
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            prefix = f"{where}: " if where else ""
            inventory.warnings.append(f"{prefix}{var} is ignored ({_IGNORED_VARS[var]}); hosts {shown}")
        return inventory

    def _ancestors(self, name: str) -> set[str]:
        result: set[str] = set()
        todo = list(self.groups[name].parents)
        while todo:
            parent = todo.pop()
            if parent not in result:
                result.add(parent)
                todo.extend(self.groups[parent].parents)
        return result

    def _host_model(self, decl: _HostDecl, values: dict[str, Any], merged: _Vars, groups: tuple[str, ...]) -> Host:
        """`values` are the merged vars with templated connection vars rendered; `merged` the raw ones."""
        origins = merged.origins
        explicit: set[str] = set()

        def pick(*names: str) -> tuple[str, Any] | None:
            for name in names:
                if name in values and values[name] is not None:
                    return name, values[name]
            return None

        address = decl.name
        if found := pick("ansible_host", "ansible_ssh_host"):
            address = str(found[1])
            explicit.add("address")
        port = decl.name_port or 22
        if decl.name_port:
            explicit.add("port")
        if found := pick("ansible_port", "ansible_ssh_port"):
            port = _port(found[1], origins[found[0]])
            explicit.add("port")
        user = _current_user()
        if found := pick("ansible_user", "ansible_ssh_user"):
            user = str(found[1])
            explicit.add("user")
        key_file = None
        if found := pick("ansible_ssh_private_key_file", "ansible_private_key_file"):
            key_file = self._path(found[1], origins[found[0]])
            explicit.add("key_file")
        become = False
        if found := pick("ansible_become"):
            become = _boolean(found[1], origins[found[0]])
        become_user = str(values.get("ansible_become_user") or "root")
        known_hosts = None
        if found := pick("fabnet_known_hosts"):
            known_hosts = self._path(found[1], origins[found[0]])
        return Host(
            name=decl.name,
            address=address,
            port=port,
            user=user,
            key_file=key_file,
            become=become,
            become_user=become_user,
            known_hosts=known_hosts,
            groups=groups,
            vars=dict(merged.values),
            var_origins=dict(origins),
            explicit=frozenset(explicit),
            ignored_vars=tuple(sorted(v for v in values if v in _IGNORED_VARS)),
        )

    def _path(self, value: Any, origin: Origin) -> Path:
        if not isinstance(value, str) or not value.strip():
            raise origin.error(f"expected a file path, got {value!r}")
        path = Path(os.path.expanduser(value))
        return path if path.is_absolute() else self.path.parent / path


_CONNECTION_VARS = {
    "ansible_host",
    "ansible_ssh_host",
    "ansible_port",
    "ansible_ssh_port",
    "ansible_user",
    "ansible_ssh_user",
    "ansible_ssh_private_key_file",
    "ansible_private_key_file",
    "ansible_become",
    "ansible_become_user",
    "fabnet_known_hosts",
}


def _port(value: Any, origin: Origin) -> int:
    if isinstance(value, bool):
        raise origin.error(f"expected a port number 1..65535, got {value!r}")
    try:
        port = int(str(value).strip())
    except ValueError:
        raise origin.error(f"expected a port number 1..65535, got {value!r}") from None
    if not 1 <= port <= 65535:
        raise origin.error(f"expected a port number 1..65535, got {port}")
    return port


def _boolean(value: Any, origin: Origin) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"yes", "true", "on", "1", "y"}:
        return True
    if text in {"no", "false", "off", "0", "n"}:
        return False
    raise origin.error(f"expected true or false, got {value!r}")


def _looks_like_ini(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return re.search(r"^\s*\[[^\]\[]+\]\s*$", text, re.MULTILINE) is not None


def _current_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "root"


def _type_name(value: Any) -> str:
    return {
        dict: "a mapping",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }.get(type(value), type(value).__name__)




def load_inventory(path: str | Path) -> Inventory:
    """Read an Ansible YAML inventory and the group_vars/ and host_vars/ beside it.

    Variable precedence, lowest first (Ansible's documented order): `all` vars in the inventory file;
    other groups' vars in the file, parents before children (then `ansible_group_priority`, then name);
    group_vars/all; group_vars/<group> in the same group order; host vars in the file; host_vars/<host>.
    Merging replaces whole values (no deep merge), as Ansible does by default.
    """
    return _Loader(Path(path)).load()


__all__ = ["Host", "Inventory", "expand_host_range", "load_inventory"]
