"""Shared test configuration: where the real tool-output samples live, and the order files start in."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).parent
SAMPLES = TESTS / "samples"

# The suite runs in groups of whole files (pytest-xdist's loadfile). A group takes the next file when it
# is done with its own, so the suite ends soon after its longest files do: they must start first. These
# are the longest, longest first (by `--durations` on a 2-core machine); every other end-to-end file
# comes next, the unit tests last. Without this, xdist starts the files with the most tests first, and a
# one-test file that mostly waits (the 80-second watch) was the only thing running in the suite's last
# minute and a half.
LONGEST_FIRST = (
    "e2e/test_smoke.py",
    "e2e/test_apply.py",
    "e2e/test_watch.py",
    "e2e/test_explain_faults.py",
    "e2e/test_slurm.py",
    "e2e/test_watch_fleet.py",
    "unit/test_inventory_oracle.py",
    "e2e/test_bootstrap.py",
    "e2e/test_watch_services.py",
    "e2e/test_audit.py",
    "unit/parsers/test_variants.py",
    "e2e/test_become_password.py",
    "e2e/test_explain.py",
    "e2e/test_hardening.py",
    "e2e/test_demo.py",
    "unit/test_batch.py",
    "e2e/test_secrets_everywhere.py",
)


def start_rank(path: Path) -> tuple[int, int]:
    """Where a test file starts among the others: the longest first, then end-to-end, then unit."""
    name = path.relative_to(TESTS).as_posix() if path.is_relative_to(TESTS) else path.as_posix()
    if name in LONGEST_FIRST:
        return (0, LONGEST_FIRST.index(name))
    return (1, 0) if name.startswith("e2e/") else (2, 0)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A stable sort: the tests of one file keep their order, and files of one rank keep collection order.
    items.sort(key=lambda item: start_rank(item.path))


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    return SAMPLES
