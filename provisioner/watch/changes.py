"""What changed on a host between two watch cycles: pure functions of two snapshots, no I/O.

A snapshot is one cycle's view of a host: its drift items (as audit's JSON shows them, already cleaned),
its error counters and its links' carrier changes. Watch reports changes, never repeats: drift that
appeared, changed or went away, an error counter that rose (with its rate per second), that the host could
read before and cannot now, or that it reads again after it could not, an RDMA device, port or counter that is
gone (no longer listed, with nothing printed about it) or back, error counters that went back (a clear or a
reset), a link that went down (and up again) between two cycles or whose netdev was registered again, a host that
went down or came back, a session logged into again.
A host that was down is compared, once back, with its last snapshot from before it went down. The netdevs'
changes are `netdevs.py`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from provisioner.parsers.port_counters import saturated
from provisioner.watch.drift import DriftItem, drift_diff, drift_items
from provisioner.watch.events import Change, ChangeKind
from provisioner.watch.links import LinkReading
from provisioner.watch.netdevs import Netdevs, netdev_changes


@dataclass
class Snapshot:
    host: str
    at: float  # seconds since the epoch
    up: bool
    error: str | None = None
    drift: dict[str, DriftItem] = field(default_factory=dict)
    links: LinkReading = field(default_factory=LinkReading)
    logins: int = 0  # SSH logins of the host's kept session so far


def snapshot(host_doc: Mapping[str, Any], links: LinkReading, at: float, logins: int = 0) -> Snapshot:
    status = host_doc.get("status")
    up = status not in ("unreachable",) and not (status == "failed" and not host_doc.get("resources"))
    return Snapshot(str(host_doc.get("name")), at, up, host_doc.get("error") if not up else None,
                    drift_items(host_doc) if up else {}, links if up else LinkReading(), logins)


def _link_changes(base: Snapshot, cur: Snapshot, listed: Snapshot | None = None,
                  seen: AbstractSet[str] | None = None, netdevs: Netdevs | None = None) -> list[Change]:
    changes = []
    seconds = max(cur.at - base.at, 1e-9)
    for name, value in cur.links.counters.items():
        before = base.links.counters.get(name)
        # A counter unreadable at the previous cycle has no value there, so none is turned into a rise across the
        # gap (counter_readable below says why).
        if before is not None and value > before:  # a drop is a reset (reboot, driver reload): a new base
            delta = value - before
            # IB error counters stop at the top of their width and never wrap: past that, this is the
            # last rise watch can see until the port's counters are reset.
            stuck = ", at its maximum: it counts no more until reset (perfquery -R)" \
                if saturated(name.rpartition(" ")[2], value) else ""
            changes.append(Change(cur.host, cur.at, "counter_rose", name,
                                  f"+{delta} in {seconds:.0f} s ({delta / seconds:.3g}/s), now {value}{stuck}",
                                  delta, delta / seconds))
    changes += _counters_reset(base, cur)
    for name, before in base.links.counters.items():
        # Only a counter read at the previous cycle: one the host never could read (no PMA) is said once, in the
        # first cycle's summary, and one still unreadable was reported when it turned so. Its own file or its whole
        # folder may have failed.
        printed = cur.links.why_unreadable(name) if name not in cur.links.counters else None
        if printed is not None:
            changes.append(Change(cur.host, cur.at, "counter_unreadable", name,
                                  f"can no longer be read (was {before}): the host printed "
                                  f"{printed!r}; a rise cannot be seen until it reads again"))
    for name, value in cur.links.counters.items():
        was = base.links.why_unreadable(name)
        if was is None:
            continue
        # No rise and no rate here: the last value read before the gap is not compared with this one. What made
        # the counter unreadable (a firmware reset, a driver reload, an unbound device) often zeroes it as well,
        # and how long it was out is known only to the cycle, so a difference would be a guess at a rise that may
        # have happened before the gap, or a reset read as calm. This value is the base the next cycle's rise is
        # counted from (base is this snapshot, which holds it).
        changes.append(Change(cur.host, cur.at, "counter_readable", name,
                              f"can be read again, now {value} (the host printed {was!r} before); rises are "
                              "counted from this value"))
    changes += _presence_changes(listed or base, cur, seen)
    changes += netdev_changes(cur.host, cur.at, base.links, cur.links, netdevs or Netdevs())
    return changes


def _counters_reset(base: Snapshot, cur: Snapshot) -> list[Change]:
    """One change per port or device whose error counters went back since `base`: a drop is no rise, and the
    values now are the base of the next ones."""
    dropped: dict[str, list[str]] = {}
    for name, value in cur.links.counters.items():
        before = base.links.counters.get(name)
        if before is not None and value < before:
            dropped.setdefault(_where(name), []).append(f"{name.partition(' ')[2]} {before} -> {value}")
    # hfi1 names its 32-bit counters with `,32`: those may also have wrapped.
    return [Change(cur.host, cur.at, "counters_reset", where,
                   f"error counters went back since the last cycle ({', '.join(sorted(went))}): cleared "
                   "(perfquery -R), or its driver reloaded or its firmware reset"
                   + (", or a 32-bit counter wrapped" if any(",32 " in w for w in went) else "")
                   + "; rises are counted from these values")
            for where, went in sorted(dropped.items())]


def _where(name: str) -> str:
    """The device or port a counter is under: "mlx5_0/1" of "mlx5_0/1 symbol_error", "efa_0" of "efa_0 cmds_err"."""
    return name.partition(" ")[0]


def _last_values(counters: Mapping[str, int], under: str) -> str:
    """A device's or port's error counters as the last cycle read them: how many, and those that were not 0."""
    mine = {name: value for name, value in counters.items()
            if _where(name) == under or _where(name).startswith(under + "/")}
    if not mine:
        return "no error counter read"
    # Its own counters by their names alone; a device's ports' counters by their whole names, which say the port.
    raised = [f"{name.partition(' ')[2] if _where(name) == under else name} {value}"
              for name, value in sorted(mine.items()) if value]
    return (f"{len(mine)} error counter{'s' if len(mine) > 1 else ''}, "
            + (f"not 0: {', '.join(raised)}" if raised else "all 0"))


def _presence_changes(base: Snapshot, cur: Snapshot, seen: AbstractSet[str] | None = None) -> list[Change]:
    """RDMA devices, ports and counters listed at `base` and not now, or now and not at `base`. The host printed
    nothing about them: a device unbound, fallen off the PCIe bus or left without its driver takes its folder
    along, so the listing is all that tells. Said once each: the next cycle compares with this one. One listed
    now that `seen` (every name the watch has listed on the host) lacks is new, not back."""
    before, now = base.links.present, cur.links.present
    if before is None or now is None:
        return []  # either cycle cannot say what is absent: a cut or unparsed output is no device lost
    changes = []
    for name in sorted(before - now):
        device, _, port = name.partition("/")
        if port and device not in now:
            continue  # the device's own change says it
        kind: ChangeKind = "port_gone" if port else "device_gone"
        changes.append(Change(cur.host, cur.at, kind, name,
                              f"is gone: {'its device no longer lists it' if port else 'no longer in class/infiniband'}"
                              f" (unbound, off the PCIe bus, driver unloaded); last read: "
                              f"{_last_values(base.links.counters, name)}"))
    for name in sorted(now - before):
        device, _, port = name.partition("/")
        if port and device not in before:
            continue
        # No rise and no rate from the value before the gap (none is in `base`): what took the device away
        # (a reset, a driver reload) zeroes its counters as well, as counter_readable says. These are the base.
        now_values = f"now: {_last_values(cur.links.counters, name)}; rises are counted from these values"
        if seen is not None and name not in seen:
            changes.append(Change(cur.host, cur.at, "port_new" if port else "device_new", name,
                                  f"is new: never listed on this host since the watch began (bound, hot-plugged, "
                                  f"or renamed when its driver came back); {now_values}"))
        else:
            changes.append(Change(cur.host, cur.at, "port_back" if port else "device_back", name,
                                  f"is present again (absent at the previous cycle); {now_values}"))
    for name, value in base.links.counters.items():
        # A counter whose file is gone while its device or port stays: a driver that no longer serves it. One its
        # host printed an error for instead is unreadable (above), not gone.
        if (name not in cur.links.counters and cur.links.why_unreadable(name) is None and _where(name) in now
                and not _port_copy(cur, name)):
            changes.append(Change(cur.host, cur.at, "counter_gone", name,
                                  f"is gone while its {'port' if '/' in _where(name) else 'device'} stays (was "
                                  f"{value}); a rise cannot be seen until it is back"))
    for name, value in cur.links.counters.items():
        if (name not in base.links.counters and base.links.why_unreadable(name) is None and _where(name) in before
                and not _port_copy(base, name)):
            changes.append(Change(cur.host, cur.at, "counter_back", name,
                                  f"is present again, now {value}; rises are counted from this value"))
    return changes


def _port_copy(snap: Snapshot, name: str) -> bool:
    """True for a device's counter that a port of the device has under its name too: links.parse leaves the
    device's copy out while the two are equal (an old EFA driver served one list at both levels), so its absence
    is no counter lost."""
    where, _, counter = name.partition(" ")
    return "/" not in where and any(n.startswith(where + "/") and n.endswith(" " + counter)
                                    for n in snap.links.counters)


def _summary(cur: Snapshot) -> str:
    where = {name.split(" ")[0] for name in [*cur.links.counters, *cur.links.unreadable,
                                             *cur.links.unreadable_folders]}
    ports = len({w for w in where if "/" in w})  # "mlx5_0/1"; a device's own counters are under "efa_0"
    devices = f", {len(where) - ports} RDMA devices" if len(where) > ports else ""
    unreadable = cur.links.unreadable
    first = next(iter(unreadable.items()), None)
    cannot = (f"; {len(unreadable)} error counter{'s' if len(unreadable) > 1 else ''} unreadable ({first[0]}: "
              f"the host printed {first[1]!r}"
              + (", ..." if len(unreadable) > 1 else "") + ")") if first else ""
    folders = cur.links.unreadable_folders
    first_folder = next(iter(folders.items()), None)
    cannot += (f"; {len(folders)} counter folder{'s' if len(folders) > 1 else ''} unreadable ({first_folder[0]}: "
               f"the host printed {first_folder[1]!r}" + (", ..." if len(folders) > 1 else "") + ")"
               ) if first_folder else ""
    return (f"{len(cur.drift)} drift items, {ports} RDMA ports{devices}, {len(cur.links.carrier_changes)} links watched"
            + cannot + (f"; counters: {cur.links.problem}" if cur.links.problem else ""))


def diff(prev: Snapshot | None, base: Snapshot | None, cur: Snapshot, listed: Snapshot | None = None,
         seen: AbstractSet[str] | None = None, netdevs: Netdevs | None = None) -> list[Change]:
    """The changes from `prev` (the host's previous cycle) to `cur`; `base` is its last snapshot while up, `listed`
    its last whose listing of devices and ports could be trusted (default: `base`), `seen` every device and port
    a trusted listing has named (None: each one listed now and not at `listed` is back, none new), `netdevs` what
    the host's NICs' netdevs were when last seen."""
    if not cur.up:
        if prev is None or prev.up:
            return [Change(cur.host, cur.at, "host_down", "", cur.error or "unreachable")]
        return []
    changes: list[Change] = []
    if prev is not None and not prev.up:
        changes.append(Change(cur.host, cur.at, "host_back", "", f"reachable again after {cur.at - prev.at:.0f} s"
                              if base is None else f"reachable again; down since about {_ago(base, cur)}"))
    elif prev is not None and cur.logins > prev.logins:
        changes.append(Change(cur.host, cur.at, "reconnected", "", "its session was lost and logged into again"))
    if base is None:
        return [*changes, Change(cur.host, cur.at, "watching", "", _summary(cur))]
    return (changes + drift_diff(cur.host, cur.at, base.drift, cur.drift)
            + _link_changes(base, cur, listed, seen, netdevs))


def _ago(base: Snapshot, cur: Snapshot) -> str:
    return f"{cur.at - base.at:.0f} s ago"


@dataclass
class HostTrack:
    """A host's previous snapshot and its last one while up: what the next cycle is compared with."""

    prev: Snapshot | None = None
    base: Snapshot | None = None
    # The last snapshot while up whose listing could be trusted: what is gone or back is judged against it, so a
    # device lost during a cycle whose output was cut is still said at the next cycle that lists the host whole
    # (and that cycle's partial counters never read as counters back).
    listed: Snapshot | None = None
    seen: set[str] = field(default_factory=set)  # every device and port a trusted listing named: one not here is new
    netdevs: Netdevs = field(default_factory=Netdevs)

    def advance(self, cur: Snapshot) -> list[Change]:
        listed = self.listed if cur.links.present is not None else None
        changes = diff(self.prev, self.base, cur, listed, self.seen, self.netdevs)
        self.prev = cur
        if cur.up:
            self.base = cur
            self.netdevs.remember(cur.links, changes)
            if cur.links.present is not None:
                self.listed = cur
                self.seen |= cur.links.present
        return changes


def counter_rates(changes: Sequence[Change]) -> dict[str, float]:
    return {c.subject: c.rate for c in changes if c.kind == "counter_rose" and c.rate is not None}
