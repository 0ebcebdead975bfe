"""`watch --drain-failed`: a host whose cycle found something wrong is drained in Slurm, once per watch.

The reason reads `fabnet: watch: CAUSE` (scheduler/drain.py's form), so `fabnet audit --resume-fixed`
leaves it for a person to look at; watch never resumes a host itself: a link that flapped once and
came back is still a link to check.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

from provisioner.scheduler import Scheduler, SchedulerError
from provisioner.scheduler.drain import POWERED_DOWN, Action, drain_failed
from provisioner.watch.events import Change

# What drains a host: what audit's --drain-failed drains (drift, unreachable), a sick link, and an RDMA device or
# port that is gone: a job placed there would find a rail missing, as with a link down. A netdev registered again
# (a driver reload) is a link that went down, as a flap is; one gone is a rail missing. An error counter that can
# no longer be read, or is gone while its port stays, is reported, not drained on: watch lost sight of the link,
# which may still be sound.
DRAINS = frozenset({"drift_new", "drift_changed", "counter_rose", "device_gone", "port_gone", "link_flap", "link_reset",
                    "link_gone", "link_down", "host_down"})


def causes(changes: Sequence[Change]) -> dict[str, str]:
    found: dict[str, list[str]] = {}
    for change in changes:
        if change.kind in DRAINS:
            what = f"{change.subject}: {change.detail}" if change.subject else change.detail
            found.setdefault(change.host, []).append(f"{change.kind.replace('_', ' ')} {what}")
    return {host: "; ".join(items) for host, items in found.items()}


class Drainer:
    def __init__(self, connect: Callable[[], AbstractContextManager[Scheduler]]) -> None:
        self._connect = connect
        self._drained: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, changes: Sequence[Change]) -> tuple[list[Action], str | None]:
        """Drain the hosts these changes show failing, if not drained by this watch already: what was
        done, and the scheduler's error if it could not be asked (the host is tried again next time)."""
        with self._lock:
            todo = {host: cause for host, cause in causes(changes).items() if host not in self._drained}
            if not todo:
                return [], None
            try:
                with self._connect() as scheduler:
                    actions = drain_failed(scheduler, "watch", todo)
            except SchedulerError as exc:
                return [], str(exc)
            # A host left out of service for someone else's reason stays so: asking again each cycle would
            # only repeat that. One left because power saving had it off is asked again: once up, it counts.
            self._drained.update(a.host for a in actions if a.action == "drained"
                                 or (a.action == "left" and POWERED_DOWN not in a.detail))
            return actions, None
