"""Lab profiles: the starting state of each virtual node, so a lab starts as a realistically drifted fleet.

A profile has `defaults` (the state of a healthy node) and `nodes`, a map from node name to the fields
that differ on that node. Nodes not named there get the defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from provisioner.errors import ConfigError

DEFAULT_PROFILE = Path(__file__).with_name("profiles") / "default.yml"

# NCCL versions the lab's local package repository carries as real .deb files.
NCCL_VERSIONS: tuple[str, ...] = ("2.18.3-1+cuda12.2", "2.21.5-1+cuda12.4", "2.23.4-1+cuda12.6")


class QosState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    trust: Literal["pcp", "dscp"] = "dscp"
    pfc: list[int] = Field(default_factory=lambda: [3], description="priorities with PFC enabled")
    ecn: list[int] = Field(default_factory=lambda: [3], description="priorities with ECN enabled")
    cnp_dscp: int = 48
    traffic_class: int | None = 106
    roce_tos: int | None = 106


class NodeState(BaseModel):
    """Everything the lab sets on one node before it boots."""

    model_config = ConfigDict(extra="forbid")

    data_mtu: int = Field(9000, ge=576, le=9216)
    mtu_persistent: bool = True
    data_link_up: bool = True
    ofed: str = "MLNX_OFED_LINUX-23.10-1.1.9.0"
    nccl: str | None = Field("2.21.5-1+cuda12.4", description="libnccl2 version installed, or null for none")
    services: dict[str, bool] = Field(
        default_factory=lambda: {"rdma_cm": True, "openibd": True},
        description="unit name -> started and enabled",
    )
    modules: dict[str, bool] = Field(default_factory=lambda: {"nvidia_peermem": True})
    sysctls: dict[str, str] = Field(default_factory=dict)
    files: dict[str, str | None] = Field(
        default_factory=dict, description="absolute path -> content, or null to make sure it is absent"
    )
    qos: QosState = Field(default_factory=QosState)
    port_counters: dict[str, int] = Field(
        default_factory=dict,
        description="RDMA port counter -> value on mlx5_0 port 1 (sysfs names, e.g. symbol_error: 12); "
                    "the others read 0",
    )
    nic_stats: dict[str, int] = Field(
        default_factory=dict,
        description="`ethtool -S` counter -> value on the data interface (mlx5 names, e.g. rx_discards_phy: 40); "
                    "the others read 0",
    )
    gpus: int = 8
    gpu_model: str = "NVIDIA H100 80GB HBM3"
    mgmt_rtt_ms: float | None = Field(
        None, ge=0, le=10000, description="round-trip time to the control machine; null: the lab's --rtt")


class Profile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = ""
    nodes_default: int = Field(6, ge=1, le=250, description="node count when `lab up` is given none")
    defaults: NodeState = Field(default_factory=NodeState)
    nodes: dict[str, dict] = Field(default_factory=dict, description="node name -> overrides of defaults")

    def node_state(self, name: str) -> NodeState:
        """The defaults with this node's overrides applied (nested mappings merge one level deep)."""
        merged = self.defaults.model_dump()
        for key, value in self.nodes.get(name, {}).items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
        return NodeState.model_validate(merged)


def load_profile(path: Path | None = None) -> Profile:
    """Read and validate a profile; every problem is a ConfigError naming the file and key."""
    import yaml

    path = path or DEFAULT_PROFILE
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read lab profile: {exc.strerror}", file=str(path)) from exc
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise ConfigError(f"invalid YAML: {exc}", file=str(path),
                          line=line + 1 if line is not None else None) from exc
    try:
        profile = Profile.model_validate(data)
        for name in profile.nodes:
            profile.node_state(name)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        raise ConfigError(first["msg"], file=str(path), key=key) from exc
    return profile
