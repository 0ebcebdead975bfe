"""`explain` on what torch.distributed prints in its recent releases (2.4 on), from the field (tests/samples/logs/,
sources in tests/samples/INDEX.md): the c10 logger's bracketed prefix taken off the evidence, torch's
`[rankN]:` read as the rank behind a viewer's line counter, a store client that lost torch's TCPStore server
named as that, and NCCL's remote error as torch raises it."""

from __future__ import annotations

from tests.unit.explain._field import causes_of, table

# file -> (the top cause's id, text its first evidence line starts with, text its title/detail/fix hold)
CASES: dict[str, tuple[str, str, str]] = {
    # `[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] ` goes; ranks 0, 1, 2 timed out together.
    "torch-c10-prefix-watchdog-pg-guid-1.txt": ("collective-timeout", "[Rank 1] Watchdog caught collective operation",
                                                "global ranks 0, 1, 2 waited 600.061 s in ALLREDUCE (SeqNum 808)"),
    # `[80746] ` is a line counter, not rank 80746.
    "torch-line-counter-watchdog-1.txt": ("collective-timeout", "[Rank 0] Watchdog caught collective operation",
                                         "global ranks 0, 4 waited"),
    "torch-store-reset-should-dump-1.txt": ("connection-lost", "[PG ID 0 PG GUID 0 Rank 8] Failed to check",
                                            "(TCPStore) at sglang-0.default.pod.transwarp.local:20000"),
    "torch-dist-backend-remote-socket-reset-1.txt": (
        "connection-lost", "torch.distributed.DistBackendError: NCCL error in:", "the path dropped the connection"),
}
# file -> the hosts the top cause names (none of these logs says which host a line came from)
HOSTS: dict[str, list[str]] = {name: [] for name in CASES}

test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, test_the_hosts_each_names = table(
    CASES, HOSTS, evidence_starts=True)


def test_no_line_counter_is_read_as_a_rank() -> None:
    detail = causes_of("torch-line-counter-watchdog-1.txt")[0].detail
    assert "8074" not in detail, detail


def test_the_store_server_is_named_as_an_address() -> None:
    top = causes_of("torch-store-reset-should-dump-1.txt")[0]
    assert top.addresses == ["sglang-0.default.pod.transwarp.local:20000"], top.addresses
    assert "the path dropped" not in top.detail, top.detail
