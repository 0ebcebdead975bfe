"""inventories/prod.yml, the example the README applies, is valid with playbooks/site.yml and gives
apply what it needs per host (OFED installer, package manager, management interfaces)."""

from __future__ import annotations

from pathlib import Path

from provisioner.evaluate import engine
from provisioner.load.hostplans import resolve, validate
from provisioner.load.inventory import load_inventory
from provisioner.load.playbook import load_playbook

ROOT = Path(__file__).resolve().parents[2]
PROD = ROOT / "inventories" / "prod.yml"
SITE = ROOT / "playbooks" / "site.yml"


def test_prod_inventory_is_valid_with_the_site_playbook() -> None:
    assert validate(PROD, SITE) == []


def test_prod_inventory_gives_apply_its_settings() -> None:
    plans = resolve(load_playbook(SITE), load_inventory(PROD))
    assert len(plans) == 32
    ctx = engine.host_context(plans[0])
    assert ctx.package_manager == "apt" and ctx.management_interfaces == ("eno1",)
    assert ctx.ofed_install_command and "$FABNET_OFED_VERSION" in ctx.ofed_install_command
