"""A wait in torch's key-value store that timed out: the store-based rendezvous or barrier (a process group's
gloo mesh, torchelastic's role info, a barrier on the store) that not every rank reached.

Wording read (torch/csrc/distributed/c10d TCPStore across releases): `torch.distributed.DistStoreError: wait
timeout after 600000ms, keys: /default_pg/0//cuda//0` (2.5 on; the keys as waited for, each with the store's
`/` prefix), before it `RuntimeError: Wait timeout` (1.x) and the FileStore's `Timeout waiting for key: K`; a
get that timed out says only `RuntimeError: Socket Timeout` (1.x) or `DistStoreError: Socket Timeout` (2.x), and
the traceback's frames then tell which step waited (`_exit_barrier`, `_share_and_gather`, ...).
Gloo's full-mesh rendezvous and torchelastic's role info key each rank's entry by its rank (the key's last
part), so such keys name the ranks that had not posted theirs.
"""

from __future__ import annotations

import re

from provisioner.explain.evidence import evidence, for_count, grep, hosts, listed
from provisioner.explain.logs import Log
from provisioner.explain.model import Cause
from provisioner.explain.torch_store import store_servers
from provisioner.parsers._text import unique

_WAIT = re.compile(r"\bwait timeout after (?P<ms>[0-9]+) ?ms, keys: (?P<keys>\S.*)"
                   r"|(?:RuntimeError|DistStoreError): Wait timeout\b|Timeout waiting for key: (?P<key>\S+)")
_RANK_KEY = re.compile(r"/(?P<rank>[0-9]+)$")
# The store's client giving up on a blocking call (a get or wait on a key no one had set yet) with no key named:
# `RuntimeError: Socket Timeout` (1.x, raised from recvBytes in c10d/Utils.hpp), `DistStoreError: Socket Timeout`
# (2.x). An error class must stand before it: torch's own sentence around a store error (`... got error: Socket
# Timeout`) is the NCCL-id rule's.
_SOCKET_TIMEOUT = re.compile(r"(?:RuntimeError|DistStoreError|DistNetworkError):\s*Socket Timeout\b")
_BARRIER_REPORT = re.compile(r"Error waiting on exit barrier")
# The traceback's frames above the error name the store-based step that waited.
_FRAME = re.compile(r"\bin (?P<fn>_exit_barrier|_share_and_gather|_store_based_barrier|next_rendezvous|_rendezvous)\b")
_STEPS = {"_exit_barrier": "torchelastic's exit barrier (each node's agent waiting for the others at the end)",
          "_share_and_gather": "torchelastic's exchange of the agents' role info right after the rendezvous",
          "_store_based_barrier": "the store-based barrier of a process group's creation",
          "next_rendezvous": "torchelastic's rendezvous", "_rendezvous": "torchelastic's rendezvous"}
_FRAMES_UP = 30


def _step(log: Log, number: int) -> str | None:
    """The store-based step the traceback ending at line `number` was in (its innermost named frame)."""
    for back in range(number - 1, max(0, number - _FRAMES_UP), -1):
        line = log.line(back)
        if line is not None and (m := _FRAME.search(line.text)):
            return _STEPS[m["fn"]]
    return None


def store_wait(logs: list[Log]) -> list[Cause]:
    hits = grep(logs, _WAIT)
    if not hits:
        return _socket_timeout(logs)
    lines = [line for line, _ in hits]
    keys = unique([k.strip() for _, m in hits for k in (m["keys"] or m["key"] or "").split(",") if k.strip()])
    waited = unique([f"{int(m['ms']) / 1000:g} s" for _, m in hits if m["ms"]])
    ranks = [m["rank"] for k in keys if (m := _RANK_KEY.search(k))]
    detail = ("a wait in torch's key-value store (TCPStore) timed out" + (f" after {', '.join(waited)}" if waited
              else "") + (f" on {listed('key', keys[:4])}" if keys else "") + ": the store-based rendezvous or "
              "barrier (a process group's setup, torchelastic's rendezvous) did not complete, because not every "
              "rank posted its key.")
    if ranks and len(ranks) == len(keys):
        detail += (f" The keys end in the rank that posts them: {listed('rank', unique(ranks))} never arrived "
                   f"({for_count(len(unique(ranks)), 'it', 'they')} did not start, crashed or hung before this point, "
                   "or could not reach the store).")
    servers = store_servers([line for log in logs for line in log.lines])
    return [Cause(
        id="rendezvous-incomplete", title="the store-based rendezvous or barrier did not complete",
        detail=detail,
        fix="Read the output of the ranks that never arrived for their first error (or whether they started at "
            "all); check that every node reaches the store's host:port (MASTER_ADDR and MASTER_PORT, a firewall, "
            "name resolution) and that every rank runs the same world size and creates the same process groups "
            "in the same order.",
        score=55, hosts=hosts(lines), addresses=servers, settings=["MASTER_ADDR", "MASTER_PORT"],
        evidence=evidence(lines),
    )]


def _socket_timeout(logs: list[Log]) -> list[Cause]:
    """A store call that timed out with only `Socket Timeout` to say so. Where the agent also reported its exit
    barrier, that rule reads the same error in its own words."""
    if grep(logs, _BARRIER_REPORT):
        return []
    found = [(line, _step(log, line.number)) for log in logs for line, _ in log.grep(_SOCKET_TIMEOUT)]
    if not found:
        return []
    lines = [line for line, _ in found]
    steps = unique([step for _, step in found if step])
    detail = ("a blocking call on torch's key-value store (TCPStore) timed out (`Socket Timeout`)"
              + (f" in {' and '.join(steps)}" if steps else "")
              + ": the store was reachable, but the key it waited for was never set, because not every rank "
                "(or node's agent) reached that point: one did not start, crashed, hung or was still working, "
                "or could not reach the store.")
    return [Cause(
        id="rendezvous-incomplete", title="a wait in torch's store timed out (Socket Timeout)",
        detail=detail,
        fix="Find the rank or node that never arrived and read its output for its first error (or whether it "
            "started); check that every node reaches the store's host:port (MASTER_ADDR and MASTER_PORT, a "
            "firewall, name resolution). Raise the store's timeout only when that node was merely slower.",
        score=55, hosts=hosts(lines), settings=["MASTER_ADDR", "MASTER_PORT"], evidence=evidence(lines),
    )]
