"""docs/playbook.md is what provisioner.load.docs generates from the models, and its examples are real playbooks;
what docs/ARCHITECTURE.md and the README name exists."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import yaml

from provisioner.load import docs
from provisioner.load.playbook import load_playbook
from provisioner.resources import REGISTRY


def test_the_committed_reference_is_current() -> None:
    # On failure: run `python -m provisioner.load.docs` and commit docs/playbook.md.
    assert docs.DOC_PATH.read_text() == docs.reference()
    assert docs.main(["--check"]) == 0


def test_every_key_of_every_kind_is_in_the_reference() -> None:
    text = docs.reference()
    for kind, rtype in REGISTRY.items():
        assert f"\n### {kind}\n" in text
        shown = {key for example in rtype.examples for key in example}
        assert shown == set(rtype.spec.model_fields), f"{kind}: its examples must set every key once"
        section = text.split(f"\n### {kind}\n", 1)[1].split("\n### ", 1)[0]
        for key, field in rtype.spec.model_fields.items():
            assert f"| `{key}` | " in section
            assert field.description and docs._cell(field.description) in section  # a | is escaped in a table


def test_the_types_and_defaults_read_as_written() -> None:
    text = docs.reference()
    assert "| `mtu` | integer or null | `null` | `9000` |" in text
    assert "| `state` | \"up\" or \"down\" | `up` | `up` |" in text
    assert "| `path` | string | (required) | `/etc/nccl.conf` |" in text
    assert "| `mode` | string | `'0644'` |" in text
    assert "| `tsa` | list of (\"ets\" or \"strict\" or \"vendor\") or null |" in text


def test_the_examples_load_as_a_playbook(tmp_path: Path) -> None:
    # The play example with every kind's examples as its resources, through the real loader.
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "fabric.env.j2").write_text("NCCL_IB_HCA={{ inventory_hostname }}\n")
    play = {**docs.PLAY_EXAMPLE, "resources": [{kind: example} for kind, rtype in sorted(REGISTRY.items())
                                               for example in rtype.examples]}
    path = tmp_path / "site.yml"
    path.write_text(yaml.safe_dump([play], sort_keys=False))
    playbook = load_playbook(path)
    [loaded] = playbook.plays
    assert [decl.kind for decl in loaded.resources] == [kind for kind in sorted(REGISTRY)
                                                        for _ in REGISTRY[kind].examples]
    assert all(decl.ok for decl in loaded.resources)


ROOT = Path(__file__).resolve().parents[2]


def test_every_path_the_architecture_map_names_exists() -> None:
    # A module, folder or test named in docs/ARCHITECTURE.md, e.g. `apply/guards.py`, `scheduler/` or
    # `tests/unit/test_spine.py` (module paths are under provisioner/), a bare module name such as
    # `rules_gdr.py` somewhere in the package, and a `folder/module.name` that module defines.
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    paths = set(re.findall(r"`((?:[a-z_]+/)+(?:[a-z_]+\.py)?)`", text)) - {"group_vars/", "host_vars/"}
    modules = set(re.findall(r"`([a-z_]+\.py)`", text))
    attributes = {(module, name) for module, name in re.findall(r"`((?:[a-z_]+/)+[a-z_]+)\.([A-Za-z_]+)", text)
                  if name not in ("py", "md")}
    assert len(paths) > 20 and len(modules) > 20 and len(attributes) > 5
    missing = [name for name in sorted(paths)
               if not (ROOT / name).exists() and not (ROOT / "provisioner" / name).exists()]
    missing += [name for name in sorted(modules) if not any((ROOT / "provisioner").rglob(name))]
    for module, attribute in sorted(attributes):
        imported = importlib.import_module("provisioner." + module.replace("/", "."))
        if not hasattr(imported, attribute):
            missing.append(f"{module}.{attribute}")
    assert missing == []


def test_the_architecture_map_names_every_step_folder_and_explain_rule_family() -> None:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    folders = {p.name for p in (ROOT / "provisioner").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert {f for f in folders if f"`{f}/`" not in text} == set()
    rules = {p.name for p in (ROOT / "provisioner" / "explain").glob("rules_*.py")}
    assert {r for r in rules if f"`{r}`" not in text} == set()


def test_the_readme_names_every_resource_kind() -> None:
    text = (ROOT / "README.md").read_text()
    assert {kind for kind in REGISTRY if f"`{kind}`" not in text} == set()
