"""Compare-and-swap in a host's change script: the shell that reads a step's targets (`Step.expect`)
again under the host lock and says which no longer hold what they should. Pure: builds shell only.

Every target is checked twice: once for all steps before the first change (a conflict that was
already there is found before anything is changed), and again right before its own step runs (an
edit made while an earlier step ran, a package install that took minutes, is not overwritten). A
target that an earlier step of the same run changes (it writes that file, or sets that value) is
expected, at the second check, to hold what that step left, read right after it ran; the gather-time
value would call the run's own change a conflict (two steps writing one file, a sysctl set then its
file written). Only steps that name a target (in `expect` or `writes`) count as changing it: any
other change since the plan read it is someone else's, and a conflict.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence

from provisioner.resources.steps import Expect, Step, read_setting

Target = tuple[str, str | None]  # (a file's path or a setting's name, the setting's read command)


def _target(expect: Expect) -> Target:
    return (expect.path, expect.read)


def _changes(step: Step) -> set[Target]:
    """The targets `step` changes: those it is guarded on, and the files it writes."""
    return {_target(e) for e in step.expect} | {(path, None) for path in step.writes}


def _read(path: str, read: str | None) -> str:
    """A command substitution printing a target's value as `Expect.value` holds it."""
    if read is None:
        p = shlex.quote(path)
        return f"$(if [ -e {p} ]; then sha256sum < {p} | cut -c1-64; else echo absent; fi)"
    return read_setting(read)


class Guards:
    """The checks of one host's steps (in run order). Shell variables: `__fn_cf_I` (text) and
    `__fn_cj_I` (JSON strings) say what of step I's targets changed, and stay empty when nothing did;
    `__fn_t_N`/`__fn_x_N` say that target N was changed by an earlier step of this run, and what it
    held right after."""

    def __init__(self, steps: Sequence[Step]) -> None:
        self.steps = list(steps)
        # Only targets that a later step is guarded on and an earlier step changes are read again
        # after that earlier step: one read each, none for the others.
        self.followed: dict[Target, int] = {}
        changed: set[Target] = set()
        for step in self.steps:
            for expect in step.expect:
                if _target(expect) in changed:
                    self.followed.setdefault(_target(expect), len(self.followed))
            changed |= _changes(step)

    def before_any(self, i: int) -> list[str]:
        """Step `i`'s targets against what the plan read, before the first change of the run."""
        return [f"__fn_cf_{i}=; __fn_cj_{i}="] + [self._check(i, e, after_earlier=False) for e in self.steps[i].expect]

    def before_step(self, i: int) -> list[str]:
        """Step `i`'s targets again, right before it runs (when the first check found nothing)."""
        checks = [self._check(i, e, after_earlier=True) for e in self.steps[i].expect]
        return [f'if [ -z "$__fn_cf_{i}" ]; then {"; ".join(checks)}; fi'] if checks else []

    def after_step(self, i: int) -> list[str]:
        """What step `i` left in the targets it changes that later steps are guarded on."""
        return [f"__fn_t_{n}=1; __fn_x_{n}={_read(*target)}" for target, n in self.followed.items()
                if target in _changes(self.steps[i])]

    def _check(self, i: int, expect: Expect, *, after_earlier: bool) -> str:
        """One target compared with what it should hold; what changed is appended to step `i`'s
        conflict variables. A value read on the host goes into the text only, as "$__fn_v" (never
        pasted into the script), and never into the journal's JSON strings."""
        now = f"__fn_v={_read(expect.path, expect.read)}"
        q = shlex.quote
        said = f"{expect.path} changed since it was read"
        if expect.read is None:
            plan = _append(i, q(said + "; "), said)
        else:
            plan = _append(i, q(f"{said} (was {expect.value}, now ") + '"$__fn_v"' + q("); "),
                           f"{said} (was {expect.value})")
        n = self.followed.get(_target(expect)) if after_earlier else None
        if n is None:
            return f'{now}; if [ "$__fn_v" != {q(expect.value)} ]; then {plan}; fi'
        # An earlier step of this run may have changed it: then it must hold what that step left.
        if expect.read is None:
            said = f"{expect.path} changed since an earlier step of this run wrote it"
            run = _append(i, q(said + "; "), said)
        else:
            said = f"{expect.path} changed since an earlier step of this run set it"
            run = _append(i, q(f"{said} (to ") + f'"$__fn_x_{n}"' + q(", now ") + '"$__fn_v"' + q("); "), said)
        return (f'{now}; if [ -n "$__fn_t_{n}" ]; then if [ "$__fn_v" != "$__fn_x_{n}" ]; then {run}; fi; '
                f'elif [ "$__fn_v" != {q(expect.value)} ]; then {plan}; fi')


def _append(i: int, shown: str, record: str) -> str:
    """Shell appending a conflict to step `i`'s variables: `shown` (shell words) to the text, `record`
    to the JSON strings."""
    return f'__fn_cf_{i}="$__fn_cf_{i}"{shown}; __fn_cj_{i}="$__fn_cj_{i},"{shlex.quote(json.dumps(record))}'
