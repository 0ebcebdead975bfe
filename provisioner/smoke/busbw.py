"""Bandwidth arithmetic with nccl-tests' definitions (its doc/PERFORMANCE.md).

algbw = bytes / time. busbw rescales it so it can be compared with the hardware's link bandwidth
whatever the rank count: for all-reduce every rank sends and receives 2(n-1)/n of the data.
Units as nccl-tests prints them: GB/s = 1e9 bytes per second; times in microseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def all_reduce_factor(ranks: int) -> float:
    if ranks < 1:
        raise ValueError("an all-reduce needs at least one rank")
    return 2 * (ranks - 1) / ranks


def algbw(size_bytes: int, seconds: float) -> float:
    """GB/s; 0 for a zero time (a degenerate measurement, never a division error)."""
    return size_bytes / seconds / 1e9 if seconds > 0 else 0.0


def busbw(size_bytes: int, seconds: float, ranks: int) -> float:
    return algbw(size_bytes, seconds) * all_reduce_factor(ranks)


@dataclass(frozen=True)
class SizeResult:
    """One message size of a sweep, as nccl-tests reports it (out-of-place figures)."""

    size: int  # bytes
    time_us: float
    algbw: float  # GB/s
    busbw: float  # GB/s
    wrong: int = 0  # elements with a wrong result (0 = numerically right)


def size_result(size_bytes: int, seconds: float, ranks: int, wrong: int = 0) -> SizeResult:
    return SizeResult(size_bytes, seconds * 1e6, algbw(size_bytes, seconds), busbw(size_bytes, seconds, ranks), wrong)


def average_busbw(rows: Sequence[SizeResult]) -> float:
    """nccl-tests' `Avg bus bandwidth`: the plain mean of busbw over the sizes of the sweep."""
    return sum(r.busbw for r in rows) / len(rows) if rows else 0.0
