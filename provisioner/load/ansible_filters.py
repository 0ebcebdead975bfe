"""The Ansible filters and lookups inventories commonly use in their variables (`lookup('env', ...)`,
`to_json`, `basename`, `regex_replace`, `combine`, ...), added to fabnet's Jinja2 environment so such
inventories render unchanged. Nothing here reads a file: `lookup('file')` and its kind stay unsupported.
"""

from __future__ import annotations

import base64
import json
import os
import posixpath
import re
from collections.abc import Mapping
from typing import Any

import jinja2
import yaml


def _lookup(kind: str, *terms: Any, **options: Any) -> Any:
    """`lookup('env', 'NAME', default=...)`: the control machine's environment; other kinds are refused."""
    if kind != "env":
        raise ValueError(f"lookup({kind!r}) is not supported; fabnet supports lookup('env', NAME)")
    values = [os.environ.get(str(term), options.get("default", "")) for term in terms]
    return values if options.get("wantlist") else ",".join(str(v) for v in values)


def _query(kind: str, *terms: Any, **options: Any) -> list[Any]:
    values: list[Any] = _lookup(kind, *terms, wantlist=True, **options)
    return values


def _combine(*dicts: Mapping[str, Any], recursive: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for item in dicts:
        for key, value in item.items():
            if recursive and isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
                result[key] = _combine(result[key], value, recursive=True)
            else:
                result[key] = value
    return result


def _regex_replace(value: Any, pattern: str, replacement: str = "", ignorecase: bool = False) -> str:
    return re.sub(pattern, replacement, str(value), flags=re.IGNORECASE if ignorecase else 0)


def _regex_search(value: Any, pattern: str, ignorecase: bool = False) -> str | None:
    found = re.search(pattern, str(value), flags=re.IGNORECASE if ignorecase else 0)
    return found.group(0) if found else None


def _ternary(value: Any, true_value: Any, false_value: Any, none_value: Any = None) -> Any:
    if value is None and none_value is not None:
        return none_value
    return true_value if value else false_value


def _flatten(items: Any, levels: int | None = None) -> list[Any]:
    result: list[Any] = []
    for item in items:
        if isinstance(item, list | tuple) and (levels is None or levels > 0):
            result.extend(_flatten(item, None if levels is None else levels - 1))
        else:
            result.append(item)
    return result


def _mandatory(value: Any, msg: str | None = None) -> Any:
    if isinstance(value, jinja2.Undefined):
        raise ValueError(msg or "a mandatory variable is not defined")
    return value


FILTERS = {
    "to_json": lambda v, **kw: json.dumps(v, **kw),
    "to_nice_json": lambda v, indent=4, **kw: json.dumps(v, indent=indent, sort_keys=True, **kw),
    "from_json": json.loads,
    "to_yaml": lambda v, **kw: yaml.safe_dump(v, default_flow_style=True, **kw),
    "to_nice_yaml": lambda v, indent=4, **kw: yaml.safe_dump(v, indent=indent, default_flow_style=False, **kw),
    "from_yaml": yaml.safe_load,
    "basename": lambda v: posixpath.basename(str(v)),
    "dirname": lambda v: posixpath.dirname(str(v)),
    "splitext": lambda v: list(posixpath.splitext(str(v))),
    "regex_replace": _regex_replace,
    "regex_search": _regex_search,
    "regex_findall": lambda v, p, ignorecase=False: re.findall(p, str(v), re.IGNORECASE if ignorecase else 0),
    "b64encode": lambda v: base64.b64encode(str(v).encode()).decode(),
    "b64decode": lambda v: base64.b64decode(str(v)).decode(),
    "ternary": _ternary,
    "combine": _combine,
    "dict2items": lambda d: [{"key": k, "value": v} for k, v in d.items()],
    "items2dict": lambda items, key_name="key", value_name="value": {i[key_name]: i[value_name] for i in items},
    "flatten": _flatten,
    "mandatory": _mandatory,
}


def register(env: jinja2.Environment) -> None:
    """Add the filters and `lookup`/`query` to `env` (names it already has are left as they are)."""
    for name, function in FILTERS.items():
        env.filters.setdefault(name, function)
    env.globals.setdefault("lookup", _lookup)
    env.globals.setdefault("query", _query)
    env.globals.setdefault("q", _query)


__all__ = ["FILTERS", "register"]
