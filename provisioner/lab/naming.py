"""Names and addresses of one lab's objects, derived from its slot number so two labs never collide.

Addresses come from 198.18.0.0/15, the range set aside for network benchmarking (RFC 2544): it is
never routed anywhere real, so lab traffic cannot leave the machine even by mistake.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from provisioner.errors import ConfigError

LAB_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,15}$")
MAX_NODES = 200
MAX_SLOT = 250


def check_lab_name(name: str) -> str:
    if not LAB_NAME_RE.match(name):
        raise ConfigError(
            f"invalid lab name {name!r}: use 1-16 lower-case letters, digits or '-', starting with a letter",
            key="--name",
        )
    return name


def node_name(index: int) -> str:
    return f"gpu{index:02d}"


@dataclass(frozen=True)
class LabNames:
    lab: str
    slot: int

    # Interface names must fit in 15 characters: "fn" + two hex digits of the slot keeps them short.
    @property
    def prefix(self) -> str:
        return f"fn{self.slot:02x}"

    @property
    def mgmt_bridge(self) -> str:
        return f"{self.prefix}-mgmt"

    @property
    def data_bridge(self) -> str:
        return f"{self.prefix}-data"

    def mgmt_port(self, index: int) -> str:
        return f"{self.prefix}-m{index}"

    def data_port(self, index: int) -> str:
        """The host-side end of a node's data veth: that node's port on the lab 'switch'."""
        return f"{self.prefix}-d{index}"

    def netns(self, index: int) -> str:
        return f"fabnet-{self.lab}-{node_name(index)}"

    def mgmt_ip(self, index: int) -> str:
        return f"198.18.{self.slot}.{index}"

    @property
    def mgmt_gateway(self) -> str:
        return f"198.18.{self.slot}.254"

    @property
    def mgmt_router(self) -> str:
        """The delay router's leg on the management bridge (only in a lab with a round-trip time)."""
        return f"198.18.{self.slot}.253"

    @property
    def rtt_tun(self) -> str:
        return f"{self.prefix}-rtt"

    @property
    def rtt_port(self) -> str:
        return f"{self.prefix}-mr"

    @property
    def rtt_netns(self) -> str:
        return f"fabnet-{self.lab}-rtt"

    def data_ip(self, index: int) -> str:
        return f"198.19.{self.slot}.{index}"

    # Fixed MACs per node: random ones with reused IPs leave stale ARP entries that stall SSH for
    # tens of seconds after a quick down/up.
    def mac(self, kind: int, index: int) -> str:
        return f"02:fb:{self.slot:02x}:{kind:02x}:{index >> 8:02x}:{index & 0xFF:02x}"
