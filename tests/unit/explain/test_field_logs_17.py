"""`explain` on field logs of ranks in containers on Docker's default bridge network, and a /dev/shm that
refused NCCL's file (tests/samples/logs/, sources in tests/samples/INDEX.md)."""

from __future__ import annotations

from tests.unit.explain._field import causes_of, line_top, table

# file -> (the top cause's id, text its first evidence line holds, text its title/detail/fix hold)
CASES: dict[str, tuple[str, str, str]] = {
    # nccl#331: NCCL_COMM_ID at the host's address, seen from a bridged container. Before: `NCCL_SOCKET_IFNAME
    # names no interface`, though it was never set; the maintainers: the bridge reaches only its own host.
    "nccl-container-bridge-comm-id-bind-1.txt": (
        "container-bridge-network", "No interface found in the same subnet as remote address 192.168.0.91",
        "--network=host"),
    # nccl#331, the other container: it dialled the master container's bridge address. Before: `a host cannot
    # reach its peers`, pinning NCCL_SOCKET_IFNAME, which cannot help.
    "nccl-container-bridge-connect-refused-2.txt": (
        "container-bridge-network", "Connect to 172.17.0.3<37551> failed", "172.17.0.0/16"),
}
HOSTS: dict[str, list[str]] = {
    "nccl-container-bridge-comm-id-bind-1.txt": ["e82c50601d13"],
    "nccl-container-bridge-connect-refused-2.txt": ["71d46aa8dab5"],
}

test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, test_the_hosts_each_names = table(
    CASES, HOSTS)


def test_the_bridge_cause_keeps_the_socket_causes_below_it() -> None:
    ids = [c.id for c in causes_of("nccl-container-bridge-comm-id-bind-1.txt")]
    assert ids[0] == "container-bridge-network" and "no-socket-interface" in ids[1:], ids


def test_a_bridge_address_on_a_named_host_is_not_taken_for_a_container() -> None:
    """A LAN may use 172.17.x.x too: without Docker's default hostname (12 hex digits) the failure stays a
    peer that cannot be reached."""
    assert line_top("include/socket.h:390 NCCL WARN Connect to 172.17.0.3<37551> failed : Connection refused"
                    )[0] == "peer-unreachable"


def test_a_denied_segment_is_not_called_full() -> None:
    """nccl#328 (its case is in test_field_logs): before, `/dev/shm had no room`."""
    cause = causes_of("nccl-shm-open-permission-denied-7.txt")[0]
    assert "no room" not in cause.title and "--shm-size" not in cause.settings, cause
