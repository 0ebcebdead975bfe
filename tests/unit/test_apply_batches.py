"""Rolling batches as Ansible's `serial` computes them, and the apply exit codes."""

from __future__ import annotations

import pytest

from provisioner.run.runner import batches

HOSTS = [f"gpu{i:02d}" for i in range(1, 11)]


@pytest.mark.parametrize(("serial", "sizes"), [
    (None, [10]), (["2"], [2, 2, 2, 2, 2]), (["3"], [3, 3, 3, 1]), (["1", "100%"], [1, 9]),
    (["1", "20%", "100%"], [1, 2, 7]), (["25%"], [2, 2, 2, 2, 2]), (["1%"], [1] * 10), (["50"], [10]),
])
def test_batch_sizes(serial: list[str] | None, sizes: list[int]) -> None:
    result = batches(HOSTS, serial)
    assert [len(b) for b in result] == sizes
    assert [h for b in result for h in b] == HOSTS  # every host once, in inventory order


def test_no_hosts_no_batches() -> None:
    assert batches([], ["1", "100%"]) == []
