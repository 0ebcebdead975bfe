"""The resource kinds: for each, the probes that read a host and the pure evaluation of their output.

`REGISTRY` maps a play's kind name to its ResourceType. It is filled from the modules of this package:
the module named like a kind defines `RESOURCE` (a ResourceType), so a new kind is one new module and
nothing else changes. `register`/`unregister` add and take away a kind defined elsewhere (a plugin, a
test's toy kind).

A kind's module is imported when the kind is first looked up, not before: a play that names two kinds
loads two modules and their parsers, not all of them (an `mtu` audit starts about a tenth quicker).
Listing the registry (an unknown kind's message, the playbook reference) imports every module.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from provisioner.resources.base import ResourceType


class Registry(Mapping[str, ResourceType[Any]]):
    """Kind name -> ResourceType, each built-in kind's module imported on its first lookup."""

    def __init__(self) -> None:
        self._kinds: dict[str, ResourceType[Any]] = {}
        self._builtin_kinds: set[str] = set()  # found in this package's modules, not registered from elsewhere
        self._removed: set[str] = set()  # built-in kinds unregistered: not loaded again until registered
        self._complete = False
        self._lock = threading.Lock()  # watch's hosts look kinds up from their own threads

    def __getitem__(self, kind: str) -> ResourceType[Any]:
        found = self._kinds.get(kind) or self._builtin(kind)
        if found is None and not self._complete:
            self._discover()  # a module whose RESOURCE has another name than the module's own
            found = self._kinds.get(kind)
        if found is None:
            raise KeyError(kind)
        return found

    def __iter__(self) -> Iterator[str]:
        self._discover()
        # Sorted built-in kinds first, then those registered from elsewhere in their order: one order everywhere.
        builtin = sorted(self._builtin_kinds)
        return iter([*builtin, *(kind for kind in self._kinds if kind not in self._builtin_kinds)])

    def __len__(self) -> int:
        self._discover()
        return len(self._kinds)

    def __contains__(self, kind: object) -> bool:
        if not isinstance(kind, str):
            return False
        try:
            self[kind]
        except KeyError:
            return False
        return True

    def register(self, rtype: ResourceType[Any]) -> ResourceType[Any]:
        self._builtin(rtype.kind)  # a built-in kind of that name is taken, loaded or not
        with self._lock:
            known = self._kinds.get(rtype.kind)
            if known is not None and known is not rtype:
                raise ValueError(f"resource kind {rtype.kind!r} is already registered")
            self._kinds[rtype.kind] = rtype
            self._removed.discard(rtype.kind)
        return rtype

    def unregister(self, kind: str) -> None:
        with self._lock:
            self._kinds.pop(kind, None)
            self._builtin_kinds.discard(kind)
            if kind in _module_names():
                self._removed.add(kind)

    def _builtin(self, kind: str) -> ResourceType[Any] | None:
        """The kind from the module of this package named like it, if there is one and it defines the kind."""
        if kind not in _module_names() or kind in self._removed:
            return None
        rtype = getattr(importlib.import_module(f"{__name__}.{kind}"), "RESOURCE", None)
        if not isinstance(rtype, ResourceType) or rtype.kind != kind:
            return None
        return self._add(rtype)

    def _discover(self) -> None:
        if self._complete:
            return
        for name in sorted(_module_names()):
            rtype = getattr(importlib.import_module(f"{__name__}.{name}"), "RESOURCE", None)
            if isinstance(rtype, ResourceType) and rtype.kind not in self._removed:
                self._add(rtype)
        self._complete = True

    def _add(self, rtype: ResourceType[Any]) -> ResourceType[Any]:
        with self._lock:
            self._builtin_kinds.add(rtype.kind)
            return self._kinds.setdefault(rtype.kind, rtype)


@functools.cache
def _module_names() -> frozenset[str]:
    """This package's modules, listed from its folder once (no import)."""
    return frozenset(info.name for info in pkgutil.iter_modules(__path__))


REGISTRY = Registry()


def register(rtype: ResourceType[Any]) -> ResourceType[Any]:
    """Add a kind; a second, different kind under a name already taken is refused."""
    return REGISTRY.register(rtype)


def unregister(kind: str) -> None:
    REGISTRY.unregister(kind)


__all__ = ["REGISTRY", "Registry", "register", "unregister"]
