"""The interface a failed connection blames is one on the hosts in the failure, and the note names its host.

Wordings (NCCL): `Bootstrap : Using lo:127.0.0.1<0>` and `NET/Socket : Using [0]eth0:10.0.0.8<0>` (bootstrap.cc
and transport/net_socket.cc, INFO), `misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.9<43127>
failed : Connection refused` (misc/socket.cc, 2.19). Lines built by hand in a pdsh collection (`host: `).
"""

from __future__ import annotations

from provisioner.explain import explain


def _nccl(host: str, message: str, warn: str = "") -> str:
    level = f"misc/socket.cc:484 NCCL WARN {message}" if warn else f"NCCL INFO {message}"
    return f"{host}: {host}:2291:2456 [0] {level}\n"


def _peer_unreachable(text: str) -> tuple[str, list[str]]:
    cause = next(c for c in explain([("job.log", text)]).causes if c.id == "peer-unreachable")
    return cause.detail, cause.hosts


def test_the_healthy_hosts_lo_is_not_blamed() -> None:
    # gpu01 cannot reach 10.0.0.9 (no host of this log); gpu02 lists `lo` beside its data interface.
    text = (_nccl("gpu01", "Bootstrap : Using eth0:10.0.0.7<0>")
            + _nccl("gpu02", "NET/Socket : Using [0]lo:127.0.0.1<0> [1]eth0:10.0.0.8<0>")
            + _nccl("gpu01", "socketStartConnect: Connect to 10.0.0.9<43127> failed : Connection refused", "warn"))
    detail, hosts = _peer_unreachable(text)
    assert "looks wrong" not in detail and "lo " not in detail
    assert hosts == ["gpu01"]


def test_the_failing_hosts_own_lo_is_named_with_its_host() -> None:
    text = (_nccl("gpu01", "Bootstrap : Using lo:127.0.0.1<0>")
            + _nccl("gpu02", "Bootstrap : Using eth0:10.0.0.8<0>")
            + _nccl("gpu01", "socketStartConnect: Connect to 10.0.0.8<43127> failed : Connection refused", "warn"))
    detail, hosts = _peer_unreachable(text)
    assert "the interface chosen looks wrong: lo on gpu01 (127.0.0.1, loopback interface)" in detail
    assert hosts == ["gpu01"]


def test_the_unreachable_peers_own_interface_is_named_with_its_host() -> None:
    # gpu02 published an address on docker0: that is the address gpu01 could not reach.
    text = (_nccl("gpu01", "Bootstrap : Using eth0:10.0.0.7<0>")
            + _nccl("gpu02", "Bootstrap : Using docker0:172.17.0.1<0>")
            + _nccl("gpu03", "Bootstrap : Using docker0:172.17.0.1<0>")
            + _nccl("gpu01", "socketStartConnect: Connect to 172.17.0.1<43127> failed : No route to host", "warn"))
    detail, _ = _peer_unreachable(text)
    assert "docker0 on gpu02 (172.17.0.1" in detail


def _suspect_interface(text: str) -> tuple[str, list[str]]:
    cause = next(c for c in explain([("job.log", text)]).causes if c.id == "suspect-interface")
    return cause.detail, cause.hosts


def test_with_no_failed_connection_each_suspect_interface_is_named_with_its_host() -> None:
    # Nothing failed: the note names every suspect interface, each with the host it is on.
    text = (_nccl("gpu01", "Bootstrap : Using lo:127.0.0.1<0>")
            + _nccl("gpu02", "NET/Socket : Using [0]docker0:172.17.0.1<0> [1]eth0:10.0.0.8<0>")
            + _nccl("gpu03", "Bootstrap : Using eth0:10.0.0.9<0>"))
    detail, hosts = _suspect_interface(text)
    assert detail.startswith("lo on gpu01 (127.0.0.1, loopback interface), "
                             "docker0 on gpu02 (172.17.0.1, container or virtual bridge interface): ")
    assert hosts == ["gpu01", "gpu02"]


def test_the_same_interface_on_many_hosts_is_named_once_per_host_and_capped() -> None:
    text = "".join(_nccl(f"gpu{n:02}", "Bootstrap : Using lo:127.0.0.1<0>") for n in range(1, 9))
    detail, hosts = _suspect_interface(text)
    assert "lo on gpu01 (127.0.0.1, loopback interface), lo on gpu02 " in detail
    assert "lo on gpu06 (127.0.0.1, loopback interface) and 2 more: " in detail and "gpu07" not in detail
    assert len(hosts) == 8
