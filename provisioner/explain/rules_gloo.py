"""gloo transfers that stop after the ranks connected: the signature of a path that passes small packets
(the rendezvous, gloo's handshakes, barriers) and drops full-size frames (an MTU blackhole), and, where
the errors name peers, the node every timed-out connection shares.

Wording read (gloo's transport/tcp and transport/uv, as torch vendors it): an operation that waited past
the process group's timeout, `Timed out waiting 1800000ms for recv operation to complete` (send too;
unbound_buffer.cc, no peer named); in sync mode `Read timeout [ADDR]:PORT` / `Write timeout [ADDR]:PORT`;
a socket error `Read error [ADDR]:PORT: Connection timed out` or `writev [ADDR]:PORT: ...` (pair.cc; the
newest gloo writes the peer as `rank 2 ([ADDR]:PORT)`). `Connection timed out` (ETIMEDOUT) is TCP giving
up on segments the peer never acknowledged on a connection that worked before: that names the path.
A process that died closes its sockets instead (`Connection closed by peer`, `Connection reset by peer`),
which is the dead-peer rule's, unless the ranks that closed had themselves given up waiting (gloo closes a
rank's connections when its transfer times out; a `fabnet smoke` rank exits at its deadline).

Before any transfer, the address gloo binds: with GLOO_SOCKET_IFNAME unset, torch's ProcessGroupGloo takes
the one the hostname resolves to and, where it resolves to none of the host's own, warns `Unable to resolve
hostname to a (local) address. Using the loopback address as fallback.` (every release since 1.x) and
publishes 127.0.0.1, which no other node can reach: `Gloo connectFullMesh failed with [...pair.cc:N] no
error` (older), `... timed out connecting: SO_ERROR: Connection refused, remote=[127.0.0.1]:PORT` (newer).
vLLM and SGLang build such CPU groups even where NCCL carries the data.
"""

from __future__ import annotations

import re

from provisioner.explain.evidence import Hit, counted, evidence, grep, hosts, listed, multi_node
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.explain.rules_job import CRASH
from provisioner.parsers._text import unique

_PEER = r"(?:rank (?P<rank>[0-9]+) \()?\[(?P<peer>[0-9a-fA-F.:]+)\]:(?P<port>[0-9]+)\)?"
# TCP gave up: the peer stopped acknowledging data on an established connection.
_TCP_TIMEOUT = re.compile(r"(?:Read error|writev)\s+" + _PEER + r"\s*:\s*Connection timed out", re.I)
# A rank that gave up waiting: gloo's own timeout on a transfer (no peer), a sync-mode socket's, or the
# deadline of a `fabnet smoke` rank (it exits while still waiting).
_STALL = re.compile(r"Timed out waiting (?P<ms>[0-9]+) ?ms for (?P<op>recv|send) operation"
                    r"|(?:Read|Write) timeout\s+" + _PEER + r"|own deadline of [0-9.]+ s reached", re.I)
# The rank a `fabnet smoke` rank's error line names for itself: `rank 3 error (run): ...`.
_OWN_RANK = re.compile(r"^rank (?P<rank>[0-9]+) error\b")
_ADDRESS = re.compile(r"\[(?P<peer>[0-9a-fA-F.:]+)\]:[0-9]+")
# A peer process went away (or a rank crashed): then timeouts are its echo, not the path's.
_GONE = re.compile(r"Connection (?:closed by (?:remote )?peer|reset by peer)|Socket (?:unexpectedly )?closed|"
                   r"Broken pipe|remote process exited|ncclRemoteError", re.I)


_LOOPBACK_FALLBACK = re.compile(r"Unable to resolve hostname to a \(local\) address\. Using the loopback address "
                                r"as fallback", re.I)
# What a rank on another node gets from a peer that published the loopback address.
_MESH_FAILED = re.compile(r"Gloo connectFullMesh failed|remote=\[(?:127\.|::1\])", re.I)


def _fix(where: str) -> str:
    """The MTU check, sent to the path the cause could name (`where`)."""
    return (f"Find the hop with the smaller MTU on {where}: from each host, `ping -M do -s 8972 PEER` (MTU 9000; "
            "`-s 1472` for 1500) must pass wherever small pings do; check the hosts' interfaces (`ip link`) and "
            "every switch port on the path, or run `fabnet smoke`, whose path check names the host.")
_LIMITS = ("A hop with a smaller MTU than the hosts drops full-size frames without a word; a host that went down "
           "gives the same error.")


def _path_cause(hits: list[tuple[str | None, str, LogLine]], aliases: dict[str, str]) -> Cause:
    """TCP timeouts: each is a pair (the host that reported it, the peer it names). The node in every
    pair is the one whose path drops the frames: in a ring, the node's two neighbours lose it and it
    loses both of them, so one pair alone cannot say which end is at fault. A reporter is named by its
    host, a peer by its address: `aliases` (an inventory's) tells when they are the same node."""
    pairs = list(dict.fromkeys((host, peer) for host, peer, _ in hits))
    reporters = unique([host for host, _ in pairs if host])
    peers = unique([peer for _, peer in pairs])
    listing = ", ".join(f"{host or 'a rank'} -> {peer}" for host, peer in pairs)
    node = {end: aliases.get(end, end) for pair in pairs for end in pair if end}
    common = set(node.values())
    for pair in pairs:
        common &= {node[end] for end in pair if end}
    lines = [line for _, _, line in hits]
    if len(pairs) > 1 and len(common) == 1:
        found = next(iter(common))
        named, addresses = [h for h in reporters if node[h] == found], [p for p in peers if node[p] == found]
        detail = (f"TCP gave up on connections the ranks had made and used ({listing}): every one of them "
                  f"involves {found}, so the path that drops the data is {found}'s. ") + _LIMITS
        title = f"the path of {found} drops full-size frames (MTU blackhole): connections to it timed out"
        where = f"the path of {found}"
    else:
        named, addresses = reporters, peers
        where = "each pair's path"
        if len(pairs) == 1:
            why = "this one pair, so it cannot tell which end's path drops the frames: check both."
            where = "the paths of both ends of that pair"
        elif not aliases:
            why = ("several pairs; which host has which address it does not say (--inventory tells), so the "
                   "node common to them is not named: check each pair's path.")
        else:
            why = "no node common to every pair: check each pair's path."
        detail = (f"TCP gave up on connections the ranks had made and used ({listing}): small packets passed, "
                  "the data did not. " + _LIMITS + " The log shows " + why)
        title = "a path drops full-size frames (MTU blackhole): connections timed out mid-transfer"
    return Cause(id="mtu-blackhole", title=title, detail=detail, fix=_fix(where), score=75, hosts=named,
                 addresses=addresses, evidence=evidence(lines))


def _rank_of(line: LogLine) -> tuple[str, ...]:
    """Who printed a stall line: its global rank where the log says (a launcher's tag, a `fabnet smoke`
    rank's own `rank N error`), else its file, host and words, so that a rank repeating its error (the
    exception, then a launcher's summary of it) is one rank, not two."""
    if line.rank is not None:
        return ("rank", str(line.rank))
    if own := _OWN_RANK.match(line.text):
        return ("rank", own.group("rank"))
    return ("line", line.file, line.host or "", line.text)


def _echoes(gone: list[Hit], stalled: set[str], aliases: dict[str, str]) -> bool:
    """Whether every connection that closed was closed by a rank that had itself given up waiting: gloo
    closes a rank's connections when its transfer times out, and a rank past its deadline exits. Which
    host has which address only an inventory says; without it a closure may be a crash's."""
    for line, _ in gone:
        peer = _ADDRESS.search(line.text)
        if peer is None or aliases.get(peer.group("peer")) not in stalled:
            return False
    return True


def stalled_transfers(logs: list[Log]) -> list[Cause]:
    aliases = {k: v for log in logs for k, v in log.aliases.items()}
    tcp = grep(logs, _TCP_TIMEOUT)
    if tcp:
        return [_path_cause([(line.host, m.group("peer"), line) for line, m in tcp], aliases)]
    stalls = grep(logs, _STALL)
    if not stalls or grep(logs, CRASH) or not multi_node(logs):
        return []
    lines = [line for line, _ in stalls]
    who = hosts(lines)
    gone = grep(logs, _GONE)
    if gone and not _echoes(gone, {aliases.get(h, h) for h in who}, aliases):
        return []  # a peer went away first: the dead-peer rule's
    stalled = list(dict.fromkeys(_rank_of(line) for line in lines))
    ranks = [key[1] for key in stalled if key[0] == "rank"]
    seconds = max((int(m.group("ms")) for _, m in stalls if m.group("ms")), default=0) / 1000
    waited = f" waited {seconds:g} s and" if seconds else ""
    where = ", ".join(who) if who else (listed("rank", ranks) if ranks else "the ranks")
    detail = (f"{counted(len(stalled), 'rank')} on {where}{waited} gave up waiting for transfers on connections gloo "
              "had already made (the rendezvous and its handshakes went through), and no rank crashed"
              + (" (the connections that closed were those of ranks that had given up)" if gone else
                 " or closed a connection")
              + ": data stopped flowing without an error, the signature of a path that passes small packets "
                "and drops full-size frames. A rank stuck outside the collective gives the same timeouts. "
                "These errors name no peer, so the log alone cannot tell which node's path it is.")
    return [Cause(id="mtu-blackhole", title="collectives timed out after the ranks connected (MTU blackhole?)",
                  detail=detail, fix=_fix("the path of every node the ranks ran on"), score=62,
                  evidence=evidence(lines + [line for line, _ in gone]))]


def loopback_fallback(logs: list[Log]) -> list[Cause]:
    """gloo bound to loopback because the hostname did not resolve to one of the host's addresses. On one
    node that works (the warning is routine there); across nodes the ranks cannot connect."""
    warned = grep(logs, _LOOPBACK_FALLBACK)
    if not warned:
        return []
    failed = grep(logs, _MESH_FAILED)
    if not failed and not multi_node(logs):
        return []
    lines = [line for line, _ in warned] + [line for line, _ in failed]
    return [Cause(
        id="gloo-loopback-fallback",
        title="gloo bound to the loopback address: the hostname does not resolve to an address of the host",
        detail=("torch's gloo process group binds the address the hostname resolves to; it resolved to none of "
                "the host's own, so gloo fell back to 127.0.0.1 and published it, and ranks on other nodes cannot "
                "connect to it" + (" (the full-mesh connect failed)" if failed else
                                   ": a group within one node still works, and the log shows no connect failing yet")
                + ". vLLM and SGLang build such CPU groups even where NCCL carries the data."),
        fix=("On every node set GLOO_SOCKET_IFNAME to the interface the nodes share (for Ray workers, in the "
             "environment of `ray start` or the job's runtime env, so the workers inherit it), or make the "
             "hostname resolve to that interface's address (/etc/hosts or DNS; a container on the host's network "
             "sees the host's name but its own /etc/hosts)."),
        score=88 if failed else 60, hosts=hosts(lines), settings=["GLOO_SOCKET_IFNAME"], evidence=evidence(lines),
    )]
