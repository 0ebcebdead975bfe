"""The scheduler's names for the inventory's hosts, and a scheduler that speaks inventory names.

Slurm knows a node by its NodeName, usually the short host name; an Ansible inventory often names the same
machine by its FQDN or its address. `fabnet_slurm_node` (a host variable, templates allowed, such as
`{{ inventory_hostname_short }}`) gives a host's NodeName; without it the inventory name is the NodeName.
Commands keep working in inventory names: `Renamed` puts NodeNames into everything the scheduler is asked
and inventory names into everything it answers, so drains, resumes, node states and a job's nodes all name
the hosts a reader knows from the inventory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from provisioner.errors import ConfigError
from provisioner.load.devicevars import SLURM_NODE
from provisioner.load.inventory import Host
from provisioner.scheduler import NodeState, Ran, Scheduler


@dataclass(frozen=True)
class NodeNames:
    """Inventory host <-> scheduler node, for the hosts whose names differ (the others map to themselves)."""

    to_node: Mapping[str, str]
    to_host: Mapping[str, str]

    @classmethod
    def of(cls, hosts: Iterable[Host], source: str | None = None) -> NodeNames:
        """The names of `hosts`; two hosts given one node name is an error naming both (a drain of one
        would take the other out too)."""
        to_node: dict[str, str] = {}
        owner: dict[str, str] = {}
        for host in hosts:
            node = host.node_name
            if node in owner and owner[node] != host.name:
                raise ConfigError(f"hosts {owner[node]} and {host.name} have the same Slurm node name {node!r}: "
                                  f"set {SLURM_NODE} so that each host has its own", file=source, key=SLURM_NODE)
            owner[node] = host.name
            if node != host.name:
                to_node[host.name] = node
        return cls(to_node, {node: host for host, node in to_node.items()})

    def node(self, host: str) -> str:
        return self.to_node.get(host, host)

    def host(self, node: str) -> str:
        """The inventory host a node name in the scheduler's answer stands for; a name no renamed host has is
        returned as it is. That cannot tell an unknown node from a renamed host's inventory name, so choosing
        hosts by node name maps through the inventory instead (select.py)."""
        return self.to_host.get(node, node)


class Renamed:
    """`scheduler` asked in node names and answering in inventory host names."""

    def __init__(self, scheduler: Scheduler, names: NodeNames) -> None:
        self.scheduler = scheduler
        self.names = names

    def drain(self, reasons: Mapping[str, str]) -> Mapping[str, str | Ran | None]:
        answers = self.scheduler.drain({self.names.node(host): why for host, why in reasons.items()})
        return {self.names.host(node): answer for node, answer in answers.items()}

    def resume(self, hosts: Sequence[str]) -> dict[str, str | None]:
        answers = self.scheduler.resume([self.names.node(host) for host in hosts])
        return {self.names.host(node): answer for node, answer in answers.items()}

    def state(self, hosts: Sequence[str]) -> dict[str, NodeState]:
        states = self.scheduler.state([self.names.node(host) for host in hosts])
        return {self.names.host(node): replace(state, node=node) if node in self.names.to_host else state
                for node, state in states.items()}

    def nodes_of_job(self, jobid: str) -> list[str]:
        return [self.names.host(node) for node in self.scheduler.nodes_of_job(jobid)]

    def expand(self, hostlist: str) -> list[str]:
        """The hosts a hostlist of node names stands for."""
        return [self.names.host(node) for node in self.scheduler.expand(hostlist)]
