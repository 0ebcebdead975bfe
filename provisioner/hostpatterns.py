"""Ansible host patterns (`--limit` and a play's `hosts:`): terms, globs, `~regex`, `&` and `!`,
resolved against an inventory's hosts and groups.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from provisioner.errors import ConfigError, did_you_mean
from provisioner.yamlsrc import Origin

if TYPE_CHECKING:  # inventory.py imports this module for `Inventory.select`
    from provisioner.inventory import Inventory


def split_pattern(pattern: str | Sequence[str]) -> list[str]:
    """Split an Ansible host pattern on commas, or on colons when it has none (not inside `[..]` and
    not through an IPv6 address)."""
    if not isinstance(pattern, str):
        return [term for item in pattern for term in split_pattern(str(item))]
    pattern = pattern.strip()
    if "," in pattern:
        return [t for part in pattern.split(",") for t in split_pattern(part)]
    try:
        ipaddress.ip_address(pattern.lstrip("!&"))
        return [pattern] if pattern else []
    except ValueError:
        pass
    return [t.strip() for t in re.findall(r"(?:\[[^\]]*\]|[^:\[])+", pattern) if t.strip()]


def _term_hosts(inventory: Inventory, term: str) -> set[str]:
    if term in ("all", "*"):
        return set(inventory.hosts)
    result: set[str] = set()
    if term.startswith("~"):
        try:
            regex = re.compile(term[1:])
        except re.error as exc:
            raise ValueError(f"bad regular expression {term[1:]!r}: {exc}") from None
        for group, members in inventory.groups.items():
            if regex.search(group):
                result |= members
        result |= {h for h in inventory.hosts if regex.search(h)}
        return result
    if term in inventory.groups:
        result |= inventory.groups[term]
    if term in inventory.hosts:
        result.add(term)
    if any(c in term for c in "*?["):
        for group, members in inventory.groups.items():
            if fnmatch.fnmatchcase(group, term):
                result |= members
        result |= {h for h in inventory.hosts if fnmatch.fnmatchcase(h, term)}
    return result


def match_hosts(
    inventory: Inventory, pattern: str | Sequence[str] | None, *, origin: Origin | None = None
) -> list[str]:
    """Hosts matching an Ansible host pattern, in inventory order.

    Terms are host names, group names, globs (`gpu-*`), `~regex`, `all`; `!term` removes hosts and
    `&term` keeps only hosts also in that term. As in Ansible, plain terms are applied first, then `&`,
    then `!`; a pattern of only `!`/`&` terms starts from all hosts. A term that matches nothing is an
    error (Ansible warns, then fails when nothing is left; a typo in `--limit` should not go unnoticed).
    """
    if pattern is None:
        return list(inventory.hosts)
    terms = split_pattern(pattern)

    def fail(message: str) -> ConfigError:
        if origin is not None:
            return origin.error(message)
        return ConfigError(message, key="--limit")

    if not terms:
        raise fail("empty host pattern")
    plain = [t for t in terms if t[0] not in "!&"]
    both = [t[1:] for t in terms if t[0] == "&"]
    minus = [t[1:] for t in terms if t[0] == "!"]
    names = sorted(set(inventory.groups) | set(inventory.hosts))

    def hosts_of(term: str) -> set[str]:
        try:
            found = _term_hosts(inventory, term)
        except ValueError as exc:
            raise fail(str(exc)) from None
        if not found and term not in inventory.groups:
            hint = did_you_mean(term, names)
            raise fail(f"could not match host pattern {term!r}: no host or group of that name{hint}")
        return found

    selected: set[str] = set()
    for term in plain or ["all"]:
        selected |= hosts_of(term)
    for term in both:
        selected &= hosts_of(term)
    for term in minus:
        selected -= hosts_of(term)
    return [h for h in inventory.hosts if h in selected]


__all__ = ["match_hosts", "split_pattern"]
