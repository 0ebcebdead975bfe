"""Slurm's own wire-up between the nodes of a step failing: the PMIx plugin (`mpi/pmix`, `mpi/pmix_vN`) and the
PMI2 plugin (`mpi/pmi2`) in slurmstepd exchange every rank's address before MPI_Init (or NCCL's bootstrap under
it) returns, node to node. When one node's stepd cannot reach another the fence never completes: the ranks hang
in MPI_Init until the plugin's timeout, and nothing of NCCL or the fabric was tried.

The PMIx plugin's errors come in two forms. Slurm 20.11.4 on (`PMIXP_ERROR` in pmixp_debug.h):
`error:  mpi/pmix_v3: FUNC: HOST [NODEID]: FILE:LINE: MESSAGE`. Before it:
`error: HOST [NODEID] FILE:LINE [FUNC] mpi/pmix: ERROR: MESSAGE`. HOST is the node that reports. What each
message says (src/plugins/mpi/pmix, 20.11 to 25.11, the same words throughout):

- `collective timeout seq=N` (pmixp_coll_ring.c / pmixp_coll_tree.c): the fence waited PMIxTimeout
  (SLURM_PMIX_TIMEOUT, 300 s by default) for a node's contribution; the state dump after it names the nodes still
  awaited (`wait contrib: HOSTS`) and, for the ring, the neighbours (`neighbor id: next N:HOST, prev N:HOST`).
- `Cannot establish direct connection to HOST (N)` after `Cannot establish the connection` (pmixp_dconn_tcp.c):
  the stepd's TCP connect to the other node's stepd failed; that port is in SrunPortRange when one is set, an
  ephemeral one otherwise.
- `Can't find address for host HOST, check slurm.conf`: the node is not in the slurm.conf this stepd reads.
- `send failed, rc=N, exceeded the retry limit`, `Cannot send message to PATH, size = N, hostlist:`,
  `failed to send to HOST`: a message relayed through the other node's slurmd (SlurmdPort) to that node's stepd
  did not get there. PATH is the stepd's UNIX socket (`SlurmdSpoolDir/stepd.slurm.pmix.JOB.STEP`) the slurmd
  there hands it to. N is 1001 (SLURM_COMMUNICATIONS_CONNECTION_ERROR) when that slurmd could not be connected
  to; an errno from that slurmd (2, 111, 13) when it was, but could not reach the stepd's socket.
- The stepd's own socket (pmixp_utils.c `pmixp_usock_create_srv`, 16.05 to 25.11, strerror and errno after a
  `: `): `UNIX socket path is too long: N, max M`, `Cannot create UNIX socket`, `Cannot bind() UNIX socket
  PATH`, `Cannot listen(FD, 64) UNIX socket PATH`, then pmixp_server.c's bare `pmixp_usock_create_srv`: the
  plugin did not start on that node, so the step failed there and the other nodes' messages to it fail.

- `Error handler invoked: status = N` (pmixp_client_v2.c `_errhandler`; `: Success (0)` after it 16.05.5 to
  20.11.0, `, source = [NSPACE:RANK]` from 20.11.1; `, nranges = N` / `, nprocs = N` with PMIx v1): the PMIx library
  raised an error event, and the plugin kills the step. N is a PMIx status (include/pmix_common.h): -25
  PMIX_ERR_UNREACH, a peer could not be reached, seen ahead of a fence that never completed (openpmix#2031).

The plugin failing to start in slurmstepd (`pmixp_stepd_init() failed`, `PMIx_server_init failed with error N`)
is read here too; its library not loading (`can not load PMIx library`) is its own cause, pmix-library-not-loaded.
Open MPI's side of the exchange is the reason its MPI_INIT help text gives: `PMIx_Fence_nb() failed`.

PMI2's fence (tree.c, pmi1.c, pmi2.c): `mpi/pmi2: failed to send temp kvs to HOST` (the parent node in the
fence tree, or `srun`), and srun's own `failed to send temp kvs to compute nodes`; the plugin then kills the step.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime

from provisioner.explain.evidence import evidence, hosts
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.explain.pmix_status import HANDLER, REACH
from provisioner.explain.pmix_status import named as named_status
from provisioner.explain.rules_launch import CONSEQUENCE
from provisioner.parsers._text import split_lines, unique

# The node that reports, in either form of the PMIx plugin's prefix.
_NEW = re.compile(r"mpi/pmix(?:_v\d+)?: \w+: (?P<host>\S+) \[\d+\]: \w+\.[ch]:\d+: (?P<msg>.*)$")
_OLD = re.compile(r"error: (?P<host>\S+) \[\d+\] \w+\.[ch]:\d+ \[\w+\] mpi/pmix: ERROR: (?P<msg>.*)$")
_PMI2 = re.compile(r"mpi/pmi2: (?:\d+ )?failed to send temp kvs to (?P<peer>compute nodes|\S+)")

_TIMEOUT = re.compile(r"collective timeout seq=\d+")
_WAITED = re.compile(r"^\s*wait contrib: (?P<hosts>\S+)")
_RING = re.compile(r"neighbor id: next \d+:(?P<next>\S+), prev \d+:(?P<prev>\S+)")
# The rest of the state dump (pmixp_coll.c `pmixp_coll_log`, pmixp_coll_ring.c / pmixp_coll_tree.c `*_log`): the
# plugin dumps a collective's state on its timeout and on other errors, so these lines alone do not say a fence was
# still open: they are shown beside a fence failure the other lines name.
_DUMP = re.compile(r"^Dumping collective state\s*$|: COLL_\w+ state seq=\d+|^my peerid: \d+:")
_DIRECT = re.compile(r"Cannot establish direct connection to (?P<peer>\S+) \(\d+\)|Cannot establish the connection")
_NO_ADDRESS = re.compile(r"Can't find address for host (?P<peer>\S+), check slurm\.conf")
_SEND = re.compile(r"send failed, rc=(?P<rc>-?\d+), exceeded the retry limit|Cannot send message to|"
                   r"failed to send to (?P<peer>\S+), errno")
_SOCKET = re.compile(r"UNIX socket path is too long|Cannot (?:create|bind\(\)|listen\(-?\d+, \d+\)) UNIX socket"
                     r"(?: (?P<path>/\S+?))?(?:: (?P<why>[^:()]+) \(\d+\))?$|^pmixp_usock_create_srv$")
# The plugin failing to start on a node in slurmstepd's prefork hook (mpi_pmix.c, pmixp_server.c pmixp_stepd_init,
# pmixp_client.c pmixp_libpmix_init; 17.11 to 25.11): slurmstepd then kills the step (Failed
# mpi_hook_slurmstepd_prefork).
_START = re.compile(r"pmixp_(?:stepd_init|agent_start|libpmix_init|libpmix_job_set|dconn_init|nspaces_init|"
                    r"state_init|dmdx_init)\(\) failed|PMIx_server_init failed with error (?P<code>-?\d+)|"
                    r"Cannot create (?:server lib|client cli) tmpdir: \"(?P<tmpdir>[^\"]*)\"")
# Open MPI's side of the same exchange (ompi_mpi_init.c, instance.c: the reason its `MPI_INIT failed` help text
# gives, 3.1 to 5.0): the MPI's PMIx fence (the modex) returned an error.
_CLIENT = re.compile(r"^\s*(?:PMIx_Fence(?:_nb)?\(\)|opal_pmix\.fence(?:_nb)?\(\)) failed\s*$")
# The plugin's library (mpi_pmix.c `_libpmix_open`, 17.11 to 25.11): another PMIx release than Slurm was built
# against, or none, where srun or slurmstepd runs.
_LIBRARY = re.compile(r"pmi/pmix: (?:can not load PMIx library|incorrect PMIx library version loaded "
                      r"(?P<found>\d+) was loaded, required (?P<built>\d+) version)")
# What the slurmd relaying a message answered, by `send failed, rc=N`.
_RC = {"1001": "could not connect to that node's slurmd at all",
       "2": "reached that node's slurmd, but the step's socket was not there (its stepd had not started the "
            "step or had ended)",
       "111": "reached that node's slurmd, but no stepd listened on the step's socket",
       "13": "reached that node's slurmd, which was refused the step's socket (permissions)"}


def _message(line: LogLine) -> tuple[str, str] | None:
    """(reporting node, message) of a PMIx plugin error line."""
    if "mpi/pmix" not in line.text:
        return None
    m = _NEW.search(line.text) or _OLD.search(line.text)
    return (m["host"], m["msg"]) if m else None


def _expand(ranged: str) -> list[str]:
    """Slurm's ranged host list as the dump prints it (`node[2-3],gpu-a`), one name each."""
    names: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", ranged):
        m = re.fullmatch(r"(?P<head>[^\[]*)\[(?P<body>[^\]]*)\](?P<tail>.*)", part)
        if not m:
            names.append(part)
            continue
        for piece in m["body"].split(","):
            low, _, high = piece.partition("-")
            if high and low.isdigit() and high.isdigit():
                names += [f"{m['head']}{n:0{len(low)}d}{m['tail']}" for n in range(int(low), int(high) + 1)]
            else:
                names.append(f"{m['head']}{piece}{m['tail']}")
    return names


ID = "pmix-wireup-failed"
SCORE = 83
# The launcher's and scheduler's verdicts a failed wire-up brings about (see lead).
CONSEQUENCES = {"rank-killed", "rank-exited", "rank-terminated", "job-cancelled", "node-failure", "step-time-limit"}

_LINES = ("socket", "start", "address", "direct", "send", "pmi2", "timeout", "handler", "client")
_NAMES = ("reporters", "waited", "ring", "peers", "rc", "why", "status")


def _read(log: Log) -> tuple[dict[str, list[LogLine]], dict[str, list[str]]]:
    """The plugin's failure lines by kind (and the fence's state dump), and the nodes they name: those that
    report, the peers named, the nodes the fence still waited for and the ring's neighbours."""
    found: dict[str, list[LogLine]] = {key: [] for key in (*_LINES, "dump", "event")}
    names: dict[str, list[str]] = {key: [] for key in _NAMES}
    for line in log.lines:
        if (pmi2 := _PMI2.search(line.text)) is not None:
            found["pmi2"].append(line)
            if pmi2["peer"] not in ("srun", "compute nodes"):
                names["peers"].append(pmi2["peer"])
            continue
        if _CLIENT.match(line.text):
            found["client"].append(line)
            continue
        parsed = _message(line)
        if parsed is None:
            continue
        host, msg = parsed
        if (waited := _WAITED.match(msg)) and waited["hosts"] != "-":
            names["waited"] += _expand(waited["hosts"])
            found["dump"].append(line)
        elif ring := _RING.search(msg):
            names["ring"] += [ring["prev"], ring["next"]]
            found["dump"].append(line)
        elif _DUMP.search(msg):
            found["dump"].append(line)
        elif event := HANDLER.search(msg):
            found["handler" if event["status"] in REACH else "event"].append(line)
            names["reporters"] += [host] if event["status"] in REACH else []
            names["status"].append(named_status(event["status"], event["rank"]))
        for key, pattern in (("timeout", _TIMEOUT), ("direct", _DIRECT), ("address", _NO_ADDRESS),
                             ("send", _SEND), ("socket", _SOCKET), ("start", _START)):
            if m := pattern.search(msg):
                found[key].append(line)
                # The prefork hook runs before the plugin knows its node's name: it prints `(null)`.
                names["reporters"] += [host] if host != "(null)" else []
                groups = {k: v for k, v in m.groupdict().items() if v}
                names["peers"] += [groups["peer"]] if "peer" in groups else []
                names["rc"] += [groups["rc"]] if "rc" in groups else []
                names["why"] += [f"{groups['path']}: {groups['why']}" if "path" in groups else groups["why"]
                                 ] if "why" in groups else []
                names["why"] += [f"PMIx_server_init returned {groups['code']}"] if "code" in groups else []
                names["why"] += [f"cannot create {groups['tmpdir']}"] if "tmpdir" in groups else []
    return found, names


def pmix_wireup(logs: list[Log]) -> list[Cause]:
    reads = [_read(log) for log in logs]
    merged = {key: [ln for found, _ in reads for ln in found[key]] for key in (*_LINES, "dump", "event")}
    named = {key: [n for _, names in reads for n in names[key]] for key in _NAMES}
    lines = [ln for key in _LINES for ln in merged[key]]
    if not lines:
        return []
    if merged["timeout"] or merged["handler"]:
        lines += merged["dump"]
    lines += merged["event"]
    reporters = unique(named["reporters"])
    # The node the fence waited for is the one to look at; without the dump's list, the ring's neighbours.
    awaited = unique(named["waited"] or ([h for h in named["ring"] if h not in reporters] if merged["timeout"]
                                         else []))
    peers = unique(named["peers"] + awaited)
    where = unique(peers + reporters)
    by = ", ".join(reporters) or "a node's slurmstepd"
    if merged["socket"]:
        why = "; ".join(unique(named["why"]))
        what = (f"the stepd on {by} could not create the step's PMIx socket{f' ({why})' if why else ''}: the "
                "plugin did not start there, so the step failed on that node and the others' messages to it went "
                "nowhere. The socket is SlurmdSpoolDir/stepd.slurm.pmix.JOB.STEP: its path must fit a UNIX "
                "socket's 107 characters, slurmd must be able to write there, and a file left there by an "
                "earlier step of the same id blocks bind() (Address already in use)")
    elif merged["start"]:
        why = "; ".join(unique(named["why"]))
        what = (f"Slurm's PMIx plugin did not start in the stepd on {by}{f' ({why})' if why else ''}: it could not "
                "start its PMIx server (PMIx_server_init) or set up the job in it, so slurmstepd killed the step "
                "before any rank ran. The PMIx library it loads failed in its own start: another PMIx release than "
                "the plugin was built against, its temporary directories (TmpFS, PMIxCliTmpDirBase) not writable "
                "or full, or a job at that library's limits")
    elif merged["address"]:
        what = (f"{by} could not look up {', '.join(peers) or 'a node of the step'} in slurm.conf: the nodes "
                "read different slurm.conf files, or that node's NodeAddr/NodeHostname does not resolve there")
    elif merged["direct"]:
        what = (f"{by} could not open its direct TCP connection to the stepd on "
                f"{', '.join(peers) or 'another node'}: a firewall between the nodes drops that port (in "
                "SrunPortRange when set, an ephemeral port otherwise), or that node's stepd was gone")
        if peers and set(peers) <= set(reporters):
            what += (f"; the peer it names is itself: the step's node list gave another node's id the name "
                     f"{', '.join(peers)} (seen in heterogeneous jobs, whose components number their nodes apart)")
    elif merged["send"] or merged["pmi2"]:
        what = (f"{by} could not pass the fence's data on to {', '.join(peers) or 'the next node'} (through its "
                "slurmd, or to srun): that node's slurmd or step failed, or a firewall drops SlurmdPort or "
                "SrunPortRange between them")
        if said := unique([f"rc={rc}: it {_RC[rc]}" for rc in named["rc"] if rc in _RC]):
            what += f" ({'; '.join(said)})"
    elif merged["handler"] and not merged["timeout"]:
        what = (f"the PMIx library in the stepd on {by} reported {'; '.join(unique(named['status']))}, and "
                "Slurm's plugin killed the step: a node of the step "
                "could not reach another's stepd (a firewall between the nodes, an address it cannot route, or that "
                "node's stepd gone)")
    elif not merged["timeout"]:
        what = ("the MPI's own PMIx fence, the exchange of the ranks' addresses in MPI_Init, returned an error: "
                "under srun that fence is Slurm's PMIx plugin between the nodes' slurmstepd (its own errors are in "
                "the slurmd log of each node), under mpirun its daemons (prted/orted)")
    else:
        what = (f"the fence on {by} timed out waiting for {', '.join(awaited) or 'another node'}: that node's "
                "stepd never sent its part (its tasks did not start there, its slurmd or container start hung, "
                "or the stepds cannot reach each other)")
    if named["status"] and not (merged["handler"] and not merged["timeout"]):
        what += f"; PMIx reported {'; '.join(unique(named['status']))} to the plugin, which killed the step"
    client = not any(merged[key] for key in _LINES if key != "client")
    how = ("The ranks exchange their addresses through it" if client else
           "Slurm's MPI plugin exchanges the ranks' addresses between the nodes' slurmstepd")
    detail = (f"{what}. {how} before MPI_Init returns; that exchange failed, so the ranks hung or were killed in "
              "start-up and nothing of NCCL or the fabric was tried.")
    plugin = "PMI2" if merged["pmi2"] and not (merged["timeout"] or merged["direct"] or merged["send"]) else "PMIx"
    title = (f"Slurm's PMIx plugin could not create its socket on {by}" if merged["socket"] else
             f"Slurm's PMIx plugin could not start on {by}" if merged["start"] else
             "the MPI's PMIx exchange between the nodes failed (PMIx_Fence)" if client else
             f"Slurm's {plugin} exchange between the step's nodes failed" + (f" ({', '.join(peers)})" if peers
                                                                             else ""))
    return [Cause(
        id=ID,
        title=title,
        detail=detail,
        fix=("On that node, check SlurmdSpoolDir (`scontrol show config`): short enough, writable by slurmd, "
             "no stepd.slurm.pmix.* file of a step that has ended; then " if merged["socket"] else
             "Read that node's slurmd log with PMIxDebug=1 (mpi.conf) for the PMIx library's own error; check that "
             "the libpmix it loads is the release the plugin was built against (`srun --mpi=list`, `ldd` of "
             "mpi_pmix*.so) and that TmpFS and PMIxCliTmpDirBase are writable with room; then "
             if merged["start"] else "")
        + "run `srun -N2 --mpi=pmix hostname` and an MPI hello world across the same nodes; open SlurmdPort "
            "(6818) and SrunPortRange (set one in slurm.conf so a firewall can allow it) between all compute "
            "nodes and the login node; read the slurmd log of the node named; give slow container starts "
            "more time (SLURM_PMIX_TIMEOUT or PMIxTimeout in mpi.conf); check that every node runs the same "
            "Slurm and slurm.conf and that the MPI was built against the PMIx Slurm's plugin uses "
            "(`srun --mpi=list`); SLURM_PMIX_DIRECT_CONN=false routes the exchange through slurmd instead.",
        score=SCORE, hosts=where or hosts(lines), evidence=evidence(lines))]


LIBRARY = "pmix-library-not-loaded"


def pmix_library(logs: list[Log]) -> list[Cause]:
    """Slurm's PMIx plugin could not load the PMIx library it was built against where srun or slurmstepd runs:
    `--mpi=pmix` is then no MPI type there (srun's `Invalid MPI type`), and no rank starts."""
    hits = [(line, m) for log in logs for line, m in log.grep(_LIBRARY)]
    if not hits:
        return []
    lines = [line for line, _ in hits]
    versions = unique([f"PMIx v{m['found']} loaded, v{m['built']} built against" for _, m in hits if m["found"]])
    return [Cause(
        id=LIBRARY, title="Slurm's PMIx plugin could not load its PMIx library",
        detail="the mpi/pmix plugin opens libpmix.so.2 of the PMIx release Slurm was built with (from the path "
               "given to configure --with-pmix, else the library path) when srun or slurmstepd loads it"
               + (f", and found another release ({'; '.join(versions)})" if versions else ", and found none there")
               + ": the plugin did not load, so `--mpi=pmix` was refused and no rank started. It is the PMIx "
               "installation on that host, not the network.",
        fix="Install the PMIx release Slurm was built against on every node and login host, at the path Slurm was "
            "configured with (`srun --mpi=list` names the plugin's version, mpi_pmix_vN); an LD_LIBRARY_PATH that "
            "puts an MPI's own bundled libpmix first makes the plugin load that one: unset it for srun, or rebuild "
            "Slurm against the PMIx the MPI uses.",
        score=86, hosts=hosts(lines), evidence=evidence(lines))]


# A time on a line: Slurm's log stamp (`[2024-02-26T11:17:29.123]`) or a stepd verdict's (`CANCELLED AT ...`).
_STAMP = re.compile(r"\b(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)\b")


def _stamps(cause: Cause, raw: Mapping[str, dict[int, str]]) -> list[datetime]:
    """The times on a cause's evidence lines, read from the lines as the log wrote them (their text lost the
    prefix)."""
    return [datetime.fromisoformat(m[1]) for e in cause.evidence
            if (m := _STAMP.search(raw.get(e.file, {}).get(e.line, e.text)))]


def _follows(then: Cause, first: Cause, raw: Mapping[str, dict[int, str]]) -> bool:
    """Whether `then`'s lines come after `first`'s: by line in the same log, by time where both carry one
    in another log; in another log without times the order is not known, and a verdict there is taken
    to follow the wire-up, which happens at the start of the step."""
    files = {e.file for e in first.evidence}
    theirs = [e.line for e in then.evidence if e.file in files]
    if theirs:
        return min(theirs) > min(e.line for e in first.evidence if e.file in files)
    if (when := _stamps(then, raw)) and (began := _stamps(first, raw)):
        return min(when) >= min(began)
    return True


def lead(causes: list[Cause], texts: Sequence[tuple[str, str]] = ()) -> list[Cause]:
    """With the wire-up failed, the launcher's and scheduler's verdicts after it (the ranks killed, exited or
    cancelled, a node failure, the time limit) are its consequence: a step whose fence never completes hangs
    until the plugin, srun or the job's end kills it. They are kept, ranked just below it and saying so; a
    node failure names the node the wire-up could not reach, when the wire-up's own lines name none. `texts`:
    the logs as (name, text), whose lines' times order a verdict in another log than the wire-up's."""
    pmix = next((c for c in causes if c.id == ID), None)
    if pmix is None:
        return causes
    raw = {name: {line.number: line.raw for line in split_lines(text)} for name, text in texts}
    after = [c for c in causes if c.id in CONSEQUENCES and _follows(c, pmix, raw)]
    if not after:
        return causes
    # Said once: the demoted cause's own sentence calling the errors after it its consequence is taken out.
    note = (" It is most likely a consequence of Slurm's PMIx/PMI2 exchange between the step's nodes failing "
            "(pmix-wireup-failed), not the cause: a step whose wire-up fails hangs or is killed in start-up, and "
            "the errors the ranks report after that come from the same failure.")
    down = (" A node Slurm reports failed this way may have been set down because the other nodes could not "
            "reach it: if it is up and its slurmd answers, look at the wire-up, not the node.")
    failed = unique([h for c in after if c.id == "node-failure" for h in c.hosts])
    if failed and not set(failed) & set(pmix.hosts):
        pmix = pmix.model_copy(update={
            "detail": pmix.detail + f" Slurm then reported a node failure on {', '.join(failed)}: most likely the "
                      "node the message could not reach (its slurmd log tells whether it went down first or was "
                      "set down because of this).",
            "hosts": unique(failed + pmix.hosts)})
    return [pmix if c.id == ID else c.model_copy(update={
        "score": min(c.score, SCORE - 1),
        "detail": c.detail.replace(CONSEQUENCE, "") + note + (down if c.id == "node-failure" else "")})
        if any(c is a for a in after) else c for c in causes]
