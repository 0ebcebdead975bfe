"""What watch reports: one change on one host, of a kind that is an alert or news (data only).

`watch/changes.py` finds changes between two cycles of a host, `watch/netdevs.py` those of its NICs' netdevs;
the drainer, the metrics, the history and the printers read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

ChangeKind = Literal["watching", "drift_new", "drift_changed", "drift_gone", "counter_rose", "counter_unreadable",
                     "counter_readable", "device_gone", "device_back", "device_new", "port_gone", "port_back",
                     "port_new", "counter_gone", "counter_back", "counters_reset", "link_flap", "link_reset",
                     "link_gone", "link_moved", "link_back", "link_down", "link_up", "host_down", "host_back",
                     "reconnected"]
# Kinds that mean something went wrong (an alert); the others are news (something recovered, or began). A device
# or port that is gone is an alert, as a link down is: the rail it served carries nothing now. A counter gone
# while its port stays is one too, as an unreadable one is: its rises can no longer be seen. A netdev registered
# again (a driver reload) took its link down meanwhile, as a flap does; one gone takes its rail along, unless its
# device kept its driver (moved into a container's namespace, or renamed: news). Counters that went back are
# news: an operator's clear (perfquery -R) does that too.
BAD: frozenset[str] = frozenset({"drift_new", "drift_changed", "counter_rose", "counter_unreadable", "device_gone",
                                 "port_gone", "counter_gone", "link_flap", "link_reset", "link_gone", "link_down",
                                 "host_down"})


@dataclass(frozen=True)
class Change:
    host: str
    at: float
    kind: ChangeKind
    subject: str  # the drift item, "DEVICE/PORT counter", a netdev, or "" for the host itself
    detail: str
    delta: float | None = None
    rate: float | None = None  # per second

    @property
    def bad(self) -> bool:
        return self.kind in BAD

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "at": self.at, "kind": self.kind, "subject": self.subject,
                "detail": self.detail, "delta": self.delta, "rate": self.rate}
