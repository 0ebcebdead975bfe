"""Targets and facts for the smoke unit tests, built from recorded lab outputs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from provisioner.load.inventory import Host
from provisioner.smoke import preflight
from provisioner.smoke.targets import Target

HERE = Path(__file__).parent


def target(name: str, **kwargs: object) -> Target:
    values: dict = {"data_ifaces": ("eth1",), "env": {"NCCL_SOCKET_IFNAME": "eth1", "NCCL_IB_HCA": "mlx5_0"}}
    values.update(kwargs)
    return Target(name=name, host=Host(name=name, address=f"198.18.1.{name[-1]}"), **values)


def facts(name: str, *, mtu: int = 9000, up: bool = True, pings: list[preflight.Ping] | None = None,
          torch: bool = True, gpus: int = 0) -> preflight.HostFacts:
    recorded = "ip-j-addr-healthy.json" if up else "ip-j-addr-eth1-down.json"
    ifaces = preflight.parse_addr((HERE / recorded).read_text())
    live = ifaces["eth1"]
    ifaces["eth1"] = dataclasses.replace(live, mtu=mtu)
    return preflight.HostFacts(name, ifaces=ifaces, ib_devices=("mlx5_0",), gpus=gpus, python="3.11.2",
                               torch=torch, pings=pings or [])
