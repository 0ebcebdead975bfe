"""The desired-state resources a play can declare, as strict pydantic models.

A play lists resources as one-key mappings `{kind: spec}`; each kind's ResourceType names its model
(`provisioner.resources.REGISTRY`), which may live here or in the kind's own module. Models refuse unknown
keys, and every field carries a description because `fabnet validate` quotes it to say what is allowed.
Numbers also arrive as strings (a rendered "{{ mtu }}" is text) and are coerced.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from provisioner.load import names, sandbox
from provisioner.load.version_spec import VersionConstraint

# ---------------------------------------------------------------------------------------------- values


def _no_bool(value: Any) -> Any:
    # pydantic's lax mode would turn `true` into 1; a boolean where a number belongs is a mistake.
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {str(value).lower()}")
    return value


Int = Annotated[int, BeforeValidator(_no_bool)]
Priority = Annotated[Int, Field(ge=0, le=7)]
Dscp = Annotated[Int, Field(ge=0, le=63)]


def _one_of(*allowed: int) -> AfterValidator:
    def check(value: int) -> int:
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(map(str, allowed))}")
        return value

    return AfterValidator(check)


def _distinct(values: list[int]) -> list[int]:
    if len(set(values)) != len(values):
        raise ValueError("lists a priority more than once")
    return sorted(values)


PriorityList = Annotated[list[Priority], AfterValidator(_distinct)]


def _sysctl_text(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("write the number (1 or 0), not true/false")
    if isinstance(value, int | float):
        return str(value)
    return value.strip() if isinstance(value, str) else value


def _mode_text(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        raise ValueError("quote the mode, e.g. mode: '0644' (YAML reads an unquoted 0644 as the number 420)")
    return value


# Names that reach commands on a host: what the kernel, systemd and dpkg allow, minus shell syntax
# and a leading '-' (see `provisioner.load.names`).
NetDev = Annotated[str, AfterValidator(names.netdev)]
RdmaDevice = Annotated[str, AfterValidator(names.rdma_device)]
UnitName = Annotated[str, AfterValidator(names.unit)]
ModuleName = Annotated[str, AfterValidator(names.kernel_module)]
SysctlName = Annotated[str, AfterValidator(names.sysctl_name)]
PackageName = Annotated[str, AfterValidator(names.package)]
HostPath = Annotated[str, AfterValidator(names.file_path)]


def _template_name(value: str) -> str:
    problem = sandbox.check_name(value)
    if problem is not None:
        raise ValueError(problem)
    return value


TemplateName = Annotated[str, AfterValidator(_template_name)]
UserName = Annotated[str, AfterValidator(names.user)]

Notify = Annotated[
    list[UnitName],
    Field(description="systemd units to restart once, after the run's other changes, when this resource changed"),
]


# ----------------------------------------------------------------------------------------------- specs


class Spec(BaseModel):
    """Base of every resource spec; `kind` is the key a play writes it under."""

    # coerce_numbers_to_str: a rendered "{{ x }}" keeps x's type, and `owner: 0` means uid 0.
    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)

    kind: ClassVar[str]
    # Fields naming a Jinja2 template file -> the field its rendering for a host fills (FileSpec: the
    # content). The loader checks the file exists; the host plan renders it.
    templates: ClassVar[dict[str, str]] = {}

    def target(self) -> str:
        """What the resource is about, for reports (`interface[ens1f0]`); kinds with a name override it."""
        return self.kind


def _exactly_one(model: BaseModel, *names: str) -> None:
    given = [n for n in names if getattr(model, n) is not None]
    if len(given) != 1:
        raise ValueError(f"set exactly one of {' or '.join(names)}" + (f" (got {', '.join(given)})" if given else ""))


_RDMA_DEVICE_DOC = (
    "RDMA device name such as mlx5_0; the host's netdev for it is looked up with ibdev2netdev / rdma link"
)


class InterfaceSpec(Spec):
    """MTU and link state of one network interface."""

    kind: ClassVar[str] = "interface"

    name: NetDev | None = Field(None, description="netdev name such as ens1f0np0 (or use rdma_device)")
    rdma_device: RdmaDevice | None = Field(None, description=_RDMA_DEVICE_DOC + " (or use name)")
    mtu: Int | None = Field(
        None,
        ge=1500,
        le=9216,
        description="MTU in bytes, 1500..9216; 9000 for RoCE over Ethernet, 4200 where switches stop there",
    )
    state: Literal["up", "down"] = Field("up", description="administrative link state: up or down")
    persistent: bool = Field(
        True, description="true: the MTU must also be in the boot-time network configuration, not only live"
    )

    @model_validator(mode="after")
    def _target(self) -> InterfaceSpec:
        _exactly_one(self, "name", "rdma_device")
        return self

    def target(self) -> str:
        return f"interface[{self.name or self.rdma_device}]"


class MtuUniformSpec(Spec):
    """Fleet-wide check: every host of the play has the same MTU on this interface."""

    kind: ClassVar[str] = "mtu_uniform"

    interface: NetDev | None = Field(None, description="netdev name (or use rdma_device)")
    rdma_device: RdmaDevice | None = Field(None, description=_RDMA_DEVICE_DOC + " (or use interface)")

    @model_validator(mode="after")
    def _target(self) -> MtuUniformSpec:
        _exactly_one(self, "interface", "rdma_device")
        return self

    def target(self) -> str:
        return f"mtu_uniform[{self.interface or self.rdma_device}]"


class ServiceSpec(Spec):
    """A systemd unit that must be running (or stopped) and enabled (or not) at boot."""

    kind: ClassVar[str] = "service"

    name: UnitName = Field(description="systemd unit name; '.service' may be left out")
    state: Literal["started", "stopped"] = Field("started", description="started or stopped")
    enabled: bool | None = Field(True, description="true/false: enabled at boot or not; null: not checked")

    def target(self) -> str:
        return f"service[{self.name}]"


class KernelModuleSpec(Spec):
    """A kernel module that must be loaded (or absent)."""

    kind: ClassVar[str] = "kernel_module"

    name: ModuleName = Field(description="module name as lsmod shows it, e.g. nvidia_peermem")
    state: Literal["loaded", "absent"] = Field("loaded", description="loaded or absent")
    persistent: bool = Field(
        True,
        description="true: also listed in /etc/modules-load.d when loaded, and not listed there when absent",
    )
    notify: Notify = []

    def target(self) -> str:
        return f"kernel_module[{self.name}]"


class SysctlSpec(Spec):
    """A kernel parameter value."""

    kind: ClassVar[str] = "sysctl"

    name: SysctlName = Field(description="dotted sysctl name, e.g. net.ipv4.conf.all.arp_ignore")
    value: Annotated[str, BeforeValidator(_sysctl_text), AfterValidator(names.sysctl_value)] = Field(
        description="value as `sysctl -n` prints it; numbers are accepted and kept as text"
    )
    persistent: bool = Field(True, description="true: also set in /etc/sysctl.d so it survives a reboot")

    def target(self) -> str:
        return f"sysctl[{self.name}]"


class OfedSpec(Spec):
    """The installed NVIDIA/Mellanox OFED driver stack (as `ofed_info -s` reports it)."""

    kind: ClassVar[str] = "ofed"

    version: VersionConstraint = Field(
        description="version constraint: '==23.10-1.1.9.0', '>=23.07', '>=23.07,<24.04'; bare version: =="
    )
    flavor: Literal["MLNX_OFED_LINUX", "DOCA", "OFED-internal"] | None = Field(
        None, description="distribution of the stack: MLNX_OFED_LINUX, DOCA or OFED-internal; null: any"
    )

    def target(self) -> str:
        return "ofed"


class NcclSpec(Spec):
    """The installed NCCL library package."""

    kind: ClassVar[str] = "nccl"

    version: VersionConstraint = Field(
        description="version constraint: '==2.21.5', '>=2.19', '>=2.19,<2.24'; a bare version means =="
    )
    package: PackageName = Field("libnccl2", description="package that carries NCCL")

    def target(self) -> str:
        return f"nccl[{self.package}]"


class RoceQosSpec(Spec):
    """Lossless RoCE settings of one NIC port: trust mode, PFC, ECN, DSCP mapping, RoCE traffic class."""

    kind: ClassVar[str] = "roce_qos"

    interface: NetDev | None = Field(None, description="netdev name of the port (or use rdma_device)")
    rdma_device: RdmaDevice | None = Field(None, description=_RDMA_DEVICE_DOC + " (or use interface)")
    trust: Literal["pcp", "dscp"] | None = Field(None, description="QoS trust mode: pcp or dscp")
    pfc: PriorityList | None = Field(
        None, description="priorities 0..7 with PFC enabled; every other priority must have PFC off"
    )
    dscp2prio: dict[Dscp, Priority] | None = Field(
        None, description="mapping DSCP 0..63 -> priority 0..7 that must hold (other DSCPs are not checked)"
    )
    ecn: PriorityList | None = Field(None, description="priorities 0..7 with ECN enabled (others must be off)")
    traffic_class: Int | None = Field(
        None,
        ge=0,
        le=255,
        description="RoCE traffic class 0..255 in the device's tc/1/traffic_class (DSCP << 2 | ECN bits)",
    )
    cnp_dscp: Dscp | None = Field(None, description="DSCP 0..63 of congestion notification packets")
    roce_tos: Int | None = Field(
        None, ge=0, le=255, description="default ToS 0..255 of RDMA-CM connections (cma_roce_tos)"
    )
    port_state: Literal["active"] | None = Field(None, description="required RDMA port state: active")
    active_mtu: Annotated[Int, _one_of(256, 512, 1024, 2048, 4096)] | None = Field(
        None, description="required active RoCE MTU: 256, 512, 1024, 2048 or 4096"
    )
    gid_index: Int | None = Field(
        None, ge=0, le=255, description="GID index that must exist and be a RoCE v2 GID (NCCL_IB_GID_INDEX)"
    )
    tsa: list[Literal["ets", "strict", "vendor"]] | None = Field(
        None,
        min_length=8,
        max_length=8,
        description="transmission selection per traffic class 0..7: ets, strict or vendor",
    )
    tcbw: list[Annotated[Int, Field(ge=0, le=100)]] | None = Field(
        None,
        min_length=8,
        max_length=8,
        description="ETS bandwidth percent per traffic class 0..7, summing to 100",
    )

    @model_validator(mode="after")
    def _check(self) -> RoceQosSpec:
        _exactly_one(self, "interface", "rdma_device")
        settings = set(type(self).model_fields) - {"interface", "rdma_device"}
        if all(getattr(self, name) is None for name in settings):
            raise ValueError(f"sets nothing to check; give at least one of {', '.join(sorted(settings))}")
        if self.tcbw is not None and sum(self.tcbw) != 100:
            raise ValueError(f"tcbw must sum to 100 (got {sum(self.tcbw)})")
        return self

    def target(self) -> str:
        return f"roce_qos[{self.interface or self.rdma_device}]"


class FileSpec(Spec):
    """A file whose content, mode and owner must match; content given inline or from a Jinja2 template."""

    kind: ClassVar[str] = "file"
    templates: ClassVar[dict[str, str]] = {"template": "content"}

    path: HostPath = Field(description="absolute path of the file on the host")
    content: str | None = Field(None, description="the file's content (or use template)")
    template: TemplateName | None = Field(
        None,
        description="Jinja2 template rendered per host: a relative path inside the playbook's templates/ "
        "directory or the project's templates/ directory beside it (or use content)",
    )
    mode: Annotated[str, BeforeValidator(_mode_text), AfterValidator(lambda m: m.zfill(4))] = Field(
        "0644",
        pattern=r"^0?[0-7]{3,4}$",
        description="permissions as a quoted octal string such as '0644' (an unquoted 0644 is a YAML number)",
    )
    owner: UserName = Field("root", description="owning user name or uid")
    group: UserName = Field("root", description="owning group name or gid")
    sensitive: bool = Field(
        False,
        description="the content is a secret: reports show only its hashes and line counts (as Ansible's "
        "no_log); key, credential and password files are treated so without it",
    )
    notify: Notify = []

    @model_validator(mode="after")
    def _source(self) -> FileSpec:
        _exactly_one(self, "content", "template")
        return self

    def target(self) -> str:
        return f"file[{self.path}]"


_COUNTER_NAME = Annotated[str, AfterValidator(names.counter_name)]


class PortCountersSpec(Spec):
    """Limits on port error counters: RDMA (sysfs `counters`/`hw_counters`, or the device's `hw_counters` for one
    a port lacks, as EFA's `cmds_err`; `perfquery -x`) or a NIC driver's (`ethtool -S`: RoCE discards, pause storms)."""

    kind: ClassVar[str] = "port_counters"

    # Checked as roce_qos and interface check it: a path under class/infiniband (no '..'), and perfquery's -C.
    device: RdmaDevice | None = Field(None, description="RDMA device such as mlx5_0; every device when unset")
    port: Int | None = Field(None, ge=1, le=255, description="port number; every port when unset")
    interface: NetDev | None = Field(
        None, description="netdev whose driver statistics source ethtool reads, e.g. ens1f0np0 (ethtool only)"
    )
    max: dict[_COUNTER_NAME, Int] = Field(
        default_factory=dict,
        description="counter -> highest allowed value, e.g. {symbol_error: 0, link_downed: 0} (sysfs names; "
        "with source ethtool, names as ethtool -S prints them)",
    )
    max_rate: dict[_COUNTER_NAME, float] = Field(
        default_factory=dict,
        description="counter -> highest allowed increase per second, measured over `interval` in the same read",
    )
    interval: float = Field(2.0, gt=0, le=30, description="seconds between the two readings of a rate check")
    source: Literal["sysfs", "perfquery", "ethtool"] = Field(
        "sysfs",
        description="sysfs (under fabnet_sysfs_root), perfquery -x (needs device and port) or ethtool -S "
        "(needs interface)",
    )

    @model_validator(mode="after")
    def _something_to_check(self) -> PortCountersSpec:
        if not self.max and not self.max_rate:
            raise ValueError("set max or max_rate (or both)")
        if self.source == "ethtool":
            given = [key for key in ("device", "port") if getattr(self, key) is not None]
            if given:
                verb = "do" if len(given) > 1 else "does"
                raise ValueError(f"{' and '.join(given)} {verb} not apply to source ethtool, which reads the "
                                 "statistics of one netdev: name it in interface")
            if self.interface is None:
                raise ValueError("source ethtool needs interface (the netdev, e.g. ens1f0np0)")
            return self
        if self.interface is not None:
            raise ValueError(f"interface applies to source ethtool only; source {self.source} reads RDMA "
                             "devices (use device and port)")
        for key in ("max", "max_rate"):
            for name in getattr(self, key):
                if refusal := names.rdma_counter_refusal(name, self.source):
                    raise ValueError(f"{key}: {name!r} is not a {self.source} counter name ({refusal}); names as "
                                     "ethtool prints them need source ethtool")
        if self.source == "perfquery" and (self.device is None or self.port is None):
            raise ValueError("source perfquery needs device and port")
        return self

    def target(self) -> str:
        if self.source == "ethtool":
            return f"port_counters[{self.interface}]"
        where = self.device or "*"
        return f"port_counters[{where}/{self.port}]" if self.port is not None else f"port_counters[{where}]"
