"""`explain` on field logs whose NCCL (or RCCL) proxy thread warned (tests/samples/logs/, sources in
tests/samples/INDEX.md). The proxy's warnings echo another failure: where the log holds it, that cause comes
first and names the proxy only as its echo; where the proxy's warnings are all there is, they are read as a
rank or its process that went away."""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from tests.unit.explain._field import causes_of, table

# file -> (the top cause's id, text its first evidence line holds, text its title/detail/fix hold)
CASES: dict[str, tuple[str, str, str]] = {
    # A local peer closed its socket during transport setup; the rank's `Socket recv failed while polling`
    # follows it.
    "nccl-proxy-polling-peer-closed-1.txt": (
        "connection-lost", "socketProgress: Connection closed by remote peer gpu004.ds-a4-r02.abc.com<55693>",
        "proxy-thread warnings on gpu004"),
    # RCCL's hipify paths; the test's own `unhandled cuda error` is the cause, the polling WARN its echo.
    "rccl-proxy-polling-hipify-1.txt": ("cuda-failure", "Test NCCL failure", "Socket recv failed while polling"),
    # Only proxy warnings, behind a date and a minute: the accept that found no connection, local rank 0's
    # connection broken, the Close for rank 0 failing. Before, a generic dead peer with no one named.
    "nccl-proxy-accept-eagain-1.txt": (
        "proxy-connection-lost", "[Service thread] Accept failed Resource temporarily unavailable",
        "local rank 0's connection to a proxy thread broke off"),
    # The socketStartConnect failure is the cause; `[Proxy Service 0] Failed to execute operation Connect` its echo.
    "nccl-socket-connect-abort-1.txt": (
        "peer-unreachable", "socketStartConnect: Connect to 10.0.0.2<45763> failed",
        "`[Proxy Service 0] Failed to execute operation Connect from rank 0, retcode 2`) are an echo"),
    # A connection to NCCL's port that did not carry its handshake, behind `worker-9 >> ` and two clocks.
    "nccl-proxy-wrong-magic-worker-prefix-1.txt": (
        "bootstrap-foreign-connection", "socketFinalizeAccept: wrong magic 74656d2f20544547", "not one of this job's"),
}
# file -> the hosts the top cause names
HOSTS: dict[str, list[str]] = {
    "nccl-proxy-polling-peer-closed-1.txt": ["gpu004"],
    "rccl-proxy-polling-hipify-1.txt": ["UVOSLinux"],
    "nccl-proxy-accept-eagain-1.txt": ["ncivki7qpk7pmo1btv0h0"],
    "nccl-socket-connect-abort-1.txt": ["ubuntu"],
    # NCCL's prefix has an empty host (`:168:1228 [2]`); the `worker-9 >> ` label every line carries names it.
    "nccl-proxy-wrong-magic-worker-prefix-1.txt": ["worker-9"],
}


test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, test_the_hosts_each_names = table(
    CASES, HOSTS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_proxy_warning_is_never_a_cause_beside_the_one_it_echoes(name: str) -> None:
    causes = causes_of(name)
    assert all(c.id != "proxy-connection-lost" for c in causes[1:])


def test_the_timestamp_is_not_evidence() -> None:
    first = causes_of("nccl-proxy-accept-eagain-1.txt")[0].evidence[0].text
    assert first.startswith("ncivki7qpk7pmo1btv0h0:179:3087 [6] proxy.cc:1458 NCCL WARN"), first


def test_a_collectors_host_label_is_not_evidence() -> None:
    # The `worker-9 >> ` label names the cause's host; the evidence starts with what NCCL printed.
    [first] = causes_of("nccl-proxy-wrong-magic-worker-prefix-1.txt")[0].evidence
    assert first.text.startswith(":166:1226 [0] misc/socket.cc:484 NCCL WARN socketFinalizeAccept"), first.text


W = "gpu07:4242:4250 [3] proxy.cc:{loc} NCCL WARN {text}"


@pytest.mark.parametrize(("text", "holds"), [
    ("Socket recv failed while polling for opId=(nil)", "lost the connection to the proxy thread serving it"),
    ("[Service thread] Could not receive type from localRank 2", "local rank 2's connection"),
    ("[Service thread] Could not receive type from localRank 1, res=6, closed=1", "closed its end"),
    ("[Service thread] Error encountered progressing operation=Connect, res=2, closing connection",
     "Connect (connecting to a peer) with a system error"),
    ("[Proxy Service 5] Failed to execute operation SharedInit from rank 5, retcode 1", "with a CUDA error"),
    ("[Service thread] Accept failed Too many open files", "ran out of file descriptors"),
    ("[Proxy service] Too many connections (128 max)", "beyond its 128 local ranks"),
])
def test_each_release_wording_alone_names_what_went_away(text: str, holds: str) -> None:
    causes = explain([("rank.log", W.format(loc=1500, text=text) + "\n")]).causes
    assert [c.id for c in causes] == ["proxy-connection-lost"]
    assert holds in causes[0].detail and causes[0].hosts == ["gpu07"]


def test_an_orderly_close_alone_is_not_a_failure() -> None:
    line = "gpu07:4242:4250 [3] NCCL INFO [Service thread] Connection closed by localRank 0\n"
    assert explain([("rank.log", line)]).causes == []
