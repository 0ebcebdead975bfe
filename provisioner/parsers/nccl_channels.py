"""What an NCCL INFO log says each communicator built (parsers/nccl_debug): its place among nodes, its rings
and trees, the transport of every connection per channel and peer, its channel counts and its init timing.

A communicator's lines come from the thread that initialises it. 2.19 on print `comm 0x.. rank R nRanks N
nNodes M localRanks L localRank l MNNVL 0` before its rings and connections; 2.7 to 2.18 name the comm only in
the last line, `comm 0x.. rank R nranks N cudaDev D busId B - Init COMPLETE`. So what a thread prints before
its comm is known waits for it, and `Init COMPLETE` ends the thread's comm (the next comm it makes is another).

Connections, in the wording of each release: `Ring 00 : 0[0] -> 1[1] via P2P/IPC` and `Ring 00 : 7 -> 8
[send] via NET/IB/0` (2.3 to 2.6), `Channel 00 : 0[1a000] -> 1[1b000] via P2P/IPC/read` (2.7 on, `Channel
00/1 :` with the connection index from 2.12), `CollNet 00/0 : 3 [send] via COLLNET/SHARP/0` (2.12 on). Each
rank's neighbours on every ring: `Ring 00 : 7 -> 0 -> 1` (prev -> rank -> next, 2.10 on). NVLS (2.17 on): the
rank that heads each NVLS head on every node, `NVLS Head  0:  0  8` (node 0's ranks print it, up to 20 nodes),
and this rank's head, `NVLS comm 0x.. headRank 0 nHeads 8 ...` (2.18 on). With runtime connect (2.22 on) NVLS
may be set up at the first collective, after `Init COMPLETE`: a comm pointer names its comm, and the head lines
belong to the comm the thread finished last unless it printed something of a new comm since.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_serializer, field_validator

from provisioner.parsers._text import Fact

Thread = tuple[str, str, str]  # (host, pid, tid); empty parts where the line's prefix names none

_CONNECTION = re.compile(
    r"^(?P<kind>Ring|Channel|CollNet) (?P<channel>[0-9]+)(?:/(?P<index>[0-9]+))? : (?P<src>[0-9]+)(?:\[[^\]]*\])?"
    r"(?: -> (?P<dst>[0-9]+)(?:\[[^\]]*\])?)?(?: \[(?P<direction>send|receive)\])? via (?P<transport>\S.*?)\s*$"
)
# The ring order rank 0 prints per channel: `Channel 00/08 :    0   7   6   5` (2.7 on), `Ring 00 :    0   1`.
_RING = re.compile(r"^(?:Channel [0-9]+/[0-9]+|Ring [0-9]+) :(?P<ranks>(?:\s+[0-9]+)+)\s*$")
_RING_CHANNEL = re.compile(r"[0-9]+")
_RING_PEERS = re.compile(
    r"^Ring (?P<channel>[0-9]+) : (?P<prev>-?[0-9]+) -> (?P<rank>[0-9]+) -> (?P<next>-?[0-9]+)\s*$")
_NVLS_HEAD = re.compile(r"^NVLS Head\s*(?P<head>[0-9]+):(?P<ranks>(?:\s+-?[0-9]+)*)\s*$")
_NVLS_COMM = re.compile(r"^NVLS comm (?P<comm>0x[0-9a-fA-F]+) headRank (?P<head>-?[0-9]+) nHeads (?P<nheads>[0-9]+)")
# `Trees [0] 1/8/-1->0->-1 [1] ...` (2.4 on; 2.5 to 2.7 add `|up->rank->down` for the second tree).
_TREE = re.compile(
    r"\[(?P<channel>[0-9]+)\]\s*(?P<down>-?[0-9]+/-?[0-9]+/-?[0-9]+)->(?P<rank>-?[0-9]+)->(?P<up>-?[0-9]+)"
)
_PLACE = re.compile(r"\bnNodes (?P<nnodes>[0-9]+) localRanks (?P<local_ranks>[0-9]+) localRank (?P<local_rank>[0-9]+)")
_DEVICE = re.compile(r"\bcudaDev (?P<cuda_dev>[0-9]+)(?: nvmlDev [0-9]+)? busId (?P<bus_id>[0-9a-fA-F]+)")
_COMM_ID = re.compile(r"\bcommId (?P<comm_id>0x[0-9a-fA-F]+)")
# `8 coll channels, 0 collnet channels, 16 nvls channels, 16 p2p channels, 2 p2p channels per peer` (2.7 on).
_COUNTS = re.compile(r"^[0-9]+ coll channels,")
_COUNT = re.compile(r"(?P<count>[0-9]+) (?P<what>[a-z0-9 ]+?) channels(?P<per> per peer)?")
# `NVLS multicast support is available on dev 0` / `is not available` (2.17 on).
_MULTICAST = re.compile(r"^NVLS multicast support is (?P<not>not )?available")
# `Connected all rings`, `Connected all trees`, `Connected NVLS tree`, `Connected binomial trees`, `Connected
# Collnet Chains ...`, `Connected all rings, use ring PXN 0 GDR 1` (2.27 on).
_CONNECTED = re.compile(r"^Connected (?:all )?(?P<what>rings|trees|NVLS tree|binomial trees|Collnet Chains|collnet)\b",
                        re.IGNORECASE)
# `Init timings: rank 2 nranks 16 total 1.08 (...)` (2.22), `Init timings - ncclCommInitRank: rank ...` (2.23 on).
_TIMINGS = re.compile(r"^Init timings(?: - \w+)?: rank (?P<rank>[0-9]+) nranks [0-9]+ total (?P<total>[0-9.]+)")


class Link(Fact):
    """A connection between two ranks on one or more channels, and the transport NCCL chose for it."""

    host: str | None = None
    comm: str | None = None
    kind: str  # ring (2.3 to 2.6), channel, collnet
    src: int
    dst: int | None = None  # a CollNet connection names one rank
    direction: str | None = None  # send / receive for network connections
    transport: str  # as printed after `via`: P2P/IPC/read, SHM/direct/direct, NET/IB/0/GDRDMA, ...
    channels: list[int] = Field(default_factory=list)
    line: int


class TreeNode(Fact):
    """A rank's place in one channel's tree: its parent (`up`, -1 at the root) and its children."""

    up: int
    down: list[int] = Field(default_factory=list)


class RingPeers(Fact):
    """A rank's neighbours on one channel's ring: the rank it receives from and the one it sends to."""

    prev: int
    next: int


class Communicator(Fact):
    """One communicator as a rank saw it: `network` is what that rank's `Using network` line said."""

    host: str | None = None
    pid: int | None = None
    comm: str
    rank: int
    nranks: int
    network: str | None = None
    comm_id: str | None = None
    cuda_dev: int | None = None
    bus_id: str | None = None
    nnodes: int | None = None
    local_ranks: int | None = None
    local_rank: int | None = None
    rings: dict[int, list[int]] = Field(default_factory=dict)  # channel -> ring order (rank 0 prints it)
    trees: dict[int, TreeNode] = Field(default_factory=dict)  # channel -> this rank's place
    ring_peers: dict[int, RingPeers] = Field(default_factory=dict)  # channel -> this rank's ring neighbours
    nvls_heads: dict[int, list[int]] = Field(default_factory=dict)  # NVLS head -> the rank heading it per node
    nvls_head_rank: int | None = None  # this rank's NVLS head (-1: none)
    nvls_nheads: int | None = None
    channels: dict[str, int] = Field(default_factory=dict)  # coll, collnet, nvls, p2p, p2p per peer
    nvls_multicast: bool | None = None  # whether NVLS multicast (NVSwitch SHARP) was available to the rank
    connected: list[str] = Field(default_factory=list)  # what it finished connecting: rings, trees, NVLS tree
    init_started: bool = False
    init_complete: bool = False
    init_seconds: float | None = None
    line: int

    # In JSON, channels of one layout are one entry: `[{"channels": [0, 8], "ranks": [0, 1, 2, 3]}, ...]`, not
    # 64 near-identical ones. Either form reads back.
    @field_serializer("rings", "trees", "ring_peers", when_used="json")
    def _grouped(self, by_channel: dict[int, Any]) -> list[dict[str, Any]]:
        return group_channels(by_channel)

    @field_validator("rings", "trees", "ring_peers", mode="before")
    @classmethod
    def _ungrouped(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        return {channel: {k: v for k, v in entry.items() if k != "channels"} if "ranks" not in entry
                else entry["ranks"] for entry in value for channel in entry["channels"]}


def group_channels(by_channel: dict[int, Any]) -> list[dict[str, Any]]:
    """{channel: layout} as one entry per distinct layout with the channels that share it, first-seen order."""
    groups: dict[str, dict[str, Any]] = {}
    for channel, layout in sorted(by_channel.items()):
        fields = layout.model_dump(mode="json") if isinstance(layout, Fact) else {"ranks": list(layout)}
        groups.setdefault(repr(fields), {"channels": [], **fields})["channels"].append(channel)
    return list(groups.values())


class Topology:
    """Reads the lines that describe what a communicator built; nccl_debug hands it every INFO message."""

    def __init__(self) -> None:
        self.links: dict[tuple[object, ...], dict[str, Any]] = {}
        self.pending: dict[Thread, dict[str, Any]] = {}  # what a thread printed before its comm was named
        self.pending_links: dict[Thread, list[dict[str, Any]]] = {}
        self.current: dict[Thread, dict[str, Any]] = {}  # the comm a thread is initialising
        self.finished: dict[Thread, dict[str, Any]] = {}  # the comm whose Init COMPLETE a thread printed last
        self.named: dict[tuple[str, str, str], dict[str, Any]] = {}  # (host, pid, comm pointer) -> its comm

    def read(self, message: str, thread: Thread, host: str | None, number: int) -> None:
        """Take a message that describes a communicator's build; any other is left alone."""
        if m := _CONNECTION.match(message):
            self._link(m, thread, host, number)
        elif m := _RING_PEERS.match(message):
            peers = RingPeers(prev=int(m.group("prev")), next=int(m.group("next")))
            self._target(thread).setdefault("ring_peers", {})[int(m.group("channel"))] = peers
        elif m := _NVLS_HEAD.match(message):
            heads = [int(r) for r in m.group("ranks").split()]
            self._nvls_target(thread).setdefault("nvls_heads", {})[int(m.group("head"))] = heads
        elif m := _NVLS_COMM.match(message):
            named = self.named.get((thread[0], thread[1], m.group("comm"))) or self._nvls_target(thread)
            named.update(nvls_head_rank=int(m.group("head")), nvls_nheads=int(m.group("nheads")))
        elif m := _RING.match(message):
            channel = int(_RING_CHANNEL.findall(message)[0])
            self._target(thread).setdefault("rings", {})[channel] = [int(r) for r in m.group("ranks").split()]
        elif message.startswith("Trees"):
            trees = self._target(thread).setdefault("trees", {})
            for t in _TREE.finditer(message):
                down = [int(d) for d in t.group("down").split("/") if d != "-1"]
                trees[int(t.group("channel"))] = TreeNode(up=int(t.group("up")), down=down)
        elif _COUNTS.match(message):
            self._target(thread)["channels"] = {
                c.group("what") + (" per peer" if c.group("per") else ""): int(c.group("count"))
                for c in _COUNT.finditer(message)
            }
        elif m := _MULTICAST.match(message):
            self._target(thread)["nvls_multicast"] = not m.group("not")
        elif m := _CONNECTED.match(message):
            connected = self._target(thread).setdefault("connected", [])
            if m.group("what") not in connected:
                connected.append(m.group("what"))
        elif m := _TIMINGS.match(message):
            comm = self.finished.get(thread) or self.current.get(thread)
            if comm is not None and comm.get("rank") == int(m.group("rank")):
                comm["init_seconds"] = float(m.group("total"))

    def comm(self, record: dict[str, Any], message: str, thread: Thread) -> None:
        """A line that names the communicator `record` (kept by nccl_debug): take what it and the thread said."""
        for pattern in (_PLACE, _DEVICE, _COMM_ID):
            if m := pattern.search(message):
                record.update({k: int(v) if v.isdigit() and k != "bus_id" else v for k, v in m.groupdict().items()})
        for name, value in self.pending.pop(thread, {}).items():
            if isinstance(value, dict) and isinstance(record.get(name), dict):
                record[name].update(value)
            else:
                record[name] = value
        # The thread's links so far are this comm's: filed under it, so the thread's next comm starts afresh.
        for link in self.pending_links.pop(thread, []):
            del self.links[_key(link, thread)]
            link["comm"] = record["comm"]
            kept = self.links.setdefault(_key(link, thread), link)
            kept["channels"] += [c for c in link["channels"] if c not in kept["channels"]]
        self.current[thread] = record
        self.named[(thread[0], thread[1], record["comm"])] = record
        if message.rstrip().endswith("Init START"):
            record["init_started"] = True
        elif message.rstrip().endswith("Init COMPLETE"):
            record["init_complete"] = True
            self.finished[thread] = record
            del self.current[thread]

    def build(self) -> list[Link]:
        return [Link.model_validate(link) for link in self.links.values()]

    def _target(self, thread: Thread) -> dict[str, Any]:
        return self.current.get(thread) or self.pending.setdefault(thread, {})

    def _nvls_target(self, thread: Thread) -> dict[str, Any]:
        """NVLS set up at the first collective (runtime connect) belongs to the comm the thread finished last."""
        if thread in self.current or self.pending.get(thread) or thread not in self.finished:
            return self._target(thread)
        return self.finished[thread]

    def _link(self, m: re.Match[str], thread: Thread, host: str | None, number: int) -> None:
        comm = self.current.get(thread)
        new: dict[str, Any] = {
            "host": host, "comm": comm["comm"] if comm else None, "kind": m.group("kind").lower(),
            "src": int(m.group("src")), "dst": int(m.group("dst")) if m.group("dst") else None,
            "direction": m.group("direction"), "transport": m.group("transport"), "channels": [], "line": number,
        }
        link = self.links.setdefault(_key(new, thread), new)
        if link is new and comm is None:
            self.pending_links.setdefault(thread, []).append(link)
        if int(m.group("channel")) not in link["channels"]:
            link["channels"].append(int(m.group("channel")))


def _key(link: dict[str, Any], thread: Thread) -> tuple[object, ...]:
    """One connection of one comm: a comm not yet named is the thread's (pid with the comm, since two
    processes may print the same comm address)."""
    owner = (thread[1], link["comm"]) if link["comm"] else thread
    return (link["host"], owner, link["kind"], link["src"], link["dst"], link["direction"], link["transport"])
