"""A host's drift as watch and the run history compare it: the checks of audit's JSON that are not ok, and
what appeared, changed or went away between two readings. Pure functions, no I/O.

Apart from the links' changes (changes.py), so the history of a one-shot audit or apply loads no more than this.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from provisioner.watch.events import Change


@dataclass(frozen=True)
class DriftItem:
    kind: str
    target: str
    attribute: str
    desired: str
    actual: str | None
    status: str  # drift or error
    message: str = ""

    @property
    def key(self) -> str:
        return f"{self.kind} {self.target}: {self.attribute}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "target": self.target, "attribute": self.attribute, "desired": self.desired,
                "actual": self.actual, "status": self.status, "message": self.message}


def drift_items(host_doc: Mapping[str, Any]) -> dict[str, DriftItem]:
    """The checks of one host of audit's JSON that are not ok (drift, or could not be read)."""
    items: dict[str, DriftItem] = {}
    for resource in host_doc.get("resources", []):
        for check in resource.get("checks", []):
            if check.get("status") in ("drift", "error"):
                item = DriftItem(str(resource.get("kind")), str(resource.get("target")), str(check.get("attribute")),
                                 str(check.get("desired")), check.get("actual"), str(check.get("status")),
                                 str(check.get("message") or ""))
                items[item.key] = item
    return items


def drift_diff(host: str, at: float, before: Mapping[str, DriftItem], after: Mapping[str, DriftItem]) -> list[Change]:
    """Drift items that appeared, changed their value, or went away (back to what the playbook wants)."""
    changes = []
    for key, item in after.items():
        old = before.get(key)
        what = f"{item.actual!s} (want {item.desired})" if item.status == "drift" else f"unreadable: {item.message}"
        if old is None:
            changes.append(Change(host, at, "drift_new", key, what))
        elif (old.actual, old.status) != (item.actual, item.status):
            changes.append(Change(host, at, "drift_changed", key, f"{old.actual!s} -> {what}"))
    for key, item in before.items():
        if key not in after:
            changes.append(Change(host, at, "drift_gone", key, f"back to {item.desired}"))
    return changes
