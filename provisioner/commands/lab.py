"""`fabnet lab up|add|status|down`: the local lab of virtual GPU nodes, as a command group of its own."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from provisioner import startup
from provisioner.commands.options import CONTEXT
from provisioner.lazy import lazy_module

if TYPE_CHECKING:
    from provisioner.output import report
else:
    report = lazy_module("provisioner.output.report")


@click.group(
    "lab",
    context_settings=CONTEXT,
    help=(
        "A local lab of virtual GPU nodes for demos and tests (needs root).\n\n"
        "Each node is a systemd-nspawn container (real systemd, real sshd with its own host key, real "
        "dpkg and apt with a local repository of libnccl2 packages) in its own network namespace, with a "
        "management interface (eth0, SSH) and a data interface (eth1) on a second bridge that plays the "
        "switch: the host-side end of each node's data veth is that node's switch port.\n\n"
        "LAB EMULATION: there is no NIC or GPU here. ofed_info, mlnx_qos, dcb (show), ibv_devinfo, ibstat, "
        "ibdev2netdev, show_gids, rdma link, nvidia-smi topo -m, cma_roce_tos, lsmod/modprobe (for "
        "nvidia_peermem) and the ECN/traffic-class sysfs files (under /var/lib/fabnet-lab/sys) are "
        "stand-ins that print the real tools' formats and keep per-node state. The RDMA port's active_mtu "
        "follows eth1's real MTU as RoCE does (1500 -> 1024, 4200/9000 -> 4096)."
    ),
)
def lab_group() -> None:
    startup.release()  # lab work loads no plans; its commands run long enough to want the collector


name_option = click.option("--name", "-n", default="lab", show_default=True,
                           help="Lab name; several labs can coexist.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")


@lab_group.command("up")
@click.option("--nodes", type=click.IntRange(1, 200), default=None,
              help="Number of nodes (default: the profile's, 6 for the built-in one).")
@name_option
@click.option("--profile", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Lab profile YAML: each node's starting state (default: a realistically drifted fleet).")
@click.option("--rtt", default="0ms", show_default=True, metavar="TIME",
              help="Round-trip time between this machine and the nodes on the management (SSH) path, "
                   "e.g. 20ms; ping and SSH see it, the data network does not. A node's mgmt_rtt_ms in the "
                   "profile overrides it.")
@json_option
@click.option("--slurm", "with_slurm", is_flag=True,
              help="Run a Slurm cluster over the nodes (Debian's slurm-wlm): slurmctld on the first node, slurmd "
                   "on every node, partition 'gpu'. The inventory names the controller in fabnet_slurm_controller. "
                   "The first such lab installs slurm-wlm and munge into a cached layer (needs the Debian mirror).")
@click.option("--share-python/--no-share-python", default=True, show_default=True,
              help="Bind this virtualenv's packages (torch, for `fabnet smoke`) read-only into every node, "
                   "usable through the inventory's fabnet_python.")
def lab_up(nodes: int | None, name: str, profile: Path | None, rtt: str, as_json: bool, share_python: bool,
           with_slurm: bool) -> None:
    """Create a lab and wait until every node answers SSH; then show how to reach the nodes.

    The first run builds a Debian root filesystem with debootstrap (about a minute, cached).

    \b
    Examples:
      fabnet lab up --nodes 16                 16 nodes on a local bridge
      fabnet lab up --nodes 16 --rtt 20ms      the same, 20 ms away from this machine
      fabnet lab up --nodes 3 --slurm          3 nodes in a Slurm partition (sinfo, srun on the nodes)
    """
    from provisioner.lab import manager
    from provisioner.lab.delay import parse_rtt

    try:
        rtt_ms = parse_rtt(rtt)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--rtt") from exc
    with report.progress_log() as log:
        manager.up(name, nodes, profile, log=log, rtt_ms=rtt_ms, share_python=share_python,
                   with_slurm=with_slurm)
    _print_status(name, as_json)


@lab_group.command("add")
@name_option
@click.option("--count", type=click.IntRange(1, 200), default=1, show_default=True, help="Nodes to add.")
@json_option
def lab_add(name: str, count: int, as_json: bool) -> None:
    """Add new nodes to a running lab, as new servers join a fleet: the vendor's defaults (MTU 1500,
    no QoS, no NCCL, no NCCL env file), the lab's networks, the next names (gpu07, ...).

    Their host keys are fresh and NOT in the lab's known_hosts, so fabnet refuses them until they are
    trusted. The inventory lists them in `gpu` and in `new`; `lab down` removes them with the lab.

    \b
    Examples:
      fabnet lab add --name demo
      fabnet bootstrap /var/lib/fabnet/labs/demo/inventory.yml --limit new --accept-new --yes
    """
    from provisioner.lab import grow

    with report.progress_log() as log:
        grow.add(name, count, log=log)
    _print_status(name, as_json)


@lab_group.command("status")
@name_option
@json_option
def lab_status(name: str, as_json: bool) -> None:
    """Show a lab's nodes: addresses, interfaces, whether they run, and the inventory/key/known_hosts paths.

    \b
    Reach a node with strict host-key checking:
      ssh -i KEY -o UserKnownHostsFile=KNOWN_HOSTS -o StrictHostKeyChecking=yes root@MGMT_IP
    """
    _print_status(name, as_json)


def _print_status(name: str, as_json: bool) -> None:
    from provisioner.lab import manager

    state, nodes = manager.status(name)
    report.lab_status(state, nodes, as_json=as_json)


@lab_group.command("down")
@name_option
def lab_down(name: str) -> None:
    """Remove a lab: containers, namespaces, interfaces, mounts and files.

    Safe to repeat, and works on a lab whose `up` crashed or was killed half-way.
    """
    from provisioner.lab import manager

    found = manager.down(name)
    report.info(f"lab {name!r} removed" if found else f"lab {name!r}: nothing to remove")
