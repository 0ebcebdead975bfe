"""The Jinja2 environments fabnet renders with: Jinja's sandbox (no way to Python internals) plus
bounds on what a template may read, produce and cost.

- Files: templates load only from the playbook's template directories, by a relative name without
  `..`, hidden parts or symlinks that lead out; values written in inventories and playbooks cannot
  include, import or extend any file at all.
- Size: no rendered value, file or intermediate string or list is longer than MAX_OUTPUT; operators,
  string methods and filters that multiply their input are checked before they allocate.
- Time: rendering one value or file stops after MAX_SECONDS (checked at every call, attribute, item,
  loop step and piece of output); macros that recurse without end are an error, not a RecursionError.
"""

from __future__ import annotations

import functools
import math
import posixpath
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path, PurePosixPath
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

from provisioner.errors import ConfigError
from provisioner.load.yamlsrc import read_text

MAX_OUTPUT = 1024 * 1024  # characters (or items) of any rendered value, file or intermediate result
MAX_SECONDS = 5.0  # to render one value or one template file
MAX_TEMPLATE_BYTES = 1024 * 1024  # size of a template file
MAX_LIPSUM = 100  # paragraphs lipsum() may make
MAX_INT_BITS = 4096  # results of ** (9**9**9 would take minutes to compute)

_LOOP = "fabnet__loop"  # the global that every {% for %} iterates through (ticks the clock)
_RESERVED = "fabnet__"


class TemplateLimitError(SecurityError):
    """A template that would read outside its directories, or cost more than a limit allows."""


_deadline: ContextVar[float | None] = ContextVar("fabnet_template_deadline", default=None)


@contextmanager
def budget() -> Iterator[None]:
    """Bound the rendering done inside (nested uses share the outermost deadline)."""
    if _deadline.get() is not None:
        yield
        return
    token = _deadline.set(time.monotonic() + MAX_SECONDS)
    try:
        yield
    finally:
        _deadline.reset(token)


def _tick() -> None:
    deadline = _deadline.get()
    if deadline is not None and time.monotonic() > deadline:
        raise TemplateLimitError(f"rendering took longer than the limit of {MAX_SECONDS:g} s")


def _too_big(what: str, size: float) -> TemplateLimitError:
    return TemplateLimitError(f"{what} would be {_count(size)} long, over the limit of {_count(MAX_OUTPUT)}")


def _count(size: float) -> str:
    return f"{int(size):,} characters" if size < 1e15 else "astronomically many characters"


def sized(value: Any, what: str = "a result") -> Any:
    """`value`, unless it is a string or collection longer than MAX_OUTPUT."""
    if isinstance(value, str | bytes | list | tuple | dict | set | frozenset) and len(value) > MAX_OUTPUT:
        raise _too_big(what, len(value))
    return value


def _check_size(size: float, what: str) -> None:
    if size > MAX_OUTPUT:
        raise _too_big(what, size)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return 0


# A printf conversion with its width and precision (`%09d`, `%-*s`, `%.3f`), and a str.format field's
# spec (`{:>10}`, `{0:.2f}`); a `{` inside a spec takes the width from an argument.
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\d+|\*)?(?:\.(\d+|\*))?[a-zA-Z%]")
_BRACE = re.compile(r"\{[^{}]*:([^{}]*)\}")
_NESTED = re.compile(r"\{[^{}]*:[^{}]*\{")
_DIGITS = re.compile(r"\d{1,30}")


def _format_widths(text: str, args: Iterable[Any] = ()) -> int:
    """The widest field a format string asks for (`%0999999999d`, `{:>999999999}`, `%*d` or `{:>{}}`
    with the width among the arguments), so the result's size is known before it is made."""
    widest = 0
    from_args = False
    for match in _PERCENT.finditer(text):
        widest = max([widest, *(int(g) for g in match.groups() if g and g.isdigit() and len(g) < 30)])
        from_args = from_args or "*" in match.group(0)
    for match in _BRACE.finditer(text):
        widest = max([widest, *(int(d) for d in _DIGITS.findall(match.group(1)))])
    if from_args or _NESTED.search(text):
        widest = max([widest, *(_int(a) for a in args if isinstance(a, int) and not isinstance(a, bool))])
    return widest


def _estimate_str_call(name: str, text: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> float:
    """How long the result of `text.name(*args)` could be, for the methods whose output can outgrow
    their input; 0 for the others (their result is checked after the call)."""
    if name in ("ljust", "rjust", "center", "zfill"):
        return max(len(text), _int(args[0]) if args else 0)
    if name == "expandtabs":
        return len(text) + text.count("\t") * max(_int(args[0]) if args else 8, 0)
    if name == "join":
        items = list(args[0]) if args and isinstance(args[0], list | tuple) else []
        return sum(len(str(i)) for i in items[: MAX_OUTPUT + 1]) + len(text) * len(items)
    if name == "replace" and len(args) >= 2:
        old, new = str(args[0]), str(args[1])
        return len(text) + (text.count(old) if old else len(text) + 1) * len(new)
    if name in ("format", "format_map"):
        values = [*args, *kwargs.values()]
        return len(text) + _format_widths(text, values) + sum(len(v) for v in values if isinstance(v, str))
    return 0


def _estimate_binop(operator: str, left: Any, right: Any) -> float:
    if operator == "*":
        for seq, times in ((left, right), (right, left)):
            if isinstance(seq, str | list | tuple) and isinstance(times, int):
                return len(seq) * max(times, 0)
    if operator == "+" and isinstance(left, str | list | tuple) and isinstance(right, str | list | tuple):
        return len(left) + len(right)
    if operator == "%" and isinstance(left, str):
        values = right if isinstance(right, tuple) else (right,)
        return len(left) + _format_widths(left, values) + sum(len(v) for v in values if isinstance(v, str))
    return 0


def _check_power(left: Any, right: Any) -> None:
    if isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and right > 0:
        bits = right * math.log2(abs(left))
        if bits > MAX_INT_BITS:
            raise TemplateLimitError(f"{left} ** {right} would have {bits:,.0f} bits, over the limit of {MAX_INT_BITS}")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)[: MAX_OUTPUT + 1]


def _len(value: Any) -> int:
    return len(value) if isinstance(value, str | list | tuple | dict) else 0


def _center(value: Any, width: Any = 80, *_: Any) -> float:
    return max(_len(value), _int(width))


def _indent(value: Any, width: Any = 4, *_: Any, **__: Any) -> float:
    pad = len(width) if isinstance(width, str) else _int(width)
    return len(_text(value)) * (1 + max(pad, 0))


def _format(value: Any, *args: Any, **kwargs: Any) -> float:
    return len(_text(value)) + _format_widths(_text(value), [*args, *kwargs.values()])


def _join(value: Any, separator: Any = "", *_: Any) -> float:
    if not isinstance(value, list | tuple):
        return 0
    return sum(len(str(i)) for i in value[: MAX_OUTPUT + 1]) + len(str(separator)) * len(value)


def _replace(value: Any, old: Any = "", new: Any = "", *_: Any) -> float:
    text = _text(value)
    return len(text) + (text.count(str(old)) + 1) * len(str(new))


def _count_arg(_value: Any, count: Any = 1, *_: Any) -> float:
    return _int(count)


# Filters whose result can outgrow their input: how long it could be, from (value, *args).
_FILTER_ESTIMATES: dict[str, Callable[..., float]] = {
    "center": _center,
    "indent": _indent,
    "format": _format,
    "join": _join,
    "replace": _replace,
    "batch": _count_arg,
    "slice": _count_arg,
}


class BoundedSandbox(SandboxedEnvironment):
    """Jinja's sandbox with size and time checks at every operator, call, attribute and item."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for name, func in list(self.filters.items()):
            self.filters[name] = bounded_filter(name, func, _FILTER_ESTIMATES.get(name))
        self.globals["lipsum"] = _lipsum
        self.globals["range"] = _ticking_range
        self.globals[_LOOP] = _ticking

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        try:
            ast = super()._parse(source, name, filename)
        except RecursionError:  # Jinja's parser recurses once per level of brackets, operators and blocks
            raise jinja2.TemplateSyntaxError("nested too deeply to parse", 1, name, filename) from None
        for node in ast.find_all(nodes.Name):
            if node.name.startswith(_RESERVED):
                raise jinja2.TemplateSyntaxError(f"names starting with {_RESERVED} are reserved", node.lineno, name,
                                                 filename)
        # Every loop steps through fabnet__loop, so a loop that prints nothing still meets the clock.
        for loop in ast.find_all(nodes.For):
            loop.iter = nodes.Call(nodes.Name(_LOOP, "load", lineno=loop.lineno), [loop.iter], [], None, None,
                                   lineno=loop.lineno)
        return ast

    def compile(self, source: Any, name: str | None = None, filename: str | None = None, raw: bool = False,
                defer_init: bool = False) -> Any:
        try:
            # jinja2's stubs type the result by a Literal `raw`; this override passes its caller's on as it came.
            return super().compile(source, name, filename, raw, defer_init)  # type: ignore[call-overload]
        except (RecursionError, MemoryError, SyntaxError):
            # Code generation and Python's compiler recurse too; a template that deep is not a real one.
            raise jinja2.TemplateSyntaxError("nested too deeply to compile", 1, name, filename) from None

    def join_path(self, template: str, parent: str) -> str:
        # `{% include "x.j2" %}` is looked up beside the including template; bad names reach the loader
        # unchanged, so it can say why they are refused.
        folder = posixpath.dirname(parent)
        return template if check_name(template) is not None or not folder else posixpath.join(folder, template)

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        _tick()
        if operator == "**":
            _check_power(left, right)
        _check_size(_estimate_binop(operator, left, right), f"the result of {operator!r}")
        return sized(super().call_binop(context, operator, left, right))

    def getattr(self, obj: Any, attribute: str) -> Any:
        _tick()
        return sized(super().getattr(obj, attribute), f"attribute {attribute!r}")

    def getitem(self, obj: Any, argument: Any) -> Any:
        _tick()
        return sized(super().getitem(obj, argument), "an item")

    def call(__self, __context: jinja2.runtime.Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        _tick()
        method = getattr(__obj, "__wrapped__", __obj)  # str.format arrives wrapped by the sandbox
        owner = getattr(method, "__self__", None)
        if isinstance(owner, str):
            _check_size(_estimate_str_call(getattr(method, "__name__", ""), owner, args, kwargs),
                        f"the result of {getattr(method, '__name__', 'a method')}()")
        return sized(SandboxedEnvironment.call(__self, __context, __obj, *args, **kwargs))


def bounded_filter(name: str, func: Callable[..., Any], estimate: Callable[..., float] | None) -> Callable[..., Any]:
    # Filters with pass_context & co. get extra leading arguments: the value is the first one after them.
    skip = 1 if getattr(func, "jinja_pass_arg", None) is not None else 0

    @functools.wraps(func)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _tick()
        if estimate is not None and len(args) > skip:
            try:
                size = estimate(*args[skip:], **kwargs)
            except TypeError:
                size = 0  # wrong arguments: the filter itself says so
            _check_size(size, f"the result of the {name} filter")
        return sized(func(*args, **kwargs), f"the result of the {name} filter")

    return bounded


def _lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    if _int(n) > MAX_LIPSUM or _int(max) > 1000:
        raise TemplateLimitError(f"lipsum() makes at most {MAX_LIPSUM} paragraphs of at most 1000 words")
    return jinja2.utils.generate_lorem_ipsum(n=n, html=html, min=min, max=max)


def _ticking(iterable: Iterable[Any]) -> Iterator[Any]:
    for item in iterable:
        _tick()
        yield item


def _ticking_range(*args: int) -> Iterator[int]:
    from jinja2.sandbox import safe_range

    return _ticking(safe_range(*args))


def render_bounded(template: jinja2.Template, context: dict[str, Any]) -> str:
    """`template.render(context)`, stopping as soon as the output passes MAX_OUTPUT or time runs out."""
    with budget():
        parts: list[str] = []
        size = 0
        for part in template.generate(context):
            size += len(part)
            _check_size(size, "the rendered text")
            _tick()
            parts.append(part)
        return "".join(parts)


# ------------------------------------------------------------------------------------ where files come from


def template_dirs(playbook_dir: Path) -> tuple[Path, ...]:
    """The directories a playbook's templates come from: its own templates/, then the project's."""
    return (playbook_dir / "templates", playbook_dir.parent / "templates")


def check_name(name: str) -> str | None:
    """Why a template name is not allowed, or None: only a relative path inside a template directory."""
    if not name or name.strip() != name:
        return "a template name must not be empty or start or end with whitespace"
    if any(ord(c) < 0x20 or c in "\\\x7f" for c in name):
        return "a template name must not contain control characters or '\\'"
    path = PurePosixPath(name)
    if path.is_absolute():
        return "a template is named relative to the playbook's templates/ directory, not by an absolute path"
    if any(part in ("..", ".") for part in name.split("/")) or "//" in name:
        return "a template name must not contain '..', '.' or empty parts"
    if any(part.startswith(".") for part in path.parts):
        return "a template name must not contain hidden ('.'-prefixed) parts"
    return None


class DirLoader(jinja2.BaseLoader):
    """Loads `name` from the first directory that has it, refusing names and symlinks that lead out."""

    def __init__(self, dirs: Iterable[Path]) -> None:
        self.dirs = tuple(dirs)

    def find(self, name: str) -> Path | None:
        if check_name(name) is not None:
            return None
        for base in self.dirs:
            candidate = base / name
            try:
                real = candidate.resolve(strict=True)
                root = base.resolve(strict=True)
            except (OSError, RuntimeError):
                continue
            if real.is_relative_to(root) and real.is_file():
                return candidate
        return None

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        problem = check_name(template)
        if problem is not None:
            raise TemplateLimitError(f"{problem}: {template!r}")
        found = self.find(template)
        if found is None:
            raise jinja2.TemplateNotFound(template)
        try:
            source = read_text(found, what="template", limit=MAX_TEMPLATE_BYTES)
        except ConfigError as exc:
            raise TemplateLimitError(f"{found}: {exc.message}") from None
        mtime = found.stat().st_mtime_ns

        def uptodate() -> bool:
            try:
                return found.stat().st_mtime_ns == mtime
            except OSError:
                return False

        return source, str(found), uptodate
