"""Which emulated kernel modules are loaded, and what that means for devices."""

from __future__ import annotations

from .core import MODULES, Env, read_json
from .hw import Hw


def module_state(env: Env, hw: Hw) -> dict[str, bool]:
    state = dict(hw.modules)
    live = read_json(env.modules_file)
    if isinstance(live, dict):
        state.update({k: bool(v) for k, v in live.items() if k in state})
    return state


def module_deps(name: str) -> tuple[str, ...]:
    return MODULES.get(name, (16384, ()))[1]


def holders(name: str, state: dict[str, bool]) -> list[str]:
    return [m for m, loaded in state.items() if loaded and name in module_deps(m)]


def rdma_present(env: Env, hw: Hw) -> bool:
    mods = module_state(env, hw)
    return mods.get("mlx5_core", True) and mods.get("mlx5_ib", True)


def verbs_present(env: Env, hw: Hw) -> bool:
    return rdma_present(env, hw) and module_state(env, hw).get("ib_uverbs", True)


def gpus_present(env: Env, hw: Hw) -> bool:
    return module_state(env, hw).get("nvidia", True)
