"""The inventory as Ansible holds it while reading sources: groups with their hosts, children, parents and
vars in the order they were written; `reconcile` then applies Ansible's rules (`all`, `ungrouped`, depth).

File readers (YAML, INI) fill it through the same few calls Ansible's inventory plugins make, so two
sources of either kind merge exactly as they do in Ansible.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from provisioner.errors import ConfigError
from provisioner.load import names
from provisioner.load.yamlsrc import Origin


@dataclass
class VarSet:
    """Variables with the place each was written."""

    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, Origin] = field(default_factory=dict)

    def set(self, key: str, value: Any, origin: Origin) -> None:
        self.values[key] = value
        self.origins[key] = origin

    def update(self, other: VarSet) -> None:
        self.values.update(other.values)
        self.origins.update(other.origins)


@dataclass
class GroupNode:
    name: str
    hosts: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)
    vars: VarSet = field(default_factory=VarSet)
    depth: int = 0
    priority: int = 1


@dataclass
class HostNode:
    name: str
    origin: Origin
    vars: VarSet = field(default_factory=VarSet)
    groups: list[str] = field(default_factory=list)  # direct groups, in the order they were added


class InventoryGraph:
    """Hosts and groups of one or more inventory sources."""

    def __init__(self) -> None:
        self.groups: dict[str, GroupNode] = {"all": GroupNode("all"), "ungrouped": GroupNode("ungrouped")}
        self.hosts: dict[str, HostNode] = {}
        self.warnings: list[str] = []
        # Vars written on the line of a host that has a group's name (see `set_host_var`), by group.
        self.group_named_hosts: dict[str, list[Origin]] = {}
        self.add_child("all", "ungrouped", Origin("", None))

    # -- what readers call

    def add_group(self, name: str, origin: Origin) -> GroupNode:
        if name not in self.groups:
            check_name("group name", name, origin)
        return self.groups.setdefault(name, GroupNode(name))

    def add_host(self, name: str, group: str | None, port: int | None, origin: Origin) -> HostNode:
        host = self.hosts.get(name)
        if host is None:
            check_name("host name", name, origin)
            host = self.hosts[name] = HostNode(name, origin)
            if port:  # as Ansible: the port of the first declaration becomes ansible_port
                host.vars.set("ansible_port", port, origin)
        if group is not None:
            node = self.groups[group]
            if name not in node.hosts:
                node.hosts.append(name)
                host.groups.append(group)
        return host

    def add_child(self, parent: str, child: str, origin: Origin) -> None:
        if parent == child:
            raise origin.error(f"group {parent!r} lists itself as a child")
        parent_node, child_node = self.groups[parent], self.groups[child]
        if child in parent_node.children:
            return
        if child in self.ancestors(parent):
            raise origin.error(f"adding {child!r} as a child of {parent!r} makes groups contain each other in a loop")
        parent_node.children.append(child)
        if parent not in child_node.parents:
            child_node.parents.append(parent)

    def set_host_var(self, host: str, key: str, value: Any, origin: Origin) -> None:
        """A var written on a host's line. Ansible looks the name up among groups first, so where a group of
        that name exists already the var becomes the group's (with a group var's lower precedence): fabnet
        does the same, and `reconcile` refuses it where the group holds other hosts, which would get it too."""
        if host in self.groups:
            self.group_named_hosts.setdefault(host, []).append(origin)
            self.set_group_var(host, key, value, origin)
        else:
            self.hosts[host].vars.set(key, value, origin)

    def set_group_var(self, group: str, key: str, value: Any, origin: Origin) -> None:
        node = self.groups[group]
        if key == "ansible_group_priority":  # Ansible keeps it as the group's priority, not as a variable
            try:
                node.priority = int(value)
            except (TypeError, ValueError):
                raise origin.error(f"expected an integer, got {value!r}") from None
            return
        node.vars.set(key, value, origin)

    # -- after every source is read

    def reconcile(self) -> None:
        """Ansible's rules: every group hangs from `all`; a host in no group but `all` is in `ungrouped`;
        a host in another group is not. Then each group's depth (longest path from `all`)."""
        for name in list(self.groups):
            if name != "all" and not self.groups[name].parents:
                self.add_child("all", name, Origin("", None))
        ungrouped = self.groups["ungrouped"]
        for host in self.hosts.values():
            if "ungrouped" in host.groups and set(host.groups) - {"all", "ungrouped"}:
                host.groups.remove("ungrouped")
                ungrouped.hosts.remove(host.name)
            elif not set(host.groups) - {"all"}:
                self.add_host(host.name, "ungrouped", None, host.origin)
        for name in self.groups:
            self.groups[name].depth = 0
        for name in self._topological():
            node = self.groups[name]
            for child in node.children:
                child_node = self.groups[child]
                child_node.depth = max(child_node.depth, node.depth + 1)
        for conflict in sorted(set(self.groups) & set(self.hosts)):
            self.warnings.append(f"found both a group and a host named {conflict!r} (Ansible warns the same)")
        for group, origins in self.group_named_hosts.items():
            others = [h for h in self.group_hosts(group) if h != group]
            if others:
                shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
                raise origins[0].error(
                    f"host {group!r} has the name of group {group!r}, so Ansible gives the vars on its line to the "
                    f"group and every host in it ({shown}) gets them: rename the host or the group")

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

        for name in self.groups:
            visit(name)
        return order[::-1]

    def ancestors(self, group: str) -> set[str]:
        result: set[str] = set()
        todo = list(self.groups[group].parents)
        while todo:
            parent = todo.pop()
            if parent not in result:
                result.add(parent)
                todo.extend(self.groups[parent].parents)
        return result

    def descendants(self, group: str) -> list[str]:
        """The group, its children, then each further generation, as Ansible walks them."""
        ordered = [group, *self.groups[group].children]
        seen = set(ordered)
        level = list(self.groups[group].children)
        while level:
            following: list[str] = []
            for name in level:
                for child in self.groups[name].children:
                    if child not in seen:
                        seen.add(child)
                        ordered.append(child)
                        following.append(child)
            level = following
        return ordered

    def order_is_ansibles(self, group: str) -> bool:
        """Whether Ansible's host order for the group is defined: it walks each generation below the
        children by iterating a set of group objects, so when two groups of one generation both have
        children, the next generation's order (and so `group[0]`) depends on memory addresses."""
        level = list(self.groups[group].children)
        seen = {group, *level}
        while level:
            parents = [name for name in level if any(c not in seen for c in self.groups[name].children)]
            if len(parents) > 1:
                return False
            following = [c for name in parents for c in self.groups[name].children if c not in seen]
            seen.update(following)
            level = following
        return True

    def group_hosts(self, group: str) -> list[str]:
        """Hosts of a group and of every group below it, in Ansible's order (what `ansible GROUP
        --list-hosts` prints and `groups['GROUP']` holds)."""
        hosts: list[str] = []
        seen: set[str] = set()
        for name in self.descendants(group):
            for host in self.groups[name].hosts:
                if host not in seen:
                    seen.add(host)
                    hosts.append(host)
        return hosts

    def host_groups(self, host: str) -> set[str]:
        """Every group a host belongs to, directly or through a child group, `all` included."""
        result = {"all"}
        for group in self.hosts[host].groups:
            result.add(group)
            result |= self.ancestors(group)
        return result

    def sorted_groups(self, names: set[str]) -> list[GroupNode]:
        """Ansible's order for merging group vars: depth, then priority, then name."""
        return sorted((self.groups[n] for n in names), key=lambda g: (g.depth, g.priority, g.name))


def check_name(what: str, name: str, origin: Origin) -> None:
    """Every reader (YAML, INI, TOML, JSON, host lists) adds names through here, after YAML, TOML and JSON
    escapes are decoded: the raw text's check in invsources cannot see `"gpu\\u001b01"`. Readers also
    check a host pattern before expanding it, so a name like `gpu01\\e[2J` is refused for what it holds,
    not reported as a malformed range."""
    try:
        names.inventory_name(what, name)
    except ValueError as exc:
        # The key path holds the name itself: escape it too, or the error prints what it refuses.
        raise ConfigError(str(exc), file=names.shown(origin.file), line=origin.line,
                          key=names.shown(origin.key) or None) from None


__all__ = ["GroupNode", "HostNode", "InventoryGraph", "VarSet", "check_name"]
