"""Jinja2 for inventory and playbook values: the sandboxed environment, syntax checks, and the lazy
per-host rendering of variables and template files with Ansible's magic variables.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
from jinja2 import nodes

from provisioner.errors import ConfigError, RenderError
from provisioner.load.invsources import HostList
from provisioner.load.sandbox import BoundedSandbox, DirLoader, bounded_filter, budget, render_bounded, sized
from provisioner.load.yamlsrc import Origin

_TEMPLATE_MARKERS = ("{{", "{%", "{#")


def _bool_filter(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on", "y", "t"}
    return bool(value)


def _make_env(loader: jinja2.BaseLoader | None = None) -> BoundedSandbox:
    # trim_blocks as in Ansible's template module, so `{% if %}` lines leave no blank line behind.
    env = BoundedSandbox(
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        autoescape=False,
        loader=loader,
    )
    env.filters["bool"] = bounded_filter("bool", _bool_filter, None)
    env.filters["quote"] = bounded_filter("quote", lambda value: shlex.quote(str(value)), None)
    return env


# Values written in inventories and playbooks: no loader, and include/import/extend refused when parsed.
TEMPLATE_ENV = _make_env()


@lru_cache(maxsize=16)
def file_env(dirs: tuple[Path, ...]) -> BoundedSandbox:
    """The environment of template files: they load (and include) only from `dirs`."""
    return _make_env(DirLoader(dirs))


def has_template(text: str) -> bool:
    # An Ansible `!unsafe` string (ansible_tags.UnsafeText) is never a template.
    return not getattr(text, "ansible_unsafe", False) and any(marker in text for marker in _TEMPLATE_MARKERS)


@dataclass(frozen=True)
class _Compiled:
    names: frozenset[str]
    template: jinja2.Template
    expression: Any  # compiled single `{{ expr }}`, or None


_FILE_NODES = (nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)


@lru_cache(maxsize=4096)
def _compile(text: str) -> _Compiled:
    try:
        return _compile_checked(text)
    except RecursionError:  # Jinja's analysis and code generation recurse once per level of the tree
        raise jinja2.TemplateSyntaxError("nested too deeply to compile", 1) from None


# Jinja's code generation slows down sharply with the depth of the tree (350 chained filters took 40 s of
# CPU to compile); no real value comes near this.
MAX_TREE_DEPTH = 64


def _tree_depth(ast: nodes.Node) -> int:
    deepest, stack = 0, [(ast, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_TREE_DEPTH:
            break
        stack.extend((child, depth + 1) for child in node.iter_child_nodes())
    return deepest


def _compile_checked(text: str) -> _Compiled:
    ast = TEMPLATE_ENV.parse(text)
    if _tree_depth(ast) > MAX_TREE_DEPTH:
        raise jinja2.TemplateSyntaxError(f"nested more than {MAX_TREE_DEPTH} levels deep", 1)
    for node in ast.find_all(_FILE_NODES):
        # A value must not read the control machine's files; templates do that, from templates/ only.
        raise jinja2.TemplateSyntaxError(
            "a value cannot include, import or extend a template; use a file resource's template: instead",
            node.lineno,
        )
    names = frozenset(jinja2.meta.find_undeclared_variables(ast))
    expression = None
    body = ast.body
    if (
        len(body) == 1
        and isinstance(body[0], nodes.Output)
        and len(body[0].nodes) == 1
        and not isinstance(body[0].nodes[0], nodes.TemplateData)
        and text.startswith("{{")
        and text.endswith("}}")
    ):
        inner = text[2:-2].lstrip("-+").rstrip("-")
        try:
            expression = TEMPLATE_ENV.compile_expression(inner, undefined_to_none=False)
        except (jinja2.TemplateSyntaxError, RecursionError):
            expression = None
    return _Compiled(names, TEMPLATE_ENV.from_string(text), expression)


def check_template_text(text: str) -> str | None:
    """The syntax error in a template string, or None."""
    try:
        _compile(text)
    except jinja2.TemplateSyntaxError as exc:
        return exc.message or str(exc)
    return None


def _undefined_inside(value: Any) -> jinja2.Undefined | None:
    if isinstance(value, jinja2.Undefined):
        return value
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        for item in value:
            found = _undefined_inside(item)
            if found is not None:
                return found
    return None


def _template_line(exc: BaseException, filename: str) -> int | None:
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


class _Failed(jinja2.StrictUndefined):
    """A variable whose own template failed: raises that error where a template uses it, not before."""

    __slots__ = ("fabnet_error",)

    def _fail_with_undefined_error(self, *args: Any, **kwargs: Any) -> Any:
        raise self.fabnet_error


for _name in [n for c in jinja2.StrictUndefined.__mro__ for n, v in vars(c).items()
              if v is jinja2.Undefined._fail_with_undefined_error]:  # __str__, __iter__, ... use the error
    setattr(_Failed, _name, _Failed._fail_with_undefined_error)


class VarResolver:
    """Values for one host. A variable may itself be a template (Ansible resolves them lazily, so group
    vars can build on host vars); each is rendered once, on first use, with loops reported.

    A string that is exactly one `{{ expr }}` keeps the expression's type (`"{{ mtu }}"` with `mtu: 9000`
    gives the int 9000, `"{{ prios }}"` a list); any other template renders to a string.
    """

    def __init__(
        self, host: str, raw: Mapping[str, Any], origins: Mapping[str, Origin], magic: Mapping[str, Any]
    ) -> None:
        self.host = host
        self.raw = raw
        self.origins = origins
        self.magic = magic
        self._done: dict[str, Any] = {}
        self._failed: dict[str, ConfigError] = {}
        self._stack: list[str] = []
        # Every variable a rendering used, through other variables too (`reset_used`, `used`): a file
        # whose content comes from a password variable is reported as sensitive.
        self._deps: dict[str, frozenset[str]] = {}
        self.used: set[str] = set()

    def reset_used(self) -> None:
        self.used = set()

    def var(self, name: str) -> Any:
        if name in self._done:
            self.used |= self._deps[name]
            return self._done[name]
        if name in self._failed:
            raise self._failed[name]  # the same error again, so one bad variable is reported once
        origin = self.origins.get(name) or Origin("", None, name)
        if name in self._stack:
            loop = " -> ".join([*self._stack[self._stack.index(name) :], name])
            raise RenderError(
                f"variables refer to each other in a loop: {loop}",
                host=self.host,
                file=origin.file or None,
                line=origin.line,
                key=origin.key or name,
            )
        self._stack.append(name)
        outer, self.used = self.used, set()
        try:
            value = self.render(self.raw[name], origin, what=f"variable {name!r}")
        except ConfigError as exc:
            self._failed[name] = exc
            raise
        finally:
            self._stack.pop()
            self._deps[name] = frozenset({name, *self.used})
            self.used = outer | self._deps[name]
        self._done[name] = value
        return value

    def context(self, names: Iterable[str]) -> dict[str, Any]:
        ctx: dict[str, Any] = {}
        for name in names:
            if name in self.raw:
                try:
                    ctx[name] = self.var(name)
                except ConfigError as exc:  # as in Ansible, it fails only if the branch taken uses it
                    ctx[name] = _Failed(name=name)
                    ctx[name].fabnet_error = exc
            elif name in self.magic:
                ctx[name] = self.magic[name]
        return ctx

    def render(self, value: Any, origin: Origin, *, what: str = "") -> Any:
        """`value` with every string in it rendered; errors point at `origin`."""
        if isinstance(value, str):
            return self.render_text(value, origin, what=what)
        if isinstance(value, dict):
            return {k: self.render(v, origin, what=what) for k, v in value.items()}
        if isinstance(value, list):
            return [self.render(v, origin, what=what) for v in value]
        return value

    def render_text(self, text: str, origin: Origin, *, what: str = "") -> Any:
        if not has_template(text):
            return text
        suffix = f" in {what}" if what else ""
        try:
            compiled = _compile(text)
        except jinja2.TemplateSyntaxError as exc:
            raise RenderError(
                f"template syntax error{suffix}: {exc.message}",
                host=self.host,
                file=origin.file or None,
                line=origin.line,
                key=origin.key or None,
            ) from None
        try:
            with budget():
                ctx = self.context(compiled.names)
                if compiled.expression is not None:
                    result = sized(compiled.expression(**ctx), "the value")
                    undefined = _undefined_inside(result)
                    if undefined is not None:
                        str(undefined)  # raises UndefinedError naming the variable
                    return result
                return render_bounded(compiled.template, ctx)
        except (jinja2.TemplateError, ArithmeticError, TypeError, ValueError, LookupError, RecursionError,
                MemoryError) as exc:
            message = _message(exc)
            raise RenderError(
                f"cannot render {_short(text)}{suffix}: {message}",
                host=self.host,
                file=origin.file or None,
                line=origin.line,
                key=origin.key or None,
            ) from None

    def render_file(self, name: str, dirs: tuple[Path, ...], origin: Origin) -> str:
        """Render the template file `name` from `dirs`; errors name the template's own file and line."""
        env = file_env(dirs)
        try:
            template = env.get_template(name)
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigError(f"template syntax error: {exc.message}", file=exc.filename, line=exc.lineno) from None
        except (jinja2.TemplateError, OSError) as exc:
            raise origin.error(f"cannot read template {name}: {_message(exc)}") from None
        filename = template.filename or name
        try:
            with budget():
                ctx = self.context(_file_names(dirs, name, Path(filename).stat().st_mtime_ns))
                return render_bounded(template, ctx)
        except ConfigError:
            raise
        except (jinja2.TemplateError, ArithmeticError, TypeError, ValueError, LookupError, RecursionError,
                MemoryError, OSError) as exc:
            message = _message(exc)
            if isinstance(exc, jinja2.TemplateNotFound):
                message = f"template {message} not found in {' or '.join(str(d) for d in dirs)}"
            raise RenderError(
                f"{message} (rendering for {origin.key or origin})",
                host=self.host,
                file=filename,
                line=_template_line(exc, filename),
            ) from None


def _short(text: str) -> str:
    shown = repr(text)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _message(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "recursion too deep (a macro or loop that calls itself without end?)"
    if isinstance(exc, MemoryError):
        return "out of memory while rendering"
    return getattr(exc, "message", None) or str(exc)


@lru_cache(maxsize=256)
def _file_names(dirs: tuple[Path, ...], name: str, mtime_ns: int) -> frozenset[str]:
    """Variables a template file (and the files it includes by a literal name) reads; parsed once per
    version of the file, not once per host."""
    del mtime_ns  # part of the cache key only
    env = file_env(dirs)
    names: set[str] = set()
    todo, seen = [name], set[str]()
    while todo:
        current = todo.pop()
        if current in seen or len(seen) > 1000:
            continue
        seen.add(current)
        try:
            source, _, _ = env.loader.get_source(env, current)  # type: ignore[union-attr]
        except jinja2.TemplateError:
            continue  # reported when rendering reaches it
        ast = env.parse(source)
        names |= jinja2.meta.find_undeclared_variables(ast)
        for ref in jinja2.meta.find_referenced_templates(ast):
            if ref is not None:
                todo.append(env.join_path(ref, current))
    return frozenset(names)


def find_template(name: str, dirs: tuple[Path, ...]) -> Path | None:
    """Where template `name` is found in `dirs`, or None (also for names that would lead out of them)."""
    return DirLoader(dirs).find(name)


def check_template_file(name: str, dirs: tuple[Path, ...]) -> ConfigError | None:
    """A syntax error in a template file, located in that file, or None."""
    env = file_env(dirs)
    try:
        env.get_template(name)
    except jinja2.TemplateSyntaxError as exc:
        return ConfigError(f"template syntax error: {exc.message}", file=exc.filename, line=exc.lineno)
    except jinja2.TemplateError as exc:
        return ConfigError(f"cannot read template {name}: {_message(exc)}")
    return None


def magic_vars_for(
    name: str,
    host_groups: Sequence[str],
    groups: Mapping[str, list[str]],
    hostvars: Mapping[str, Mapping[str, Any]],
    source: Path | HostList,
) -> dict[str, Any]:
    """The variables Ansible provides without anyone defining them, from their parts: the inventory loader
    needs them before the `Inventory` exists (`inventory.magic_vars` gives them for a loaded one)."""
    return {
        "inventory_hostname": name,
        "inventory_hostname_short": name.split(".", 1)[0],
        "group_names": list(host_groups),
        "groups": groups,
        "hostvars": hostvars,  # as written: templates inside other hosts' vars are not rendered
        # A host list (`gpu01,gpu02,`) is its own inventory_file and has no folder, as in Ansible.
        "inventory_dir": str(source.parent) if isinstance(source, Path) else None,
        "inventory_file": str(source),
    }


__all__ = [
    "TEMPLATE_ENV",
    "VarResolver",
    "check_template_file",
    "check_template_text",
    "file_env",
    "find_template",
    "has_template",
    "magic_vars_for",
]
