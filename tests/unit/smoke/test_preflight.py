"""Pre-flight: parsing recorded `ip -j addr`, ping plans, and the verdicts that name hosts and values."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from provisioner.facts import batch
from provisioner.resources.base import ProbeResult
from provisioner.smoke import preflight
from provisioner.smoke.preflight import Ping
from tests.unit.smoke._helpers import HERE, facts, target

NAMES = ["gpu01", "gpu02", "gpu03", "gpu04"]


def test_parse_recorded_ip_addr() -> None:
    healthy = preflight.parse_addr((HERE / "ip-j-addr-healthy.json").read_text())
    assert healthy["eth1"].mtu == 9000 and healthy["eth1"].up
    assert healthy["eth1"].ipv4 == ("198.19.1.1",)
    assert healthy["lo"].up and healthy["eth0"].ipv4 == ("198.18.1.1",)
    down = preflight.parse_addr((HERE / "ip-j-addr-eth1-down.json").read_text())
    assert not down["eth1"].up and down["eth0"].up


def test_ping_plan_all_pairs_then_ring() -> None:
    small = preflight.ping_peers(NAMES)
    pairs = {(a, b) for a, peers in small.items() for b in peers}
    assert len(pairs) == 6 and all((b, a) not in pairs for a, b in pairs)
    big = [f"n{i:02d}" for i in range(12)]
    ring = preflight.ping_peers(big)
    assert all(len(peers) == 1 for peers in ring.values())
    assert ring["n11"] == ["n00"]


def test_probe_script_quotes_and_splits() -> None:
    t = target("gpu01", python="/opt/my venv/bin/python3; rm -rf /")
    found = preflight.probes(t, [("gpu02", "198.19.1.2")])
    assert "'/opt/my venv/bin/python3; rm -rf /'" in found["python"].command
    assert "ping -n -q -M do" in found["ping"].command and "198.19.1.2" in found["ping"].command
    nonce = batch.new_nonce()
    assert set(found) == {"addr", "ib", "gpus", "python", "ping"}
    script = preflight.build_script(found, nonce)
    assert all(f"__fn_probe {probe.key} " in script for probe in found.values())


@pytest.mark.skipif(shutil.which("ping") is None or not Path("/sys/class/net/lo/mtu").exists()
                    or os.geteuid() != 0, reason="needs ping, root and a loopback interface")
def test_the_loopbacks_mtu_above_an_ip_packet_is_pinged_at_the_largest_size() -> None:
    """The loopback's MTU is 65536, more than an IPv4 packet holds: its full-size ping is the largest there is
    (65507 bytes), which passes, instead of one ping refuses, which read as a path dropping large frames."""
    found = preflight.probes(target("node1", data_ifaces=("lo",)), [("node2", "127.0.0.1")], facts=False)
    run = subprocess.run(["sh", "-c", found["ping"].command], capture_output=True, text=True, timeout=30)
    pings = preflight.parse_pings(run.stdout)
    mtu = int(Path("/sys/class/net/lo/mtu").read_text())
    assert pings == [Ping("node2", True, True, min(mtu - 28, 65507), 0)], run.stdout + run.stderr


def test_parse_facts_from_probe_results() -> None:
    found = preflight.probes(target("gpu01"), [("gpu02", "198.19.1.2")])
    results = {
        found["addr"].key: ProbeResult((HERE / "ip-j-addr-healthy.json").read_text(), "", 0),
        found["ib"].key: ProbeResult("mlx5_0\nmlx5_1\n", "", 0),
        found["gpus"].key: ProbeResult("/dev/nvidia0\n/dev/nvidia1\n", "", 0),
        found["python"].key: ProbeResult("3.11.2\n1\n", "", 0),
        found["ping"].key: ProbeResult("gpu02 0 1 8972 1500\n", "", 0),
    }
    got = preflight.parse_facts("gpu01", found, results)
    assert got.ib_devices == ("mlx5_0", "mlx5_1") and got.gpus == 2 and got.torch and got.python == "3.11.2"
    assert got.pings == [Ping("gpu02", True, False, 8972, 1500)]
    missing = preflight.parse_facts("gpu01", found, {})
    assert missing.errors and missing.python is None


def test_healthy_fleet_has_no_findings() -> None:
    targets = [target(n) for n in NAMES]
    pings = {n: [Ping(p, True, True, 8972) for p in preflight.ping_peers(NAMES)[n]] for n in NAMES}
    found = {n: facts(n, pings=pings[n]) for n in NAMES}
    assert preflight.evaluate(targets, found, runner="torch", backend="auto") == []


def test_one_node_with_another_mtu_is_named_with_values() -> None:
    targets = [target(n) for n in NAMES]
    found = {n: facts(n, mtu=1500 if n == "gpu03" else 9000,
                      pings=[Ping(p, True, n != "gpu03" and p != "gpu03", 8972 if n != "gpu03" else 1472)
                             for p in preflight.ping_peers(NAMES)[n]]) for n in NAMES}
    findings = preflight.evaluate(targets, found, runner="torch", backend="auto")
    assert [f.check for f in findings] == ["mtu"]  # the failed pings are explained by the MTU mismatch
    assert findings[0].hosts == ("gpu03",)
    assert "gpu03 at 1500" in findings[0].message and "the other 3 hosts at 9000" in findings[0].message


def test_two_nodes_behind_small_switch_ports() -> None:
    targets = [target(n) for n in NAMES]
    behind = {"gpu01", "gpu02"}
    found = {n: facts(n, pings=[Ping(p, True, not ({n, p} & behind), 8972, 1500 if {n, p} & behind else 0)
                                for p in preflight.ping_peers(NAMES)[n]]) for n in NAMES}
    findings = preflight.evaluate(targets, found, runner="torch", backend="auto")
    assert [f.check for f in findings] == ["path_mtu"]
    assert set(findings[0].hosts) == behind
    assert "8972" in findings[0].message and "1500" in findings[0].message and "MTU 9000" in findings[0].message


def test_interface_down_and_unreachable_peer() -> None:
    targets = [target(n) for n in NAMES]
    found = {n: facts(n, up=n != "gpu04",
                      pings=[Ping(p, "gpu04" not in (n, p), False, 8972) for p in preflight.ping_peers(NAMES)[n]])
             for n in NAMES}
    findings = preflight.evaluate(targets, found, runner="torch", backend="auto")
    assert findings[0].check == "interface" and findings[0].hosts == ("gpu04",)
    assert "eth1 is down" in findings[0].message
    unreachable = [f for f in findings if f.check == "data_path" and "no packet" in f.message]
    assert unreachable and unreachable[0].hosts == ("gpu04",)


@pytest.mark.parametrize(("env", "expected"), [
    ({"NCCL_SOCKET_IFNAME": "ens1f0"}, "NCCL_SOCKET_IFNAME names interface 'ens1f0'"),
    ({"NCCL_SOCKET_IFNAME": "=eth"}, "NCCL_SOCKET_IFNAME names interface 'eth'"),
    ({"NCCL_IB_HCA": "mlx5_3:1"}, "NCCL_IB_HCA names RDMA device 'mlx5_3:1'"),
    ({"GLOO_SOCKET_IFNAME": "eth1,ib0"}, "GLOO_SOCKET_IFNAME names interface 'ib0'"),
])
def test_env_names_must_exist(env: dict[str, str], expected: str) -> None:
    targets = [target(n, env=env) for n in NAMES[:2]]
    findings = preflight.check_env(targets, {n: facts(n) for n in NAMES[:2]})
    assert len(findings) == 1 and expected in findings[0].message
    assert findings[0].hosts == ("gpu01", "gpu02")


@pytest.mark.parametrize("env", [{"NCCL_SOCKET_IFNAME": "eth"}, {"NCCL_SOCKET_IFNAME": "^docker,lo"},
                                 {"NCCL_SOCKET_IFNAME": "=eth1"}, {"NCCL_IB_HCA": "=mlx5_0:1"},
                                 {"NCCL_IB_HCA": "mlx5"}, {"NCCL_IB_HCA": "^mlx5_9"}])
def test_env_prefix_exact_and_exclude_forms(env: dict[str, str]) -> None:
    assert preflight.check_env([target("gpu01", env=env)], {"gpu01": facts("gpu01")}) == []


def test_runtime_checks_and_backend() -> None:
    targets = [target(n) for n in NAMES[:2]]
    no_torch = {"gpu01": facts("gpu01"), "gpu02": facts("gpu02", torch=False)}
    findings = preflight.check_runtime(targets, no_torch, "torch", "auto")
    assert findings[0].hosts == ("gpu02",) and "torch" in findings[0].message
    assert preflight.check_runtime(targets, no_torch, "nccl-tests", "auto") == []
    cpu = {n: facts(n) for n in NAMES[:2]}
    assert preflight.resolve_backend("auto", cpu) == ("gloo", 1)
    gpu = {n: facts(n, gpus=8) for n in NAMES[:2]}
    assert preflight.resolve_backend("auto", gpu) == ("nccl", 8)
    assert preflight.check_runtime(targets, cpu, "torch", "nccl")[0].check == "gpus"


def test_unreadable_probe_is_its_own_finding() -> None:
    found = preflight.probes(target("gpu01"), None)
    results = {found["addr"].key: ProbeResult("", 'Option "-j" is unknown, try "ip -help".', 255),
               found["ib"].key: ProbeResult("", "", 0), found["gpus"].key: ProbeResult("", "", 0),
               found["python"].key: ProbeResult("3.11.2\n1\n", "", 0)}
    got = preflight.parse_facts("gpu01", found, results)
    findings = preflight.evaluate([target("gpu01")], {"gpu01": got}, runner="torch", backend="auto")
    assert findings[0].check == "probe" and "ip -j addr" in findings[0].message
    assert 'Option "-j" is unknown' in findings[0].message


SAMPLES = HERE.parents[1] / "samples"


def test_parse_addr_skips_the_empty_entries_of_older_iproute2() -> None:
    # iproute2 before 5.0 printed `{}` for every interface a filter left out (greshake/i3status-rust#997):
    # one such entry made the whole host's interfaces unreadable.
    ifaces = preflight.parse_addr((SAMPLES / "ip-addr" / "empty-objects-4.20-1.json").read_text())
    assert list(ifaces) == ["wlp0s20f3"]
    assert ifaces["wlp0s20f3"] == preflight.Iface("wlp0s20f3", 1500, True, ("192.168.1.124",), admin_up=True,
                                                  operstate="UP")
    # Every entry empty, addresses too (greshake/i3status-rust#922): no interface, and no error.
    assert preflight.parse_addr((SAMPLES / "ip-addr" / "addr-info-empty-objects-2.json").read_text()) == {}


def test_an_entry_without_an_mtu_has_no_mtu_rather_than_zero() -> None:
    ifaces = preflight.parse_addr('[{"ifindex":1,"ifname":"eth1","flags":["UP","LOWER_UP"],"operstate":"UP"}]')
    assert ifaces["eth1"].mtu is None


@pytest.mark.parametrize(("iface", "message", "fix"), [
    # A bond member (SLAVE flag, `master`): its addresses are the bond's.
    ("swp5", "gpu01: data interface swp5 is a member of bond bond42", "use bond42 as the data interface"),
    # Administratively up without carrier: `ip link set up` would change nothing.
    ("bond42", "gpu01: data interface bond42 is up but has no link (operstate DOWN)", "check the cable"),
])
def test_data_interface_findings_from_real_ip_json(iface: str, message: str, fix: str) -> None:
    # `ip -j addr` prints each link as `ip -j link` does (iproute2 4.14 here), with addr_info added.
    ifaces = preflight.parse_addr((SAMPLES / "ip-link" / "bond-802.3ad-4.14-2.json").read_text())
    found = preflight.check_interfaces([target("gpu01", data_ifaces=(iface,))],
                                       {"gpu01": preflight.HostFacts("gpu01", ifaces=ifaces)})
    assert len(found) == 1 and found[0].message.startswith(message) and found[0].fix.startswith(fix)


def test_an_interface_never_set_up_is_reported_down() -> None:
    ifaces = preflight.parse_addr((SAMPLES / "ip-link" / "vlan-4.14-3.json").read_text())
    found = preflight.check_interfaces([target("gpu01", data_ifaces=("eth0.42",))],
                                       {"gpu01": preflight.HostFacts("gpu01", ifaces=ifaces)})
    assert [f.message for f in found] == ["gpu01: data interface eth0.42 is down"]
    assert found[0].fix.startswith("bring it up (ip link set eth0.42 up)")
