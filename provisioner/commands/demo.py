"""`fabnet demo`: the main job on the built-in lab, from a drifted fleet to a proven one and a new node."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from provisioner.commands.options import CONTEXT, load_targets
from provisioner.lazy import lazy_module

if TYPE_CHECKING:
    from provisioner.lab.state import LabState
    from provisioner.output import report
else:
    report = lazy_module("provisioner.output.report")


@click.command("demo", context_settings=CONTEXT)
@click.option("--name", "-n", default="demo", show_default=True, help="Lab name.")
@click.option("--nodes", type=click.IntRange(1, 200), default=None, help="Number of nodes (default 6).")
@click.option("--keep/--no-keep", default=True, show_default=True, help="Leave the lab running afterwards.")
def demo(name: str, nodes: int | None, keep: bool) -> None:
    """Bring up the default drifted lab, show the fleet, audit it against playbooks/site.yml, fix the
    drift with apply, audit again, prove it with an all-reduce, then add a new node and bootstrap it.

    Re-uses a running lab of the same name. Needs root. Run it from the repository's top directory so
    playbooks/site.yml is found.

    \b
    Examples:
      fabnet demo                      the default 6-node lab, left running (fabnet lab down --name demo)
      fabnet demo --nodes 3 --no-keep  a smaller lab, removed at the end
    """
    from provisioner.lab import manager
    from provisioner.lab.state import LabState

    existing = LabState.load(name)
    if existing is None or not existing.complete:
        if existing is not None:
            manager.down(name)
        with report.progress_log() as log:
            manager.up(name, nodes, log=log)
    state, statuses = manager.status(name)
    report.lab_status(state, statuses, as_json=False)
    from provisioner.load.loading import DEFAULT_PLAYBOOK

    if DEFAULT_PLAYBOOK.is_file():
        from provisioner.evaluate import engine

        report.info(f"\nAuditing the fleet against {DEFAULT_PLAYBOOK} (read-only):\n")
        plans, _ = load_targets(state.inventory_path, DEFAULT_PLAYBOOK, None)
        with report.host_progress(len(plans), "auditing", [p.host.name for p in plans]) as progress:
            outcome = engine.audit(plans, engine.Options(), progress)
        report.audit_tables(outcome)
        from provisioner.commands.apply import converge_for_demo
        report.info(f"\nFixing the drift: fabnet apply {state.inventory_path} --yes\n")
        converge_for_demo(plans, engine.Options())
        report.info("\nAuditing again (exit 0 means every node is in sync):\n")
        with report.host_progress(len(plans), "auditing", [p.host.name for p in plans]) as progress:
            outcome = engine.audit(plans, engine.Options(), progress)
        report.audit_tables(outcome)

        from provisioner.commands.smoke import demo_smoke

        demo_smoke(state.inventory_path, DEFAULT_PLAYBOOK)
        _demo_new_node(name, state.inventory_path, DEFAULT_PLAYBOOK)
    if not keep:
        manager.down(name)
    report.info(closing_text(state, keep))


def closing_text(state: LabState, keep: bool) -> str:
    """What to try next on the lab left running; with --no-keep the lab is gone, so only that is said."""
    if not keep:
        return f"\nlab '{state.name}' removed (--no-keep)"
    drifted_qos_node = state.nodes[min(2, len(state.nodes) - 1)]  # gpu03 has PFC off in the default profile
    return (
        "\nNext steps:\n"
        f"  fabnet audit {state.inventory_path} --json     the same, for a program\n"
        f"  ssh -i {state.key_path} -o UserKnownHostsFile={state.known_hosts_path} "
        f"-o StrictHostKeyChecking=yes root@{drifted_qos_node.mgmt_ip} "
        "mlnx_qos -i eth1\n"
        f"  fabnet lab down --name {state.name}                 remove the lab"
    )


def _demo_new_node(name: str, inventory: Path, playbook: Path) -> None:
    """The demo's last act: a vendor-default node joins the converged lab and is bootstrapped into it."""
    from provisioner.commands.bootstrap import bootstrap_for_demo
    from provisioner.lab import grow

    if not grow.added_nodes(inventory):  # a re-run shows the node that joined before, unchanged now
        report.info("\nA new node joins the fleet with the vendor's defaults (MTU 1500, no QoS, no NCCL) and a "
                    "host key nobody has seen: fabnet lab add\n")
        with report.progress_log() as log:
            grow.add(name, 1, log=log)
    newest = grow.added_nodes(inventory)[-1]
    report.info(f"\nBootstrapping it: fabnet bootstrap {inventory} --limit new --accept-new --yes\n"
                "(--accept-new trusts its host key on first use: fine for the demo's own lab; on a real fleet, "
                f"check {newest}'s fingerprint on its console and pass --fingerprint instead)\n")
    bootstrap_for_demo(inventory, playbook, "new")
