"""A version requirement in a playbook (`version: '>=23.10'`) as a pydantic value, and the version part
of what a host reports. Parsing and comparing are provisioner.parsers.versions'."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from provisioner.parsers import versions


def installed_version(text: str) -> str:
    """The version part of what a host reports: `MLNX_OFED_LINUX-23.10-1.1.9.0:` -> `23.10-1.1.9.0`."""
    return re.sub(r"^\D*", "", text.strip().rstrip(":"))


class VersionConstraint(BaseModel):
    """A version requirement such as `==23.10-1.1.9.0`, `>=23.07` or `>=23.07,<24.04`.

    Parsing and matching are `provisioner.parsers.versions`' (one notion of versions in the project):
    comparisons look only as deep as the constraint is written, so `==2.21.5` accepts
    `2.21.5-1+cuda12.4` and `<24.04` refuses `24.04-0.6.6.0`. A bare version means `==`.
    """

    model_config = ConfigDict(frozen=True)

    text: str

    @model_validator(mode="before")
    @classmethod
    def _parse(cls, value: Any) -> Any:
        if isinstance(value, cls | dict):
            return value
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValueError("expected a version constraint string such as '>=23.10'")
        if isinstance(value, float):
            # YAML reads 23.10 as the number 23.1: the version the user meant is already lost.
            raise ValueError(f"YAML read the version as the number {value}; quote it, e.g. version: '23.10'")
        text = str(value).strip()
        versions.parse_constraint(text)  # its ValueError names the bad clause and the operators allowed
        return {"text": text}

    def matches(self, installed: str) -> bool:
        """Whether a version as a host reports it (product prefix and all) satisfies the constraint."""
        try:
            return versions.matches(installed_version(installed), self.text)
        except ValueError:
            return False

    def __str__(self) -> str:
        return self.text
