"""A kind added by one module and nothing else: registered from `toy_kind`, a playbook using it
validates, audits against recorded facts and plans its steps, with no other file knowing the kind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.apply import changes
from provisioner.evaluate import engine
from provisioner.load import docs
from provisioner.load.hostplans import resolve, validate
from provisioner.load.inventory import load_inventory
from provisioner.load.playbook import load_playbook
from provisioner.load.specs import Spec
from provisioner.plan import planner as plan
from provisioner.resources import REGISTRY, register, unregister
from provisioner.resources.base import ProbeResult, ResourceType, Results

from . import toy_kind

INVENTORY = "[gpu]\ngpu01 ansible_host=10.0.0.1 pages=512\n"
PLAYBOOK = """\
- hosts: gpu
  resources:
    - kernel_module: {name: nvidia_peermem, persistent: false}
    - hugepages: {count: "{{ pages }}", template: note.j2}
"""


@pytest.fixture
def toy() -> Iterator[None]:
    assert toy_kind.KIND not in REGISTRY
    register(toy_kind.RESOURCE)
    try:
        yield
    finally:
        unregister(toy_kind.KIND)
    assert toy_kind.KIND not in REGISTRY


def _files(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "note.j2").write_text("pages on {{ inventory_hostname }}: {{ pages }}\n")
    inventory = tmp_path / "hosts"
    inventory.write_text(INVENTORY)
    playbook = tmp_path / "site.yml"
    playbook.write_text(PLAYBOOK)
    return inventory, playbook


def test_unknown_until_registered(tmp_path: Path) -> None:
    inventory, playbook = _files(tmp_path)
    [error] = validate(inventory, playbook)
    assert "unknown resource kind 'hugepages'" in error.message
    assert (error.line, error.key) == (4, "plays[0].resources[1].hugepages")


def test_a_registered_kind_validates_audits_and_plans(tmp_path: Path, toy: None) -> None:
    inventory, playbook = _files(tmp_path)
    assert validate(inventory, playbook) == []

    [host] = resolve(load_playbook(playbook), load_inventory(inventory, playbook_dir=tmp_path))
    _module, pages = host.resources
    assert isinstance(pages.spec, toy_kind.HugepagesSpec)
    assert pages.spec.count == 512  # rendered from the host's variable, then coerced by the kind's model
    assert pages.spec.note == "pages on gpu01: 512\n"  # its template field, rendered for the host
    assert [p.command for p in engine.plan_probes(host)][-1] == toy_kind.PROBE.command

    # Recorded facts: the module is loaded, the host has 128 pages.
    results = Results({
        toy_kind.PROBE.key: ProbeResult("128\n", "", 0),
        **{p.key: ProbeResult("Module  Size  Used by\nnvidia_peermem 16384 0\n", "", 0)
           for p in engine.plan_probes(host) if p.key != toy_kind.PROBE.key},
    })
    outcomes = engine.evaluate(host, results)
    assert [(o.kind, o.status) for o in outcomes] == [("kernel_module", "ok"), ("hugepages", "drift")]
    [check] = outcomes[1].checks
    assert (check.attribute, check.desired, check.actual) == ("count", "512", "128")

    planned = plan.remedies(host, results, outcomes)
    steps = changes.order([(rp.outcome.kind, rp.outcome.target, rp.steps) for rp in planned])
    [step] = steps
    assert step.command == "sysctl -w vm.nr_hugepages=512"
    assert step.needs == ("kernel_module[nvidia_peermem]",)  # the kind's declared `needs`

    # The facts of a host already at 512 pages: in sync, nothing to do.
    results = Results({**results.by_key, toy_kind.PROBE.key: ProbeResult("512\n", "", 0)})
    assert [o.status for o in engine.evaluate(host, results)] == ["ok", "ok"]


def test_the_kinds_template_field_is_checked(tmp_path: Path, toy: None) -> None:
    inventory, playbook = _files(tmp_path)
    (tmp_path / "templates" / "note.j2").unlink()
    [error] = validate(inventory, playbook)
    assert "template 'note.j2' not found" in error.message
    assert error.key == "plays[0].resources[1].hugepages.template"


def test_the_reference_documents_it(toy: None) -> None:
    text = docs.reference()
    assert "[`hugepages`](#hugepages)" in text
    assert "| `count` | integer | (required) | `512` | number of huge pages |" in text


def test_a_kind_name_is_taken_once(toy: None) -> None:
    other = ResourceType(toy_kind.KIND, toy_kind.HugepagesSpec, toy_kind.probes, toy_kind.evaluate)
    with pytest.raises(ValueError, match="already registered"):
        register(other)
    register(toy_kind.RESOURCE)  # the same one again changes nothing
    assert REGISTRY[toy_kind.KIND] is toy_kind.RESOURCE


def test_a_kind_and_its_model_agree() -> None:
    class Other(Spec):
        kind = "other"

    with pytest.raises(ValueError, match="spec model of kind 'other'"):
        ResourceType(toy_kind.KIND, Other, toy_kind.probes, toy_kind.evaluate)
