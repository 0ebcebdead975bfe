"""mtu_uniform: one MTU per host, then the fleet compared against its most common MTU."""

from __future__ import annotations

from provisioner.load.specs import MtuUniformSpec
from provisioner.resources import REGISTRY, interface
from provisioner.resources.mtu_uniform import fleet_checks

from ._recorded import IP_LINK, failed, run, sample

SPEC = MtuUniformSpec(interface="eth1")


def test_host_reports_its_mtu_as_ok() -> None:
    result = run("mtu_uniform", {"interface": "eth1"}, {"ip -j -d link show": IP_LINK})
    assert result.summary() == [("mtu", "ok", "same on all hosts", "9000")]
    assert result.probes == [interface.IP_LINK]


def test_host_via_rdma_device() -> None:
    result = run("mtu_uniform", {"rdma_device": "mlx5_0"},
                 {"ip -j": IP_LINK, "rdma link show": sample("rdma-link-1.txt"), "ibdev2netdev": ""})
    assert result.summary() == [("mtu", "ok", "same on all hosts", "1500")]


def test_host_without_the_interface_is_an_error() -> None:
    result = run("mtu_uniform", {"interface": "eth9"}, {"ip -j": IP_LINK})
    assert result.summary() == [("mtu", "error", "same on all hosts", None)]
    assert result.checks[0].message == "no interface eth9"


def test_rdma_device_without_a_netdev_is_an_error_that_says_so() -> None:
    result = run("mtu_uniform", {"rdma_device": "mlx5_7"},
                 {"ip -j": IP_LINK, "rdma link show": sample("rdma-link-5-ib-polling.txt"), "ibdev2netdev": ""})
    assert result.summary() == [("mtu", "error", "same on all hosts", None)]
    assert result.checks[0].message.startswith("RDMA device mlx5_7 has no netdev")


def test_failed_probe_is_an_error() -> None:
    result = run("mtu_uniform", {"interface": "eth1"}, {"ip -j": failed("ip: command failed")})
    assert result.checks[0].status == "error"


def test_odd_host_out() -> None:
    mtus = {f"gpu0{i}": 9000 for i in range(1, 7)} | {"gpu02": 1500}
    checks = fleet_checks(SPEC, mtus)
    assert checks["gpu02"].status == "drift"
    assert checks["gpu02"].actual == "1500"
    assert checks["gpu02"].desired == "9000 (fleet)"
    assert checks["gpu02"].message == "gpu02 has 1500 where 5 other hosts have 9000"
    assert {h for h, c in checks.items() if c.status == "ok"} == {"gpu01", "gpu03", "gpu04", "gpu05", "gpu06"}
    assert checks["gpu01"].message == "same as 4 other hosts"


def test_several_odd_hosts_are_named() -> None:
    checks = fleet_checks(SPEC, {"a": 9000, "b": 9000, "c": 9000, "d": 1500, "e": 4200})
    assert checks["d"].message == "d has 1500 where 3 other hosts have 9000; also differing: e (4200)"
    assert checks["e"].status == "drift"


def test_tie_takes_the_larger_mtu() -> None:
    checks = fleet_checks(SPEC, {"a": 1500, "b": 9000})
    assert (checks["a"].status, checks["b"].status) == ("drift", "ok")
    assert checks["a"].message == "a has 1500 where 1 other host has 9000"


def test_unknown_mtu_is_an_error_and_does_not_vote() -> None:
    checks = fleet_checks(SPEC, {"a": None, "b": 4200, "c": 4200})
    assert checks["a"].status == "error"
    assert [checks["b"].status, checks["c"].status] == ["ok", "ok"]


def test_single_host_is_uniform() -> None:
    assert fleet_checks(SPEC, {"a": 9000})["a"].status == "ok"


def test_registered_for_fleet_evaluation() -> None:
    assert REGISTRY["mtu_uniform"].fleet_checks is fleet_checks


def test_a_host_alone_in_its_play_is_not_called_the_same_as_the_fleet() -> None:
    # `--limit gpu01`: nothing to compare with, and the check says so instead of "ok (fleet)".
    check = fleet_checks(SPEC, {"gpu01": 9000})["gpu01"]
    assert check.status == "ok"
    assert "(fleet)" not in check.desired
    assert "compared with no other host" in check.message
