"""port_counters: a counter the kernel could not read is a check that could not be made, naming what was printed.

`N/A (no PMA)` (an iWARP device without a performance-management agent) and a reader's `Permission denied` are
neither a value over the limit nor a counter that is not there: the check is an error that says the host could not
read it and what it printed instead.
"""

from __future__ import annotations

import pytest

from ._recorded import run, sample

GREP = "grep -r -H"
IWARP = sample("port-counters-sysfs-2-iwarp-no-pma.txt")
# A reader's complaints, as GNU grep prints them when stderr is kept (the parser's recorded forms).
DENIED = ("mlx5_0/ports/1/counters/symbol_error:0\n"
          "grep: mlx5_0/ports/1/hw_counters/rx_icrc_encapsulated: Permission denied\n")
EFA_DEVICE = ("efa_0/hw_counters/cmds_err:N/A (no PMA)\n"
              "grep: efa_0/hw_counters/mmap_err: Permission denied\n")


def test_a_counter_without_a_pma_is_unreadable_not_missing() -> None:
    result = run("port_counters", {"device": "i40iw0", "max": {"link_downed": 0, "port_rcv_errors": 0}},
                 {GREP: IWARP})
    assert result.summary() == [("i40iw0/1 link_downed", "error", "<= 0", None),
                                ("i40iw0/1 port_rcv_errors", "error", "<= 0", None)]
    message = result.checks[0].message
    assert message == "cannot read i40iw0/1 link_downed: the host printed 'N/A (no PMA)'"
    assert "has no counter" not in message


def test_a_counter_absent_from_the_same_listing_still_reads_as_missing() -> None:
    [check] = run("port_counters", {"device": "i40iw0", "max": {"symbol_error": 0}}, {GREP: IWARP}).checks
    assert check.status == "error" and check.message == "i40iw0/1 has no counter symbol_error"


def test_a_reader_that_was_refused_names_the_refusal() -> None:
    checks = run("port_counters", {"max": {"symbol_error": 0, "rx_icrc_encapsulated": 0}}, {GREP: DENIED}).checks
    assert [(c.attribute, c.status) for c in checks] == [("mlx5_0/1 symbol_error", "ok"),
                                                         ("mlx5_0/1 rx_icrc_encapsulated", "error")]
    assert checks[1].message == "cannot read mlx5_0/1 rx_icrc_encapsulated: the host printed 'Permission denied'"


def test_a_device_counter_that_cannot_be_read() -> None:
    checks = run("port_counters", {"device": "efa_0", "max": {"cmds_err": 0, "mmap_err": 0}},
                 {GREP: EFA_DEVICE}).checks
    assert [c.message for c in checks] == ["cannot read efa_0 cmds_err: the host printed 'N/A (no PMA)'",
                                           "cannot read efa_0 mmap_err: the host printed 'Permission denied'"]
    assert all(c.status == "error" and c.actual is None for c in checks)


def test_a_port_counter_that_cannot_be_read_is_not_judged_on_the_devices_copy() -> None:
    # The port keeps the counter but could not serve it: the device's copy of the name is not the port's value.
    text = "grep: efa_0/ports/1/hw_counters/rx_drops: Permission denied\nefa_0/hw_counters/rx_drops:0\n"
    [check] = run("port_counters", {"max": {"rx_drops": 0}}, {GREP: text}).checks
    assert (check.attribute, check.status) == ("efa_0/1 rx_drops", "error")
    assert "Permission denied" in check.message


@pytest.mark.parametrize("second", [IWARP, IWARP.replace("link_downed:N/A (no PMA)", "link_downed:3")])
def test_a_rate_with_an_unreadable_reading_cannot_be_measured(second: str) -> None:
    first = IWARP.replace("link_downed:N/A (no PMA)", "link_downed:1") if second is IWARP else IWARP
    [check] = run("port_counters", {"device": "i40iw0", "max_rate": {"link_downed": 0}, "interval": 2},
                  {GREP: first + "@@interval 2\n" + second}).checks
    assert (check.attribute, check.status, check.actual) == ("i40iw0/1 link_downed rate", "error", None)
    assert check.message == "cannot read i40iw0/1 link_downed: the host printed 'N/A (no PMA)'"
