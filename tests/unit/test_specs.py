"""Resource spec models: defaults, coercion of rendered strings, and refusals."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from provisioner.load.specs import (
    FileSpec,
    InterfaceSpec,
    KernelModuleSpec,
    MtuUniformSpec,
    NcclSpec,
    OfedSpec,
    RoceQosSpec,
    ServiceSpec,
    SysctlSpec,
)
from provisioner.load.version_spec import VersionConstraint, installed_version
from provisioner.resources import REGISTRY


def errors(model: type, **data: object) -> list[tuple[tuple, str]]:
    with pytest.raises(ValidationError) as info:
        model(**data)
    return [(e["loc"], e["msg"]) for e in info.value.errors()]


def test_kinds_registry() -> None:
    KINDS = {kind: rtype.spec for kind, rtype in REGISTRY.items()}
    assert set(KINDS) == {
        "interface",
        "mtu_uniform",
        "service",
        "kernel_module",
        "sysctl",
        "ofed",
        "nccl",
        "port_counters",
        "roce_qos",
        "file",
    }
    assert all(KINDS[kind].kind == kind for kind in KINDS)


def test_every_field_is_documented() -> None:
    for model in (rtype.spec for rtype in REGISTRY.values()):
        for name, info in model.model_fields.items():
            assert info.description, f"{model.kind}.{name} has no description"


def test_interface_defaults_and_string_mtu() -> None:
    spec = InterfaceSpec(name="ens1f0np0", mtu="9000")
    assert spec.mtu == 9000
    assert (spec.state, spec.persistent) == ("up", True)
    assert spec.target() == "interface[ens1f0np0]"


def test_interface_mtu_not_a_number() -> None:
    assert errors(InterfaceSpec, name="eth0", mtu="abc") == [
        (("mtu",), "Input should be a valid integer, unable to parse string as an integer")
    ]


def test_interface_mtu_range_and_booleans() -> None:
    assert errors(InterfaceSpec, name="eth0", mtu=9500)[0][0] == ("mtu",)
    assert errors(InterfaceSpec, name="eth0", mtu=1000)[0][0] == ("mtu",)
    assert "expected a number, got true" in errors(InterfaceSpec, name="eth0", mtu=True)[0][1]


def test_interface_needs_exactly_one_target() -> None:
    assert "set exactly one of name or rdma_device" in errors(InterfaceSpec, mtu=9000)[0][1]
    both = errors(InterfaceSpec, name="eth0", rdma_device="mlx5_0")[0][1]
    assert "(got name, rdma_device)" in both
    assert InterfaceSpec(rdma_device="mlx5_0").target() == "interface[mlx5_0]"


def test_interface_name_is_a_valid_netdev() -> None:
    assert errors(InterfaceSpec, name="a-name-longer-than-15")[0][0] == ("name",)
    assert errors(InterfaceSpec, name="eth0/1")[0][0] == ("name",)


def test_unknown_key_is_refused() -> None:
    assert errors(InterfaceSpec, name="eth0", mut=9000) == [(("mut",), "Extra inputs are not permitted")]


def test_mtu_uniform() -> None:
    assert MtuUniformSpec(interface="eth1").target() == "mtu_uniform[eth1]"
    assert "exactly one" in errors(MtuUniformSpec)[0][1]


def test_service_defaults() -> None:
    spec = ServiceSpec(name="rdma_cm")
    assert (spec.state, spec.enabled) == ("started", True)
    assert ServiceSpec(name="openibd", enabled=None).enabled is None
    assert ServiceSpec(name="openibd", enabled="false").enabled is False
    assert errors(ServiceSpec, name="x", state="running")[0][0] == ("state",)


def test_kernel_module_defaults() -> None:
    spec = KernelModuleSpec(name="nvidia_peermem")
    assert (spec.state, spec.persistent) == ("loaded", True)
    assert errors(KernelModuleSpec, name="nvidia peermem")[0][0] == ("name",)


def test_sysctl_value_becomes_text() -> None:
    assert SysctlSpec(name="net.ipv4.conf.all.arp_ignore", value=1).value == "1"
    assert SysctlSpec(name="net.core.rmem_max", value=" 16777216 ").value == "16777216"
    assert "not true/false" in errors(SysctlSpec, name="a.b", value=True)[0][1]


@pytest.mark.parametrize(
    ("constraint", "installed", "ok"),
    [
        ("==23.10-1.1.9.0", "MLNX_OFED_LINUX-23.10-1.1.9.0:", True),
        ("==23.10-1.1.9.0", "MLNX_OFED_LINUX-23.10-1.1.8.0:", False),
        (">=23.07", "MLNX_OFED_LINUX-23.10-1.1.9.0", True),
        (">=23.07", "MLNX_OFED_LINUX-5.8-2.0.3.0", False),
        (">=23.07,<24.04", "24.04-0.6.6.0", False),
        (">=23.07,<24.04", "23.07-0.5.1.2", True),
        ("23.10", "23.10-1.1.9.0", True),
        ("==2.21.5", "2.21.5-1+cuda12.4", True),
        ("==2.21.5", "2.21.50-1", False),
        ("!=2.18.3", "2.18.3-1+cuda12.2", False),
        (">2.18", "2.21.5-1+cuda12.4", True),
        (">=4.7", "OFED-internal-4.7-3.2.9", True),
    ],
)
def test_version_constraints(constraint: str, installed: str, ok: bool) -> None:
    assert VersionConstraint.model_validate(constraint).matches(installed) is ok


def test_installed_version_drops_the_product_name() -> None:
    assert installed_version("MLNX_OFED_LINUX-23.10-1.1.9.0:") == "23.10-1.1.9.0"
    assert installed_version("OFED-internal-4.7-3.2.9") == "4.7-3.2.9"


def test_ofed_and_nccl_specs() -> None:
    ofed = OfedSpec(version=">=23.10", flavor="MLNX_OFED_LINUX")
    assert str(ofed.version) == ">=23.10"
    assert NcclSpec(version="==2.21.5").package == "libnccl2"
    assert errors(OfedSpec, version=">=23.10", flavor="mlnx")[0][0] == ("flavor",)


def test_unquoted_float_version_is_refused_with_a_hint() -> None:
    # YAML reads `version: 23.10` as 23.1; accepting it would silently compare against 23.1.
    ((loc, msg),) = errors(OfedSpec, version=23.10)
    assert loc == ("version",)
    assert "quote it" in msg


def test_unreadable_version_constraint() -> None:
    message = errors(NcclSpec, version="~>2")[0][1]
    assert "malformed clause '~>2'" in message and ">=" in message


def test_roce_qos_coerces_rendered_strings() -> None:
    spec = RoceQosSpec(
        interface="eth1",
        trust="dscp",
        pfc=["3"],
        ecn=[3],
        dscp2prio={"26": "3"},
        traffic_class="106",
        cnp_dscp="48",
        active_mtu="4096",
        gid_index="3",
    )
    assert (spec.pfc, spec.dscp2prio, spec.traffic_class, spec.active_mtu, spec.gid_index) == (
        [3],
        {26: 3},
        106,
        4096,
        3,
    )


@pytest.mark.parametrize(
    ("data", "loc"),
    [
        ({"pfc": [8]}, ("pfc", 0)),
        ({"pfc": [3, 3]}, ("pfc",)),
        ({"ecn": [-1]}, ("ecn", 0)),
        ({"dscp2prio": {64: 1}}, ("dscp2prio", 64, "[key]")),
        ({"dscp2prio": {26: 9}}, ("dscp2prio", 26)),
        ({"traffic_class": 256}, ("traffic_class",)),
        ({"cnp_dscp": 64}, ("cnp_dscp",)),
        ({"active_mtu": 9000}, ("active_mtu",)),
        ({"port_state": "down"}, ("port_state",)),
        ({"trust": "l2"}, ("trust",)),
        ({"tsa": ["ets"] * 7}, ("tsa",)),
    ],
)
def test_roce_qos_ranges(data: dict, loc: tuple) -> None:
    assert errors(RoceQosSpec, interface="eth1", **data)[0][0] == loc


def test_roce_qos_needs_a_setting_and_tcbw_sums_to_100() -> None:
    assert "sets nothing to check" in errors(RoceQosSpec, interface="eth1")[0][1]
    assert "tcbw must sum to 100 (got 80)" in errors(RoceQosSpec, interface="eth1", tcbw=[10] * 8)[0][1]
    ok = RoceQosSpec(rdma_device="mlx5_0", tsa=["ets"] * 8, tcbw=[50, 50, 0, 0, 0, 0, 0, 0])
    assert ok.target() == "roce_qos[mlx5_0]"


def test_file_spec() -> None:
    spec = FileSpec(path="/etc/nccl.conf", content="NCCL_DEBUG=WARN\n", mode="644")
    assert (spec.mode, spec.owner, spec.group) == ("0644", "root", "root")
    assert FileSpec(path="/etc/x", template="x.j2").template == "x.j2"


def test_file_spec_refusals() -> None:
    assert "exactly one of content or template" in errors(FileSpec, path="/etc/x")[0][1]
    assert errors(FileSpec, path="etc/x", content="")[0][0] == ("path",)
    assert errors(FileSpec, path="/etc/x", content="", mode="0999")[0][0] == ("mode",)
    ((loc, msg),) = errors(FileSpec, path="/etc/x", content="", mode=420)  # what YAML makes of `mode: 0644`
    assert loc == ("mode",)
    assert "quote the mode" in msg
