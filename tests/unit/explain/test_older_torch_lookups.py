"""`explain` on the lookup failures of older torch releases, read like the current wordings: a host named where
the line names it, a lookup that names none where it does not.

Lines built from torch's source: socket.cpp's first form (torch 1.10) warns `The network addresses of (H, P) cannot
be retrieved <gai_strerror text>.` (no family, no `gai error` code), and throws `The client socket has failed to
connect to any network address on (H, P).` followed by that warning; its TCPStore before socket.cpp (c10d Utils.cpp,
tcputil::connect) raises `ValueError: host not found: <gai_strerror text>` and names no host. The field logs of the
latter are in test_field_logs_21.py.
"""

from __future__ import annotations

from provisioner.explain import explain
from provisioner.explain.model import Cause

_OLD_WARNING = ("[W socket.cpp:558] [c10d] The network addresses of (master1, 29500) cannot be retrieved Name or "
                "service not known.\n")
_OLD_THROWN = ("RuntimeError: The client socket has failed to connect to any network address on (master1, 29500). "
               "The network addresses of (master1, 29500) cannot be retrieved Temporary failure in name resolution.\n")
_HOST_NOT_FOUND = "ValueError: host not found: Name or service not known\n"
_REFUSED = ("[E socket.cpp:1019] [c10d] The client socket has failed to connect to [10.1.2.3]:29500 (errno: 111 - "
            "Connection refused).\n")
_TIMED_OUT = ("[E socket.cpp:860] [c10d] The client socket has timed out after 1800s while trying to connect to "
              "(master1, 29500).\n")


def _causes(text: str) -> list[Cause]:
    causes = explain([("job.log", text)]).causes
    assert causes, text
    return causes


def test_the_first_socket_wording_names_the_store_it_could_not_look_up() -> None:
    for text, why in ((_OLD_WARNING, "Name or service not known"),
                      (_OLD_THROWN, "Temporary failure in name resolution"),
                      (_OLD_WARNING + _OLD_THROWN, "Name or service not known")):
        top = _causes(text)[0]
        assert top.id == "peer-unreachable", top.id
        assert top.title == "a host cannot resolve the rendezvous store's name master1", top.title
        assert f"master1 did not resolve to any address ({why}" in top.detail, top.detail
        assert top.addresses == ["master1"] and "getent ahosts" in top.fix


def test_the_first_socket_wording_does_not_claim_a_retry() -> None:
    detail = _causes(_OLD_WARNING)[0].detail
    assert "does not retry the lookup" in detail and "until its connect timeout" not in detail, detail
    current = _OLD_WARNING.replace("retrieved Name or service not known", "retrieved (gai error: -2 - Name or "
                                   "service not known)")
    assert "until its connect timeout" in _causes(current)[0].detail


def test_the_first_socket_wording_reads_as_the_current_one_beside_a_failed_connection() -> None:
    # The store named and timed out: the lookup is why. Another peer refused (at another port: an address tried at
    # the looked-up port after the warning is one the name resolved to): the lookup is of another name.
    top = _causes(_OLD_WARNING + _TIMED_OUT)[0]
    assert "cannot resolve the rendezvous store's name master1" in top.title, top.title
    top = _causes(_OLD_WARNING + _REFUSED.replace(":29500", ":41234"))[0]
    assert "resolve" not in top.title and top.addresses == ["10.1.2.3"], top.title
    assert "The lookup of master1 failed too (Name or service not known)" in top.detail, top.detail


def test_host_not_found_names_no_host_and_says_whose_lookup_it_was() -> None:
    top = _causes(_HOST_NOT_FOUND)[0]
    assert top.id == "name-unresolved" and "does not name it" in top.title, top.title
    assert "rendezvous store" in top.title and "TCPStore" in top.detail and not top.addresses, top.detail
    assert "(Name or service not known)" in top.detail and "MASTER_ADDR" in top.settings
    assert top.evidence[0].text.startswith("ValueError: host not found")


def test_host_not_found_beside_a_failed_connection_calls_no_peer_unresolved() -> None:
    for failed, peer in ((_REFUSED, "10.1.2.3"), (_TIMED_OUT, "master1")):
        top = _causes(_HOST_NOT_FOUND + failed)[0]
        assert top.id == "peer-unreachable" and "resolve" not in top.title, top.title
        assert f"{peer} did not resolve" not in top.detail and top.addresses == [peer], top.detail
        assert "A host name lookup failed too (Name or service not known)" in top.detail, top.detail


def test_host_not_found_is_the_store_lookup_before_a_bare_gaierror() -> None:
    gaierror = "socket.gaierror: [Errno -3] Temporary failure in name resolution\n"
    causes = _causes(gaierror + _HOST_NOT_FOUND)
    assert causes[0].id == "name-unresolved" and "rendezvous store" in causes[0].title, causes[0].title
    assert _causes(gaierror)[0].title == "a host name did not resolve (the log does not name the host)"


# socket.cpp's first form logs its summary alone (`logError`) and throws it followed by each address's error
# (`The client socket has failed to connect to A:P (errno: N - why).`); the current form says `... of (H, P)`.
_OLD_SUMMARY = ("[E socket.cpp:566] [c10d] The client socket has failed to connect to any network address on (master1, "
                "29500).\n")


def test_the_first_socket_wording_of_a_failed_connection_is_one() -> None:
    for text in (_OLD_SUMMARY, _OLD_SUMMARY.replace("address on (", "address of (")):
        top = _causes(text)[0]
        assert top.id == "peer-unreachable" and top.addresses == ["master1"], (top.id, top.addresses)
        assert top.title == "a host cannot reach the rendezvous store (MASTER_ADDR / --rdzv_endpoint)", top.title
        assert "resolve" not in top.detail, top.detail


def test_the_first_socket_wording_thrown_says_why_each_address_failed() -> None:
    thrown = ("RuntimeError: The client socket has failed to connect to any network address on (master1, 29500). "
              "The client socket has failed to connect to 10.1.2.3:29500 (errno: 113 - No route to host).\n")
    top = _causes(thrown)[0]
    assert top.id == "peer-unreachable" and "master1" in top.addresses, top.addresses
    assert "(No route to host)" in top.detail and "resolve" not in top.title, top.detail


# The store's host named before connecting: torchelastic 0.1's etcd rendezvous (`Rank N will conenct to TCPStore
# server at H:P`, sic; elastic#31 is a field log of it in test_field_logs_21.py) and torch's elastic agent
# (torch/distributed/elastic/utils/distributed.py: `Creating c10d store on H:P`, then `Successfully created c10d
# store`).
_CREATING = ("I0101 00:00:00.000000 140 torch/distributed/elastic/utils/distributed.py:56] Creating c10d store on "
             "master1:29500\n")


def test_host_not_found_names_the_store_the_launcher_named_before() -> None:
    for said in (_CREATING, "INFO 2020-01-17 00:55:01,702 Rank 1 will conenct to TCPStore server at master1:29500\n",
                 "INFO 2020-01-17 00:55:01,702 Setting up TCPStore server on master1:29500\n"):
        top = _causes(said + _HOST_NOT_FOUND)[0]
        assert top.id == "peer-unreachable", (said, top.id)
        assert top.title == "a host cannot resolve the rendezvous store's name master1", top.title
        assert "master1 did not resolve to any address (Name or service not known)" in top.detail, top.detail
        assert top.addresses == ["master1"] and [e.line for e in top.evidence] == [2, 1]


def test_a_store_created_an_address_or_another_host_names_no_store() -> None:
    created = _CREATING + "I0101 00:00:01.000000 140 distributed.py:71] Successfully created c10d store\n"
    address = _CREATING.replace("master1", "10.1.2.3")
    said = "node2: INFO 2020-01-17 00:55:01,702 Rank 1 will conenct to TCPStore server at master1:29500\n"
    other = said + "node1: " + _HOST_NOT_FOUND
    for text in (created + _HOST_NOT_FOUND, address + _HOST_NOT_FOUND, other, _HOST_NOT_FOUND + _CREATING):
        top = _causes(text)[0]
        assert top.id == "name-unresolved" and "does not name it" in top.title, (text, top.title)
    top = _causes(said + "node2: " + _HOST_NOT_FOUND)[0]
    assert top.title.endswith("name master1") and top.hosts == ["node2"], (top.title, top.hosts)


def test_the_store_named_before_host_not_found_beside_another_failure() -> None:
    top = _causes(_CREATING + _HOST_NOT_FOUND + _REFUSED)[0]
    assert "resolve" not in top.title and top.addresses == ["10.1.2.3"], top.title
    assert "The lookup of master1 failed too (Name or service not known)" in top.detail, top.detail
    assert "Creating c10d store on master1:29500" in [e.text for e in top.evidence][-1]
