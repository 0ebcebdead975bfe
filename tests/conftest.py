"""Shared test configuration: where the real tool-output samples live."""

from __future__ import annotations

from pathlib import Path

import pytest

SAMPLES = Path(__file__).parent / "samples"


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    return SAMPLES
