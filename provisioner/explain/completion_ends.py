"""Which RDMA completion errors are the two ends of one connection. When the path between two hosts fails, the
queue pair's two ends both give up retrying and each logs the same error; one cause then names the link between
them, not two causes one host each.

Two records are taken as the two ends when each names the other's GID (`localGid X remoteGids Y`, 2.19 on), or
each names the other's address (`from peer A<port>`, the address the peer's log shows as its own in `OOB if:A<0>`
or `Bootstrap : Using if:A<0>`, or an inventory alias), or, where neither says, the logs show no host but these
two. Anything that points elsewhere (a GID or address of a third host) keeps them apart.

A flushed request (status 5) is only the echo of an earlier error on its queue pair: on the other end of a connection
whose first end logged a path error it is that error's echo, so it joins that link's cause instead of standing alone.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence

from provisioner.explain import ibverbs
from provisioner.explain.logs import Log
from provisioner.parsers.nccl_errors import CompletionError

Key = tuple[str | None, str | None, int]  # host, device, status: one group of completion errors

# The address a host's own NCCL lines give it: `NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.0.0.1<0>`,
# `Bootstrap : Using eth0:10.0.0.1<0>`, `NET/Socket : Using [0]eth0:10.0.0.1<0>`.
_OWN = re.compile(r"(?:\bOOB|\bUsing)\s+(?:\[[0-9]+\])?[\w.@-]+:(?P<addr>[0-9A-Fa-f:.]+?)<[0-9]+>")


def _ip(text: str | None) -> str | None:
    """An address as one spelling (an IPv4-mapped GID as its IPv4 address), or None for none or a blank one."""
    try:
        address = ipaddress.ip_address((text or "").strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return None if address.is_unspecified else str(address)


def _owners(logs: list[Log]) -> dict[str, str]:
    """{address or name: host} as far as the logs and the caller's aliases say."""
    owners: dict[str, str] = {}
    for log in logs:
        owners.update({(_ip(k) or k): v for k, v in log.aliases.items()})
        for line, m in log.grep(_OWN):
            if line.host and (address := _ip(m["addr"])):
                owners.setdefault(address, line.host)
    return owners


def _job_hosts(logs: list[Log]) -> set[str]:
    names: set[str] = set()
    for log in logs:
        names |= {line.host for line in log.lines if line.host} | set(log.rank_hosts.values())
        names |= set(log.nccl.hosts) if log.nccl else set()
        names |= {d.host for d in log.tests.devices} if log.tests else set()
    return names


class _Ends:
    def __init__(self, logs: list[Log]) -> None:
        self.owners = _owners(logs)
        self.aliases = {k: v for log in logs for k, v in log.aliases.items()}
        self.hosts = {self.node(h) for h in _job_hosts(logs)}

    def node(self, name: str) -> str:
        return self.aliases.get(name, name)

    def peer(self, address: str) -> str | None:
        found = self.owners.get(_ip(address) or address)
        return self.node(found) if found else None

    def link(self, a: Key, a_errors: Sequence[CompletionError], b: Key, b_errors: Sequence[CompletionError]
             ) -> str | None:
        """Why the two groups are the two ends of one connection, or None when nothing says so."""
        if a[0] is None or b[0] is None or (host_a := self.node(a[0])) == (host_b := self.node(b[0])):
            return None
        gids = [{g for e in errors if (g := _ip(getattr(e, side)))} for errors in (a_errors, b_errors)
                for side in ("local_gid", "remote_gid")]
        if all(gids):
            return "each names the other's GID" if gids[0] & gids[3] and gids[2] & gids[1] else None
        named = [[self.peer(e.peer) for e in errors if e.peer] for errors in (a_errors, b_errors)]
        if any(p is not None and p != other for peers, other in zip(named, (host_b, host_a), strict=True)
               for p in peers):
            return None
        if all(peers and None not in peers for peers in named):
            return "each names the other's address"
        if self.hosts == {host_a, host_b}:
            return "no other host is in the logs"
        return None


def _matched(why: Mapping[tuple[Key, Key], str], keys: Sequence[Key], done: set[Key]
             ) -> dict[Key, tuple[Key, str]]:
    """{key: (its other end, why)} for the keys not yet done that have exactly one other end among those."""
    found = {k: [b for a, b in why if a == k and b not in done] for k in keys if k not in done}
    return {k: (ends[0], why[(k, ends[0])]) for k, ends in found.items()
            if len(ends) == 1 and found.get(ends[0]) == [k]}


def pair(groups: Mapping[Key, Sequence[CompletionError]], logs: list[Log]) -> list[tuple[list[Key], str]]:
    """The groups as causes: two groups that are the ends of one link together (the first end's error first), with
    why, each other alone (with ""). Only errors of the fabric path fold (both ends see a lost path alike; a
    registration error is one host's), first the same status on both ends, then a flush on the end facing a path
    error, and only where each end has exactly one match."""
    ends = _Ends(logs)
    keys = list(groups)
    fabric = [k for k in keys if ibverbs.status(k[2]).kind == "fabric"]
    flush = [k for k in keys if ibverbs.status(k[2]).kind == "flush"]
    same = {(a, b): reason for a in fabric for b in fabric
            if a != b and a[2] == b[2] and (reason := ends.link(a, groups[a], b, groups[b]))}
    paired = _matched(same, keys, set())
    echo = {(a, b): reason for a in fabric for b in flush if (reason := ends.link(a, groups[a], b, groups[b]))}
    echo |= {(b, a): reason for (a, b), reason in echo.items()}
    paired |= _matched(echo, keys, set(paired))
    out: list[tuple[list[Key], str]] = []
    done: set[Key] = set()
    for key in keys:
        if key in done:
            continue
        if key in paired:
            other, reason = paired[key]
            # The error the flush echoes names the cause, so it comes first.
            first, second = (other, key) if ibverbs.status(key[2]).kind == "flush" else (key, other)
            out.append(([first, second], reason))
            done |= {key, other}
        else:
            out.append(([key], ""))
            done.add(key)
    return out
