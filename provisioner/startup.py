"""The garbage collector around start-up.

Almost everything fabnet allocates before it reaches hosts (modules, classes, pydantic's validators, the
inventory and the plans) lives until it exits, and the collector's passes over it while it grows, then at
every later full pass and at exit, are wasted work: about 80 ms of a one-host audit's 380. So the program
starts with the collector off (`hold`) and, once loading is done, moves what is alive into the permanent
generation and turns it back on (`release`, Python's `gc.freeze`). Done before the host workers fork, it
also keeps the collector in each worker from writing to, and so copying, the pages it shares with the
parent.

Only the program itself holds (`cli.main` without arguments): a test that runs commands in its own
process keeps its collector as it is.
"""

from __future__ import annotations

import gc

_held = False


def hold() -> None:
    """Collector off until `release()`."""
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def release() -> None:
    """Freeze what is alive and turn the collector back on; nothing when `hold()` did not turn it off."""
    global _held
    if _held:
        _held = False
        gc.freeze()
        gc.enable()
