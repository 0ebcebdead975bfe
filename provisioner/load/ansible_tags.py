"""Ansible's YAML tags `!vault` (an ansible-vault encrypted value) and `!unsafe` (text never templated).

fabnet does not decrypt vaulted values: it carries them as opaque `VaultedValue`s, so an inventory holding
an encrypted `ansible_become_pass` loads and audits, and only a template that uses such a value fails,
saying which value is vaulted. The constructors are registered on PyYAML's SafeLoader, the loader
`yamlsrc` builds every document with.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

import yaml


class VaultedValueError(ValueError):
    """A vaulted value was needed as text."""


class VaultedValue:
    """An `!vault` value: the ciphertext, never the secret."""

    __slots__ = ("ciphertext",)

    def __init__(self, ciphertext: str) -> None:
        self.ciphertext = ciphertext

    def _refuse(self, *_: Any) -> Any:
        raise VaultedValueError(
            "the value is encrypted with ansible-vault (!vault); fabnet does not decrypt vaulted values: "
            "put the plain value in a file fabnet reads (e.g. a host_vars file kept out of version control) "
            "or leave the variable unused"
        )

    __str__ = _refuse
    __iter__ = _refuse
    __len__ = _refuse
    __format__ = _refuse

    def __repr__(self) -> str:  # shown where a check names the value it got
        return "<a value encrypted with ansible-vault, which fabnet does not decrypt>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VaultedValue) and other.ciphertext == self.ciphertext

    def __hash__(self) -> int:
        return hash(self.ciphertext)


# Ansible's connection and sudo passwords: fabnet never shows their plain values (a vaulted one shows
# as its ciphertext, as ansible-inventory prints it).
PASSWORD_VARS = frozenset({
    "ansible_password", "ansible_ssh_pass", "ansible_become_password", "ansible_become_pass",
    "ansible_ssh_private_key_passphrase",
})
# Variable names that hold secrets. Narrower than SECRET_WORDS (no bare `key`): a file rendered from
# such a variable is wanted at 0600 when its playbook gives no mode, and `ssh_key_type` is no secret.
SECRET_VARIABLE = re.compile(
    r"passw|passphrase|secret|token|credential|private_?key|api_?key|access_?key|_pass$|^pass$|vault",
    re.IGNORECASE,
)


def secret_variable(name: str) -> bool:
    """Whether a variable named `name` holds a password or key: what it renders into is sensitive."""
    return name in PASSWORD_VARS or bool(SECRET_VARIABLE.search(name))


HIDDEN = "<hidden: fabnet never shows a password>"


def hide_passwords(variables: dict[str, Any]) -> dict[str, Any]:
    """`variables` with every plain password (by the variable's name) replaced by HIDDEN; vaulted values
    stay as they are."""
    return {name: HIDDEN if secret_variable(name) and value is not None and not _vaulted(value) else value
            for name, value in variables.items()}


def _vaulted(value: Any) -> bool:  # loaded, or as ansible-inventory prints it
    return isinstance(value, VaultedValue) or (isinstance(value, dict) and "__ansible_vault" in value)


def vault_file(text: str) -> bool:
    """Whether a whole file is encrypted with ansible-vault: Ansible's test is this header, first thing."""
    return text.startswith("$ANSIBLE_VAULT")


class UnsafeText(str):
    """An `!unsafe` string: Ansible never renders it as a template."""

    __slots__ = ()
    ansible_unsafe = True


def _vault(loader: yaml.SafeLoader, node: yaml.Node) -> VaultedValue:
    if not isinstance(node, yaml.ScalarNode):
        raise yaml.constructor.ConstructorError(None, None, "!vault needs a scalar (the vault text)",
                                                node.start_mark)
    return VaultedValue(str(loader.construct_scalar(node)))


def _unsafe(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return UnsafeText(loader.construct_scalar(node))
    if isinstance(node, yaml.SequenceNode):
        return [UnsafeText(v) if isinstance(v, str) else v for v in loader.construct_sequence(node, deep=True)]
    return {k: UnsafeText(v) if isinstance(v, str) else v
            for k, v in loader.construct_mapping(node, deep=True).items()}  # type: ignore[arg-type]


def to_json_value(value: Any, *, tag_unsafe: bool = True) -> Any:
    """A value as `ansible-inventory` prints it: vaulted values tagged, unsafe ones too with `tag_unsafe`."""
    if isinstance(value, VaultedValue):
        return {"__ansible_vault": value.ciphertext}
    if isinstance(value, UnsafeText):
        return {"__ansible_unsafe": str(value)} if tag_unsafe else str(value)
    if isinstance(value, dict):
        return {str(k): to_json_value(v, tag_unsafe=tag_unsafe) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json_value(v, tag_unsafe=tag_unsafe) for v in value]
    if isinstance(value, set | frozenset):  # YAML's !!set: a list, as Ansible prints it (in an order of fabnet's)
        return [to_json_value(v, tag_unsafe=tag_unsafe) for v in sorted(value, key=repr)]
    if isinstance(value, datetime.date | datetime.time):  # an unquoted YAML timestamp: ISO 8601, as Ansible
        return value.isoformat()
    return value


yaml.add_constructor("!vault", _vault, Loader=yaml.SafeLoader)
yaml.add_constructor("!unsafe", _unsafe, Loader=yaml.SafeLoader)

__all__ = ["HIDDEN", "PASSWORD_VARS", "UnsafeText", "VaultedValue", "VaultedValueError", "hide_passwords",
           "secret_variable", "to_json_value", "vault_file"]
