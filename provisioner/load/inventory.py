"""Ansible inventories, read the way Ansible reads them, turned into hosts with their variables.

Sources are YAML or INI files (recognised by content) or directories of them, several merged in order;
`group_vars/` and `host_vars/` beside each source and beside the playbook apply with Ansible's precedence.
Readers live in `inventory_yaml`/`inventory_ini`, files in `invsources`, host patterns in `hostpatterns`,
connection values are checked in `connvars`; templated connection values are rendered by `templating`.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provisioner.errors import ConfigError, ConfigErrors, did_you_mean, fold_errors
from provisioner.load import (
    ansible_filters,
    ansible_tags,  # noqa: F401  (registers !vault and !unsafe with the YAML loader)
)
from provisioner.load.ansible_tags import vault_file
from provisioner.load.connvars import (
    CONNECTION_VARS,
    check_address,
    check_boolean,
    check_path,
    check_port,
    check_user,
    current_user,
    pick,
)
from provisioner.load.devicevars import SLURM_NODE, check_device_vars
from provisioner.load.hostpatterns import limit_terms, match_hosts
from provisioner.load.hostrange import expand_host_range
from provisioner.load.ini_or_yaml import parse_yaml_text
from provisioner.load.invgraph import InventoryGraph, VarSet
from provisioner.load.invsources import (
    HostList,
    read_host_list,
    read_source,
    read_text,
    source_of,
    unknown_vars_files,
    vars_dir,
    vars_files,
)
from provisioner.load.templating import TEMPLATE_ENV, VarResolver, has_template, magic_vars_for
from provisioner.load.yamlsrc import Origin

ansible_filters.register(TEMPLATE_ENV)


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
    slurm_name: str | None = None  # fabnet_slurm_node, rendered and checked; see node_name

    def __hash__(self) -> int:
        return hash(self.name)

    @property
    def node_name(self) -> str:
        """The host's name in the scheduler (Slurm's NodeName): `fabnet_slurm_node` where the inventory sets
        it (an inventory of FQDNs or addresses for nodes Slurm knows by short names), else the host's name."""
        return self.slurm_name or self.name

    @property
    def ssh_config_host(self) -> str:
        """The name to hand to ssh (and to look up in ~/.ssh/config): `ansible_host`, else the host's name."""
        return self.address


@dataclass
class Inventory:
    """All hosts in definition order. `groups` maps every group (with `all` and `ungrouped`) to its hosts,
    those of child groups included; `group_order` holds the same in Ansible's order, `group_hosts` only
    each group's own hosts and `children` its direct child groups, in the order written."""

    source: Path | HostList
    hosts: dict[str, Host]
    groups: dict[str, set[str]]
    children: dict[str, list[str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    group_order: dict[str, list[str]] = field(default_factory=dict)
    group_hosts: dict[str, list[str]] = field(default_factory=dict)
    sources: tuple[Path | HostList, ...] = ()
    unordered_groups: set[str] = field(default_factory=set)  # Ansible's host order undefined (see invgraph)

    def select(self, pattern: str | Sequence[str] | None, *, origin: Origin | None = None,
               warnings: list[str] | None = None, limit: bool = False) -> list[str]:
        """Host names matching an Ansible host pattern (a play's, or with `limit` a limit's).
        See `hostpatterns.match_hosts`."""
        return match_hosts(self, pattern, origin=origin, warnings=self.warnings if warnings is None else warnings,
                           limit=limit)

    def select_limit(self, limit: str, *, base: Path | None = None) -> list[str]:
        """Hosts a `--limit` selects: a pattern, `@FILE` of names included. Empty is an error, not "all"."""
        return match_hosts(self, None, terms=limit_terms(limit, base), warnings=self.warnings, limit=True)

    def shared_vars(self) -> tuple[dict[str, list[str]], dict[str, Mapping[str, Any]]]:
        """Every group's hosts and every host's vars (`groups` and `hostvars` in templates)."""
        return self.group_order, {name: h.vars for name, h in self.hosts.items()}


_IGNORED_VARS = {
    "ansible_ssh_common_args": "extra ssh arguments are not passed on; use ~/.ssh/config",
    "ansible_ssh_extra_args": "extra ssh arguments are not passed on; use ~/.ssh/config",
    "ansible_password": "password logins are not supported; use a key",
    "ansible_ssh_pass": "password logins are not supported; use a key",
    # A password kept in inventory files (plain, or vaulted where fabnet cannot open it) is not used:
    # it comes from the environment or the terminal, and so never from a file in a repository.
    "ansible_become_password": "the sudo password is not read from inventories; set FABNET_BECOME_PASSWORD "
                               "or pass -K (--ask-become-pass)",
    "ansible_become_pass": "the sudo password is not read from inventories; set FABNET_BECOME_PASSWORD "
                           "or pass -K (--ask-become-pass)",
    "ansible_connection": "fabnet reaches every host over SSH, whatever the connection plugin",
}
_SSH_CONNECTIONS = {"ssh", "smart", "paramiko", "paramiko_ssh", "ansible.builtin.ssh", "ansible.builtin.paramiko_ssh"}


class _VarFiles:
    """group_vars/ and host_vars/ files, each read once however many hosts use it."""

    def __init__(self, warnings: list[str]) -> None:
        self.warnings = warnings
        self.cache: dict[tuple[Path, str, str], VarSet] = {}

    def get(self, base: Path, kind: str, name: str) -> VarSet:
        key = (base, kind, name)
        if key not in self.cache:
            merged = VarSet()
            for path in vars_files(base, kind, name, self.warnings):
                text = read_text(path)
                if vault_file(text):
                    # Ansible's usual place for secrets (group_vars/all/vault.yml): fabnet never decrypts, so
                    # the inventory still loads, and a template that uses one of its variables fails, naming it.
                    self.warnings.append(f"{path}: encrypted with ansible-vault as a whole file; fabnet does not "
                                         "decrypt vault files, so none of its variables are set")
                    continue
                src = parse_yaml_text(text, str(path), self.warnings)
                if src.data is None:
                    continue
                if not isinstance(src.data, dict):
                    raise src.error("a vars file is a mapping of variable names to values")
                for var, value in src.data.items():
                    if not isinstance(var, str):
                        raise src.error(f"a variable name must be a string, got {var!r}", (str(var),))
                    merged.set(var, value, src.origin((var,)))
            self.cache[key] = merged
        return self.cache[key]


def _merge(graph: InventoryGraph, host: str, files: _VarFiles, inv_bases: list[Path],
           play_bases: list[Path]) -> VarSet:
    """Ansible's precedence, lowest first: inventory-file vars of `all`, then of the other groups (by
    depth, priority, name); group_vars/all beside the inventory, then beside the playbook; group_vars/<g>
    likewise; the host's inventory-file vars; host_vars/<host> beside the inventory, then the playbook."""
    ordered = graph.sorted_groups(graph.host_groups(host) - {"all"})
    merged = VarSet()
    merged.update(graph.groups["all"].vars)
    for group in ordered:
        merged.update(group.vars)
    for base in (*inv_bases, *play_bases):
        merged.update(files.get(base, "group_vars", "all"))
    for bases in (inv_bases, play_bases):
        for group in ordered:
            for base in bases:
                merged.update(files.get(base, "group_vars", group.name))
    merged.update(graph.hosts[host].vars)
    for base in (*inv_bases, *play_bases):
        merged.update(files.get(base, "host_vars", host))
    return merged


def _host_model(name: str, merged: VarSet, values: Mapping[str, Any], groups: tuple[str, ...], base: Path,
                declared: Origin) -> Host:
    """`values` are the merged vars with templated connection vars rendered; `merged` the raw ones;
    `declared` where the host is first written, which a bad name used as the address is reported at."""
    origins = merged.origins
    check_device_vars(values, origins)
    explicit: set[str] = set()
    if found := pick(values, "ansible_host", "ansible_ssh_host"):
        address = check_address(found[1], origins.get(found[0]), found[0])
        explicit.add("address")
    else:
        address = check_address(name, declared, "the host's name (used as its address, no ansible_host set)")
    port = 22
    if found := pick(values, "ansible_port", "ansible_ssh_port"):
        port = check_port(found[1], origins.get(found[0]))
        explicit.add("port")
    user = current_user()
    if found := pick(values, "ansible_user", "ansible_ssh_user"):
        user = check_user(found[1], origins.get(found[0]), found[0])
        explicit.add("user")
    key_file = None
    if found := pick(values, "ansible_ssh_private_key_file", "ansible_private_key_file"):
        key_file = check_path(found[1], origins.get(found[0]), base)
        explicit.add("key_file")
    become = False
    if found := pick(values, "ansible_become"):
        become = check_boolean(found[1], origins.get(found[0]))
    become_user = "root"
    if found := pick(values, "ansible_become_user"):
        become_user = check_user(found[1], origins.get(found[0]), found[0])
    known_hosts = None
    if found := pick(values, "fabnet_known_hosts"):
        known_hosts = check_path(found[1], origins.get(found[0]), base)
    understood = False
    if found := pick(values, "ansible_ssh_common_args"):
        strict_file = _strict_host_key_args(found[1])
        understood = strict_file is not None
        if strict_file and known_hosts is None:
            known_hosts = check_path(strict_file, origins.get(found[0]), base)
    return Host(
        name=name, address=address, port=port, user=user, key_file=key_file, become=become,
        become_user=become_user, known_hosts=known_hosts, groups=groups, vars=dict(merged.values),
        var_origins=dict(origins), explicit=frozenset(explicit),
        slurm_name=str(values[SLURM_NODE]).strip() if values.get(SLURM_NODE) is not None else None,
        ignored_vars=tuple(sorted(v for v in values if v in _IGNORED_VARS
                                  and not (v == "ansible_connection" and str(values[v]) in _SSH_CONNECTIONS)
                                  and not (v == "ansible_ssh_common_args" and understood))),
    )


def _strict_host_key_args(value: object) -> str | None:
    """For ssh arguments that only ask for strict host-key checking (what fabnet always does), the
    UserKnownHostsFile they name ('' when none); None when they ask for anything else."""
    try:
        words = shlex.split(str(value))
    except ValueError:
        return None
    options: list[str] = []
    while words:
        word = words.pop(0)
        if word == "-o" and words:
            options.append(words.pop(0))
        elif word.startswith("-o") and len(word) > 2:
            options.append(word[2:])
        else:
            return None
    known_file = ""
    for option in options:
        key, _, setting = option.partition("=")
        key = key.strip().lower()
        if key == "stricthostkeychecking" and setting.strip().lower() == "yes":
            continue
        if key == "userknownhostsfile" and setting.strip() and " " not in setting.strip() and not known_file:
            known_file = setting.strip()
            continue
        return None
    return known_file


def _warn_unknown_files(graph: InventoryGraph, bases: list[Path]) -> None:
    for base in dict.fromkeys(bases):
        for entry in unknown_vars_files(base, "group_vars", set(graph.groups)):
            stem = entry.name.rsplit(".", 1)[0] if not entry.is_dir() and "." in entry.name else entry.name
            graph.warnings.append(f"{entry}: no group named {stem!r} in the inventory, not used"
                                  + did_you_mean(stem, graph.groups))
        for entry in unknown_vars_files(base, "host_vars", set(graph.hosts)):
            stem = entry.name.rsplit(".", 1)[0] if not entry.is_dir() and "." in entry.name else entry.name
            graph.warnings.append(f"{entry}: no host named {stem!r} in the inventory, not used")


def load_inventory(source: str | Path | Sequence[str | Path], *, playbook_dir: str | Path | None = None) -> Inventory:
    """Read Ansible inventory sources (files or directories, several merged in order, as `-i` does) with
    the group_vars/ and host_vars/ beside each source and beside the playbook. Raises ConfigError(s)."""
    sources = [source_of(s) for s in ([source] if isinstance(source, str | Path) else source)]
    if not sources:
        raise ConfigError("no inventory given")
    graph = InventoryGraph()
    files: list[Path | HostList] = []
    for given in sources:
        if isinstance(given, HostList):
            read_host_list(graph, given)
            files.append(given)
        else:
            files.extend(read_source(graph, given))
    # inventory_file/inventory_dir in templates: the first file read, as for Ansible's first host
    first_file = files[0] if files else sources[0]
    graph.reconcile()
    inv_bases = [vars_dir(path) for path in sources if isinstance(path, Path)]
    play_bases = [Path(playbook_dir)] if playbook_dir is not None else []
    play_bases = [b for b in play_bases if b.resolve() not in {i.resolve() for i in inv_bases}]
    var_files = _VarFiles(graph.warnings)
    _warn_unknown_files(graph, [*inv_bases, *play_bases])

    group_order = {name: graph.group_hosts(name) for name in graph.groups}
    merged_by_host = {host: _merge(graph, host, var_files, inv_bases, play_bases) for host in graph.hosts}
    hostvars = {name: merged.values for name, merged in merged_by_host.items()}
    hosts: dict[str, Host] = {}
    errors: list[ConfigError] = []
    for name, merged in merged_by_host.items():
        groups = tuple(sorted(graph.host_groups(name) - {"all"}))
        try:
            values = dict(merged.values)
            templated = [v for v in (*CONNECTION_VARS, SLURM_NODE)
                         if isinstance(values.get(v), str) and has_template(values[v])]
            if templated:
                magic = magic_vars_for(name, groups, group_order, hostvars, first_file)
                resolver = VarResolver(name, merged.values, merged.origins, magic)
                for var in templated:
                    values[var] = resolver.var(var)
            # Relative paths in vars: beside the first inventory folder; a host list has none (as Ansible's cwd)
            hosts[name] = _host_model(name, merged, values, groups, inv_bases[0] if inv_bases else Path.cwd(),
                                      graph.hosts[name].origin)
        except ConfigError as exc:
            errors.extend(exc.errors if isinstance(exc, ConfigErrors) else [exc])
    if errors:
        raise ConfigErrors(fold_errors(errors))  # a bad group var fails each of its hosts: one line, naming them
    inventory = Inventory(
        source=first_file,
        hosts=hosts,
        groups={name: set(members) for name, members in group_order.items()},
        children={name: list(g.children) for name, g in graph.groups.items()},
        warnings=graph.warnings,
        group_order=group_order,
        group_hosts={name: list(g.hosts) for name, g in graph.groups.items()},
        unordered_groups={name for name in graph.groups if not graph.order_is_ansibles(name)},
        sources=tuple(sources),
    )
    _warn_ignored(inventory)
    return inventory


def _warn_ignored(inventory: Inventory) -> None:
    ignored: dict[tuple[str, str], list[str]] = {}
    for name, host in inventory.hosts.items():
        for var in host.ignored_vars:
            origin = host.var_origins.get(var)
            ignored.setdefault((str(origin) if origin else "", var), []).append(name)
    for (where, var), names in ignored.items():
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        prefix = f"{where}: " if where else ""
        inventory.warnings.append(f"{prefix}{var} is ignored ({_IGNORED_VARS[var]}); hosts {shown}")


def magic_vars(inventory: Inventory, host: Host) -> dict[str, Any]:
    """The variables Ansible provides without anyone defining them (here, not in templating, which the
    inventory loader imports)."""
    groups, hostvars = inventory.shared_vars()
    return magic_vars_for(host.name, host.groups, groups, hostvars, inventory.source)


__all__ = ["Host", "Inventory", "expand_host_range", "load_inventory", "magic_vars"]
