"""`explain` on a job where one host connects through a slower transport than the others (TCP among RDMA
hosts, no GPUDirect, shared memory instead of P2P, another network plugin). The logs are built from NCCL's own
format strings (transport/net.cc `Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s` with `/GDRDMA`
and `/Shared`, transport/p2p.cc `via P2P/%s%s%s`, transport/shm.cc `via SHM/%s/%s`, init.cc `Using network
%s`; 2.5's `Ring %02d : %d -> %d [send] via NET/%s/%d%s`); the real sample logs of uniform multi-node jobs
(tests/samples/logs/) must stay silent."""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from tests.unit.explain._field import LOGS, words

HOSTS = ("gpu-a", "gpu-b", "gpu-c")


def _job(net: dict[str, str], local: dict[str, str] | None = None, network: dict[str, str] | None = None,
         hosts: tuple[str, ...] = HOSTS) -> str:
    """Two ranks per host in one ring: each host's two GPUs through `local`, then the host's last rank to the
    next host's first through `net` (as each side prints its own half)."""
    lines = []
    count = len(hosts)
    for i, host in enumerate(hosts):
        first, second = 2 * i, 2 * i + 1
        nxt, prev = (2 * (i + 1)) % (2 * count), (2 * i - 1) % (2 * count)
        lines.append(f"{host}:100:100 [0] NCCL INFO Using network {(network or {}).get(host, 'IB')}")
        via = (local or {}).get(host, "P2P/CUMEM/read")
        for channel in range(2):
            lines.append(f"{host}:100:200 [0] NCCL INFO Channel {channel:02d}/0 : {first}[0] -> {second}[1] via {via}")
            lines.append(f"{host}:101:201 [1] NCCL INFO Channel {channel:02d}/0 : {second}[1] -> {nxt}[0] [send] "
                         f"via {net[host]}")
            lines.append(f"{host}:100:200 [0] NCCL INFO Channel {channel:02d}/0 : {prev}[1] -> {first}[0] [receive] "
                         f"via {net[host]}")
    return "\n".join(lines) + "\n"


def _causes(text: str) -> dict[str, list[str]]:
    return {c.id: c.hosts for c in explain([("job.log", text)]).causes}


def _cause(text: str, want: str):  # type: ignore[no-untyped-def]
    return next(c for c in explain([("job.log", text)]).causes if c.id == want)


GOOD = {h: "NET/IB/0/GDRDMA" for h in HOSTS}


def test_one_host_on_sockets_is_named_and_the_check_is_its_hca() -> None:
    text = _job({**GOOD, "gpu-c": "NET/Socket/0"}, network={"gpu-c": "Socket"})
    cause = _cause(text, "host-slower-transport")
    assert cause.hosts == ["gpu-c"] and "IB" in cause.title
    assert "ibv_devinfo" in words(cause) and "NCCL_IB_HCA" in words(cause)
    assert any("NET/Socket/0" in e.text for e in cause.evidence)
    assert any("GDRDMA" in e.text for e in cause.evidence), "the transport the others use is shown"
    # The per-log "sockets between nodes" would blame every host of the log.
    assert "ib-not-used" not in _causes(text)


def test_one_host_without_gdrdma_is_named_and_the_check_is_peermem() -> None:
    cause = _cause(_job({**GOOD, "gpu-b": "NET/IB/0"}), "host-without-gpudirect")
    assert cause.hosts == ["gpu-b"]
    assert "lsmod | grep nvidia_peermem" in cause.fix
    assert cause.evidence[0].text.endswith("via NET/IB/0")


def test_one_host_on_shared_memory_is_named_and_the_check_is_p2p() -> None:
    cause = _cause(_job(GOOD, local={"gpu-a": "SHM/direct/direct"}), "host-without-p2p")
    assert cause.hosts == ["gpu-a"]
    assert "NCCL_P2P_DISABLE" in cause.fix and "ACS" in cause.fix


def test_one_host_with_another_network_plugin() -> None:
    net = {**GOOD, "gpu-b": "NET/IBext_v8/0/GDRDMA"}
    cause = _cause(_job(net, network={"gpu-b": "IBext_v8"}), "host-network-differs")
    assert cause.hosts == ["gpu-b"] and "NET/Plugin" in cause.fix


def test_shared_gdrdma_connections_count_as_gdrdma() -> None:
    assert not _causes(_job({**GOOD, "gpu-b": "NET/IB/1/GDRDMA/Shared"}))


def test_a_plugin_message_on_one_host_is_no_network() -> None:
    text = ("gpu-a:100:100 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.\n"
            + _job(GOOD))
    assert not _causes(text)


def test_nccl_2_5_ring_lines() -> None:
    text = ("gpu-a:1:2 [0] NCCL INFO Ring 00 : 1 -> 2 [send] via NET/IB/0/GDRDMA\n"
            "gpu-b:3:4 [0] NCCL INFO Ring 00 : 1 -> 2 [receive] via NET/IB/0\n")
    assert _causes(text) == {"host-without-gpudirect": ["gpu-b"]}


@pytest.mark.parametrize("text", [
    _job(GOOD),  # every host alike: NVLink/P2P within a node against the network between nodes is the design
    _job({h: "NET/IB/0" for h in HOSTS}),  # no host uses GPUDirect: one rule for the whole job says it
    _job({"gpu-a": "NET/Socket/0"}, local={"gpu-a": "SHM/direct/direct"}, hosts=("gpu-a",)),  # one host
    # one host's GPUs on P2P, another's on both (a topology both share): no host lacks P2P
    _job(GOOD, local={"gpu-a": "P2P/IPC/read"}),
])
def test_silent_when_the_hosts_agree(text: str) -> None:
    assert not {k for k in _causes(text) if k.startswith("host-")}


@pytest.mark.parametrize("name", [
    "nccl-2.9-efa-p4d-two-nodes-mpi-tags.txt", "nccl-socket-family-unsupported-1.txt",
    "nccl-2.11-socket-two-containers-aws-batch.txt",
])
def test_real_uniform_multi_node_logs_stay_silent(name: str) -> None:
    causes = explain([(name, (LOGS / name).read_text())]).causes
    assert not [c.id for c in causes if c.id.startswith("host-")]


def test_two_hosts_on_two_networks_name_both_and_neither_as_the_odd_one() -> None:
    two = ("gpu-a", "gpu-b")
    net = {"gpu-a": "NET/IB/0/GDRDMA", "gpu-b": "NET/IBext_v8/0/GDRDMA"}
    cause = _cause(_job(net, network={"gpu-b": "IBext_v8"}, hosts=two), "host-network-differs")
    assert cause.hosts == ["gpu-a", "gpu-b"] and "rest of the job" not in cause.title, cause.title
