"""The examples users paste: every `fabnet ...` line of the --help texts, the README's code blocks and
command table, and docs/*.md names options that exist, and the --limit of an example on the shipped
inventories/prod.yml selects hosts there."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from provisioner.cli import app
from provisioner.load.inventory import load_inventory

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench/README.md"]


def _commands() -> list[tuple[str, click.Command]]:
    ctx = click.Context(app)
    found: list[tuple[str, click.Command]] = []
    for name in app.list_commands(ctx):
        command = app.get_command(ctx, name)
        assert command is not None
        found.append((name, command))
        if isinstance(command, click.Group):
            for sub in command.list_commands(ctx):
                found.append((f"{name} {sub}", command.get_command(ctx, sub)))  # type: ignore[arg-type]
    return found


def _resolve(words: list[str]) -> tuple[click.Command, int]:
    """The (sub)command the words name, and how many words named it."""
    command: click.Command = app
    ctx = click.Context(app)
    used = 0
    while isinstance(command, click.Group) and used < len(words):
        sub = command.get_command(ctx, words[used])
        if sub is None:
            break
        command, used = sub, used + 1
    return command, used


def _options(command: click.Command) -> set[str]:
    names = {"-h", "--help"}
    for param in command.params:
        names.update(param.opts, param.secondary_opts)
    return names


def _segments(line: str) -> list[str]:
    """The `fabnet ...` commands of one example line, without the description or comment after them."""
    line = re.sub(r"^\s*(\w+=\S+\s+)*(\.venv/bin/)?", "", line).replace("\\\\", "").rstrip("\\ ")
    line = re.split(r"\s{2,}|\s#\s", line.strip())[0]
    return [s.strip() for s in re.split(r"\s(?:&&|\||>|;)\s", line) if s.strip().startswith("fabnet ")]


def _examples() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for name, command in _commands():
        for line in (command.help or "").splitlines():
            for segment in _segments(line.replace("Example:", "")):
                found.append((f"fabnet {name} --help", segment))
    for doc in DOCS:
        fenced = False
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            where = f"{doc.relative_to(ROOT)}:{number}"
            if line.startswith("| `fabnet "):
                cell = re.split(r"(?<!\\)\|", line)[1].replace("\\|", " ")
                found += [(where, synopsis) for synopsis in re.findall(r"`(fabnet [^`]*)`", cell)]
            elif fenced or line.startswith("    "):
                found += [(where, segment) for segment in _segments(line.replace(".venv/bin/fabnet", "fabnet"))]
    return found


EXAMPLES = _examples()


def test_the_examples_are_found() -> None:
    assert len(EXAMPLES) > 60
    assert any(where.startswith("README.md") for where, _ in EXAMPLES)
    assert any(where == "fabnet smoke --help" for where, _ in EXAMPLES)


@pytest.mark.parametrize(("where", "example"), EXAMPLES, ids=[f"{w}: {e[:60]}" for w, e in EXAMPLES])
def test_every_option_of_an_example_exists(where: str, example: str) -> None:
    words = shlex.split(example)[1:]
    command, used = _resolve(words)
    assert used, f"{where}: {example}: no such command"
    have = _options(command)
    # A table's synopsis lists options as `[--forks N]` or `[--drain-failed|--drain-cmd T]`.
    given = re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", " ".join(w for w in words[used:] if w.startswith(("-", "[")))
                       .replace("|", " "))
    assert [o for o in given if o not in have] == [], f"{where}: {example}"


def test_a_limit_of_an_example_on_the_shipped_inventory_selects_its_hosts() -> None:
    inventory = load_inventory(ROOT / "inventories/prod.yml")
    tried = 0
    for where, example in EXAMPLES:
        words = shlex.split(example)
        if "inventories/prod.yml" not in words:
            continue
        for flag in ("--limit", "-l"):
            if flag in words:
                warnings: list[str] = []
                assert inventory.select(words[words.index(flag) + 1], warnings=warnings), f"{where}: {example}"
                assert warnings == [], f"{where}: {example}: {warnings}"
                tried += 1
    assert tried >= 3
