"""NCCL's proxy thread: the per-process service thread that sets up and drives a rank's network and P2P
connections on its behalf. Its warnings are nearly always an echo: the proxy loses a connection because the
rank or process at the other end went away, or an operation it ran for a rank failed on an error that an
earlier WARN names. So this rule's cause ranks below any other; `fold` turns it into a note on the cause
that explains it, and only a log with nothing else gets it as its answer.

Wording read (learned from NCCL's release history, RCCL prints the same behind its hipify paths):
`Proxy Call to rank N failed (Op)` (2.12 to 2.16), `Socket recv failed while polling for opId=0x...`
(2.17 on, the rank's side), and on the proxy's side `[Proxy Service N] Failed to execute operation Op from
rank R, retcode C` (2.12 on), `[Service thread] Accept failed <strerror>` (a WARN 2.12 to 2.29, INFO
after), `[Service thread] Could not receive type from localRank N` (with `, res=R, closed=C` from 2.17),
`[Service thread] Error encountered progressing operation=Op, res=R, closing connection` (2.17 on),
`[Proxy Service] Poll failed: <strerror>` and `[Proxy service] Too many connections (N max)`.
`[Service thread] Connection closed by localRank N` is an INFO line every orderly teardown prints too.
"""

from __future__ import annotations

import re

from provisioner.explain.evidence import evidence, grep, hosts, listed
from provisioner.explain.logs import Log
from provisioner.explain.model import Cause
from provisioner.parsers._text import unique

ID = "proxy-connection-lost"
# Below every cause that names what went wrong (a dead peer is 50), above nccl-tests' own failure summary.
SCORE = 49

_POLLING = re.compile(r"Socket recv failed while polling(?: for opId=\S+)?")
_EXECUTE = re.compile(r"\[Proxy Service(?: UDS)? (?P<service>-?[0-9]+)\] Failed to execute operation (?P<op>\w+) "
                      r"from rank (?P<rank>-?[0-9]+),? retcode (?P<code>[0-9]+)")
_CALL = re.compile(r"Proxy Call to rank (?P<rank>[0-9]+) failed \((?P<op>\w+)\)")
_ACCEPT = re.compile(r"\[Service thread\] Accept failed:?\s*(?P<why>.*\S)?")
_RECEIVE = re.compile(r"\[Service thread\] Could not receive type from localRank (?P<local>-?[0-9]+)"
                      r"(?:,\s*res=(?P<code>[0-9]+),\s*closed=(?P<closed>[0-9]+))?")
_PROGRESS = re.compile(r"\[Service thread\] Error encountered progressing operation=(?P<op>\w+),"
                       r"\s*res=(?P<code>[0-9]+)")
_POLL = re.compile(r"\[Proxy [Ss]ervice(?: UDS)?\] (?:WSA)?Poll failed:?\s*(?P<why>.*\S)?")
_TOO_MANY = re.compile(r"\[Proxy [Ss]ervice\] Too many connections \((?P<max>[0-9]+) max\)")
# Any of them, their group names taken off so the alternatives can share one pattern.
ANY = re.compile("|".join(re.sub(r"\?P<\w+>", "", p.pattern) for p in (
    _POLLING, _EXECUTE, _CALL, _ACCEPT, _RECEIVE, _PROGRESS, _POLL, _TOO_MANY)))

# ncclResult_t, as the retcode/res fields print it.
_RESULTS = {1: "a CUDA error", 2: "a system error", 3: "an internal error", 4: "an invalid argument",
            5: "invalid usage", 6: "a remote error"}
# What each operation is, in an operator's words.
_OPERATIONS = {"Init": "setting up a connection's buffers", "SharedInit": "setting up shared buffers",
               "Setup": "setting up a connection", "Connect": "connecting to a peer",
               "Close": "closing a connection", "ConvertFd": "sharing a buffer between local ranks",
               "GetFd": "sharing a buffer between local ranks", "Register": "registering a buffer",
               "Deregister": "deregistering a buffer"}
_FILES = re.compile(r"too many open files", re.I)


def _result(code: str | None) -> str:
    return _RESULTS.get(int(code), f"error {code}") if code else "an error"


def _operation(op: str) -> str:
    return f"{op} ({_OPERATIONS[op]})" if op in _OPERATIONS else op


def _sentence(text: str) -> str | None:
    """What one proxy warning means, in an operator's words."""
    if _POLLING.search(text) or _CALL.search(text):
        return ("a rank lost the connection to the proxy thread serving it (`Socket recv failed while polling` / "
                "`Proxy Call ... failed`): the proxy closed it after an operation failed, or the process that "
                "hosts it died")
    if m := _EXECUTE.search(text) or _PROGRESS.search(text):
        rank = f" for rank {m['rank']}" if "rank" in m.groupdict() else ""
        return (f"the proxy thread failed {_operation(m['op'])}{rank} with {_result(m['code'])}"
                + (": the rank had already gone away" if m["op"] == "Close" else
                   ": the WARN just before it in that rank's log names the failing call"))
    if m := _RECEIVE.search(text):
        gone = "closed its end" if m["closed"] == "1" else "broke off without closing"
        return (f"local rank {m['local']}'s connection to a proxy thread {gone}: that rank's process died, was "
                "killed or aborted")
    if m := _ACCEPT.search(text) or _POLL.search(text):
        why = m["why"] or "an error"
        return f"the proxy thread's socket failed ({why})" + (
            ": the process ran out of file descriptors" if _FILES.search(why) else
            ": a connection to it went away before it was accepted (the connecting process died, or it was not "
            "NCCL's)" if "temporarily unavailable" in why else "")
    if m := _TOO_MANY.search(text):
        return (f"the proxy thread refused a connection beyond its {m['max']} local ranks: more ranks share the "
                "node's proxy than NCCL allows")
    return None


def proxy_failures(logs: list[Log]) -> list[Cause]:
    hits = grep(logs, ANY)
    if not hits:
        return []
    lines = [line for line, _ in hits]
    ranks = unique([m["rank"] for _, m in grep(logs, _EXECUTE) + grep(logs, _CALL)])
    files = any(_FILES.search(line.text) for line in lines)
    said = unique([w for line in lines if (w := _sentence(line.text))])
    return [Cause(
        id=ID, title="NCCL's proxy thread lost a connection: a rank or its process went away",
        detail="; ".join(said) + ". No other error is in the log, so the proxy's is the first: the "
               "usual reasons are a rank's process that died or was killed, a peer node that went down, or "
               + ("the open-file limit (this log names it)." if files else "the open-file limit."),
        fix="Find the rank that went away first" + (f" ({listed('rank', ranks)})" if ranks else "")
            + ": its node's launcher and scheduler output and `dmesg` (the OOM killer, a signal); whether a peer "
            "node went down or rebooted; the job's open-file limit (`ulimit -n`, LimitNOFILE for a service; NCCL "
            "opens sockets per peer and channel). Rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,PROXY "
            "and read the WARN before the proxy's on each rank.",
        score=SCORE, hosts=hosts(lines), evidence=evidence(lines),
    )]


def fold(causes: list[Cause]) -> list[Cause]:
    """With a cause that outranks the proxy's, the proxy warnings are its echo: say so on that cause and
    drop the proxy's own."""
    proxy = next((c for c in causes if c.id == ID), None)
    others = [c for c in causes if c.id != ID]
    if proxy is None or not others or max(c.score for c in others) <= proxy.score:
        return causes
    top = max(others, key=lambda c: c.score)
    where = f" on {', '.join(proxy.hosts)}" if proxy.hosts else ""
    note = (f" NCCL's proxy-thread warnings{where} (`{_short(proxy.evidence[0].text)}`) are an echo of this, "
            "not a cause of their own.")
    echoed = top.model_copy(update={"detail": top.detail + note})
    return [echoed if c is top else c for c in others]


def _short(text: str) -> str:
    m = ANY.search(text)
    return m.group(0) if m else text
