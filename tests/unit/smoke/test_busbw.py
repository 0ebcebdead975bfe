"""busbw arithmetic against nccl-tests' own printed figures."""

from __future__ import annotations

import pytest

from provisioner.parsers.nccl_tests import parse_nccl_tests
from provisioner.smoke.busbw import algbw, all_reduce_factor, average_busbw, busbw, size_result
from tests.unit.parsers._samples import SAMPLES


def test_factor_is_two_n_minus_one_over_n() -> None:
    assert all_reduce_factor(1) == 0
    assert all_reduce_factor(2) == 1
    assert all_reduce_factor(4) == 1.5
    assert all_reduce_factor(8) == 1.75
    with pytest.raises(ValueError):
        all_reduce_factor(0)


def test_units_are_gigabytes_per_second() -> None:
    assert algbw(1_000_000_000, 1.0) == 1.0
    assert busbw(1_000_000_000, 0.5, 4) == 3.0
    assert algbw(100, 0.0) == 0.0  # degenerate time, no ZeroDivisionError
    row = size_result(64 << 20, 0.1, 4, wrong=0)
    assert row.time_us == pytest.approx(100_000)
    assert row.busbw == pytest.approx(row.algbw * 1.5)


@pytest.mark.parametrize("name", ["all_reduce_perf-4.txt", "all_reduce_perf-5.txt"])
def test_reproduces_nccl_tests_rows(name: str) -> None:
    """Recomputed from size and time, algbw and busbw match what all_reduce_perf printed."""
    parsed = parse_nccl_tests((SAMPLES / name).read_text())
    ranks = len(parsed.devices)
    assert ranks in (8, 16)
    for row in parsed.rows:
        seconds = row.oop_time_us / 1e6
        assert algbw(row.size, seconds) == pytest.approx(row.oop_algbw, abs=0.01, rel=0.002)
        assert busbw(row.size, seconds, ranks) == pytest.approx(row.oop_busbw, abs=0.01, rel=0.002)


def test_average_is_the_plain_mean_as_in_nccl_tests() -> None:
    parsed = parse_nccl_tests((SAMPLES / "all_reduce_perf-4.txt").read_text())
    rows = [size_result(r.size, r.oop_time_us / 1e6, len(parsed.devices)) for r in parsed.rows]
    # nccl-tests averages busbw over out-of-place and in-place; ours over out-of-place only: close, not equal.
    assert average_busbw(rows) == pytest.approx(parsed.avg_busbw, rel=0.02)
    assert average_busbw([]) == 0.0
