"""Localisation: two rounds of disjoint pairs name the slow host, never all pairs."""

from __future__ import annotations

from provisioner.smoke import localise

HOSTS = [f"gpu0{i}" for i in range(1, 9)]


def measure(pair: tuple[str, str], slow: set[str], bad_links: set[frozenset[str]] = frozenset()) -> float:
    return 0.1 if (set(pair) & slow or frozenset(pair) in bad_links) else 1.0


def simulate(hosts: list[str], slow: set[str], bad_links: set[frozenset[str]] = frozenset()) -> localise.Verdict:
    pairs, leftover = localise.first_round(hosts)
    assert len(pairs) == len(hosts) // 2
    assert len({h for p in pairs for h in p}) == 2 * len(pairs)  # disjoint
    round1 = {p: measure(p, slow, bad_links) for p in pairs}
    slow_pairs, fast = localise.slow_pairs(round1, threshold=0.5)
    round2_pairs = localise.second_round(slow_pairs, leftover, fast)
    assert len({h for p in round2_pairs for h in p}) == 2 * len(round2_pairs)  # parallel runs share no host
    round2 = {p: measure(p, slow, bad_links) for p in round2_pairs}
    return localise.verdict(round1, round2, 0.5, leftover)


def test_one_slow_host_of_four_and_eight() -> None:
    for count in (4, 8):
        for slow in HOSTS[:count]:
            verdict = simulate(HOSTS[:count], {slow})
            assert list(verdict.slow_hosts) == [slow], (count, slow)
            assert verdict.reference == 1.0 and f"{slow} (0.100 GB/s" in verdict.message


def test_odd_count_checks_the_leftover() -> None:
    assert list(simulate(HOSTS[:5], {"gpu05"}).slow_hosts) == ["gpu05"]
    assert simulate(HOSTS[:5], set()).slow_hosts == {}


def test_a_bad_link_between_two_good_hosts() -> None:
    verdict = simulate(HOSTS[:4], set(), {frozenset({"gpu01", "gpu02"})})
    assert verdict.slow_hosts == {} and "gpu01<->gpu02" in verdict.message


def test_uniformly_slow_fleet_blames_nobody() -> None:
    round1 = {("a", "b"): 0.2, ("c", "d"): 0.21}
    verdict = localise.verdict(round1, {}, 0.5)
    assert verdict.slow_hosts == {} and "as a whole" in verdict.message


def test_failed_pair_counts_as_slow() -> None:
    slow, fast = localise.slow_pairs({("a", "b"): None, ("c", "d"): 1.0}, 0.5)
    assert slow == [("a", "b")] and fast == [("c", "d")]


def test_a_noisy_innocent_partner_is_not_blamed() -> None:
    """Measured on a loaded 2-core machine: gpu03 rate-limited; gpu04, its round-1 partner, came out
    low with a good host too (CPU contention), but nine times faster than the slow pair."""
    round1 = {("gpu01", "gpu02"): 0.130, ("gpu03", "gpu04"): 0.0061}
    round2 = {("gpu03", "gpu01"): 0.0062, ("gpu04", "gpu02"): 0.0559}
    verdict = localise.verdict(round1, round2, threshold=0.07)
    assert list(verdict.slow_hosts) == ["gpu03"]


def test_both_hosts_of_a_pair_can_be_slow() -> None:
    verdict = simulate(HOSTS[:4], {"gpu03", "gpu04"})
    assert sorted(verdict.slow_hosts) == ["gpu03", "gpu04"]
