"""Inventory + playbook -> per-host plans: the first step of every command that reaches hosts."""

from __future__ import annotations

from pathlib import Path

from provisioner import startup
from provisioner.hostplans import HostPlan, resolve
from provisioner.inventory import load_inventory
from provisioner.keycheck import check_keys
from provisioner.playbook import load_playbook


def load_plans(inventory: Path, playbook: Path, limit: str | None, *,
               ssh_config: Path | None = None) -> tuple[list[HostPlan], list[str]]:
    """The plans of the hosts the playbook targets (after `--limit`), and the inventory's warnings.

    group_vars/ and host_vars/ beside the playbook are read too, as Ansible does. The targeted hosts'
    private key files (inventory and `ssh_config`, default ~/.ssh/config) must be usable (keycheck.py).
    """
    loaded_inventory = load_inventory(inventory, playbook_dir=playbook.parent)
    plans = resolve(load_playbook(playbook), loaded_inventory, limit)
    check_keys([plan.host for plan in plans], ssh_config)
    startup.release()  # what was loaded lives until exit
    return plans, list(loaded_inventory.warnings)


def load_hosts(inventory: Path, limit: str | None, *,
               ssh_config: Path | None = None) -> tuple[list[HostPlan], list[str]]:
    """Every inventory host (after `--limit`) with no resources: for commands that need no playbook."""
    loaded = load_inventory(inventory)
    # `--limit ''` is an error from select_limit, never "every host".
    names = loaded.select_limit(limit) if limit is not None else list(loaded.hosts)
    check_keys([loaded.hosts[name] for name in names], ssh_config)
    startup.release()
    return [HostPlan(loaded.hosts[name]) for name in names], list(loaded.warnings)
