"""Modules loaded on first use, so `fabnet --help` and usage errors start without rich or pydantic."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any


class _Deferred(ModuleType):
    """Stands for a module until one of its attributes is read; every read then goes to the real module.

    Not importlib's LazyLoader: under Python 3.11 its first attribute reads from several threads at once
    race, and a thread can find the module still empty (watch's hosts report from their own threads).
    import_module takes the import system's per-module lock, so threads that arrive during the import
    wait for it to finish; once imported it is a dictionary lookup.
    """

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self.__name__), attr)


def lazy_module(name: str) -> ModuleType:
    """`name`, loaded on first attribute access: `--help` and usage errors need no rich (about 40 ms)."""
    if name in sys.modules:
        return sys.modules[name]
    return _Deferred(name)
