"""The resource kinds: for each, the probes that read a host and the pure evaluation of their output.

`REGISTRY` maps a play's kind name to its ResourceType. It is filled from the modules of this package:
a module that defines `RESOURCE` (a ResourceType) adds that kind, so a new kind is one new module and
nothing else changes. `register`/`unregister` add and take away a kind defined elsewhere (a plugin, a
test's toy kind).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from provisioner.resources.base import ResourceType

REGISTRY: dict[str, ResourceType[Any]] = {}


def register(rtype: ResourceType[Any]) -> ResourceType[Any]:
    """Add a kind; a second, different kind under a name already taken is refused."""
    known = REGISTRY.get(rtype.kind)
    if known is not None and known is not rtype:
        raise ValueError(f"resource kind {rtype.kind!r} is already registered")
    REGISTRY[rtype.kind] = rtype
    return rtype


def unregister(kind: str) -> None:
    REGISTRY.pop(kind, None)


def _discover() -> None:
    # Sorted, so the kinds (and the messages listing them) come in one order everywhere.
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        rtype = getattr(module, "RESOURCE", None)
        if isinstance(rtype, ResourceType):
            register(rtype)


_discover()

__all__ = ["REGISTRY", "register", "unregister"]
