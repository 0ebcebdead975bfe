"""What changed in a host's netdevs between two watch cycles (pure): a link down, up or flapping between them,
and, for a NIC's netdev (one a device backs: `LinkReading.hardware`), one registered again (a driver reload),
gone with its device, or moved out of the namespace while its device keeps its driver.

`before` is the host's last reading while up, `now` this cycle's; `Netdevs` is what the host's watch remembers
of its NICs' netdevs across cycles where one is absent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from provisioner.watch.events import Change
from provisioner.watch.links import LinkReading


@dataclass
class Netdevs:
    """What a host's watch remembers of its NICs' netdevs across cycles where one is absent."""

    index: dict[str, int] = field(default_factory=dict)  # each one's last ifindex
    moved: set[str] = field(default_factory=set)  # those that left with their device still bound (link_moved)

    def remember(self, now: LinkReading, changes: list[Change]) -> None:
        """After a cycle while up: the indexes it read, and which netdevs moved out or are back."""
        nics = now.hardware or frozenset()
        self.index.update({name: index for name, index in now.ifindex.items() if name in nics})
        self.moved -= set(now.carrier_changes)
        self.moved |= {c.subject for c in changes if c.kind == "link_moved"}


def netdev_changes(host: str, at: float, before: LinkReading, now: LinkReading, netdevs: Netdevs) -> list[Change]:
    changes = _gone(host, at, before, now)
    for iface, value in now.carrier_changes.items():
        if (reset := _registered_again(host, at, before, now, iface, netdevs)) is not None:
            changes.append(reset)
            continue
        was = before.carrier_changes.get(iface)
        if was is None or value <= was:
            continue
        delta = value - was
        if now.carrier.get(iface) == 1 and before.carrier.get(iface) != 1:
            changes.append(Change(host, at, "link_up", iface, f"link is up again ({delta} carrier changes)", delta))
        elif now.carrier.get(iface) == 1:
            changes.append(Change(host, at, "link_flap", iface,
                                  f"link went down and came back ({delta} carrier changes)", delta))
        else:
            changes.append(Change(host, at, "link_down", iface, f"link is down ({delta} carrier changes)", delta))
    return changes


def _gone(host: str, at: float, before: LinkReading, now: LinkReading) -> list[Change]:
    """A NIC's netdev read `before` and no longer in /sys/class/net: gone with its device (its driver unloaded or
    crashed, the device unbound or fallen off the bus), or moved out while the device keeps its driver. Judged
    only between two readings that listed the NICs whole (an output cut before its end loses no link). When it is
    back, its new index says so (link_reset), or link_back after a move."""
    if before.hardware is None or now.hardware is None:
        return []
    changes = []
    for iface in sorted(set(before.carrier_changes) - set(now.carrier_changes)):
        if iface not in before.hardware:
            continue
        was = "up" if before.carrier.get(iface) == 1 else "down"
        device = before.devices.get(iface)
        if device is not None and now.bound is not None and device in now.bound:
            changes.append(Change(host, at, "link_moved", iface,
                                  f"is no longer in /sys/class/net while its device {device} keeps its driver: moved "
                                  f"into another network namespace (a container's) or renamed; it was {was}"))
        else:
            of = f" (device {device})" if device is not None else ""
            changes.append(Change(host, at, "link_gone", iface,
                                  f"is gone{of}: no longer in /sys/class/net (its driver unloaded or crashed, its "
                                  f"device unbound or off the bus); it was {was} at the last cycle"))
    return changes


def _registered_again(host: str, at: float, before: LinkReading, now: LinkReading, iface: str,
                      netdevs: Netdevs) -> Change | None:
    """A NIC's netdev the kernel registered again since `before` (a new ifindex under the same name, or a
    carrier-change count that went back): its driver was reloaded or its device reset, which took the link down
    meanwhile. One absent `before` (a reload that spanned a cycle) is compared with its last index in `netdevs`;
    one that had moved out with its device bound is back (news)."""
    if iface not in (now.hardware or ()):
        return None
    if iface not in before.carrier_changes and iface in netdevs.moved:
        return Change(host, at, "link_back", iface, "is back in /sys/class/net (moved back, or renamed back); "
                      + ("it is up" if now.carrier.get(iface) == 1 else "it is down"))
    since = "the last cycle" if iface in before.ifindex else "it was last seen"
    was = before.ifindex.get(iface, netdevs.index.get(iface))
    index = now.ifindex.get(iface)
    count_before, count = before.carrier_changes.get(iface), now.carrier_changes.get(iface)
    if was is not None and index is not None and was != index:
        how = f"ifindex {was} -> {index}"
    elif count_before is not None and count is not None and count < count_before:
        how = f"its carrier changes went back from {count_before} to {count}"
    else:
        return None
    state = "it is up now" if now.carrier.get(iface) == 1 else "it is down now"
    return Change(host, at, "link_reset", iface,
                  f"registered again since {since} ({how}): its driver was reloaded or its device reset, "
                  f"so the link went down meanwhile; {state}")
