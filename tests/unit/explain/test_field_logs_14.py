"""`explain` on what NCCL says when a path it was asked for does not start and it falls back without stopping the
job, from the field (tests/samples/logs/, sources in tests/samples/INDEX.md): SHARP in-network reduction (CollNet)
that the fabric does not grant, and plugin lines that are only NCCL looking for a plugin nobody asked for. Single
lines built from NCCL's source wording (no field log found) test the net plugin loader across releases."""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from tests.unit.explain._field import causes_of, table, words

# file -> (the top cause's id, text its first evidence line holds, text its title/detail/fix hold)
CASES: dict[str, tuple[str, str, str]] = {
    # A fabric without SHARP: the plugin cannot create the job, NCCL says it uses point-to-point.
    "nccl-collnet-sharp-job-1.txt": (
        "collnet-unavailable", "SHARP coll init error: Cannot create SHARP job(-11)", "sharp_am"),
    # SHARP is there but the streaming aggregation tree is not granted.
    "nccl-collnet-sharp-tree-lock-1.txt": (
        "collnet-unavailable", "SHARP group create: Streaming Tree lock failed (-18)", "SHARP_COLL_ENABLE_SAT=0"),
}
# file -> the hosts the top cause names
HOSTS: dict[str, list[str]] = {
    "nccl-collnet-sharp-job-1.txt": ["ib-vm-52", "ib-vm-41"],
    "nccl-collnet-sharp-tree-lock-1.txt": ["C25L19", "C25L18"],
}

test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, test_the_hosts_each_names = table(
    CASES, HOSTS)


def test_a_plugin_without_a_usable_api_that_nobody_asked_for_is_no_cause() -> None:
    # NCCL 2.20 found a libnccl-net.so it cannot use and went on with its own IB: the maintainers call it harmless.
    assert causes_of("nccl-net-plugin-no-api-harmless-1.txt") == []


_H = "gpu-a:1234:1300 [0] NCCL INFO "


@pytest.mark.parametrize("text", [
    # 2.12 to 2.18
    _H + "NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open shared object file: "
         "No such file or directory\n" + _H + "NET/Plugin : No plugin found, using internal implementation",
    # 2.19
    _H + "NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or directory No plugin "
         "found (libnccl-net.so), using internal implementation",
    # 2.23 to 2.25, and 2.30 (no fallback text)
    _H + "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
    _H + "NET/Plugin: Could not find: libnccl-net.so",
    # trying an older API version first is no failure
    _H + "NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.",
])
def test_no_plugin_installed_is_normal_in_every_release_wording(text: str) -> None:
    assert explain([("a.log", text + "\n")]).causes == []


@pytest.mark.parametrize(("text", "holds"), [
    # 2.12 to 2.25: the name NCCL_NET_PLUGIN gave, not found
    (_H + "NET/Plugin: Plugin name set by env to libnccl-net-ofi.so\n"
     + _H + "NET/Plugin: Could not find: libnccl-net-ofi.so. Using internal network plugin.",
     "NCCL_NET_PLUGIN=libnccl-net-ofi.so"),
    # 2.26 on: the environment line, and a name NCCL expands (`ofi` -> libnccl-net-ofi.so)
    (_H + "NCCL_NET_PLUGIN set by environment to ofi\n" + _H + "NET/Plugin: Could not find: ofi libnccl-net-ofi.so",
     "libnccl-net-foo.so"),
    # found, but a library it needs is missing (2.23 to 2.29 print dlopen's words alone)
    (_H + "NET/Plugin: libfabric.so.1: cannot open shared object file: No such file or directory", "ldd"),
    # found, but no API version this NCCL reads (to 2.27, then 2.28 on)
    (_H + "NCCL_NET_PLUGIN set by environment to aws-ofi\n"
     + _H + "NET/Plugin: Failed to find ncclNetPlugin symbol (>= v5). ncclNetPlugin symbols v4 and lower are not "
            "supported.", "built for this NCCL release"),
    (_H + "NCCL_NET_PLUGIN set by environment to gcp\n"
     + _H + "External network plugin /usr/local/lib/libnccl-net-gcp.so is unsupported", "TCP sockets"),
])
def test_a_plugin_asked_for_that_did_not_load_is_named_with_its_fix(text: str, holds: str) -> None:
    top = explain([("a.log", text + "\n")]).causes[0]
    assert top.id == "net-plugin-not-loaded" and top.hosts == ["gpu-a"], (top.id, top.hosts)
    assert holds in words(top), words(top)


def test_a_requested_plugin_that_failed_is_the_reason_sockets_were_used() -> None:
    text = "".join(f"{h}:1:1 [0] NCCL INFO {m}\n" for h, m in [
        ("gpu-a", "NCCL_NET_PLUGIN set by environment to ofi"),
        ("gpu-a", "NET/Plugin: Could not find: ofi libnccl-net-ofi.so"),
        ("gpu-a", "Using network Socket"), ("gpu-b", "Using network Socket"),
        ("gpu-a", "Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0")])
    ids = [c.id for c in explain([("a.log", text)]).causes]
    assert ids[:2] == ["net-plugin-not-loaded", "ib-not-used"], ids


def test_no_network_transport_at_all_stops_the_job() -> None:
    line = "gpu-a:1:1 [0] plugin/net.cc:349 NCCL WARN Failed to initialize any NET plugin\n"
    top = explain([("a.log", line)]).causes[0]
    assert top.id == "net-plugin-none" and "NCCL_NET" in words(top), top.id
