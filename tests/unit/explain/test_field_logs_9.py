"""`explain` on NCCL RAS reports (`ncclras`, NCCL 2.24 on; `ncclras -f json`, 2.28.7 on) from the field
(tests/samples/logs/, sources in tests/samples/INDEX.md): a process RAS declared dead or that stopped answering
names its node, and a report that saw every rank running leaves the answer to what the rest of the log says; a
node the job summary finds running fewer processes than the others is named, and a rank behind the others on an
operation is named as behind."""

from __future__ import annotations

from tests.unit.explain._field import LOGS, causes_of, table

# file -> (the top cause's id, text its first evidence line holds, text its title/detail/fix hold)
CASES: dict[str, tuple[str, str, str]] = {
    # The process of rank 7 exited: RAS misses its data (job level and in communicator #0-0) but has not yet
    # declared it dead.
    "ncclras-report-incomplete-1.txt": (
        "ras-process-unresponsive", "INCOMPLETE", "rank 7 (process 3748990, GPU 3) on node1"),
    # A minute later: declared dead, the communicator gone.
    "ncclras-report-dead-1.txt": ("ras-process-dead", "DEAD", "lost 1 job process for good: process 3748990"),
    # Every rank running and reachable, while torch's watchdog timed out on rank 118: the timeout is the answer,
    # and the report says on it that no rank was missing.
    "ncclras-report-healthy-watchdog-1.txt": ("collective-timeout", "Watchdog caught collective operation timeout",
                                              "NCCL's RAS report saw all 256 ranks running and reachable"),
    # One node runs 2 processes where the other runs 8, and one of its 2 no longer answers: the silent process is
    # the top cause; the outlier node is named beside it (below).
    "ncclras-report-outlier-node-1.txt": ("ras-process-unresponsive", "INCOMPLETE", "rank 1 (process 60004, GPU 0)"),
    # `ncclras -f json` (2.28.9): every rank answered, rank 1 one AllReduce behind the three others.
    "ncclras-json-mismatch-a10g-2.28.9.txt": ("collective-desync", '"hash": "0xf31e5874c3f25459",',
                                              "rank 1 on 10.0.109.86 up to operation 100): behind is rank 1"),
    # `ncclras -f json` (2.28.9, no comma after the missing rank's nvml_dev): rank 1 not answering, not yet dead.
    "ncclras-json-unresponsive-2.28.9-missing-comma.txt": (
        "ras-process-unresponsive", '"hash": "0xa1349768e9517ed7",', "rank 1 (process 10017, GPU 1) on 10.0.77.184"),
}
# file -> the hosts the top cause names
HOSTS: dict[str, list[str]] = {
    "ncclras-report-incomplete-1.txt": ["node1"],
    "ncclras-report-dead-1.txt": ["node1"],
    "ncclras-report-healthy-watchdog-1.txt": [],
    "ncclras-report-outlier-node-1.txt": ["10.4.109.13"],
    "ncclras-json-mismatch-a10g-2.28.9.txt": ["10.0.109.86"],
    "ncclras-json-unresponsive-2.28.9-missing-comma.txt": ["10.0.77.184"],
}


def test_every_log_of_this_set_has_a_case() -> None:
    assert {p.name for p in LOGS.glob("ncclras-*.txt")} == set(CASES) == set(HOSTS)


_, test_the_top_cause_of_each_field_log, test_the_hosts_each_names = table(CASES, HOSTS)


def test_a_healthy_report_names_no_ras_cause() -> None:
    ids = [c.id for c in causes_of("ncclras-report-healthy-watchdog-1.txt")]
    assert not [i for i in ids if i.startswith("ras-")], ids


def test_a_report_is_not_read_as_nccl_tests_output() -> None:
    # `1 job process is considered dead (...)` has as many words as a result row.
    for name in CASES:
        assert "nccl-tests-truncated" not in [c.id for c in causes_of(name)], name


def test_the_outlier_node_of_the_job_summary_is_named() -> None:
    outlier = next(c for c in causes_of("ncclras-report-outlier-node-1.txt") if c.id == "ras-node-outlier")
    assert outlier.hosts == ["10.4.109.13"]
    assert "node 10.4.109.13 runs 2 NCCL processes where the other nodes run 8" in outlier.detail
    assert outlier.evidence[0].text == "Node 10.4.109.13 running processes 60004,60035"
    # The process ids on that line are not read: some releases print the first ones of the job there.
    assert "60035" not in outlier.detail
