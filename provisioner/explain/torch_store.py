"""What torch's TCPStore clients report when the store's server goes away mid-job: the server's address, and
that it was the store (not a data-path peer) that dropped the connection.

Wording read (torch/csrc/distributed/c10d TCPStore and ProcessGroupNCCL across releases): `[c10d] recvValue
failed on SocketImpl(fd=N, addr=[host]:port, remote=[host]:port): Connection reset by peer` (2.4 on; other
operations than recvValue print the same shape), `Failed to check the "should dump" flag on TCPStore, (maybe
TCPStore server has shut down too early), with error: ...` (the heartbeat monitor, 2.3 on). The server lives in
rank 0's process (or torchrun's agent on the master node), so a reset from it means that process ended.

Where the store is, said before connecting to it: torchelastic 0.1's etcd rendezvous (`Rank N will conenct to
TCPStore server at H:P`, sic, and on rank 0 `Setting up TCPStore server on H:P`, then `TCPStore server initialized
on H:P`) and torch's elastic agent (`Creating c10d store on H:P`, then `Successfully created c10d store`, 1.9 on).
"""

from __future__ import annotations

import re

from provisioner.explain.logs import Log, LogLine
from provisioner.parsers._text import unique

# The client's socket named by its two ends; a host in brackets (a name or an address, `[::ffff:10.0.0.1]`).
_SOCKET = re.compile(r"\b(?P<op>\w+) failed on SocketImpl\(fd=[0-9]+, addr=\[(?P<local>[^\]]*)\]:[0-9]+, "
                     r"remote=\[(?P<remote>[^\]]*)\]:(?P<port>[0-9]+)\)")
_SHOULD_DUMP = re.compile(r"Failed to check the \"should dump\" flag on TCPStore")
_ANNOUNCED = re.compile(r"Rank [0-9]+ will con(?:enct|nect) to TCPStore server at (?P<a>\S+):[0-9]+"
                        r"|Setting up TCPStore server on (?P<b>\S+):[0-9]+|Creating c10d store on (?P<c>\S+):[0-9]+")
_CREATED = re.compile(r"TCPStore server initialized on|Successfully created c10d store")


def store_servers(lines: list[LogLine]) -> list[str]:
    """`host:port` of each store server the lines say a client lost."""
    return unique([f"{m['remote']}:{m['port']}" for line in lines if (m := _SOCKET.search(line.text))])


def store_note(lines: list[LogLine]) -> str:
    """What a lost connection says when it was torch's store that dropped it; empty when none was."""
    servers = store_servers(lines)
    if not servers and not any(_SHOULD_DUMP.search(line.text) for line in lines):
        return ""
    where = f" at {', '.join(servers)}" if servers else ""
    return (f" The connection lost is torch's key-value store (TCPStore){where}: its server runs in rank 0's "
            "process (or torchrun's agent on the master node), so that process ended or was killed while the "
            "others still used it. Its own output has the first error; this is its consequence, not a fault of "
            "the data network.")


def announced_store(log: Log, line: LogLine) -> tuple[str, LogLine] | None:
    """The store's host and the line before `line` (from the same host) that named it, where no line says that
    store was created since: a lookup that failed at `line` was of that host."""
    for earlier in reversed(log.lines[:log.lines.index(line)]):
        if earlier.host != line.host:
            continue
        if _CREATED.search(earlier.text):
            return None
        if m := _ANNOUNCED.search(earlier.text):
            return next(host for host in m.groups() if host).strip("[]"), earlier
    return None
