"""`explain` on field logs of NCCL versions that differ between hosts, a heartbeat report wrapped by a terminal,
and a store wait that says only `Socket Timeout` (tests/samples/logs/, sources in tests/samples/INDEX.md)."""

from __future__ import annotations

from tests.unit.explain._field import causes_of, table, words

# file -> (the top cause's id, text its first evidence line holds, text its title/detail/fix hold)
CASES: dict[str, tuple[str, str, str]] = {
    # Two nodes' standalone runs: each bare `NCCL version` line sits between its own host's lines (NCCL printed
    # it with printf until 2.23). Before: only `TCP sockets between nodes`; the thread's fix was one NCCL.
    "nccl-version-per-host-standalone-1.txt": (
        "nccl-version-mismatch", "NCCL version 2.14.3+cuda11.7", "instance-8g-96c-1 2.14.3"),
    # torch 2.6-era `watchdog got stuck for 480 seconds` broken at 116 columns, mid-word. Named already.
    "torch-stuck-watchdog-dump-wrapped-116-1.txt": (
        "watchdog-hung", "ProcessGroupNCCL'", "stopped making progress for 480 s"),
    # torchelastic's role-info exchange timed out in a store get. Before: nothing named.
    "torchelastic-share-and-gather-socket-timeout-1.txt": (
        "rendezvous-incomplete", "RuntimeError: Socket Timeout", "exchange of the agents' role info"),
}
HOSTS: dict[str, list[str]] = {
    "nccl-version-per-host-standalone-1.txt": ["instance-8g-96c-1", "instance-8g-96c-4"],
    "torch-stuck-watchdog-dump-wrapped-116-1.txt": [],
    "torchelastic-share-and-gather-socket-timeout-1.txt": [],
}

test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, test_the_hosts_each_names = table(
    CASES, HOSTS)


def test_both_hosts_versions_are_named() -> None:
    said = words(causes_of("nccl-version-per-host-standalone-1.txt")[0])
    assert "instance-8g-96c-1 2.14.3" in said and "instance-8g-96c-4 2.19.3" in said, said


def test_the_socket_timeout_gets_the_store_advice() -> None:
    cause = causes_of("torchelastic-share-and-gather-socket-timeout-1.txt")[0]
    assert cause.settings == ["MASTER_ADDR", "MASTER_PORT"]
    assert "host:port" in cause.fix
