"""The resource kinds: for each, the probes that read a host and the pure evaluation of their output.

`REGISTRY` maps a play's kind name to its ResourceType; `FLEET_CHECKS` holds, for the kinds that compare
hosts with each other, the function the engine calls once every host is gathered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from provisioner.resources import (
    file,
    interface,
    interface_fix,
    kernel_module,
    mtu_uniform,
    nccl,
    ofed,
    port_counters,
    roce_fix,
    roce_qos,
    service,
    sysctl,
)
from provisioner.resources.base import Check, ResourceType

# Remedies of the larger kinds live in a module of their own beside the kind's probes and evaluation.
_REMEDIES: dict[str, Callable[..., list[Any]]] = {
    interface.KIND: interface_fix.remedy,
    roce_qos.KIND: roce_fix.remedy,
}

REGISTRY: dict[str, ResourceType[Any]] = {
    module.KIND: ResourceType(module.KIND, module.probes, module.evaluate,
                              _REMEDIES.get(module.KIND, getattr(module, "remedy", None)))
    for module in (
        interface, mtu_uniform, service, kernel_module, sysctl, ofed, nccl, roce_qos, file, port_counters,
    )
}

FLEET_CHECKS: dict[str, Callable[[Any, dict[str, int | None]], dict[str, Check]]] = {
    mtu_uniform.KIND: mtu_uniform.fleet_checks,
}

__all__ = ["FLEET_CHECKS", "REGISTRY"]
