"""`explain` on torch.distributed's store waits and aborted communicators, from the field (tests/samples/logs/,
sources in tests/samples/INDEX.md): a store wait that timed out read as the rendezvous it belongs to, with the
ranks its keys name, and an aborted communicator read as the reason torch quotes for it."""

from __future__ import annotations

from tests.unit.explain._field import causes_of, table

# file -> (the top cause's id, text its first evidence line starts with, text its title/detail/fix hold)
CASES: dict[str, tuple[str, str, str]] = {
    # vLLM's worker prefix goes; gloo's wrapper group waited for rank 0's key (`.../0`).
    "torch-diststore-wait-timeout-gloo-wrapper-1.txt": (
        "rendezvous-incomplete", "torch.distributed.DistStoreError: wait timeout after 600000ms",
        "rank 0 never arrived"),
    # The reason quoted is the watchdog's: a collective timeout on ranks 0, 1, 2, not a lost connection.
    "torch-comm-aborted-watchdog-reason-1.txt": (
        "collective-timeout", "RuntimeError: NCCL communicator was aborted on rank 1.",
        "process-group ranks 0, 1, 2 waited 1809.84 s in ALLREDUCE"),
    "torch-comm-aborted-watchdog-lone-2.txt": (
        "collective-timeout", "RuntimeError: : NCCL communicator was aborted on rank 3.",
        "global rank 3 waited 1803.17 s in ALLGATHER (SeqNum 266392) and gave up. No other rank's output is in "
        "the log"),
}
# file -> the hosts the top cause names (none of these logs says which host a line came from)
HOSTS: dict[str, list[str]] = {name: [] for name in CASES}

test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, test_the_hosts_each_names = table(
    CASES, HOSTS, evidence_starts=True)


def test_an_aborted_communicator_with_a_watchdog_reason_is_not_a_lost_connection() -> None:
    for name in ("torch-comm-aborted-watchdog-reason-1.txt", "torch-comm-aborted-watchdog-lone-2.txt"):
        assert "connection-lost" not in [c.id for c in causes_of(name)]
