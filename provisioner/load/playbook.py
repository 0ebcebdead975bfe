"""Playbooks: YAML lists of plays, their structure checked offline, every error with file:line: key.

`load_playbook` checks keys, kinds, types of values written literally, template syntax and template
files; nothing is rendered yet. Rendering per host is the next step, in hostplans.py.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from provisioner.errors import ConfigError, ConfigErrors, did_you_mean, fold_errors
from provisioner.load.sandbox import check_name as check_template_name
from provisioner.load.sandbox import template_dirs
from provisioner.load.specs import Int
from provisioner.load.templating import (
    check_template_file,
    check_template_text,
    find_template,
    has_template,
)
from provisioner.load.yamlsrc import KeyPath, Origin, Sourced, load_yaml
from provisioner.resources import REGISTRY
from provisioner.smoke.settings import AllReduceSpec

# ------------------------------------------------------------------------------------------ play models


class VerifySpec(BaseModel):
    """Checks run after the fleet is in the desired state."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    all_reduce: AllReduceSpec | None = Field(
        None, description="settings of the all-reduce smoke test across the play's hosts (a mapping)"
    )


def _hosts_text(value: Any) -> Any:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return ",".join(value)
    return value


class PlaySpec(BaseModel):
    """The keys a play may have besides its resources."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(None, description="a title for reports")
    hosts: Annotated[str, BeforeValidator(_hosts_text)] = Field(
        description="host pattern as in Ansible: groups, hosts, globs, !exclude, &intersect (or a list)"
    )
    vars: dict[str, Any] = Field(default_factory=dict, description="play variables (override inventory vars)")
    resources: list[Any] = Field(default_factory=list, description="list of one-key mappings {kind: spec}")
    verify: VerifySpec | None = Field(None, description="checks after apply; allowed: all_reduce")
    serial: Int | None = Field(None, ge=1, description="number of hosts changed at a time")
    max_fail_percentage: Int | None = Field(
        None, ge=0, le=100, description="percent 0..100 of failed hosts in a batch that stops the run"
    )


# -------------------------------------------------------------------------------------- loaded playbook


@dataclass(frozen=True)
class ResourceDecl:
    """One resource as written: `spec` still holds unrendered templates."""

    kind: str
    spec: Mapping[str, Any]
    origin: Origin
    path: KeyPath
    ok: bool = True  # False when offline checks already failed: resolving it would only repeat them


@dataclass(frozen=True)
class Play:
    index: int
    name: str | None
    hosts: str
    vars: Mapping[str, Any]
    var_origins: Mapping[str, Origin]
    resources: tuple[ResourceDecl, ...]
    verify: VerifySpec | None
    serial: int | None
    max_fail_percentage: int | None
    origin: Origin

    @property
    def title(self) -> str:
        return self.name or f"play {self.index + 1} ({self.hosts})"


@dataclass
class Playbook:
    path: Path
    plays: list[Play]
    source: Sourced


# ---------------------------------------------------------------------------------------- error wording


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _model_at(model: type[BaseModel], loc: Sequence[Any]) -> tuple[type[BaseModel], tuple[Any, ...]]:
    """The (nested) model that `loc` ends in, and the rest of `loc` inside it."""
    for depth, part in enumerate(loc):
        info = model.model_fields.get(part) if isinstance(part, str) else None
        nested = None
        if info is not None and depth + 1 < len(loc):
            candidates = [info.annotation, *typing.get_args(info.annotation)]
            nested = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if nested is None:
            return model, tuple(loc[depth:])
        model = nested
    return model, ()


def describe_error(err: Mapping[str, Any], model: type[BaseModel],
                   hide: bool = False) -> tuple[tuple[Any, ...], str]:
    """A pydantic error as (location within the model, one clear sentence that says what is allowed).
    `hide`: the value was rendered from a secret, so the sentence never quotes it."""
    loc = tuple(err["loc"])
    kind = err["type"]
    model, inner = _model_at(model, loc)
    fields = model.model_fields
    name = inner[0] if inner and isinstance(inner[0], str) else None
    info = fields.get(name) if name else None
    expected = f"; expected {info.description}" if info is not None and info.description else ""
    if kind == "extra_forbidden":
        return loc, f"unknown key; allowed: {', '.join(fields)}" + did_you_mean(str(loc[-1]), list(fields))
    if kind == "missing":
        return loc, f"missing required key{expected}"
    message = str(err["msg"]).removeprefix("Value error, ")
    value = err.get("input")
    if kind == "value_error":
        expected = ""  # our own validators already say what to write
    # Only a plain value is hidden; a vaulted one shows as what it is (encrypted, never its text).
    plain = str(value) if hide and isinstance(value, str | int | float) and not isinstance(value, bool) else ""
    if plain:
        message = message.replace(plain, "<hidden>")
        if kind == "string_pattern_mismatch":
            message = "invalid value (hidden: it was rendered from a password variable)"
    elif kind == "string_pattern_mismatch":
        message = f"invalid value {_short(value)}"
    elif loc and not isinstance(value, dict | list) and _short(value) not in message:
        message += f" (got {_short(value)})"
    if "[key]" in loc:
        loc = tuple(p for p in loc if p != "[key]")
        message = f"key {loc[-1]!r}: {message}"
    return loc, message + (expected if loc else "")


def data_path(data: Any, loc: Sequence[Any]) -> KeyPath:
    """A pydantic location as a key path into the YAML data (mapping keys as text, list indices as int)."""
    path: list[str | int] = []
    current = data
    for part in loc:
        if isinstance(current, list) and isinstance(part, int):
            path.append(part)
            current = current[part] if 0 <= part < len(current) else None
        else:
            path.append(str(part))
            if isinstance(current, dict):
                keys = {str(k): k for k in current}
                current = current.get(keys.get(str(part), part))
            else:
                current = None
    return tuple(path)


def _templated_at(data: Any, loc: Sequence[Any]) -> bool:
    """Whether the value at `loc`, or one it sits inside, is a template (so it is checked per host)."""
    current = data
    for part in loc:
        if isinstance(current, str):
            return has_template(current)
        if isinstance(current, dict):
            if part in current:
                current = current[part]
            elif str(part) in current:
                current = current[str(part)]
            else:
                keys = {str(k): k for k in current}
                if str(part) not in keys:
                    return False
                current = current[keys[str(part)]]
        elif isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
            current = current[part]
        else:
            return False
    return isinstance(current, str) and has_template(current)


def _strings(value: Any, path: KeyPath) -> list[tuple[KeyPath, str]]:
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(v, (*path, str(k)))]
    if isinstance(value, list):
        return [s for i, v in enumerate(value) for s in _strings(v, (*path, i))]
    return []


_VAR_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# -------------------------------------------------------------------------------------------- loading


class PlaybookLoader:
    def __init__(self, path: Path, errors: list[ConfigError]) -> None:
        self.path = path
        self.errors = errors
        self.src: Sourced

    def load(self) -> Playbook | None:
        try:
            self.src = load_yaml(self.path, root="plays")
        except ConfigError as exc:
            self.errors.append(exc)
            return None
        data = self.src.data
        if data is None or data == []:
            self.errors.append(self.src.error("the playbook has no plays"))
            return None
        if not isinstance(data, list):
            self.errors.append(self.src.error("a playbook is a list of plays (each starting with '- hosts: ...')"))
            return None
        plays = []
        for index, body in enumerate(data):
            play = self._play(index, body)
            if play is not None:
                plays.append(play)
        return Playbook(path=self.path, plays=plays, source=self.src)

    def _play(self, index: int, body: Any) -> Play | None:
        path: KeyPath = (index,)
        if not isinstance(body, dict):
            self.errors.append(self.src.error("a play is a mapping with hosts, vars, resources ...", path))
            return None
        try:
            spec = PlaySpec.model_validate(body)
        except ValidationError as exc:
            for err in exc.errors():
                loc, message = describe_error(err, PlaySpec)
                self.errors.append(self.src.error(message, (*path, *data_path(body, loc))))
            # Still check the resources, so one pass shows every problem of the play.
            if isinstance(body.get("resources"), list):
                for i, item in enumerate(body["resources"]):
                    self._resource(item, (*path, "resources", i))
            return None
        var_origins = {}
        for name in spec.vars:
            if not isinstance(name, str) or not _VAR_NAME_RE.match(name):
                self.errors.append(
                    self.src.error(
                        "a variable name must be letters, digits and _, not starting with a digit",
                        (*path, "vars", str(name)),
                    )
                )
            var_origins[str(name)] = self.src.origin((*path, "vars", str(name)))
            for sub, text in _strings(spec.vars[name], (*path, "vars", str(name))):
                self._syntax(text, sub)
        resources = tuple(
            decl
            for i, item in enumerate(spec.resources)
            if (decl := self._resource(item, (*path, "resources", i))) is not None
        )
        return Play(
            index=index,
            name=spec.name,
            hosts=spec.hosts,
            vars=spec.vars,
            var_origins=var_origins,
            resources=resources,
            verify=spec.verify,
            serial=spec.serial,
            max_fail_percentage=spec.max_fail_percentage,
            origin=self.src.origin(path),
        )

    def _syntax(self, text: str, path: KeyPath) -> bool:
        problem = check_template_text(text) if has_template(text) else None
        if problem:
            self.errors.append(self.src.error(f"template syntax error: {problem}", path))
        return problem is None

    def _resource(self, item: Any, path: KeyPath) -> ResourceDecl | None:
        if not isinstance(item, dict) or len(item) != 1:
            got = f"keys {', '.join(map(str, item))}" if isinstance(item, dict) else _short(item)
            self.errors.append(
                self.src.error(f"a resource is a one-key mapping {{kind: spec}} (kinds: {', '.join(REGISTRY)}); "
                               f"got {got}", path)
            )
            return None
        kind, spec = next(iter(item.items()))
        kind = str(kind)
        spec_path = (*path, kind)
        if kind not in REGISTRY:
            self.errors.append(
                self.src.error(
                    f"unknown resource kind {kind!r}; allowed kinds: {', '.join(REGISTRY)}"
                    + did_you_mean(kind, list(REGISTRY)),
                    spec_path,
                )
            )
            return None
        if spec is None:
            spec = {}
        if not isinstance(spec, dict):
            self.errors.append(
                self.src.error(f"the settings of a {kind} resource are a mapping; got {_short(spec)}", spec_path)
            )
            return None
        ok = all([self._syntax(text, sub) for sub, text in _strings(spec, spec_path)])
        model = REGISTRY[kind].spec
        try:
            model.model_validate(spec)
        except ValidationError as exc:
            for err in exc.errors():
                if _templated_at(spec, err["loc"]):
                    continue  # known only once rendered for a host
                loc, message = describe_error(err, model)
                self.errors.append(self.src.error(message, (*spec_path, *data_path(spec, loc))))
                ok = False
        for key in model.templates:
            template = spec.get(key)
            if isinstance(template, str) and not has_template(template):
                ok = self._template_file(template, (*spec_path, key)) and ok
        return ResourceDecl(kind=kind, spec=spec, origin=self.src.origin(spec_path), path=spec_path, ok=ok)

    def _template_file(self, name: str, path: KeyPath) -> bool:
        dirs = template_dirs(self.path.parent)
        if check_template_name(name) is not None:
            return False  # the spec's own validation has reported it
        if find_template(name, dirs) is None:
            self.errors.append(self.src.error(template_not_found(name, dirs), path))
            return False
        problem = check_template_file(name, dirs)
        if problem is not None:
            self.errors.append(problem)
            return False
        return True


def load_playbook(path: str | Path) -> Playbook:
    """Read and check a playbook's structure; templates are not rendered yet. Raises ConfigErrors."""
    errors: list[ConfigError] = []
    playbook = PlaybookLoader(Path(path), errors).load()
    if errors or playbook is None:
        raise ConfigErrors(fold_errors(errors))
    return playbook


def template_not_found(name: str, dirs: tuple[Path, ...]) -> str:
    return f"template {name!r} not found in {' or '.join(str(d) for d in dirs)}"
