"""Inventory + playbook -> per-host plans: the first step of every command that reaches hosts."""

from __future__ import annotations

from pathlib import Path

from provisioner import startup
from provisioner.errors import ConfigError
from provisioner.load.hostplans import HostPlan, resolve
from provisioner.load.inventory import load_inventory
from provisioner.load.invsources import HostList, source_of
from provisioner.load.keycheck import check_keys
from provisioner.load.playbook import load_playbook

DEFAULT_PLAYBOOK = Path("playbooks/site.yml")


def default_playbooks(inventory: Path) -> list[Path]:
    """Where a command looks for its playbook when none is given, in order: ./playbooks/site.yml, then
    playbooks/site.yml beside the inventory and in the folders above it (an Ansible project keeps
    `inventories/` and `playbooks/` side by side), so a command finds it from any working directory."""
    places = [DEFAULT_PLAYBOOK]
    if isinstance(source_of(inventory), HostList):  # host names on the command line: no folder to look in
        return places
    folder = inventory.resolve().parent if not inventory.is_dir() else inventory.resolve()
    for candidate in [folder, *folder.parents][:4]:
        places.append(candidate / DEFAULT_PLAYBOOK)
    return list(dict.fromkeys(places))


def default_playbook(inventory: Path) -> Path | None:
    """The first of `default_playbooks` that exists, if any."""
    return next((place for place in default_playbooks(inventory) if place.is_file()), None)


def find_playbook(inventory: Path, given: Path | None) -> Path:
    """The playbook a command uses: `given` as it is, else `default_playbook`; a missing one is a
    ConfigError naming where it looked and how to pass one."""
    if given is not None:
        return given
    found = default_playbook(inventory)
    if found is not None:
        return found
    places = default_playbooks(inventory)
    raise ConfigError("no playbook given, and none found at " + ", ".join(map(str, places))
                      + "; pass one with -p PLAYBOOK")


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
