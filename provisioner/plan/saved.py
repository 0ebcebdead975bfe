"""Saved plans, as operators know them from terraform: `fabnet plan -o FILE` writes each host's facts
digest and steps; `fabnet apply --plan FILE` applies exactly those steps, and refuses a host whose
live facts no longer hash to the digest the plan was made from.

A plan file holds the commands as they will run, file contents included (base64), so it is written
readable by its owner only, like a terraform plan.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from provisioner.errors import ConfigError
from provisioner.output.files import write_report
from provisioner.resources.steps import Step

SCHEMA = "fabnet/plan/v1"


def to_dict(planned: list[Any], *, inventory: str, playbook: str, limit: str | None) -> dict[str, Any]:
    return {
        "schema": SCHEMA, "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "inventory": inventory, "playbook": playbook, "limit": limit,
        "hosts": [{"name": host.name, "status": host.audit.status, "facts_digest": host.digest,
                   "steps": [asdict(step) for step in host.steps]} for host in planned],
    }


def write(path: Path, data: dict[str, Any]) -> None:
    write_report(path, json.dumps(data, indent=1) + "\n")


def read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the plan: {exc}", file=str(path)) from exc
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ConfigError(f"not a fabnet plan (expected schema {SCHEMA})", file=str(path))
    return data


def steps_of(entry: dict[str, Any]) -> list[Step]:
    return [Step.from_dict(raw) for raw in entry.get("steps", [])]


def adopt(planned: list[Any], data: dict[str, Any]) -> list[str]:
    """Put the saved steps into freshly gathered hosts. A host whose facts changed since the plan, or
    that the plan does not know, gets no steps and is returned (by name) to be refused."""
    saved = {entry["name"]: entry for entry in data.get("hosts", [])}
    refused = []
    for host in planned:
        entry = saved.get(host.name)
        if entry is None or entry.get("facts_digest") != host.digest or not host.digest:
            host.steps = []
            refused.append(host.name)
            continue
        host.steps = steps_of(entry)
        by_target: dict[str, list[Step]] = {}
        for step in host.steps:
            by_target.setdefault(step.resource, []).append(step)
        for rp in host.resources:
            rp.steps = by_target.get(rp.outcome.target, [])
    return refused


def refusal(name: str, data: dict[str, Any]) -> str:
    """Why `adopt` refused a host: the plan was made without it, or its facts changed since."""
    if name not in {entry.get("name") for entry in data.get("hosts", [])}:
        return "not in the plan (it was made before this host was in the inventory); make a new plan"
    return "live state changed since the plan was made (facts digest differs); make a new plan"
