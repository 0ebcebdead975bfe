"""What `explain` returns: causes ranked most likely first, each with the log lines that show it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Evidence(_Model):
    """One log line: which file, which line (1-based), and its text without launcher/logger prefixes."""

    file: str
    line: int
    text: str


class Cause(_Model):
    """A likely cause. `score` orders causes (higher first); `hosts` and `addresses` are where it shows,
    `settings` the knobs involved (`NCCL_SOCKET_IFNAME=eth9`), `fix` what to change."""

    id: str
    title: str
    detail: str
    fix: str
    score: int
    hosts: list[str] = Field(default_factory=list)
    addresses: list[str] = Field(default_factory=list)
    settings: list[str] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    # Every line that shows the cause as (file, line), uncapped, where the evidence shows only the first few: what
    # orders causes by which a process logged first. Not part of the report.
    signal: list[tuple[str, int]] = Field(default_factory=list, exclude=True, repr=False)


class NetworkUse(_Model):
    """The network NCCL (or gloo) used, as one log shows it."""

    file: str
    framework: str
    network: str | None = None
    provider: str | None = None  # the libfabric provider aws-ofi-nccl chose for it (efa)
    plugin: str | None = None  # the network plugin that named itself, with its version (GPUDirectTCPX 3.1.8)
    devices: list[str] = Field(default_factory=list)
    interfaces: list[str] = Field(default_factory=list)
    # A plugin's control interface (GPUDirect-TCPX's NCCL_GPUDIRECTTCPX_CTRL_DEV): its sockets carry no payload.
    control: list[str] = Field(default_factory=list)
    nccl_version: str | None = None
    hosts: list[str] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)


class Explanation(_Model):
    schema_: str = Field("fabnet/explain/v1", alias="schema")
    files: list[str] = Field(default_factory=list)
    networks: list[NetworkUse] = Field(default_factory=list)
    causes: list[Cause] = Field(default_factory=list)

    @property
    def failed(self) -> bool:
        """Whether any cause was named: every cause is a failure or a slow path."""
        return bool(self.causes)
