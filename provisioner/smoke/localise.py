"""Finding the slow host when the fleet is below threshold (pure planning and verdict).

Round 1 runs disjoint pairs in parallel (every host in exactly one pair). Round 2 splits each slow
pair: each of its hosts is paired with a different host from a pair that was fast, again in
parallel, and the host whose new pair is still slow is named. Two rounds of n/2 parallel runs, never
the n² of all pairs. A host left over from an odd count is checked in round 2 the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

Pair = tuple[str, str]

# A pair is slow when it is below the threshold AND clearly below the best pair; the second condition
# keeps a uniformly loaded fleet (every pair a bit low) from blaming any one host.
RELATIVE = 0.6


def first_round(hosts: Sequence[str]) -> tuple[list[Pair], list[str]]:
    """Disjoint pairs in inventory order, and the host left over when the count is odd."""
    pairs = [(hosts[i], hosts[i + 1]) for i in range(0, len(hosts) - 1, 2)]
    return pairs, list(hosts[len(pairs) * 2:])


def slow_pairs(results: Mapping[Pair, float | None], threshold: float) -> tuple[list[Pair], list[Pair]]:
    """(slow, fast) pairs; a pair that failed outright (None) counts as slow."""
    measured = [v for v in results.values() if v is not None]
    best = max(measured, default=0.0)
    slow = [p for p, v in results.items() if v is None or (v < threshold and v < RELATIVE * best)]
    return slow, [p for p in results if p not in slow]


def second_round(slow: Sequence[Pair], leftover: Sequence[str], fast: Sequence[Pair]) -> list[Pair]:
    """Each suspect paired with a distinct host known to be good, as far as there are good hosts."""
    good = [h for pair in fast for h in pair]
    suspects = [h for pair in slow for h in pair] + list(leftover)
    return [(suspect, good[i]) for i, suspect in enumerate(suspects) if i < len(good)]


@dataclass
class Verdict:
    slow_hosts: dict[str, float | None] = field(default_factory=dict)  # host -> busbw of its pair
    reference: float | None = None  # median busbw of the fast pairs: "the rest"
    undecided: list[str] = field(default_factory=list)
    message: str = ""


def _median(values: Sequence[float]) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def verdict(round1: Mapping[Pair, float | None], round2: Mapping[Pair, float | None], threshold: float,
            leftover: Sequence[str] = ()) -> Verdict:
    slow1, fast1 = slow_pairs(round1, threshold)
    reference = _median([v for p, v in round1.items() if p in fast1 and v is not None])
    result = Verdict(reference=reference)
    below = [p for p, v in round1.items() if v is None or v < threshold]
    if round1 and len(below) == len(round1) and not slow1:
        result.undecided = [h for pair in round1 for h in pair]
        result.message = "every pair is below the threshold and none stands out: the fleet as a whole is slow, " \
                         "not one host"
        return result
    if not slow1 and not leftover:
        result.message = "every pair reaches the threshold on its own: no single host is slow (the fleet-wide " \
                         "run is limited elsewhere, e.g. a shared uplink or CPU)"
        return result
    if not fast1:
        result.undecided = [h for pair in round1 for h in pair]
        result.message = "every pair is below the threshold: the fleet as a whole is slow, not one host"
        return result
    slow2, _fast2 = slow_pairs({**round2, **{p: round1[p] for p in fast1}}, threshold)
    checked = {suspect for suspect, _good in round2}
    before = {h: round1[pair] for pair in slow1 for h in pair}
    for suspect, good in round2:
        value = round2[(suspect, good)]
        if (suspect, good) not in slow2:
            continue
        # The host that is really slow is as slow with a good partner as in its first pair; its innocent
        # partner of round 1 is clearly faster now, even if noise on a loaded machine kept it low.
        first = before.get(suspect)
        if value is not None and first is not None and value * RELATIVE > first:
            continue
        result.slow_hosts[suspect] = value
    suspects = [h for pair in slow1 for h in pair] + list(leftover)
    result.undecided = [h for h in suspects if h not in checked]
    if result.slow_hosts:
        result.message = "slow: " + ", ".join(
            f"{h} ({_gbps(v)} with a good host, the rest {_gbps(reference)})" for h, v in result.slow_hosts.items())
    else:
        # Both hosts of a slow pair are fine with others: the link between them is the problem.
        links = [f"{a}<->{b}" for a, b in slow1]
        result.message = ("no host is slow with a good partner; slow link(s): " + ", ".join(links)) if links else \
            "no host is slow"
    return result


def _gbps(value: float | None) -> str:
    return "failed" if value is None else f"{value:.3f} GB/s"
