"""`explain` on field logs of HCA async events whose stated cause was the device or the MTU the two ends
disagreed on (tests/samples/logs/, sources in tests/samples/INDEX.md)."""

from __future__ import annotations

from tests.unit.explain._field import causes_of, table

CASES: dict[str, tuple[str, str, str]] = {
    # nccl#230: a device fault on a 4-node job after 830K iterations. Before: the collector's `...Z: ` time was
    # not taken off, so the host went unnamed, the blank `[1,14]<stdout>:` lines became evidence, and the failed
    # ibv_get_async_event (the dead device's event channel) read as a resource the HCA refused.
    "nccl-hca-catastrophic-collector-time-1.txt": (
        "hca-firmware-fault", "Got async event : local catastrophic error", "mlxfwreset"),
    # nccl#1524: the reporter found the two servers' MTUs differed (NCCL 2.20.3 stopped lowering the QP's MTU
    # to the peer's). Before: only memory registration and GPUDirect were named.
    "nccl-qp-access-violation-mtu-1.txt": (
        "ib-queue-error", "local access violation work queue error", "active_mtu"),
}
HOSTS: dict[str, list[str]] = {
    "nccl-hca-catastrophic-collector-time-1.txt": ["container-e275-1553839402050-12124-01-000057"],
    "nccl-qp-access-violation-mtu-1.txt": ["ubuntu20-server-2"],
}

test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, test_the_hosts_each_names = table(
    CASES, HOSTS)


def test_a_dead_devices_event_channel_is_no_second_cause() -> None:
    """`Call to ibv_get_async_event failed` follows the catastrophic error on every rank: it is the device's
    evidence, not a verbs call the HCA refused, and no evidence line is a prefix alone."""
    causes = causes_of("nccl-hca-catastrophic-collector-time-1.txt")
    assert [c.id for c in causes] == ["hca-firmware-fault"]
    texts = [e.text for e in causes[0].evidence]
    assert any("ibv_get_async_event" in t for t in texts) and all(t.strip() for t in texts)
