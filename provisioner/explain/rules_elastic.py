"""torchelastic's exit barrier: when a node's workers end, its agent (torchrun) waits in the rendezvous store for
every other node's agent before it exits, and says so when they do not come.

Wording read (torch/distributed/elastic/agent/server/api.py across releases): `Local worker group finished
(SUCCEEDED). Waiting 300 seconds for other agents to finish` (`(WorkerState.SUCCEEDED)` from 2.x) and `Error
waiting on exit barrier. Elapsed: N seconds` with the traceback of the store call that failed, ending in
`RuntimeError: Socket Timeout` (1.x), `torch.distributed.DistStoreError: Socket Timeout` (2.x) or
`torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. ...` when the
store itself went away. Printed by the agent's logger (`ERROR:torch.distributed...:`, `[date] torch...:
[ERROR]` or glog's `E0319 ... api.py:951]`), which the shared line cleaning leaves in the text.
"""

from __future__ import annotations

import re

from provisioner.explain.evidence import evidence
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.parsers._text import unique

_BARRIER = re.compile(r"Error waiting on exit barrier\.\s*Elapsed:\s*(?P<s>[0-9.]+)\s*seconds")
_FINISHED = re.compile(r"Local worker group finished \((?:WorkerState\.)?(?P<state>[A-Z]+)\)")
# The traceback's last line: the store call's error.
_ERROR = re.compile(r"(?:^|\]\s*|\s)(?:torch\.distributed\.)?(?:DistStoreError|DistNetworkError|DistError|RuntimeError"
                    r"|TimeoutError|ConnectionResetError|ConnectionRefusedError):\s*(?P<why>.+?)\s*$")
# How far after the barrier line its traceback may end (a traceback with carets runs about 15 lines).
_TRACEBACK = 30
# The store answers within a second when it is there: an error this soon means it was already gone.
_AT_ONCE = 5.0


def _why(log: Log, line: LogLine) -> tuple[str | None, LogLine | None]:
    for number in range(line.number + 1, line.number + _TRACEBACK):
        after = log.line(number)
        if after is None:
            continue
        if _BARRIER.search(after.text):
            break  # the next agent's report: this one's traceback ended without its error in the log
        if m := _ERROR.search(after.text):
            return m["why"], after
    return None, None


def exit_barrier(logs: list[Log]) -> list[Cause]:
    lines: list[LogLine] = []
    reasons: list[str] = []
    waits: list[float] = []
    for log in logs:
        for line, m in log.grep(_BARRIER):
            lines.append(line)
            waits.append(float(m["s"]))
            why, where = _why(log, line)
            if why and where:
                reasons.append(why)
                lines.append(where)
    if not lines:
        return []
    states = unique([m["state"] for log in logs for _, m in log.grep(_FINISHED)])
    gone = all(w < _AT_ONCE for w in waits) or any(re.search(r"closed|reset|refused|0 bytes", r, re.I)
                                                   for r in reasons)
    here = (f"this node's workers ended ({', '.join(s.lower() for s in states)})" if states
            else "this node's workers ended")
    if gone:
        detail = (f"{here}, and its agent could not reach the rendezvous store to wait for the other nodes"
                  f" ({'; '.join(unique(reasons)) or 'the store call failed at once'}): the store lives in the "
                  "agent of the first node (the rendezvous endpoint), and that agent had already exited, either "
                  "because its own node's workers ended first (older torch did not keep it up for the others) or "
                  "because that node failed.")
        fix = ("Read the first node's log for how its workers ended; if they succeeded, the job's result stands "
               "and only the ending raced (a newer torch keeps the store up until every agent has left).")
    else:
        detail = (f"{here}, and its agent waited {max(waits):.0f} s in the exit barrier for the other nodes' "
                  "agents, which did not come"
                  + (f" ({'; '.join(unique(reasons))})" if reasons else "")
                  + ": their workers were still running (rank 0 saving, evaluating or exporting after the others "
                    "finished), hung in a collective, or their node or agent died. Not a fabric fault by itself.")
        fix = ("Find the node that had not finished: read its log for a hang (a watchdog timeout) or an error. "
               "Where one rank works on alone at the end by design, have every rank wait for it (a "
               "torch.distributed.barrier() before leaving) so the nodes end together.")
    if "FAILED" in states:
        detail += " The workers here failed first: their own error is the cause, the barrier only its echo."
    return [Cause(
        id="exit-barrier", title="the launcher's exit barrier failed: the nodes did not end together",
        detail=detail, fix=fix, score=40, hosts=unique([line.host for line in lines if line.host]),
        evidence=evidence(lines),
    )]
