"""One inventory file's text -> its groups and hosts, the format found as Ansible's plugin chain finds it:
yaml (files with no extension or .yml/.yaml/.json), then ini (any file), then toml (.toml files)."""

from __future__ import annotations

import copy
from pathlib import Path

from provisioner.errors import ConfigError
from provisioner.load.inventory_ini import looks_like_ini, read_ini_inventory
from provisioner.load.inventory_toml import read_toml_inventory
from provisioner.load.inventory_yaml import read_yaml_inventory
from provisioner.load.invgraph import InventoryGraph
from provisioner.load.yamlsrc import Sourced, parse_yaml

_YAML_EXTENSIONS = (".yml", ".yaml", ".json")


def parse_yaml_text(text: str, file: str, warnings: list[str] | None = None) -> Sourced:
    """`yamlsrc.parse_yaml`, with nesting too deep for the parser a ConfigError rather than a traceback.
    With `warnings`, a duplicate key is a warning there and the last one wins, as in Ansible."""
    try:
        return parse_yaml(text, file=file, duplicates=warnings)
    except RecursionError:
        raise ConfigError("YAML nested too deeply to read", file=file) from None


def read_inventory_text(graph: InventoryGraph, text: str, file: str) -> str:
    """Add one file's inventory to `graph`; returns "yaml", "ini", "toml" or "empty"."""
    if not text.strip() or all(not line.strip() or line.lstrip()[0] in "#;" for line in text.splitlines()):
        return "empty"
    yaml_error: ConfigError | None = None
    duplicates: list[str] = []
    suffix = Path(file).suffix
    # Ansible's yaml plugin takes only these names: YAML in `hosts.example` or `cluster.inv` is read as INI.
    if suffix in ("", *_YAML_EXTENSIONS):
        try:
            src = parse_yaml_text(text, file, duplicates)
        except ConfigError as exc:
            yaml_error = exc
        else:
            if isinstance(src.data, dict):
                graph.warnings.extend(duplicates)
                read_yaml_inventory(graph, src)
                return "yaml"
    if yaml_error is not None and suffix in _YAML_EXTENSIONS and not looks_like_ini(text):
        raise yaml_error
    if text.startswith("\ufeff") and suffix != ".toml":
        # Ansible's ini plugin keeps the mark as part of line 1: a host named '\ufeff' (or '\ufeffgpu01') that
        # no machine answers to, or a first section it cannot read. A file saved by a Windows editor.
        raise ConfigError("the file starts with a byte-order mark (U+FEFF, as some Windows editors save UTF-8); "
                          "Ansible's INI reader takes it as part of the first line (a host named '\\ufeff...' "
                          "or an unreadable first section): save the file as UTF-8 without a BOM", file=file, line=1)
    # Ansible discards what a failed plugin added before trying the next one (here: toml after ini).
    before = copy.deepcopy(graph.__dict__) if suffix == ".toml" else None
    try:
        read_ini_inventory(graph, text, file)
    except ConfigError as exc:
        if before is not None:
            graph.__dict__.clear()
            graph.__dict__.update(before)
            read_toml_inventory(graph, text, file)
            return "toml"
        if yaml_error is not None and Path(file).suffix in _YAML_EXTENSIONS:
            raise yaml_error from None
        if not looks_like_ini(text):
            exc.message += " (read as an INI inventory: the file is not a YAML mapping)"
        raise
    return "ini"


__all__ = ["parse_yaml_text", "read_inventory_text"]
