"""Where inventory text comes from: files read safely (regular files only, bounded size), directories
walked in Ansible's order, each file's format recognised by its content, host lists given on the command
line (`gpu01,gpu02,`), and the `group_vars/` and `host_vars/` files Ansible would load for a group or host.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from provisioner.errors import ConfigError
from provisioner.load import yamlsrc
from provisioner.load.ansible_tags import vault_file
from provisioner.load.hostrange import split_host_port
from provisioner.load.ini_or_yaml import read_inventory_text
from provisioner.load.inventory_yaml import PLUGIN_REFUSED, save_as_static
from provisioner.load.invgraph import InventoryGraph
from provisioner.load.yamlsrc import Origin

_CONTROL = re.compile(r"[\x01-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ufffe\uffff]")
MAX_FILE_BYTES = 32 * 1024 * 1024  # an inventory or vars file past this is a mistake, not a fleet
VARS_EXTENSIONS = ("", ".yml", ".yaml", ".json")
# Ansible's defaults: hidden files, vars directories, and INVENTORY_IGNORE_EXTS.
_IGNORED = re.compile(
    r"^\.|^host_vars$|^group_vars$|^vars_plugins$|"
    + "|".join(re.escape(ext) + "$" for ext in
               (".pyc", ".pyo", ".swp", ".bak", "~", ".rpm", ".md", ".txt", ".rst", ".orig", ".cfg", ".retry"))
)


@dataclass(frozen=True)
class HostList:
    """An inventory given as host names between commas (`gpu01,gpu02:2222,`), as Ansible's host_list
    plugin reads a `-i` that holds a comma and names no file. Its hosts are in `ungrouped`; it has no
    folder, so only the playbook's group_vars/ and host_vars/ apply to them."""

    text: str

    def __str__(self) -> str:
        return self.text


def source_of(given: str | Path) -> Path | HostList:
    """What an inventory argument stands for: a host list where it holds a comma and no such path exists."""
    text = str(given)
    if "," in text and not os.path.lexists(text):
        return HostList(text)
    return Path(given)


def read_host_list(graph: InventoryGraph, source: HostList) -> None:
    """Add a host list's hosts to `graph`: each comma-separated word a host, `host:port` and
    `[v6-address]:port` as Ansible splits them; no ranges (the host_list plugin expands none)."""
    origin = Origin(source.text, None)
    _check_text(source.text, source.text)
    graph.add_group("ungrouped", origin)
    for word in source.text.split(","):
        word = word.strip()
        if word:
            name, port = split_host_port(word)
            if "[" in name:  # Ansible would take it as one host of that name, which no host is
                raise ConfigError(f"{word!r} is a host range, and host lists expand none (as in Ansible); name "
                                  "each host, or put the range in an inventory file", file=source.text)
            graph.add_host(name, "ungrouped", port, origin)


def _check_text(text: str, where: str) -> None:
    """NUL and control characters are refused (with their line), as YAML refuses them: a terminal escape
    in a host name would reach every report."""
    if "\0" in text:
        start = text.index("\0")
        column = start - text.rfind("\n", 0, start)
        raise ConfigError(f"a NUL byte at column {column}; this is not a text file", file=where,
                          line=text.count("\n", 0, start) + 1)
    control = _CONTROL.search(text)
    if control:
        start = control.start()
        column = start - text.rfind("\n", 0, start)
        raise ConfigError(f"the control character U+{ord(control.group()):04X} at column {column}; "
                          "inventories are plain text", file=where, line=text.count("\n", 0, start) + 1)


def read_text(path: Path) -> str:
    """A file's text; a FIFO, device or directory, a file over MAX_FILE_BYTES, NUL bytes or non-UTF-8
    text are ConfigErrors naming the file (never a hang: a FIFO is refused before it is read)."""
    text = yamlsrc.read_text(path, what="inventory file", limit=MAX_FILE_BYTES)
    _check_text(text, str(path))  # INI files too: a NUL is never part of an inventory
    return text


def source_files(source: Path) -> list[Path]:
    """The inventory files a source stands for: itself, or for a directory every file inside it (and in
    its subdirectories) in name order, skipping what Ansible skips."""
    if not source.is_dir():
        return [source]
    files: list[Path] = []
    for name in sorted(os.listdir(source)):
        if _IGNORED.search(name):
            continue
        files.extend(source_files(source / name))
    return files


def read_source(graph: InventoryGraph, source: Path) -> list[Path]:
    """Read every inventory file of one source into `graph`; returns the files read."""
    if not source.exists() and not source.is_symlink():
        raise ConfigError("inventory not found", file=str(source))
    files = source_files(source)
    for path in files:
        text = read_text(path)
        if vault_file(text):
            # Read as INI, each line of ciphertext would be a host. The hosts and groups cannot be skipped as
            # a vars file's secrets are: fabnet needs them, and never decrypts.
            raise ConfigError("encrypted with ansible-vault as a whole file; fabnet does not decrypt vault files: "
                              "keep hosts and groups in a plain inventory file, and secrets in vaulted values "
                              "(!vault) or vault-encrypted group_vars/host_vars files", file=str(path), line=1)
        if text.startswith("#!") and os.access(path, os.X_OK):
            # Ansible's script plugin runs it and reads the JSON it prints; running it here would run any
            # program an inventory directory holds, so say what to do instead of misreading it as INI.
            raise ConfigError("an executable inventory script: Ansible runs it and reads the JSON it prints, "
                              "fabnet does not run inventory scripts; " + _save_as_static(source, path),
                              file=str(path), line=1)
        try:
            read_inventory_text(graph, text, str(path))
        except ConfigError as exc:
            if exc.key != "plugin" or path == source:
                raise
            raise ConfigError(PLUGIN_REFUSED + _save_as_static(source, path), file=exc.file, line=exc.line,
                              key=exc.key) from None
    return files


def _save_as_static(source: Path, path: Path) -> str:
    """The advice for a script or plugin file: within a directory, Ansible's answer for the whole directory
    (a plugin such as `constructed` groups the hosts the directory's other files define; alone it has none)."""
    if path == source:
        return save_as_static(str(path))
    return save_as_static(str(source), "the whole directory") + " (Ansible reads the directory's files together: " \
        "a plugin such as constructed groups the hosts the other files define)"


def vars_dir(source: Path) -> Path:
    """The directory whose group_vars/ and host_vars/ belong to a source."""
    return source if source.is_dir() else source.parent


def vars_files(base: Path, kind: str, name: str, warnings: list[str]) -> list[Path]:
    """Ansible's lookup under BASE/KIND: the first of NAME, NAME.yml, NAME.yaml, NAME.json that exists;
    a directory contributes its files (recursively, in name order)."""
    folder = base / kind
    if not folder.is_dir() or name.startswith("/"):
        return []
    for index, ext in enumerate(VARS_EXTENSIONS):
        candidate = folder / (name + ext)
        if not candidate.exists():
            continue
        for other in VARS_EXTENSIONS[index + 1 :]:
            if (folder / (name + other)).exists():
                warnings.append(f"{folder / (name + other)}: ignored, {candidate} takes its place "
                                "(Ansible reads only the first)")
        return _dir_files(candidate) if candidate.is_dir() else [candidate]
    return []


def _dir_files(directory: Path) -> list[Path]:
    found: list[Path] = []
    for entry in sorted(directory.iterdir(), key=lambda p: p.name):
        if entry.name.startswith(".") or entry.name.endswith("~"):
            continue
        if entry.is_dir() and not entry.suffix:
            found.extend(_dir_files(entry))
        elif not entry.is_dir() and entry.suffix in VARS_EXTENSIONS:
            found.append(entry)
    return found


def unknown_vars_files(base: Path, kind: str, known: set[str]) -> list[Path]:
    """Entries of BASE/KIND that name no group (or host) of the inventory: likely typos."""
    folder = base / kind
    if not folder.is_dir():
        return []
    unknown = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or entry.name.endswith("~"):
            continue
        stem = entry.name
        if not entry.is_dir():
            for ext in VARS_EXTENSIONS[1:]:
                if stem.endswith(ext):
                    stem = stem[: -len(ext)]
                    break
        if stem not in known:
            unknown.append(entry)
    return unknown


__all__ = ["MAX_FILE_BYTES", "HostList", "read_host_list", "read_source", "read_text", "source_files", "source_of",
           "unknown_vars_files", "vars_dir", "vars_files"]
