"""watch --drain-failed: failing hosts drained once with a `fabnet: watch:` reason; news never drains."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from provisioner.scheduler import NodeState, SchedulerError
from provisioner.watch.drainer import Drainer
from provisioner.watch.events import Change


class FakeSlurm:
    def __init__(self) -> None:
        self.drains: list[dict[str, str]] = []

    def drain(self, reasons: dict[str, str]) -> dict[str, str]:
        self.drains.append(dict(reasons))
        return {}

    def resume(self, hosts: Sequence[str]) -> dict[str, str]:
        return {}

    def state(self, hosts: Sequence[str]) -> dict[str, NodeState]:
        return {}


def test_failing_hosts_are_drained_once_and_good_news_never() -> None:
    slurm = FakeSlurm()

    @contextmanager
    def connect() -> Iterator[FakeSlurm]:
        yield slurm

    drainer = Drainer(connect)  # type: ignore[arg-type]
    flap = Change("gpu01", 1.0, "link_flap", "eth1", "link went down and came back (2 carrier changes)", 2)
    news = [Change("gpu02", 1.0, "drift_gone", "sysctl x: value", "back to 1"),
            Change("gpu03", 1.0, "watching", "", "0 drift items"),
            Change("gpu04", 1.0, "counters_reset", "mlx5_0/1", "error counters went back (symbol_error 4 -> 0)")]
    actions, error = drainer([flap, *news])
    assert error is None
    assert [(a.host, a.action) for a in actions] == [("gpu01", "drained")]
    assert slurm.drains == [{"gpu01": "fabnet: watch: link flap eth1: link went down and came back (2 carrier "
                                      "changes)"}]
    assert drainer([flap]) == ([], None)  # once per watch
    assert len(slurm.drains) == 1
    reset = Change("gpu05", 2.0, "link_reset", "eth1", "registered again since the last cycle (ifindex 5 -> 9)")
    assert [(a.host, a.action) for a in drainer([reset])[0]] == [("gpu05", "drained")]


def test_an_unreachable_scheduler_is_said_and_tried_again() -> None:
    calls = 0

    @contextmanager
    def connect() -> Iterator[FakeSlurm]:
        nonlocal calls
        calls += 1
        raise SchedulerError("controller unreachable")
        yield FakeSlurm()

    drainer = Drainer(connect)  # type: ignore[arg-type]
    down = Change("gpu02", 1.0, "host_down", "", "timed out")
    assert drainer([down]) == ([], "controller unreachable")
    assert drainer([down]) == ([], "controller unreachable")
    assert calls == 2


def test_a_host_powered_off_by_power_saving_is_left_and_asked_again_once_it_is_up() -> None:
    slurm = FakeSlurm()
    states = {"gpu04": NodeState("idle", flag="~")}
    slurm.state = lambda hosts: {h: states[h] for h in hosts if h in states}  # type: ignore[method-assign]

    @contextmanager
    def connect() -> Iterator[FakeSlurm]:
        yield slurm

    drainer = Drainer(connect)  # type: ignore[arg-type]
    down = Change("gpu04", 1.0, "host_down", "", "timed out")
    actions, _ = drainer([down])
    assert [(a.host, a.action) for a in actions] == [("gpu04", "left")] and "power saving" in actions[0].detail
    assert slurm.drains == []
    # Powered up for a job and now drifted: this watch drains it after all.
    states["gpu04"] = NodeState("idle")
    actions, _ = drainer([Change("gpu04", 2.0, "drift_new", "sysctl x", "0 (want 1)")])
    assert [(a.host, a.action) for a in actions] == [("gpu04", "drained")]
