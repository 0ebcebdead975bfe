"""`explain` on RDMA completion errors whose cause the thread established: a RoCE GID index that does not route
(NCCL 2.4's `.cu` wording), and a local protection error on the GPUDirect path, which NCCL's maintainers trace
first to PCIe ACS between NIC and GPU (tests/samples/logs/, sources in tests/samples/INDEX.md)."""

from __future__ import annotations

from tests.unit.explain._field import line_top, table

# file -> (the top cause's id, text its first evidence line holds, text its title/detail/fix hold)
CASES: dict[str, tuple[str, str, str]] = {
    # nccl-tests#24: NCCL used GID index 0, the fabric needed 3 (NCCL_IB_GID_INDEX=3). Before: the same.
    "nccl-tests-2.4-completion-error-12-gid-index-cu-form-1.txt": (
        "ib-completion-error", "transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 12",
        "NCCL_IB_GID_INDEX"),
}
# Both hosts that logged it: the two ends of the failed connection, the first to log it first.
HOSTS: dict[str, list[str]] = {"nccl-tests-2.4-completion-error-12-gid-index-cu-form-1.txt": ["gpu5", "gpu4"]}

test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, test_the_hosts_each_names = table(
    CASES, HOSTS)


def test_a_protection_error_names_acs_before_registration() -> None:
    """NCCL 2.4 to 2.19 (`Got completion with error 4, ...`) and 2.19 on (`from peer ... with error 4`): status 4
    is the local host's GPUDirect path, and PCIe ACS on its bridges is the first thing to check."""
    for line in ("transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 4, opcode 1, len 21938, "
                 "vendor err 81",
                 "transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<56421> with error 4, "
                 "opcode 0, len 0, vendor err 81 (Send) localGid ::ffff:10.0.0.1 remoteGid ::ffff:10.0.0.2"):
        cause, text, _ = line_top(line)
        assert cause == "ib-completion-error", (cause, text)
        assert "ACSCtl" in text and "not the fabric" in text and "PFC" not in text, text
        assert text.index("ACS") < text.index("nvidia_peermem"), text


def test_a_length_error_stays_with_registration() -> None:
    """A local length error is the registered region, not the PCIe path: no ACS advice there."""
    _, text, _ = line_top("transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<56421> "
                          "with error 1, opcode 0, len 0, vendor err 105 (Recv)")
    assert "nvidia_peermem" in text and "ACSCtl" not in text, text


def test_a_completion_whose_peer_address_the_poster_deleted() -> None:
    """2.19's `Got completion from peer %s<%d> with error` with the address cut out by the poster: still read."""
    cause, text, hosts = line_top("transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer with error 4, "
                                  "opcode 0, len 0, vendor err 81 (Send) localGid ::ffff: remoteGid ::ffff:")
    assert cause == "ib-completion-error" and "IBV_WC_LOC_PROT_ERR" in text and hosts == ["gpu-a"], (cause, hosts)
