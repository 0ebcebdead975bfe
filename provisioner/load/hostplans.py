"""Plays resolved per host: each host's rendered, validated resources, every error with file:line: key.

`resolve` renders a loaded playbook's Jinja2 values for each host the inventory and `--limit` select,
validates the result against the resource kind's model, and keeps each resource's playbook line for
reports. `validate` is the offline check behind `fabnet validate`: structure, then rendering per host.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from provisioner.errors import ConfigError, ConfigErrors, RenderError, fold_errors
from provisioner.load.ansible_tags import secret_variable
from provisioner.load.inventory import Host, Inventory, load_inventory, magic_vars
from provisioner.load.playbook import (
    Play,
    Playbook,
    PlaybookLoader,
    ResourceDecl,
    data_path,
    describe_error,
    template_not_found,
)
from provisioner.load.sandbox import check_name as check_template_name
from provisioner.load.sandbox import template_dirs
from provisioner.load.specs import Spec
from provisioner.load.templating import VarResolver, find_template
from provisioner.load.yamlsrc import KeyPath, Origin, Sourced
from provisioner.resources import REGISTRY

# ------------------------------------------------------------------------------------- resolved per host


@dataclass(frozen=True)
class Resource:
    """A rendered, validated resource for one host. For `file` with `template`, `spec.content` holds the
    rendered text and `spec.template` still names its source."""

    kind: str
    spec: Spec
    origin: Origin

    @property
    def key(self) -> str:
        return self.origin.key

    @property
    def target(self) -> str:
        return self.spec.target()


@dataclass
class HostPlay:
    play: Play
    hosts: tuple[str, ...]  # every host of the play after --limit, for fleet-wide checks like mtu_uniform
    vars: dict[str, Any]  # the play's vars rendered for this host
    resources: list[Resource] = field(default_factory=list)


@dataclass
class HostPlan:
    host: Host
    plays: list[HostPlay] = field(default_factory=list)

    @property
    def resources(self) -> list[Resource]:
        return [r for p in self.plays for r in p.resources]


# ------------------------------------------------------------------------------------------- resolving


def _resolve(
    playbook: Playbook, inventory: Inventory, limit: str | Sequence[str] | None, errors: list[ConfigError]
) -> list[HostPlan]:
    limited: set[str] | None = None
    if limit is not None:  # an empty limit is an error, never "every host"
        try:
            limited = set(inventory.select_limit(limit) if isinstance(limit, str)
                          else inventory.select(limit, limit=True))
        except ConfigError as exc:
            errors.append(exc)
            return []
    src = playbook.source
    plans: dict[str, HostPlan] = {}
    for play in playbook.plays:
        try:
            hosts = inventory.select(play.hosts, origin=src.origin((play.index, "hosts")))
        except ConfigError as exc:
            errors.append(exc)
            continue
        if limited is not None:
            hosts = [h for h in hosts if h in limited]
        for name in hosts:
            host = inventory.hosts[name]
            host_play = _resolve_play(playbook, play, inventory, host, tuple(hosts), errors)
            plans.setdefault(name, HostPlan(host)).plays.append(host_play)
    return [plans[name] for name in inventory.hosts if name in plans]


def _resolve_play(
    playbook: Playbook,
    play: Play,
    inventory: Inventory,
    host: Host,
    hosts: tuple[str, ...],
    errors: list[ConfigError],
) -> HostPlay:
    src = playbook.source
    magic = {
        **magic_vars(inventory, host),
        "play_hosts": list(hosts),
        "ansible_play_hosts": list(hosts),
        "playbook_dir": str(playbook.path.parent),
    }
    # Play vars override inventory vars, as in Ansible; both may refer to each other.
    raw = {**host.vars, **play.vars}
    origins = {**host.var_origins, **play.var_origins}
    resolver = VarResolver(host.name, raw, origins, magic)
    rendered_vars: dict[str, Any] = {}
    for name in play.vars:
        try:
            rendered_vars[name] = resolver.var(name)
        except ConfigError as exc:
            errors.append(exc)
    host_play = HostPlay(play=play, hosts=hosts, vars=rendered_vars)
    for decl in play.resources:
        if not decl.ok:
            continue
        resource = _resolve_resource(decl, resolver, src, host, playbook.path.parent, errors)
        if resource is not None:
            host_play.resources.append(resource)
    return host_play


def _render_tree(
    value: Any, path: KeyPath, resolver: VarResolver, src: Sourced, errors: list[ConfigError]
) -> tuple[Any, bool]:
    if isinstance(value, str):
        try:
            return resolver.render_text(value, src.origin(path)), True
        except ConfigError as exc:
            errors.append(exc)
            return value, False
    if isinstance(value, dict):
        out, ok = {}, True
        for key, sub in value.items():
            out[key], sub_ok = _render_tree(sub, (*path, str(key)), resolver, src, errors)
            ok = ok and sub_ok
        return out, ok
    if isinstance(value, list):
        items, ok = [], True
        for index, sub in enumerate(value):
            item, sub_ok = _render_tree(sub, (*path, index), resolver, src, errors)
            items.append(item)
            ok = ok and sub_ok
        return items, ok
    return value, True


def _resolve_resource(
    decl: ResourceDecl,
    resolver: VarResolver,
    src: Sourced,
    host: Host,
    playbook_dir: Path,
    errors: list[ConfigError],
) -> Resource | None:
    resolver.reset_used()
    rendered, ok = _render_tree(dict(decl.spec), decl.path, resolver, src, errors)
    if not ok:
        return None
    model = REGISTRY[decl.kind].spec
    try:
        spec = model.model_validate(rendered)
    except ValidationError as exc:
        # A value rendered from a password variable is never quoted back, not even in an error.
        hide = any(secret_variable(name) for name in resolver.used)
        for err in exc.errors():
            loc, message = describe_error(err, model, hide=hide)
            where = src.origin((*decl.path, *data_path(rendered, loc)))
            errors.append(RenderError(message, host=host.name, file=where.file, line=where.line, key=where.key))
        return None
    for key, filled in model.templates.items():
        template = getattr(spec, key)
        if template is None:
            continue
        where = src.origin((*decl.path, key))
        dirs = template_dirs(playbook_dir)
        problem = check_template_name(template)
        if problem is None and find_template(template, dirs) is None:
            problem = template_not_found(template, dirs)
        if problem is not None:
            errors.append(RenderError(problem, host=host.name, file=where.file, line=where.line, key=where.key))
            return None
        try:
            content = resolver.render_file(template, dirs, where)
        except ConfigError as exc:
            errors.append(exc)
            return None
        spec = spec.model_copy(update={filled: content})
    # Content rendered from a password variable (directly or through other variables) is a secret
    # whatever the file is called: reports show only its hashes, as for `sensitive: true`.
    if "sensitive" in model.model_fields and any(secret_variable(name) for name in resolver.used):
        spec = spec.model_copy(update={"sensitive": True})
    return Resource(kind=decl.kind, spec=spec, origin=decl.origin)


def resolve(playbook: Playbook, inventory: Inventory, limit: str | Sequence[str] | None = None) -> list[HostPlan]:
    """Per host (inventory order), per play, the rendered and validated resources. Raises ConfigErrors
    listing every problem found."""
    errors: list[ConfigError] = []
    plans = _resolve(playbook, inventory, limit, errors)
    if errors:
        raise ConfigErrors(fold_errors(errors))
    return plans


def validate(
    inventory_path: str | Path,
    playbook_path: str | Path,
    limit: str | Sequence[str] | None = None,
    warnings: list[str] | None = None,
) -> list[ConfigError]:
    """Every problem in an inventory + playbook pair (structure, then rendering for each host), one line
    each; empty when all is well. The inventory's warnings are appended to `warnings` when given."""
    errors: list[ConfigError] = []
    inventory = None
    try:
        inventory = load_inventory(inventory_path, playbook_dir=Path(playbook_path).parent)
    except ConfigError as exc:
        errors.append(exc)
    playbook = PlaybookLoader(Path(playbook_path), errors).load()
    if inventory is not None and playbook is not None:
        _resolve(playbook, inventory, limit, errors)
    if inventory is not None and warnings is not None:  # after resolving: --limit adds its own
        warnings.extend(inventory.warnings)
    return fold_errors(errors)
