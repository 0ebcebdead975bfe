"""`explain` on failed host name lookups: a name is called unresolved only where the log ties it to the lookup.

Wordings: Python's `socket.gaierror: [Errno -3] Temporary failure in name resolution` with the frames above it
(caicloud/ciao#85) and `socket.gaierror: [Errno 11001] getaddrinfo failed` (Windows; JuliaWolleb/
Diffusion-based-Segmentation#55); torch c10d's `The client socket has failed to connect to [H]:P (errno: N - ...)`
(pytorch/pytorch#85300, socket.cpp) and `The network addresses of (H, P) cannot be retrieved (gai error: N - ...)`
(socket.cpp's tryConnect with no family named); NCCL 2.19's `socketStartConnect: Connect to X<P> failed : ...`.
"""

from __future__ import annotations

from provisioner.explain import explain
from provisioner.explain.model import Cause

_GAIERROR = ('Traceback (most recent call last):\n'
             '  File "/opt/conda/lib/python3.10/socket.py", line 955, in getaddrinfo\n'
             '    for res in _socket.getaddrinfo(host, port, family, type, proto, flags):\n'
             'socket.gaierror: [Errno -3] Temporary failure in name resolution\n')
_REFUSED_ADDRESS = ("[E socket.cpp:1019] [c10d] The client socket has failed to connect to [10.1.2.3]:29500 (errno: "
                    "111 - Connection refused).\n")
_REFUSED_NAME = _REFUSED_ADDRESS.replace("10.1.2.3", "master1")
_NCCL_REFUSED = ("node1:100:100 [0] NCCL WARN socketStartConnect: Connect to 10.1.2.3<43211> failed : Connection "
                 "refused\n")
_TORCH_LOOKUP = ("[W socket.cpp:601] [c10d] The network addresses of (head-node, 29500) cannot be retrieved (gai "
                 "error: -2 - Name or service not known).\n")


def _top(text: str) -> Cause:
    causes = explain([("job.log", text)]).causes
    assert causes, text
    return causes[0]


def test_a_gaierror_alone_says_the_name_is_not_in_the_log() -> None:
    for text in (_GAIERROR, "socket.gaierror: [Errno 11001] getaddrinfo failed\n"):
        top = _top(text)
        assert top.id == "name-unresolved" and "does not name the host" in top.title, top.title
        assert "does not say which name" in top.detail and not top.addresses, top.detail
        assert "getent ahosts" in top.fix and top.evidence[0].text.startswith("socket.gaierror")


def test_an_address_refused_beside_a_gaierror_is_not_called_unresolved() -> None:
    for refused in (_REFUSED_ADDRESS, _NCCL_REFUSED):
        top = _top(_GAIERROR + refused)
        assert top.id == "peer-unreachable" and "resolve" not in top.title, top.title
        assert "10.1.2.3 did not resolve" not in top.detail and top.addresses == ["10.1.2.3"], top.detail
        assert "does not name the host looked up" in top.detail, top.detail


def test_a_named_peer_refused_beside_a_gaierror_resolved() -> None:
    top = _top(_GAIERROR + _REFUSED_NAME)
    assert "resolve" not in top.title and "master1 did not resolve" not in top.detail, top.title
    assert "not master1: a connection to it was tried, so it resolved" in top.detail, top.detail


def test_a_named_peer_that_timed_out_beside_a_gaierror_is_not_guessed() -> None:
    # torch warns with the name when its own lookup fails: a bare gaierror is some other lookup.
    timed_out = ("[E socket.cpp:860] [c10d] The client socket has timed out after 1800s while trying to connect to "
                 "(master1, 29500).\n")
    top = _top(_GAIERROR + timed_out)
    assert "resolve" not in top.title and "master1 did not resolve" not in top.detail, top.title
    assert "does not name the host looked up" in top.detail, top.detail


def test_a_lookup_naming_a_host_does_not_name_another_peer_refused() -> None:
    for refused, peer in ((_REFUSED_NAME, "master1"), (_NCCL_REFUSED, "10.1.2.3")):
        top = _top(_TORCH_LOOKUP + refused)
        assert "resolve" not in top.title and f"{peer} did not resolve" not in top.detail, top.title
        assert "The lookup of head-node failed too (Name or service not known)" in top.detail, top.detail
        assert top.addresses == [peer] and "getent ahosts" in top.fix


def test_a_peer_whose_own_lookup_failed_is_still_named() -> None:
    timed_out = ("[E socket.cpp:860] [c10d] The client socket has timed out after 1800s while trying to connect to "
                 "(head-node, 29500).\n")
    top = _top(_TORCH_LOOKUP + timed_out)
    assert "cannot resolve the rendezvous store's name head-node" in top.title, top.title
    assert "head-node did not resolve to any address (Name or service not known)" in top.detail


def test_the_reason_torch_gives_for_each_address_is_kept() -> None:
    top = _top(_REFUSED_ADDRESS)
    assert "failed (Connection refused)" in top.detail and "timed out" not in top.detail, top.detail


# torch 1.10's socket.cpp (its first form) looks the name up for IPv6, then IPv4, and warns for each failed lookup
# without naming the family: `The network addresses of (H, P) cannot be retrieved <gai text>.`; each address it
# then tries that fails is `The client socket has failed to connect to A:P (errno: N - why).` or `... has timed out
# while trying to connect to A:P.`, and its summary `... failed to connect to any network address on (H, P).` is
# logged alone and thrown followed by those errors. Later releases print `[H]:P` for the address tried.
_OLD_LOOKUP = ("[W socket.cpp:558] [c10d] The network addresses of (master1, 29500) cannot be retrieved Name or "
               "service not known.\n")
_OLD_TIMED_OUT = ("[W socket.cpp:558] [c10d] The client socket has timed out while trying to connect to "
                  "10.1.2.3:29500.\n")
_OLD_SUMMARY = ("[E socket.cpp:566] [c10d] The client socket has failed to connect to any network address on (master1, "
                "29500).\n")
_TIMED_OUT_NAME = ("[E socket.cpp:860] [c10d] The client socket has timed out after 1800s while trying to connect to "
                   "(master1, 29500).\n")


def _not_unresolved(top: Cause) -> None:
    assert top.id == "peer-unreachable" and "resolve" not in top.title, top.title
    assert "master1 did not resolve" not in top.detail and "lookup of master1" not in top.detail, top.detail


def test_a_name_looked_up_then_connected_to_resolved() -> None:
    # The IPv6 lookup failed, the IPv4 one found 10.1.2.3 and the connection to it timed out.
    top = _top(_OLD_LOOKUP + _OLD_TIMED_OUT + _OLD_SUMMARY)
    _not_unresolved(top)
    assert top.title == "a host cannot reach the rendezvous store (MASTER_ADDR / --rdzv_endpoint)", top.title
    thrown = ("RuntimeError: The client socket has failed to connect to any network address on (master1, 29500). The "
              "network addresses of (master1, 29500) cannot be retrieved Name or service not known. The client socket "
              "has failed to connect to 10.1.2.3:29500 (errno: 110 - Connection timed out).\n")
    top = _top(_OLD_LOOKUP + thrown)
    _not_unresolved(top)
    assert "(Connection timed out)" in top.detail, top.detail
    # Later releases: the name tried is printed in brackets, and a timeout is not a refusal.
    current = ("[W socket.cpp:601] [c10d] The IPv6 network addresses of (master1, 29500) cannot be retrieved (gai "
               "error: -2 - Name or service not known).\n[W socket.cpp:1019] [c10d] The client socket has failed to "
               "connect to [master1]:29500 (errno: 110 - Connection timed out).\n")
    _not_unresolved(_top(current + _TIMED_OUT_NAME))


def test_a_lookup_not_followed_by_a_connection_to_that_name_still_counts() -> None:
    # The connection came first, or at another port, or from another host: the lookup that failed is still the cause.
    for text in (_OLD_TIMED_OUT + _OLD_LOOKUP + _TIMED_OUT_NAME,
                 _OLD_LOOKUP + _OLD_TIMED_OUT.replace(":29500", ":41234") + _TIMED_OUT_NAME,
                 "node1: " + _OLD_LOOKUP + "node2: " + _OLD_TIMED_OUT + "node1: " + _TIMED_OUT_NAME):
        top = _top(text)
        assert "cannot resolve the rendezvous store's name master1" in top.title, (text, top.title)


def test_a_lookup_followed_by_a_connection_alone_is_no_cause() -> None:
    connected = "[I socket.cpp:700] [c10d] The client socket has connected to [master1]:29500 on [node1]:41000.\n"
    assert "peer-unreachable" not in [c.id for c in explain([("job.log", _OLD_LOOKUP + connected)]).causes]
    assert _top(_OLD_LOOKUP).title == "a host cannot resolve the rendezvous store's name master1"
