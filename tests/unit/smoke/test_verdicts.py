"""Verdicts without a threshold, from recorded figures: each host against the fleet, the fleet against
its links (figures below are from lab runs: gloo, 4 nodes, one switch port shaped to 800 Mbit/s)."""

from __future__ import annotations

import pytest

from provisioner.smoke import linkspeed, verdicts
from provisioner.smoke.busbw import size_result
from tests.unit.smoke._helpers import target

HOSTS = ["gpu01", "gpu02", "gpu03", "gpu04"]


def test_pair_rounds_cover_the_ring_with_disjoint_pairs() -> None:
    assert verdicts.pair_rounds(2) == ()
    assert verdicts.pair_rounds(4) == (((0, 1), (2, 3)), ((1, 2), (3, 0)))
    assert verdicts.pair_rounds(3) == (((0, 1),), ((1, 2),), ((2, 0),))
    for n in range(3, 12):
        rounds = verdicts.pair_rounds(n)
        edges = [e for r in rounds for e in r]
        assert sorted(edges) == sorted((i, (i + 1) % n) for i in range(n))
        for r in rounds:
            members = [h for e in r for h in e]
            assert len(members) == len(set(members))
        assert len(rounds) == (2 if n % 2 == 0 else 3)


def test_a_rate_limited_host_is_slow_with_both_neighbours_and_named() -> None:
    pairs = {("gpu01", "gpu02"): 1.08, ("gpu03", "gpu04"): 0.094, ("gpu02", "gpu03"): 0.091,
             ("gpu04", "gpu01"): 1.12}
    figures, check = verdicts.host_figures(HOSTS, pairs, 0.5)
    assert [f.host for f in figures if f.slow] == ["gpu03"]
    assert check.status == "slow"
    assert check.message == ("gpu03: 0.094 GB/s with its best partner gpu04, fleet median 1.100 GB/s, "
                             "below 0.5 x median")
    assert {f.host: f.partner for f in figures} == {"gpu01": "gpu04", "gpu02": "gpu01", "gpu03": "gpu04",
                                                     "gpu04": "gpu01"}


def test_a_healthy_fleet_with_noise_flags_nobody() -> None:
    pairs = {("gpu01", "gpu02"): 0.61, ("gpu03", "gpu04"): 1.02, ("gpu02", "gpu03"): 0.45,
             ("gpu04", "gpu01"): 0.88}
    figures, check = verdicts.host_figures(HOSTS, pairs, 0.5)
    assert not any(f.slow for f in figures) and check.status == "pass"


def test_one_slow_link_blames_no_host() -> None:
    pairs = {("gpu01", "gpu02"): 1.0, ("gpu03", "gpu04"): 1.0, ("gpu02", "gpu03"): 0.05, ("gpu04", "gpu01"): 1.0}
    assert verdicts.host_figures(HOSTS, pairs, 0.5)[1].status == "pass"


def test_per_host_is_skipped_below_three_hosts_or_when_off() -> None:
    assert verdicts.host_figures(HOSTS[:2], {}, 0.5)[1].status == "skipped"
    assert "turned off" in verdicts.host_figures(HOSTS, {("gpu01", "gpu02"): 1.0}, 0)[1].message


ROWS = [size_result(1 << 20, 0.0105, 4), size_result(4 << 20, 0.067, 4)]  # slow fleet: ~0.09 GB/s


def test_link_rate_says_what_it_compared() -> None:
    check = verdicts.link_check({h: 10000 for h in HOSTS}, ROWS, 4, 0.25)
    assert check.status == "slow" and check.expected == pytest.approx(1.25)
    assert check.measured == pytest.approx(max(r.busbw for r in ROWS)) and check.details["size"] == 1 << 20
    assert "against the 1.250 GB/s that 10000 Mb/s links allow" in check.message
    assert "bus factor 2(n-1)/n = 1.5 for 4 ranks, so algbw up to 0.833 GB/s" in check.message
    assert check.message.endswith("below 0.25 x link rate")
    fast = [size_result(4 << 20, 0.008, 4)]  # ~0.79 GB/s
    assert verdicts.link_check({h: 10000 for h in HOSTS}, fast, 4, 0.25).status == "pass"


def test_link_rate_unknown_is_skipped_and_said() -> None:
    check = verdicts.link_check({"gpu01": 10000, "gpu02": None}, ROWS, 4, 0.25)
    assert check.status == "skipped" and "reports no link speed on gpu02" in check.message
    assert verdicts.link_check({"gpu01": 10000}, ROWS, 4, 0).status == "skipped"


def test_gloo_is_compared_with_its_links_only_when_asked() -> None:
    speeds = {h: 10000 for h in HOSTS}
    check = verdicts.link_check(speeds, ROWS, 4, None, "gloo")
    assert check.status == "skipped" and "runs on the CPU" in check.message
    assert verdicts.link_check(speeds, ROWS, 4, 0.25, "gloo").status == "slow"
    assert verdicts.link_check(speeds, ROWS, 4, None, "nccl").fraction == verdicts.LINK_FRACTION


def test_the_slowest_link_sets_the_expectation() -> None:
    check = verdicts.link_check({"gpu01": 100000, "gpu02": 25000}, [size_result(4 << 20, 0.001, 2)], 2, 0.25)
    assert check.details["slowest_link_host"] == "gpu02" and check.expected == pytest.approx(3.125)


def test_judge_collects_every_check() -> None:
    judgement = verdicts.judge(HOSTS, {("gpu01", "gpu02"): 1.0, ("gpu03", "gpu04"): 0.1, ("gpu02", "gpu03"): 0.1,
                                       ("gpu04", "gpu01"): 1.0}, {h: None for h in HOSTS}, ROWS, 4, 0.09,
                               slow_fraction=0.5, link_fraction=0.25, min_busbw=None)
    assert [(c.name, c.status) for c in judgement.checks] == [("min_busbw", "skipped"), ("per_host", "slow"),
                                                               ("link_rate", "skipped")]
    assert list(judgement.slow_hosts) == ["gpu03"] and not judgement.failed("min_busbw")


def test_link_speed_parses_sysfs_and_refuses_unknown() -> None:
    assert linkspeed.parse("eth1 10000\n", ["eth1"]) == 10000
    assert linkspeed.parse("eth1 100000\neth2 100000\n", ["eth1", "eth2"]) == 200000
    assert linkspeed.parse("eth1 -1\n", ["eth1"]) is None
    assert linkspeed.parse("eth1 unknown\n", ["eth1"]) is None
    assert linkspeed.parse("eth1 10000\n", ["eth1", "eth2"]) is None
    assert linkspeed.probe(target("gpu01", data_ifaces=())) is None


def test_link_speed_probe_reads_the_stand_in_root_first(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import subprocess

    (tmp_path / "class/net/eth1").mkdir(parents=True)
    (tmp_path / "class/net/eth1/speed").write_text("25000\n")
    probe = linkspeed.probe(target("gpu01", sysfs_root=str(tmp_path), data_ifaces=("eth1", "nosuch0")))
    assert probe is not None
    out = subprocess.run(["sh", "-c", probe.command], capture_output=True, text=True, timeout=10).stdout
    assert out.splitlines() == ["eth1 25000", "nosuch0 unknown"]


def test_a_suspect_is_measured_again_alone_with_the_fastest_host_and_cleared_if_fast() -> None:
    # Side by side, gpu02 looked slow (its pairs shared two CPUs with the others); measured again alone
    # with the fastest host it reaches the fleet, and only the host that is slow alone stays slow.
    hosts = ["gpu01", "gpu02", "gpu03", "gpu04"]
    pairs = {("gpu01", "gpu02"): 0.25, ("gpu03", "gpu04"): 0.006, ("gpu02", "gpu03"): 0.005,
             ("gpu04", "gpu01"): 0.90}
    first = verdicts.judge(hosts, pairs, {}, [], 4, 0.5, slow_fraction=0.5, link_fraction=None, min_busbw=None)
    assert set(first.slow_hosts) == {"gpu02", "gpu03"}
    again = verdicts.confirmation_pairs(first)
    assert again == [("gpu02", "gpu01"), ("gpu03", "gpu01")]
    pairs.update({("gpu02", "gpu01"): 0.85, ("gpu03", "gpu01"): 0.007})
    second = verdicts.judge(hosts, pairs, {}, [], 4, 0.5, slow_fraction=0.5, link_fraction=None, min_busbw=None)
    assert set(second.slow_hosts) == {"gpu03"}


def test_a_suspect_as_slow_as_a_control_measured_beside_it_is_cleared_and_the_pass_says_why() -> None:
    # The machine was busy while gpu04 was measured again: two good hosts measured alone right after it
    # were as slow, so the host is not named; the pass message lists it.
    hosts = ["gpu01", "gpu02", "gpu03", "gpu04"]
    pairs = {("gpu01", "gpu02"): 0.70, ("gpu03", "gpu04"): 0.30, ("gpu02", "gpu03"): 0.72,
             ("gpu04", "gpu01"): 0.34}
    first = verdicts.judge(hosts, pairs, {}, [], 4, 0.5, slow_fraction=0.5, link_fraction=None, min_busbw=None)
    assert set(first.slow_hosts) == {"gpu04"}
    assert verdicts.control_pair(first) == ("gpu02", "gpu03")
    cleared = verdicts.judge(hosts, pairs, {}, [], 4, 0.5, slow_fraction=0.5, link_fraction=None, min_busbw=None,
                             confirmation=verdicts.Confirmation(controls={"gpu04": 0.40}))
    assert cleared.slow_hosts == {}
    per_host = next(c for c in cleared.checks if c.name == "per_host")
    assert per_host.status == "pass" and "(gpu04)" in per_host.message
    figure = next(f for f in cleared.figures if f.host == "gpu04")
    assert "0.400 GB/s" in figure.message and "were busy" in figure.message


def test_a_suspect_below_its_control_stays_slow_and_says_so() -> None:
    hosts = ["gpu01", "gpu02", "gpu03", "gpu04"]
    pairs = {("gpu01", "gpu02"): 0.70, ("gpu03", "gpu04"): 0.09, ("gpu02", "gpu03"): 0.72,
             ("gpu04", "gpu01"): 0.10}
    judged = verdicts.judge(hosts, pairs, {}, [], 4, 0.5, slow_fraction=0.5, link_fraction=None, min_busbw=None,
                            confirmation=verdicts.Confirmation(controls={"gpu04": 0.69}))
    assert list(judged.slow_hosts) == ["gpu04"]
    assert "below 0.5 x that too" in judged.slow_hosts["gpu04"]
    assert judged.failed("per_host")
    # A control is only ever a limit on top of the median: a host at the median is never made slow by it.
    fine = verdicts.judge(hosts, {**pairs, ("gpu04", "gpu01"): 0.69}, {}, [], 4, 0.5, slow_fraction=0.5,
                          link_fraction=None, min_busbw=None,
                          confirmation=verdicts.Confirmation(controls={"gpu04": 5.0}))
    assert fine.slow_hosts == {}


def test_the_control_is_the_two_fastest_hosts_not_called_slow() -> None:
    hosts = ["gpu01", "gpu02", "gpu03", "gpu04", "gpu05"]
    pairs = {("gpu01", "gpu02"): 0.5, ("gpu02", "gpu03"): 0.05, ("gpu03", "gpu04"): 0.04,
             ("gpu04", "gpu05"): 0.8, ("gpu05", "gpu01"): 0.6}
    judged = verdicts.judge(hosts, pairs, {}, [], 5, 0.5, slow_fraction=0.5, link_fraction=None, min_busbw=None)
    assert set(judged.slow_hosts) == {"gpu03"}
    assert verdicts.control_pair(judged) == ("gpu04", "gpu05")
    nobody = verdicts.judge(hosts, {}, {}, [], 5, 0.5, slow_fraction=0.5, link_fraction=None, min_busbw=None)
    assert verdicts.control_pair(nobody) is None
