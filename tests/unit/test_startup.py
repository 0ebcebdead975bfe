"""The collector is off while fabnet starts and back on, with start-up's objects frozen, once loading is done."""

from __future__ import annotations

import gc

from provisioner import startup


def test_release_turns_the_collector_back_on_with_what_was_loaded_frozen() -> None:
    assert gc.isenabled()
    try:
        startup.hold()
        assert not gc.isenabled()
        loaded = [[] for _ in range(1000)]  # stands for the modules and plans start-up builds
        startup.release()
        assert gc.isenabled()
        assert gc.get_freeze_count() >= len(loaded)
        startup.release()  # a second release (another fan-out in the same command) changes nothing
        assert gc.isenabled()
    finally:
        gc.unfreeze()
        gc.enable()


def test_release_without_hold_leaves_a_callers_collector_alone() -> None:
    gc.disable()
    try:
        startup.release()
        assert not gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.enable()
