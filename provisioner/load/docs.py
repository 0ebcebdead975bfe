"""The playbook reference (docs/playbook.md), generated from the models that validate a playbook.

Every key of a play and of each resource kind, with its type, default, an example and its description,
comes from the pydantic models and the registry (each kind's `examples`), so the reference cannot
disagree with what `fabnet validate` accepts. `python -m provisioner.load.docs` writes the file;
`python -m provisioner.load.docs --check` exits 1 when the committed file differs.
"""

from __future__ import annotations

import json
import sys
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from provisioner.load.playbook import PlaySpec, VerifySpec
from provisioner.load.version_spec import VersionConstraint
from provisioner.resources import REGISTRY
from provisioner.smoke.settings import AllReduceSpec

DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "playbook.md"

# The example play the play keys are shown with (its resources are the kinds' own examples).
PLAY_EXAMPLE: dict[str, Any] = {
    "name": "RoCE fabric",
    "hosts": "gpu:!gpu99",
    "vars": {"data_mtu": 9000},
    "serial": 4,
    "max_fail_percentage": 25,
    "resources": [{"interface": {"name": "ens1f0np0", "mtu": "{{ data_mtu }}"}}],
    "verify": {"all_reduce": {"min_busbw": 40}},
}
VERIFY_EXAMPLE: dict[str, Any] = {"all_reduce": {"min_busbw": 40}}
ALL_REDUCE_EXAMPLE: dict[str, Any] = {
    "min_busbw": 40,
    "sizes": "1M:1G",
    "iters": 20,
    "runner": "torch",
    "backend": "nccl",
    "timeout": 300,
    "launch": "srun -n {np} {binary} -b {min_bytes} -e {max_bytes} -f 2 -g 1 -n {iters}",
    "launcher": "srun",
    "slow_fraction": 0.5,
    "link_fraction": 0.25,
}

_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean", Any: "any"}


def type_text(annotation: Any) -> str:
    """A field's type in words: `integer or null`, `list of integer`, `"up" or "down"`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return type_text(args[0])
    if origin in (Union, types.UnionType):
        text = " or ".join(type_text(arg) for arg in args if arg is not type(None))
        return f"{text} or null" if type(None) in args else text
    if origin is Literal:
        return " or ".join(f'"{arg}"' for arg in args)
    if origin is list:
        item = type_text(args[0])
        return f"list of ({item})" if " or " in item else f"list of {item}"
    if origin is dict:
        return f"mapping of {type_text(args[0])} to {type_text(args[1])}"
    if annotation is VersionConstraint:
        return "version constraint (string)"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    raise ValueError(f"no words for the type {annotation!r}: teach provisioner.load.docs.type_text")


class _Dumper(yaml.SafeDumper):
    """Text of several lines as a literal block (`|`), the way a playbook would write a file's content."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


def _list(dumper: yaml.SafeDumper, value: list[Any]) -> yaml.SequenceNode:
    # A list of plain values on one line (`pfc: [3]`), as people write them.
    flat = all(not isinstance(item, list | dict) for item in value)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=flat)


_Dumper.add_representer(str, _text)
_Dumper.add_representer(list, _list)


def _yaml(value: Any) -> str:
    """One value as it would be written inline in a playbook."""
    if isinstance(value, VersionConstraint):
        value = str(value)
    if isinstance(value, str) and "\n" in value:
        return json.dumps(value)  # a double-quoted YAML string: one line, escapes and all
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000, sort_keys=False)
    return text.removesuffix("\n...\n").strip()


def default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "(required)"
    if field.default_factory is not None:
        return _yaml(field.default_factory())  # type: ignore[call-arg]  # the factories here take no argument
    return _yaml(field.default)


def _code(text: str) -> str:
    return text if text == "(required)" else f"`{text}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def key_table(model: type[BaseModel], examples: list[Mapping[str, Any]], where: str) -> list[str]:
    """A table of the model's keys; each key's example is its value in the first example that sets it."""
    lines = ["| key | type | default | example | description |", "| --- | --- | --- | --- | --- |"]
    for name, field in model.model_fields.items():
        example = next((ex[name] for ex in examples if name in ex), None)
        if example is None:
            raise ValueError(f"{where}: no example sets {name!r}; add one to its examples")
        lines.append("| " + " | ".join(_cell(text) for text in (
            f"`{name}`", type_text(field.annotation), _code(default_text(field)), f"`{_yaml(example)}`",
            field.description or "")) + " |")
    return lines


def _block(data: Any) -> list[str]:
    return ["```yaml", *yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=10_000).splitlines(), "```"]


def _doc(model: type[BaseModel]) -> str:
    return " ".join((model.__doc__ or "").split())


def reference() -> str:
    """The text of docs/playbook.md. Raises ValueError (or pydantic's) when an example is missing or wrong."""
    PlaySpec.model_validate(PLAY_EXAMPLE)
    VerifySpec.model_validate(VERIFY_EXAMPLE)
    AllReduceSpec.model_validate(ALL_REDUCE_EXAMPLE)
    lines = [
        "# Playbook reference",
        "",
        "<!-- Generated by `python -m provisioner.load.docs` from the models that validate playbooks: do not edit. -->",
        "",
        "A playbook is a YAML list of plays. A play names the hosts it is about and lists resources, each a",
        "one-key mapping `{kind: settings}`. Values may be Jinja2 templates (`\"{{ data_mtu }}\"`), rendered",
        "per host with the inventory's and the play's variables; numbers written as text are accepted.",
        "Unknown keys are refused.",
        "",
        "## Play",
        "",
        _doc(PlaySpec),
        "",
        *key_table(PlaySpec, [PLAY_EXAMPLE], "play"),
        "",
        *_block([PLAY_EXAMPLE]),
        "",
        "### `verify`",
        "",
        _doc(VerifySpec),
        "",
        *key_table(VerifySpec, [VERIFY_EXAMPLE], "verify"),
        "",
        "### `verify: all_reduce`",
        "",
        _doc(AllReduceSpec),
        "",
        *key_table(AllReduceSpec, [ALL_REDUCE_EXAMPLE], "verify.all_reduce"),
        "",
        "## Resource kinds",
        "",
        ", ".join(f"[`{kind}`](#{kind})" for kind in sorted(REGISTRY)),
        "",
    ]
    for kind in sorted(REGISTRY):
        rtype = REGISTRY[kind]
        examples = list(rtype.examples)
        for example in examples:
            rtype.spec.model_validate(example)  # an example that does not validate is a bug in its kind
        lines += [f"### {kind}", "", _doc(rtype.spec), "", *key_table(rtype.spec, examples, kind), ""]
        lines += [*_block({"resources": [{kind: example} for example in examples]}), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = reference()
    if args == ["--check"]:
        return 0 if DOC_PATH.exists() and DOC_PATH.read_text() == text else 1
    from provisioner.output.files import write_atomic

    write_atomic(DOC_PATH, text)  # a repository file, readable by all (0644)
    return 0


if __name__ == "__main__":
    sys.exit(main())
