"""Verdicts that need no threshold (pure): each host against the fleet, the fleet against its links.

Per host: after the fleet's sweep, the same ranks measure pairs of hosts side by side (`pair_rounds`:
every host with both its neighbours on a ring, in two or three rounds of disjoint pairs). A host's
figure is its best pair: a host that is slow is slow with every partner, while its innocent partners
are fast with their other neighbour. A host below `slow_fraction` x the fleet's median is slow.

Per fleet: the link speed each host's data interfaces report (Mb/s, sysfs `speed`) bounds the bus
bandwidth: busbw is algbw x 2(n-1)/n precisely so that a bandwidth-bound ring all-reduce reaches the
per-host link rate. The sweep's best busbw below `link_fraction` x the slowest host's link rate is far
below what the links allow. A speed that is unknown (-1, unreadable, no data interface) skips that
verdict and says so: it never guesses a rate. gloo's all-reduce runs on the CPU, which bounds it well
below the link rate of any fast link, so with gloo the comparison is made only when asked for
(an explicit fraction).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from provisioner.smoke.busbw import SizeResult, all_reduce_factor

SLOW_FRACTION = 0.5  # a host below half the fleet's median is slow
# Far below what the links allow: NCCL reaches 80-95% of the link rate at large sizes; a quarter
# leaves room for small sweeps and for gloo on CPU, and still catches a port at a tenth of its speed.
LINK_FRACTION = 0.25
PAIR_BYTES_MAX = 16 << 20  # pairs are measured at the sweep's largest size, at most this

Pair = tuple[int, int]


def pair_rounds(count: int) -> tuple[tuple[Pair, ...], ...]:
    """Rounds of disjoint pairs of host indices covering every edge of the ring 0-1-...-(n-1)-0 once:
    two rounds for an even count, three for an odd one; none below three hosts (the pair would be the
    whole fleet again)."""
    if count < 3:
        return ()
    edges = [(i, (i + 1) % count) for i in range(count)]
    if count % 2 == 0:
        return tuple(tuple(e for i, e in enumerate(edges) if i % 2 == parity) for parity in (0, 1))
    return (tuple(edges[i] for i in range(0, count - 1, 2)), tuple(edges[i] for i in range(1, count - 1, 2)),
            (edges[-1],))


def pair_bytes(sizes: Sequence[int]) -> int:
    return min(max(sizes), PAIR_BYTES_MAX) if sizes else 0


def median(values: Sequence[float]) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


@dataclass(frozen=True)
class HostFigure:
    host: str
    busbw: float | None  # GB/s with its best partner; None when none of its pairs was measured
    partner: str | None
    slow: bool = False
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "busbw": self.busbw, "best_partner": self.partner, "slow": self.slow,
                "message": self.message}


@dataclass
class FleetCheck:
    """One verdict: what was compared with what; status pass, slow or skipped (with the reason)."""

    name: str  # per_host, link_rate, min_busbw
    status: str
    message: str
    measured: float | None = None  # GB/s
    expected: float | None = None  # GB/s the comparison was made against
    fraction: float | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"check": self.name, "status": self.status, "message": self.message, "measured_busbw": self.measured,
                "expected_busbw": self.expected, "fraction": self.fraction, **self.details}


def _gbps(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.3f} GB/s"


@dataclass
class Confirmation:
    """What measuring the suspects again alone found, by suspect: the figure of the control pair measured
    right after it, or, where its own runs alone failed, with whom and why."""

    controls: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


def host_figures(hosts: Sequence[str], pairs: Mapping[tuple[str, str], float], fraction: float,
                 confirmation: Confirmation | None = None) -> tuple[list[HostFigure], FleetCheck]:
    """Each host's best pair against the fleet's median of those figures. A host with a control was
    measured again alone, and two good hosts alone right after it: it is slow only when it is below
    `fraction` x that control as well (a busy machine slows both alike)."""
    controls = confirmation.controls if confirmation else {}
    failed = confirmation.failed if confirmation else {}
    if len(hosts) < 3:
        return [], FleetCheck("per_host", "skipped", "comparing hosts with the fleet needs 3 or more hosts")
    if fraction <= 0:
        return [], FleetCheck("per_host", "skipped", "turned off (--slow-fraction 0)")
    best: dict[str, tuple[float, str]] = {}
    for (a, b), measured in pairs.items():
        for one, other in ((a, b), (b, a)):
            if one not in best or measured > best[one][0]:
                best[one] = (measured, other)
    if not best:
        return [], FleetCheck("per_host", "skipped", "no pair of hosts was measured")
    mid = median([v for v, _ in best.values()])
    assert mid is not None
    figures = []
    for host in hosts:
        value = best[host][0] if host in best else None
        partner = best[host][1] if host in best else None
        slow = value is not None and value < fraction * mid
        message = (f"{host}: {_gbps(value)} with its best partner {partner}, fleet median {_gbps(mid)}, "
                   + (f"below {fraction:g} x median" if slow else f"at least {fraction:g} x median")) \
            if value is not None else f"{host}: no pair measured"
        control = controls.get(host)
        if slow and host in failed:
            message += f"; measured again alone {failed[host]}"
        if slow and value is not None and control is not None:
            slow = value < fraction * control
            message += (f"; two good hosts measured alone right after it: {_gbps(control)}, "
                        + (f"below {fraction:g} x that too" if slow else
                           f"it reaches {fraction:g} x that: the machines or the fabric were busy, not this host"))
        figures.append(HostFigure(host, value, partner, slow, message))
    slow_hosts = [f for f in figures if f.slow]
    if slow_hosts:
        check = FleetCheck("per_host", "slow", "; ".join(f.message for f in slow_hosts), expected=mid,
                           fraction=fraction)
    else:
        cleared = [f.host for f in figures if f.busbw is not None and f.busbw < fraction * mid]
        message = f"every host reaches {fraction:g} x the fleet median {_gbps(mid)} with its best partner"
        if cleared:
            message += f", or {fraction:g} x two good hosts measured alone right after it ({', '.join(cleared)})"
        check = FleetCheck("per_host", "pass", message, expected=mid, fraction=fraction)
    return figures, check


def link_check(speeds: Mapping[str, int | None], rows: Sequence[SizeResult], ranks: int,
               fraction: float | None, backend: str = "nccl") -> FleetCheck:
    """The sweep's best busbw against `fraction` x the slowest host's link rate (`speeds`: Mb/s per host,
    summed over its data interfaces; None when unknown). `fraction` None: LINK_FRACTION, except for
    gloo, which is not compared unless a fraction is given."""
    if fraction is None and backend == "gloo":
        return FleetCheck("link_rate", "skipped", "skipped: gloo's all-reduce runs on the CPU, which bounds it "
                          "before the link rate (give --link-fraction to compare anyway)")
    fraction = LINK_FRACTION if fraction is None else fraction
    if fraction <= 0:
        return FleetCheck("link_rate", "skipped", "turned off (--link-fraction 0)")
    unknown = sorted(h for h, v in speeds.items() if v is None)
    if not speeds or unknown:
        shown = ", ".join(unknown[:6]) + (f" and {len(unknown) - 6} more" if len(unknown) > 6 else "")
        return FleetCheck("link_rate", "skipped", f"skipped: the data interface reports no link speed on {shown}"
                          if unknown else "skipped: no link speed known")
    if not rows or ranks < 2:
        return FleetCheck("link_rate", "skipped", "skipped: no figures to compare")
    slowest = min(speeds, key=lambda h: speeds[h] or 0)
    mbit = speeds[slowest] or 0
    allowed = mbit * 1e6 / 8 / 1e9  # GB/s: a ring all-reduce's busbw reaches the per-host link rate
    best = max(rows, key=lambda r: r.busbw)
    factor = all_reduce_factor(ranks)
    words = (f"fleet busbw {_gbps(best.busbw)} (best of the sweep, at {best.size} bytes) against the "
             f"{_gbps(allowed)} that {mbit} Mb/s links allow ({slowest}'s, the slowest; bus factor 2(n-1)/n = "
             f"{factor:.3g} for {ranks} ranks, so algbw up to {_gbps(allowed / factor)})")
    details = {"link_mbps": mbit, "slowest_link_host": slowest, "bus_factor": factor, "size": best.size}
    if best.busbw < fraction * allowed:
        return FleetCheck("link_rate", "slow", f"{words}: below {fraction:g} x link rate", best.busbw, allowed,
                          fraction, details)
    return FleetCheck("link_rate", "pass", f"{words}: at least {fraction:g} x link rate", best.busbw, allowed,
                      fraction, details)


def threshold_check(avg: float | None, threshold: float | None) -> FleetCheck:
    if threshold is None:
        return FleetCheck("min_busbw", "skipped", "no --min-busbw set")
    value = avg or 0.0
    status = "pass" if value >= threshold else "slow"
    sign = ">=" if status == "pass" else "<"
    return FleetCheck("min_busbw", status, f"average busbw {value:.3f} GB/s {sign} {threshold:g} GB/s", value,
                      threshold)


@dataclass
class Judgement:
    figures: list[HostFigure]
    checks: list[FleetCheck]

    @property
    def slow_hosts(self) -> dict[str, str]:
        return {f.host: f.message for f in self.figures if f.slow}

    def failed(self, name: str) -> bool:
        return any(c.name == name and c.status == "slow" for c in self.checks)


def judge(hosts: Sequence[str], pairs: Mapping[tuple[str, str], float], speeds: Mapping[str, int | None],
          rows: Sequence[SizeResult], ranks: int, avg: float | None, *, slow_fraction: float,
          link_fraction: float | None, min_busbw: float | None, backend: str = "nccl",
          confirmation: Confirmation | None = None) -> Judgement:
    """Every verdict on a run whose ranks all finished with right results: the absolute floor, each host
    against the fleet, the fleet against its links."""
    figures, per_host = host_figures(hosts, pairs, slow_fraction, confirmation)
    return Judgement(figures, [threshold_check(avg, min_busbw), per_host,
                               link_check(speeds, rows, ranks, link_fraction, backend)])


CONFIRM_MAX = 4  # suspects measured again, one at a time


def _good(judgement: Judgement) -> list[HostFigure]:
    """The hosts the side-by-side pairs did not call slow, fastest first (ties in inventory order)."""
    return sorted((f for f in judgement.figures if not f.slow and f.busbw is not None),
                  key=lambda f: f.busbw or 0.0, reverse=True)


def confirmation_pairs(judgement: Judgement) -> list[tuple[str, str]]:
    """Each host the side-by-side pairs found slow, paired with the fastest host that was not, to be
    measured again alone: pairs measured together share the machines' CPUs and the fabric, and a
    host is called slow only when it stays slow without that company."""
    good = _good(judgement)
    if not good:
        return []
    return [(f.host, good[0].host) for f in judgement.figures if f.slow][:CONFIRM_MAX]


def control_pair(judgement: Judgement) -> tuple[str, str] | None:
    """The two fastest hosts the side-by-side pairs did not call slow, measured alone after a suspect to
    tell a slow host from a busy moment; None when fewer than two such hosts."""
    good = _good(judgement)
    return (good[0].host, good[1].host) if len(good) >= 2 else None
