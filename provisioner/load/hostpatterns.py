"""Ansible host patterns (`--limit` and a play's `hosts:`), resolved exactly as Ansible's InventoryManager
resolves them: `,` or `:` separated terms; names, globs and `~regex` (matched from the start of the name)
against groups and hosts; subscripts `g[0]`, `g[-1]`, `g[1:]`, `g[0:2]` (inclusive); `&` and `!` applied
after the plain terms; `@file` in a limit. Unknown names are warnings, as in Ansible; fabnet refuses what
Ansible would silently read as "every host": an empty limit, an empty limit file, a broken regex.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from provisioner.errors import ConfigError, did_you_mean
from provisioner.load.yamlsrc import Origin


class PatternTarget(Protocol):
    """What patterns are matched against: hosts in definition order and each group's hosts in Ansible's order."""

    @property
    def hosts(self) -> Mapping[str, Any]: ...
    @property
    def group_order(self) -> Mapping[str, list[str]]: ...


_RANGE = r"\[(?:[a-z]:[a-z]|[0-9]+:[0-9]+)(?::[0-9]+)?\]"
_LABEL = rf"(?:\w|{_RANGE})(?:[\w-]|{_RANGE})*(?<![_-])"
_IPV4_PART = r"(?:[01]?[0-9]{1,2}|2[0-4][0-9]|25[0-5]|\[[0-9]+:[0-9]+(?::[0-9]+)?\])"
_ADDRESS = re.compile(
    rf"^(?:{_LABEL}(?:\.{_LABEL})*|{_IPV4_PART}(?:\.{_IPV4_PART}){{3}}|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?$", re.ASCII
)
# Names of localhost: where no host or non-empty group has the name, Ansible answers with the first of them that
# is an inventory host, or else with its implicit localhost (the controller itself, over a local connection).
_LOCALHOST = ("127.0.0.1", "localhost", "::1")
_TERMS = re.compile(r"(?:[^\s:\[\]]|\[[^\]]*\])+")
_SUBSCRIPT = re.compile(r"^(.+)\[(?:(-?[0-9]+)|([0-9]+)([:-])([0-9]*))\]$")


def _is_address(pattern: str) -> bool:
    if _ADDRESS.match(pattern):
        return True
    try:
        ipaddress.IPv6Address(pattern)
        return True
    except ValueError:
        return False


def split_pattern(pattern: str | Sequence[str]) -> list[str]:
    """Ansible's `split_host_pattern`: split on commas; without commas, on colons unless the whole pattern
    is one address (`host:port`, IPv6, `gpu[01:04]`). Raises ValueError where Ansible would silently drop
    characters (an unbalanced `[`), since what is left could select other hosts."""
    if not isinstance(pattern, str):
        return [term for item in pattern for term in split_pattern(str(item))]
    if "," in pattern:
        terms = pattern.split(",")
    elif _is_address(pattern.strip()):
        terms = [pattern]
    else:
        terms = _TERMS.findall(pattern)
        kept = re.sub(r"[\s:]", "", "".join(terms))
        if kept != re.sub(r"[\s:]", "", pattern):
            raise ValueError(f"cannot read host pattern {pattern!r}: unbalanced '[' or ']'")
    return [t.strip() for t in terms if t.strip()]


def limit_terms(limit: str, base: Path | None = None) -> list[str]:
    """A `--limit` value's terms, `@FILE` replaced by the file's lines (Ansible's retry files). An empty
    limit, or one whose terms are all empty, is a ConfigError: Ansible would select every host."""
    fail = _failer(None, "--limit")
    try:
        raw = split_pattern(limit)
    except ValueError as exc:
        raise fail(str(exc)) from None
    terms: list[str] = []
    for term in raw:
        if not term.startswith("@"):
            terms.append(term)
            continue
        path = Path(term[1:])
        if base is not None and not path.is_absolute():
            path = base / path
        if not path.is_file():
            raise fail(f"limit file {term[1:]!r} {'is not a file' if path.exists() else 'not found'}")
        try:
            lines = [line.strip() for line in path.read_text(encoding="utf-8").split("\n")]
        except (OSError, UnicodeDecodeError) as exc:
            raise fail(f"cannot read limit file {term[1:]!r}: {exc}") from None
        names = [line for line in lines if line]
        if not names:
            raise fail(f"limit file {term[1:]!r} is empty; Ansible would then select every host")
        terms.extend(names)
    if not terms:
        raise fail("the limit is empty; Ansible would select every host (give host or group names)")
    return terms


def _failer(origin: Origin | None, key: str) -> Any:
    def fail(message: str) -> ConfigError:
        return origin.error(message) if origin is not None else ConfigError(message, key=key)

    return fail


class _Matcher:
    def __init__(self, target: PatternTarget, fail: Any, warnings: list[str] | None) -> None:
        self.target = target
        self.fail = fail
        self.warnings = warnings
        self.unmatched: list[str] = []
        self.notes: list[str] = []
        self.matched_groups: list[str] = []
        self.controller: list[str] = []

    def evaluate(self, terms: Sequence[str]) -> list[str]:
        regular = [t for t in terms if t and t[0] not in "!&"]
        both = [t for t in terms if t and t[0] == "&"]
        minus = [t for t in terms if t and t[0] == "!"]
        hosts: list[str] = []
        for term in [*(regular or ["all"]), *both, *minus]:
            if term in self.target.hosts:
                hosts.append(term)
                continue
            found = self.one(term)
            if term[0] == "!":
                drop = set(found)
                hosts = [h for h in hosts if h not in drop]
            elif term[0] == "&":
                keep = set(found)
                hosts = [h for h in hosts if h in keep]
            else:
                existing = set(hosts)
                hosts.extend(h for h in found if h not in existing)
        return list(dict.fromkeys(hosts))

    def one(self, term: str) -> list[str]:
        pattern = term[1:] if term[0] in "!&" else term
        if not pattern:
            raise self.fail(f"{term!r} needs a name after {term[0]!r}")
        expr, subscript = pattern, None
        if pattern[0] != "~" and (m := _SUBSCRIPT.match(pattern)):
            expr, index, start, sep, end = m.groups()
            if sep == "-":
                raise self.fail(f"{pattern!r}: use the inclusive [x:y] form; Ansible removed [x-y]")
            subscript = (int(index), None) if index else (int(start), int(end) if end else -1)
        hosts = self.enumerate(expr)
        if not hosts and expr in _LOCALHOST and term[0] not in "!&":
            self.controller.append(term)
        if not hosts or subscript is None:
            return hosts
        loose: set[str] = getattr(self.target, "unordered_groups", set()) & set(self.matched_groups)
        if loose:
            self.notes.append(f"{pattern!r}: Ansible's host order for group {sorted(loose)[0]!r} is not defined "
                              "(several of its child groups have children), so Ansible may pick other hosts; "
                              "fabnet takes them in the order written")
        start_at, end_at = subscript
        try:
            if end_at:  # as Ansible: [x:] runs to the end, [x:y] includes y, and [x:0] means [x]
                end_at = len(hosts) - 1 if end_at == -1 else end_at
                return hosts[start_at : end_at + 1]
            return [hosts[start_at]]
        except IndexError:
            raise self.fail(f"no host matches the subscripted pattern {pattern!r} ({len(hosts)} hosts in "
                            f"{expr!r})") from None

    def enumerate(self, pattern: str) -> list[str]:
        try:
            # A user's `~[[...` is a valid expression that Python's re warns may change meaning (FutureWarning):
            # compiled as written, as Ansible compiles it, without that warning on the operator's screen.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                regex = re.compile(pattern[1:] if pattern[0] == "~" else fnmatch.translate(pattern))
        except re.error as exc:
            raise self.fail(f"invalid regular expression in {pattern!r}: {exc}") from None
        if pattern == "~":
            raise self.fail("'~' needs a regular expression after it")
        groups = [g for g in self.target.group_order if regex.match(g)]
        self.matched_groups = groups
        results = [h for g in groups for h in self.target.group_order[g]]
        if not groups or pattern[0] == "~" or any(c in pattern for c in ".?*["):
            results.extend(h for h in self.target.hosts if regex.match(h))
        if not results and pattern in _LOCALHOST:  # Ansible: another of its names for the inventory's localhost
            results = [h for h in self.target.hosts if h in _LOCALHOST][:1]
        if not results and not groups and pattern != "all":
            self.unmatched.append(pattern)
        return results


def match_hosts(
    target: PatternTarget,
    pattern: str | Sequence[str] | None,
    *,
    origin: Origin | None = None,
    warnings: list[str] | None = None,
    terms: Sequence[str] | None = None,
    limit: bool = False,
) -> list[str]:
    """Hosts matching an Ansible host pattern, in the order Ansible gives them.

    A term that matches nothing is a warning appended to `warnings` (Ansible: "Could not match supplied
    host pattern, ignoring"); when such a term leaves the pattern with no host at all it is a ConfigError,
    as are a broken regex and an out-of-range subscript. `terms`: terms already split (from `limit_terms`).
    A play's pattern (not a `limit`) naming localhost where the inventory has no such host is an error:
    Ansible would add the controller itself, which fabnet, reaching hosts over SSH only, does not manage.
    """
    if pattern is None and terms is None:
        return list(target.hosts)
    fail = _failer(origin, "--limit")
    if terms is None:
        try:
            terms = split_pattern(pattern or "")
        except ValueError as exc:
            raise fail(str(exc)) from None
    if not terms:
        raise fail("empty host pattern")
    matcher = _Matcher(target, fail, warnings)
    hosts = matcher.evaluate(terms)
    if matcher.controller and not limit:
        term = matcher.controller[0]
        raise fail(f"host pattern {term!r}: the inventory has no host {term.split('[')[0]!r}, so Ansible would run "
                   "this play on the controller itself (its implicit localhost, a local connection); fabnet "
                   "reaches hosts over SSH only: add the host to the inventory (with ansible_host) to manage it, "
                   "or leave it out of the pattern")
    names = sorted(set(target.group_order) | set(target.hosts))
    if not hosts and matcher.unmatched:  # a known but empty group is not an error, as in Ansible
        term = matcher.unmatched[0]
        hint = did_you_mean(term, names)
        raise fail(f"could not match host pattern {term!r}: no host or group of that name{hint}")
    if warnings is not None:
        where = f"{origin}: " if origin is not None else "--limit: "
        warnings.extend(where + note for note in dict.fromkeys(matcher.notes))
        for term in dict.fromkeys(matcher.unmatched):
            warnings.append(f"{where}could not match host pattern {term!r}, ignored as Ansible ignores it"
                            + did_you_mean(term, names))
    return hosts


__all__ = ["PatternTarget", "limit_terms", "match_hosts", "split_pattern"]
