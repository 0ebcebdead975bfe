"""Which hosts a command works on, from the scheduler's point of view: `--nodelist HOSTLIST` and
`--slurm-job JOBID`, each intersected with what the plays and `--limit` (Ansible's, unchanged) select.

The inventory names the Slurm controller, the node the scheduler's commands run on: the variable
`fabnet_slurm_controller: NAME` (one value for all hosts), else the first host of the group
`slurm_controller`. Hosts Slurm knows by other names carry `fabnet_slurm_node` (names.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from provisioner.errors import ConfigError
from provisioner.load.devicevars import SLURM_NODE
from provisioner.load.inventory import Inventory, load_inventory
from provisioner.run.session import Options, open_session
from provisioner.scheduler import Scheduler
from provisioner.scheduler.command import uses
from provisioner.scheduler.hostlist import HostlistError, expand
from provisioner.scheduler.names import NodeNames, Renamed
from provisioner.scheduler.slurm import Slurm

CONTROLLER_VAR = "fabnet_slurm_controller"
CONTROLLER_GROUP = "slurm_controller"

T = TypeVar("T")


@dataclass(frozen=True)
class SchedulerArgs:
    """The scheduler options of one command (see commands/options.py)."""

    nodelist: str | None = None
    slurm_job: str | None = None
    drain_failed: bool = False  # drain in Slurm
    resume_fixed: bool = False
    drain_cmd: str | None = None  # drain by running this template locally instead (scheduler/command.py)

    @property
    def drains(self) -> bool:
        return self.drain_failed or self.drain_cmd is not None

    @property
    def selects(self) -> bool:
        return self.nodelist is not None or self.slurm_job is not None


def controller_name(inventory: Inventory) -> str:
    named = {str(host.vars[CONTROLLER_VAR]) for host in inventory.hosts.values() if host.vars.get(CONTROLLER_VAR)}
    if len(named) > 1:
        raise ConfigError(f"{CONTROLLER_VAR} differs between hosts ({', '.join(sorted(named))}): set it once, "
                          "for all hosts", file=str(inventory.source), key=CONTROLLER_VAR)
    if named:
        name = named.pop()
    elif inventory.group_order.get(CONTROLLER_GROUP):
        name = inventory.group_order[CONTROLLER_GROUP][0]
    else:
        raise ConfigError(f"no Slurm controller in the inventory: set {CONTROLLER_VAR}: HOST (all hosts' vars) or "
                          f"put the controller in a group named {CONTROLLER_GROUP}", file=str(inventory.source))
    if name not in inventory.hosts:
        raise ConfigError(f"the Slurm controller {name!r} is not a host of the inventory (fabnet reaches it "
                          "over SSH as it reaches the others)", file=str(inventory.source), key=CONTROLLER_VAR)
    return name


def node_names(inventory: Inventory) -> NodeNames:
    return NodeNames.of(inventory.hosts.values(), str(inventory.source))


@contextmanager
def _slurm(inventory: Inventory, options: Options) -> Iterator[Slurm]:
    """Slurm, over one session to the inventory's controller, asked and answering in node names."""
    with open_session(inventory.hosts[controller_name(inventory)], options) as session:
        yield Slurm(session)


@contextmanager
def connect(inventory: Inventory, options: Options) -> Iterator[Scheduler]:
    """Slurm, over one session to the inventory's controller, closed when the block ends; asked and
    answering in the inventory's host names (names.py)."""
    names = node_names(inventory)  # an inventory that gives two hosts one node name is refused first
    with _slurm(inventory, options) as slurm:
        yield Renamed(slurm, names)


def load(inventory: Path, playbook_dir: Path | None) -> Inventory:
    return load_inventory(inventory, playbook_dir=playbook_dir)


def _hosts_of(nodes: Sequence[str], inventory: Inventory, what: str) -> list[str]:
    """The inventory hosts Slurm node names stand for. A host's inventory name counts only where it is its
    node name: a host that `fabnet_slurm_node` names otherwise is not the Slurm node of its inventory name."""
    by_node = {host.node_name: name for name, host in inventory.hosts.items()}
    missing = list(dict.fromkeys(node for node in nodes if node not in by_node))
    if missing:
        raise ConfigError(f"{what} names hosts the inventory lacks: {', '.join(missing)} (a host the inventory "
                          f"names otherwise needs {SLURM_NODE}: its Slurm node name)", file=str(inventory.source))
    return list(dict.fromkeys(by_node[node] for node in nodes))


def selected_names(args: SchedulerArgs, inventory: Inventory, options: Options) -> set[str] | None:
    """The inventory hosts --nodelist and --slurm-job select (both: their intersection); None: no selection."""
    if not args.selects:
        return None
    chosen: set[str] | None = None
    if args.nodelist is not None:
        try:
            names = expand(args.nodelist)
        except HostlistError as exc:
            raise ConfigError(str(exc), key="--nodelist") from None
        if not names:
            raise ConfigError("--nodelist is empty", key="--nodelist")
        node_names(inventory)  # two hosts with one node name are refused, not one of them chosen
        chosen = set(_hosts_of(names, inventory, f"--nodelist {args.nodelist}"))
    if args.slurm_job is not None:
        node_names(inventory)
        with _slurm(inventory, options) as slurm:
            job = set(_hosts_of(slurm.nodes_of_job(args.slurm_job), inventory, f"Slurm job {args.slurm_job}"))
        chosen = job if chosen is None else chosen & job
    return chosen


def narrow(plans: list[T], args: SchedulerArgs, inventory: Path, playbook_dir: Path | None,
           options: Options) -> list[T]:
    """`plans` (HostPlans, as the plays and --limit selected them) kept to the hosts the options select."""
    node_field = args.drain_cmd is not None and uses(args.drain_cmd, "node")
    if not (args.selects or args.drain_failed or args.resume_fixed or node_field):
        return plans
    loaded = load(inventory, playbook_dir)
    if args.slurm_job is not None or args.drain_failed or args.resume_fixed:
        controller_name(loaded)  # an inventory without one is refused before any host is contacted
    if args.slurm_job is not None or args.drain_failed or args.resume_fixed or node_field:
        node_names(loaded)  # so are two hosts with one node name, which the drain would meet after the check
    names = selected_names(args, loaded, options)
    if names is None:
        return plans
    kept = [plan for plan in plans if plan.host.name in names]  # type: ignore[attr-defined]
    if not kept:
        raise ConfigError("no host is both in --nodelist/--slurm-job and among the hosts the plays and --limit "
                          "select", file=str(inventory))
    return kept
