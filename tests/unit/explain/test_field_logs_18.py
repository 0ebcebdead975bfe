"""`explain` on field logs of gloo groups that bound to loopback because the hostname resolved to none of the
host's addresses (tests/samples/logs/, sources in tests/samples/INDEX.md)."""

from __future__ import annotations

from provisioner.explain import explain
from tests.unit.explain._field import table

CASES: dict[str, tuple[str, str, str]] = {
    # vllm#7074: a Ray worker of a two-node vLLM started without GLOO_SOCKET_IFNAME (the head had it). Before:
    # `a peer process exited`, though no peer had; torch's own warning names the fallback to loopback.
    "vllm-ray-gloo-loopback-fallback-1.txt": (
        "gloo-loopback-fallback", "Unable to resolve hostname to a (local) address", "GLOO_SOCKET_IFNAME"),
}
HOSTS: dict[str, list[str]] = {"vllm-ray-gloo-loopback-fallback-1.txt": ["10.41.0.8"]}

test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, test_the_hosts_each_names = table(
    CASES, HOSTS)

_WARNING = ("[rank0]:[W427 03:10:15.652192062 ProcessGroupGloo.cpp:715] Warning: Unable to resolve hostname to a "
            "(local) address. Using the loopback address as fallback. Manually set the network interface to bind "
            "to with GLOO_SOCKET_IFNAME. (function operator())")


def _ids(text: str) -> list[str]:
    return [c.id for c in explain([("job.log", text)]).causes]


def test_the_warning_alone_on_one_node_is_no_failure() -> None:
    """On one host gloo over loopback works: single-node vLLM runs print the warning routinely."""
    assert _ids(_WARNING + "\nINFO 04-27 03:10:45 rank 1 in world size 2 is assigned as DP rank 1\n") == []


def test_the_newer_connect_error_names_the_loopback_peer() -> None:
    """torch 2.x's gloo reports the address it dialled: `remote=[127.0.0.1]:PORT`."""
    text = (_WARNING + "\nRuntimeError: Gloo connectFullMesh failed with [/pytorch/third_party/gloo/gloo/transport/"
            "tcp/pair.cc:152] timed out connecting: SO_ERROR: Connection refused, remote=[127.0.0.1]:14215\n")
    assert _ids(text)[0] == "gloo-loopback-fallback"


def test_the_warning_on_several_nodes_without_a_failed_connect_is_a_low_cause() -> None:
    text = "".join(f"(RayWorkerWrapper pid=19{n}, ip=10.41.0.{n}) {_WARNING}\n" for n in (7, 8))
    cause = explain([("job.log", text)]).causes[0]
    assert cause.id == "gloo-loopback-fallback" and cause.score < 70, (cause.id, cause.score)
    assert "no connect failing yet" in cause.detail and cause.hosts == ["10.41.0.7", "10.41.0.8"]
