"""Causes at the job level: two ranks on one GPU, a dead peer (NCCL, torch or gloo wording), traffic that
stops after connecting (MTU) and crashes (nccl-tests verdicts are in rules_nccl_tests, NCCL versions that
differ in rules_versions, torch's watchdog and rendezvous in rules_torch, CUDA failures in rules_cuda).

Wording read (learned from NCCL's release history): `Duplicate GPU detected : rank A and rank B both on
CUDA device X` (2.4 on), `Net : Connection closed by remote peer` (2.3 to 2.11, with the peer from
2.12), `socketProgress: Connection closed by remote peer X`, the ncclRemoteError text `remote process
exited or there was a network error` (2.13 on).
"""

from __future__ import annotations

import re

from provisioner.explain import rules_proxy, rules_torch
from provisioner.explain.evidence import evidence, for_count, grep, hosts, listed, multi_node
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.explain.nccl_runs import last_sizes, sizes_up_to, stalled, which, within
from provisioner.explain.torch_store import store_note, store_servers
from provisioner.parsers._text import unique

_DUPLICATE_GPU = re.compile(r"Duplicate GPU detected\s*:\s*rank (?P<a>[0-9]+) and rank (?P<b>[0-9]+) both on "
                            r"CUDA device (?P<device>\S+)")
# A peer is an address (`10.0.0.2<37532>`, gloo's `[10.0.0.2]:14788`) or, from 2.16, the name it resolves to
# (`gpu02.cluster<37532>`). The proxy thread's own warnings are rules_proxy's: they echo what this names.
_DEAD_PEER = re.compile(
    r"Connection closed by (?:remote )?peer\s*(?:\[?(?P<peer>[0-9a-fA-F.:]*[0-9])\]?(?:[:<][0-9]+>?)?"
    r"|(?P<peer3>[A-Za-z][\w.-]*)<[0-9]+>)?"
    r"|Connection reset by peer|Broken pipe|remote process exited or there was a network error|ncclRemoteError"
    r"|NCCL communicator was aborted|Gloo connectFullMesh failed|Read error \[(?P<peer2>[0-9a-fA-F.:]+)\]"
    r"|Timed out waiting [0-9]+ ?ms for (?:recv|send) operation|socketProgress(?=.*(?:closed|reset))"
    r"|Call to recv from (?P<peer4>[0-9a-fA-F.:]*[0-9])<[0-9]+> failed\s*:\s*(?:Connection timed out|"
    r"Connection reset by peer|Broken pipe)"
    r"|Failed to check the \"should dump\" flag on TCPStore",
    re.I,
)
# A shell reports a child it lost to SIGKILL as `Killed` alone on a line, or `line 1: 1234 Killed  python ...`.
CRASH = re.compile(r"Segmentation fault|core dumped|SIGSEGV|SIGBUS|SIGABRT|Bus error|Signal 9 \(SIGKILL\)|"
                    r"exitcode\s*:\s*-(?:9|11|6)\b|Killed process|Out of memory: Kill|^Killed$|"
                    r"\b[0-9]+\s+Killed\s+\S", re.I)
# `NCCL error in: ...` (torch), `NCCL failure <file>:<line> '...'` (2.0 to 2.2 samples; nccl-tests' `Test NCCL
# failure`).
_NCCL_ERROR = re.compile(r"NCCL[ _]?(?:error|failure).*?(?P<what>unhandled system error|unhandled cuda error|"
                         r"internal error|invalid usage|invalid argument)|ncclSystemError|ncclInternalError", re.I)
_BOOTSTRAP_TRACE = re.compile(r"\bbootstrap\.cc:[0-9]+ -> [0-9]+")
_INIT_DONE = re.compile(r"Init COMPLETE|Connected all (?:rings|trees)|via NET/", re.I)
_MTU_FIX = ("Check the MTU end to end between these hosts: the interfaces (`ip link`), the RDMA port's "
            "active_mtu (`ibv_devinfo`) and every switch port must agree; test with `ping -M do -s 8972 PEER` "
            "(9000) or `-s 1472` (1500). Then the path's PFC/ECN and port counters.")


def duplicate_gpu(logs: list[Log]) -> list[Cause]:
    hits = grep(logs, _DUPLICATE_GPU)
    if not hits:
        return []
    ranks = sorted({int(m.group(k)) for _, m in hits for k in ("a", "b")})
    lines = [line for line, _ in hits]
    return [Cause(
        id="duplicate-gpu", title="two ranks on the same GPU",
        detail=f"{listed('rank', ranks)} share CUDA device "
               f"{', '.join(unique([m['device'] for _, m in hits]))}: NCCL allows one rank per GPU, so the "
               "communicator was refused (invalid usage).",
        fix="Give each rank its own GPU: set the device from LOCAL_RANK (torch.cuda.set_device) and launch at "
            "most as many ranks per node as it has GPUs (CUDA_VISIBLE_DEVICES, --gpus-per-task).",
        score=95, hosts=hosts(lines), evidence=evidence(lines),
    )]


def _in_bootstrap(logs: list[Log], lines: list[LogLine]) -> bool:
    """Whether a closed connection unwound through NCCL's bootstrap (its `bootstrap.cc:N -> 6` trace follows
    within a few lines) in a log where no communicator had finished init."""
    for log in logs:
        if any(True for _ in log.grep(_INIT_DONE)):
            continue
        for line in (ln for ln in lines if ln.file == log.name):
            after = [log.line(line.number + k) for k in range(1, 8)]
            if any(a is not None and _BOOTSTRAP_TRACE.search(a.text) for a in after):
                return True
    return False


def _same_node(peer: str, host: str) -> bool:
    """`gpu004.ds-a4.example.com` and `gpu004` are one node: a log names it short, a peer often in full."""
    return peer.lower().split(".")[0] == host.lower().split(".")[0]


# torch quotes why it aborted a communicator (1.10 on): that reason is the cause (a watchdog timeout is
# rules_torch's), not a lost connection, unless the reason itself is one.
_ABORTED = rules_torch.ABORTED


def _lost(text: str) -> bool:
    aborted = _ABORTED.search(text)
    return aborted is None or bool(_DEAD_PEER.search(aborted["why"]))


def _aborted_ranks(lines: list[LogLine]) -> list[str]:
    """The ranks whose communicator torch aborted, as its `aborted on rank N` names them."""
    return unique([m["rank"] for line in lines if (m := _ABORTED.search(line.text))])


def dead_peer(logs: list[Log]) -> list[Cause]:
    hits = [(line, m) for line, m in grep(logs, _DEAD_PEER) if _lost(line.text)]
    if not hits:
        return []
    # An earlier alternative (socketProgress...) can match first: read the peer from the whole line again.
    named = [m for line, _ in hits for m in _DEAD_PEER.finditer(line.text)]
    peers = unique([p for m in named if (p := m.group("peer") or m.group("peer2") or m.group("peer3")
                                          or m.group("peer4"))])
    lines = [line for line, _ in hits]
    aborted = _aborted_ranks(lines)
    when = ("closed, reset or timed out mid-job: the other end's process died (its own log has the first error) or "
            "the path dropped the connection.")
    if _in_bootstrap(logs, lines):
        when = ("closed during NCCL's bootstrap, before the communicator was up: a rank died in init (its own log "
                "has the first error), or, before NCCL 2.27.3, any connection to the bootstrap port that closes "
                "before its handshake (a port scanner, a load balancer's health check) aborts init.")
    # A peer named by its host name that is the very node reporting it: the other end was a process there.
    local = unique([p for line, _ in hits for m in _DEAD_PEER.finditer(line.text)
                    if (p := m.group("peer3")) and line.host and _same_node(p, line.host)])
    # The node that logged a connection to itself, by the name its lines carry (a peer is often the full name).
    loggers = unique([line.host for line, _ in hits for m in _DEAD_PEER.finditer(line.text)
                      if (p := m.group("peer3")) and line.host and _same_node(p, line.host)])
    subject = (f"{for_count(max(len(hits), len(peers)), 'the connection', 'connections')} to {', '.join(peers)} "
               if peers else f"a peer connection of {listed('rank', aborted)} " if aborted else "a peer connection ")
    if local and len(local) == len(peers):
        subject = (f"{for_count(len(hits), 'a connection', 'connections')} between processes on "
                   f"{', '.join(loggers)} (the node that logged {for_count(len(hits), 'it', 'them')}) ")
        when = ("closed by the other end: that end was a process on the same node (another local rank, or a "
                "rank's proxy thread) that exited or broke off, so no network path was involved.")
    elif local:
        when += (f" ({', '.join(local)} is the node that logged it: that end was a process on the same node.)")
    fix = (f"Find the first failing rank ({'the peer named here; ' if peers else ''}its log usually has the real "
           "error: OOM, a crash, a completion error); then check the path with the hosts' link state and port "
           "counters.")
    if local and len(local) == len(peers):
        fix = ("Find the process on that node that ended first: its own output (the first error), and dmesg or the "
               "scheduler for a kill (OOM killer, a signal, a limit).")
    if note := store_note(lines):
        # Only the store's clients lost their connection: say that alone, not the data-path alternatives.
        when = "closed mid-job." + note if all(store_note([line]) for line in lines) else when + note
        fix = ("Read rank 0's output (and the launcher's on the master node) for why it ended first; check that "
               "no rank leaves or tears down the process group while others still use it.")
    return [Cause(
        id="connection-lost", title="a peer process exited or its connection dropped",
        detail=subject + when + (
            f" NCCL reported it as a remote error (a peer's process exited or the network to it failed), and torch "
            f"aborted the communicator of {listed('rank', aborted)} on it." if aborted else ""), fix=fix,
        score=50, hosts=hosts(lines), addresses=[p for p in peers if p not in local] + store_servers(lines),
        evidence=evidence(lines),
    )]


def crashes(logs: list[Log]) -> list[Cause]:
    causes = []
    if crash := grep(logs, CRASH):
        lines = [line for line, _ in crash]
        causes.append(Cause(
            id="process-crashed", title="a process crashed or was killed",
            detail="a rank ended on a signal (segmentation fault, abort, kill): the job's other ranks then "
                   "fail waiting for it.",
            fix="Read the crashed rank's output just before the signal; for a kill, check dmesg for the OOM "
                "killer and the scheduler's limits.",
            score=52, hosts=hosts(lines), evidence=evidence(lines),
        ))
    return causes


# What each of NCCL's error summaries means (ncclResult_t as ncclGetErrorString words it): in a few words, in
# full, and where to look.
_MEANINGS = {
    "unhandled system error": (
        "a call into the system failed",
        "a call NCCL made into the system failed (a socket, memory, a PCI or RDMA device); on a job across nodes "
        "that is most often the network (a connection refused or reset, an interface or RDMA device missing or "
        "down) or a limit (locked memory, open files, /dev/shm)",
        "Read the `Last error:` line or the first NCCL WARN (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET): it "
        "names the call that failed; then check that interface or device on the host, and the job's limits."),
    "unhandled cuda error": (
        "a CUDA call failed",
        "a CUDA call NCCL made failed: the GPU side (the driver, a GPU fault, memory), not the network",
        "Check the GPU on the host (`nvidia-smi`, Xid errors in dmesg) and the job's GPU memory use; rerun with "
        "NCCL_DEBUG=INFO to see the CUDA call that failed."),
    "internal error": (
        "NCCL found its own state wrong",
        "NCCL found its own state wrong: most often ranks running different NCCL releases or settings, or a "
        "peer that sent what NCCL did not expect",
        "Check that every rank loads the same libnccl and NCCL_* settings, and read the first NCCL WARN "
        "(NCCL_DEBUG=INFO) on each rank."),
    "invalid usage": (
        "NCCL refused how it was used",
        "the application used NCCL in a way it refuses (two ranks on one GPU, mismatched calls), not the fabric",
        "Read the first NCCL WARN (NCCL_DEBUG=WARN): it says which call NCCL refused and why."),
    "invalid argument": (
        "NCCL refused an argument",
        "NCCL was called with an argument it refuses (a buffer, count, device or communicator), not the fabric",
        "Read the first NCCL WARN (NCCL_DEBUG=WARN): it names the argument NCCL refused."),
}


def _last_error(log: Log, line: LogLine) -> list[LogLine]:
    """The `Last error:` torch quotes under NCCL's summary (a line or two on, its text on the line after)."""
    for number in range(line.number + 1, line.number + 4):
        after = log.line(number)
        if after is None:
            break
        if after.text.lower().startswith("last error"):
            rest = log.line(number + 1)
            return [after] + ([rest] if rest is not None and after.text.rstrip().endswith(":") else [])
    return []


def nccl_error(logs: list[Log]) -> list[Cause]:
    """NCCL's own error summary (`unhandled system error`, ...) with the `Last error:` torch quotes."""
    hits = grep(logs, _NCCL_ERROR)
    if not hits:
        return []
    lines: list[LogLine] = []
    quoted: list[str] = []
    for log in logs:
        for line, _ in log.grep(_NCCL_ERROR):
            lines.append(line)
            last = _last_error(log, line)
            lines += last
            if last:
                quoted.append(last[-1].text.split(":", 1)[1].strip() if len(last) == 1 else last[-1].text.strip())
    what = unique([(m.group("what") or m.group(0)).lower() for _, m in hits])
    aborted = _aborted_ranks([line for line, _ in hits])
    known = [w for w in what if w in _MEANINGS]
    if aborted and known:
        short, meaning, fix = _MEANINGS[known[0]]
        said = f" NCCL's last error: {'; '.join(unique(quoted)[:2])}." if quoted else ""
        return [Cause(
            id="nccl-error",
            title=f"the NCCL communicator of {listed('rank', aborted)} was aborted: {short} ({known[0]})",
            detail=(f"torch aborted the NCCL communicator of {listed('rank', aborted)} because NCCL returned "
                    f"'{known[0]}': {meaning}.{said} The errors of the other ranks after it follow from it."),
            fix=fix, score=50, hosts=hosts(lines), evidence=evidence(lines),
        )]
    return [Cause(
        id="nccl-error", title=f"NCCL failed: {', '.join(what[:2])}",
        detail="NCCL returned an error to the framework; the lines before it in the NCCL_DEBUG=INFO log name "
               "the call that failed.",
        fix="Rerun with NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,NET) and read the first WARN.",
        score=50, hosts=hosts(lines), evidence=evidence(lines),
    )]


def mtu_blackhole(logs: list[Log]) -> list[Cause]:
    """Connections were made, then traffic stopped without an error: the signature of a path that
    passes small packets and drops large ones (an MTU mismatch), or of lost PFC."""
    causes = []
    for log in logs:
        tests = log.tests
        if tests and (cut := stalled(tests)):
            # Every run that stalled, each by its last row; the log's last lines too where the last run stalled.
            reached = last_sizes(tests, cut)
            size = {n: str(last) for n, last in reached}
            lines = [line for n, run in cut
                     for line in within([ln for ln in log.lines if ln.text.split()[:1] == [size[n]]], [(n, run)])[-1:]]
            tail = log.lines[-2:] if cut[-1][0] == len(tests.run_results) else []
            causes.append(Cause(
                id="mtu-blackhole", title="nccl-tests stopped after some message sizes completed",
                detail=f"{sizes_up_to(reached)} completed{which(tests, cut)}, then "
                       f"{for_count(len(cut), 'the run', 'the runs')} stalled without an error: a path that passes "
                       "small packets and drops large ones (MTU mismatch) or a lossy RoCE path.",
                fix=_MTU_FIX, score=62, evidence=evidence(sorted(lines[:6] + tail, key=lambda line: line.number)),
            ))
    connected = grep(logs, _INIT_DONE)
    hung = grep(logs, rules_torch.WATCHDOG)
    errors = grep(logs, _DEAD_PEER) or grep(logs, rules_proxy.ANY) or any(
        log.nccl and (log.nccl.completion_errors or log.nccl.call_failures) for log in logs)
    if connected and hung and not errors and multi_node(logs):
        lines = [connected[-1][0]] + [line for line, _ in hung]
        causes.append(Cause(
            id="mtu-blackhole", title="traffic stopped after the ranks connected",
            detail="NCCL connected the ranks, then a collective hung without a network error: a path that "
                   "passes small packets and drops large ones (MTU mismatch) is the usual cause.",
            fix=_MTU_FIX, score=62, hosts=hosts(lines), evidence=evidence(lines),
        ))
    return causes


# nccl-tests names its host before a failure: `gpu07: Test NCCL failure common.cu:1005 'unhandled system error'`.
TEST_HOST = re.compile(r"^(?:\.\.\s+)?(?P<host>[\w.-]+)(?: pid [0-9]+)?:\s*Test (?:NCCL |CUDA )?failure")
