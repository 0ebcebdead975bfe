"""A wait in torch's key-value store that timed out: the store-based rendezvous or barrier (a process group's
gloo mesh, torchelastic's role info, a barrier on the store) that not every rank reached.

Wording read (torch/csrc/distributed/c10d TCPStore across releases): `torch.distributed.DistStoreError: wait
timeout after 600000ms, keys: /default_pg/0//cuda//0` (2.5 on; the keys as waited for, each with the store's
`/` prefix), before it `RuntimeError: Wait timeout` (1.x) and the FileStore's `Timeout waiting for key: K`.
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


def store_wait(logs: list[Log]) -> list[Cause]:
    hits = grep(logs, _WAIT)
    if not hits:
        return []
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
