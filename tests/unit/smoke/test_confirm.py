"""The order and use of the confirmation runs (`pairs.Runs.confirm`): the pair runs themselves are the
lab's (tests/e2e/test_smoke.py); here each run's figure is scripted to show what is measured when."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from provisioner.smoke import verdicts
from provisioner.smoke.pairs import Pair, Runs
from provisioner.smoke.settings import Settings
from tests.unit.smoke._helpers import target

HOSTS = ["gpu01", "gpu02", "gpu03", "gpu04"]


class Scripted(Runs):
    """Each run alone returns the next scripted figure (None: the run failed) and is recorded."""

    def __init__(self, figures: list[float | None]) -> None:
        super().__init__([target(h) for h in HOSTS], {}, Settings(), "gloo", 1, lambda t: None)  # type: ignore[arg-type,return-value]
        self.figures: Iterator[float | None] = iter(figures)
        self.ran: list[tuple[Pair, str]] = []

    def pair_round(self, pairs: Sequence[Pair], port: int, round_no: int,
                   role: str = "pair") -> dict[Pair, float | None]:
        assert len(pairs) == 1 and round_no == 3
        self.ran.append((pairs[0], role))
        return {pairs[0]: next(self.figures)}


def side_by_side() -> tuple[dict[tuple[str, str], float], verdicts.Judgement]:
    pairs = {("gpu01", "gpu02"): 0.70, ("gpu03", "gpu04"): 0.30, ("gpu02", "gpu03"): 0.72, ("gpu04", "gpu01"): 0.34}
    return pairs, verdicts.judge(HOSTS, pairs, {}, [], 4, 0.5, slow_fraction=0.5, link_fraction=None,
                                 min_busbw=None)


def test_a_suspect_as_fast_as_its_control_is_measured_twice_only() -> None:
    pairs, first = side_by_side()
    runs = Scripted([0.36, 0.40])
    found = runs.confirm(first, pairs, lambda m: None)
    assert runs.ran == [(("gpu04", "gpu02"), "suspect"), (("gpu02", "gpu03"), "control")]
    assert found.controls == {"gpu04": 0.40} and pairs[("gpu04", "gpu02")] == 0.36 and found.failed == {}


def test_a_suspect_below_its_control_gets_one_more_try_and_keeps_its_best() -> None:
    pairs, first = side_by_side()
    runs = Scripted([0.10, 0.70, 0.65])
    found = runs.confirm(first, pairs, lambda m: None)
    assert [role for _, role in runs.ran] == ["suspect", "control", "suspect"]
    assert pairs[("gpu04", "gpu02")] == 0.65 and found.controls == {"gpu04": 0.70}
    again = verdicts.judge(HOSTS, pairs, {}, [], 4, 0.5, slow_fraction=0.5, link_fraction=None, min_busbw=None,
                           confirmation=found)
    assert again.slow_hosts == {}


def test_a_slow_host_stays_slow_through_both_tries() -> None:
    pairs, first = side_by_side()
    runs = Scripted([0.09, 0.70, 0.08])
    found = runs.confirm(first, pairs, lambda m: None)
    again = verdicts.judge(HOSTS, pairs, {}, [], 4, 0.5, slow_fraction=0.5, link_fraction=None, min_busbw=None,
                           confirmation=found)
    assert list(again.slow_hosts) == ["gpu04"]


def test_a_run_alone_that_failed_is_tried_once_more_and_then_compared_as_usual() -> None:
    pairs, first = side_by_side()
    runs = Scripted([None, 0.38, 0.40])
    found = runs.confirm(first, pairs, lambda m: None)
    assert [role for _, role in runs.ran] == ["suspect", "suspect", "control"]
    assert found.controls == {"gpu04": 0.40} and found.failed == {}
    again = verdicts.judge(HOSTS, pairs, {}, [], 4, 0.5, slow_fraction=0.5, link_fraction=None, min_busbw=None,
                           confirmation=found)
    assert again.slow_hosts == {}


def test_a_suspect_whose_runs_alone_both_failed_stays_slow_and_says_why() -> None:
    pairs, first = side_by_side()
    runs = Scripted([None, None])
    runs.records.append({"cause": "gpu04: rank 1 never joined the rendezvous"})
    found = runs.confirm(first, pairs, lambda m: None)
    assert runs.ran == [(("gpu04", "gpu02"), "suspect"), (("gpu04", "gpu02"), "suspect")]
    assert found.controls == {} and "the run failed twice (gpu04: rank 1 never joined" in found.failed["gpu04"]
    again = verdicts.judge(HOSTS, pairs, {}, [], 4, 0.5, slow_fraction=0.5, link_fraction=None, min_busbw=None,
                           confirmation=found)
    assert list(again.slow_hosts) == ["gpu04"]
    assert "measured again alone with gpu02: the run failed twice" in again.slow_hosts["gpu04"]


def test_a_control_run_that_failed_clears_nobody() -> None:
    pairs, first = side_by_side()
    runs = Scripted([0.09, None])
    found = runs.confirm(first, pairs, lambda m: None)
    assert [role for _, role in runs.ran] == ["suspect", "control"] and found.controls == {}
    again = verdicts.judge(HOSTS, pairs, {}, [], 4, 0.5, slow_fraction=0.5, link_fraction=None, min_busbw=None,
                           confirmation=found)
    assert list(again.slow_hosts) == ["gpu04"]
