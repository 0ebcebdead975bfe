"""The registry, and what holds across kinds: shared probes, read-only commands, failures kept local."""

from __future__ import annotations

import re

from provisioner.resources import REGISTRY
from provisioner.resources.base import HostContext, Probe, ProbeResult, Results

from ._recorded import IP_LINK, LSMOD, NETWORKD_DATA, listing, sample

CTX = HostContext("gpu01", "/var/lib/fabnet-lab/sys")

# One play's worth of resources, as the lab's demo playbook would declare them.
PLAY = [
    ("interface", {"name": "eth1", "mtu": 9000}),
    ("interface", {"rdma_device": "mlx5_0", "mtu": 9000}),
    ("mtu_uniform", {"interface": "eth1"}),
    ("service", {"name": "openibd"}),
    ("kernel_module", {"name": "nvidia_peermem"}),
    ("kernel_module", {"name": "mlx5_ib"}),
    ("sysctl", {"name": "net.ipv4.conf.all.arp_ignore", "value": 1}),
    ("sysctl", {"name": "net.ipv4.conf.all.arp_announce", "value": 2}),
    ("ofed", {"version": ">=23.10"}),
    ("nccl", {"version": ">=2.19"}),
    ("roce_qos", {"interface": "eth1", "trust": "dscp", "pfc": [3], "ecn": [3], "cnp_dscp": 48,
                  "traffic_class": 106, "roce_tos": 106, "port_state": "active", "active_mtu": 4096,
                  "gid_index": 3, "tsa": ["ets"] * 8, "tcbw": [10] * 7 + [30], "dscp2prio": {26: 3}}),
    ("file", {"path": "/etc/nccl.conf", "content": "NCCL_IB_GID_INDEX=3\n"}),
]


def _specs() -> list[tuple[str, object]]:
    return [(kind, REGISTRY[kind].spec.model_validate(spec)) for kind, spec in PLAY]


def _all_probes() -> list[Probe]:
    return [probe for kind, spec in _specs() for probe in REGISTRY[kind].probes(spec, CTX)]


def test_every_kind_is_registered() -> None:
    assert set(REGISTRY) == {"interface", "mtu_uniform", "service", "kernel_module", "sysctl", "ofed", "nccl",
                             "roce_qos", "file", "port_counters"}
    assert all(rtype.kind == kind == rtype.spec.kind for kind, rtype in REGISTRY.items())
    assert {kind for kind, rtype in REGISTRY.items() if rtype.fleet_checks is not None} == {"mtu_uniform"}


def test_identical_commands_are_one_probe() -> None:
    probes = _all_probes()
    keys = [p.key for p in probes]
    ip = [p for p in probes if p.command == "ip -j -d link show"]
    assert len(ip) == 3  # two interfaces and mtu_uniform ask ...
    assert len({p.key for p in ip}) == 1  # ... and it runs once
    assert sum(1 for p in probes if p.command == "lsmod") == 2
    assert len(set(keys)) < len(keys)


def test_probes_only_read() -> None:
    setters = ("modprobe", "sysctl -w", "ip link set", "systemctl start", "systemctl enable", " > ", ">>", "tee ",
               "rm ", "mv ", "chmod", "chown", "cma_roce_tos -t", "--trust", "--pfc", "--dscp2prio")
    for probe in _all_probes():
        for setter in setters:
            assert setter not in probe.command, (setter, probe.command)
        if "mlnx_qos" in probe.command:  # reading is `-i IF` alone; every other option sets something
            assert probe.command.endswith("mlnx_qos -i eth1; fi"), probe.command
        for dcb in re.findall(r"\bdcb [^&;}]*", probe.command):  # dcb only ever shows, one batch of shows
            call, _, rest = dcb.partition("\n")
            assert call == "dcb -N -b - 2>/dev/null <<'__fn_dcb'", dcb
            commands, end, _ = rest.partition("__fn_dcb\n")
            assert end and commands.splitlines(), dcb
            for command in commands.splitlines():
                assert re.fullmatch(r"(app|pfc|ets) show dev eth1( [a-z-]+)+", command), dcb


def test_a_failed_probe_errors_only_its_own_resource() -> None:
    specs = _specs()
    interface_spec = specs[0][1]
    roce_spec = specs[10][1]
    interface_probes = REGISTRY["interface"].probes(interface_spec, CTX)
    roce_probes = REGISTRY["roce_qos"].probes(roce_spec, CTX)
    by_key = {p.key: ProbeResult("", "mlnx_qos: command failed", 1) for p in roce_probes}
    by_key[interface_probes[0].key] = ProbeResult(IP_LINK, "", 0)
    by_key[interface_probes[1].key] = ProbeResult(
        listing({"/etc/systemd/network/10-data.network": NETWORKD_DATA}), "", 0)
    results = Results(by_key)
    assert {c.status for c in REGISTRY["roce_qos"].evaluate(roce_spec, results, CTX)} == {"error"}
    assert {c.status for c in REGISTRY["interface"].evaluate(interface_spec, results, CTX)} == {"ok"}


def test_no_results_at_all_gives_errors_not_exceptions() -> None:
    for kind, spec in _specs():
        checks = REGISTRY[kind].evaluate(spec, Results({}), CTX)
        assert checks and {c.status for c in checks} == {"error"}, kind
        assert all(c.message for c in checks), kind


def test_garbage_everywhere_gives_errors_or_drift_not_exceptions() -> None:
    for kind, spec in _specs():
        probes = REGISTRY[kind].probes(spec, CTX)
        for garbage in ("\x00\xff garbage\n", "", sample("nvidia-smi-topo-1.txt"), LSMOD):
            results = Results({p.key: ProbeResult(garbage, "", 0) for p in probes})
            checks = REGISTRY[kind].evaluate(spec, results, CTX)
            assert checks, kind
            assert all(c.status in ("ok", "drift", "error") for c in checks), kind
