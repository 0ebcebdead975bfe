"""Causes at the job level: two ranks on one GPU, NCCL versions that differ, collective timeouts (with
global ranks kept apart from process-group ranks), an incomplete rendezvous, a dead peer (NCCL, torch
or gloo wording), traffic that stops after connecting (MTU), crashes, and nccl-tests verdicts.

Wording read (learned from NCCL's release history): `Duplicate GPU detected : rank A and rank B both on
CUDA device X` (2.4 on), `Net : Connection closed by remote peer` (2.3 to 2.11, with the peer from
2.12), `socketProgress: Connection closed by remote peer X`, the ncclRemoteError text `remote process
exited or there was a network error` (2.13 on), `Cuda failure 'X'` (every release).
"""

from __future__ import annotations

import re

from provisioner.explain.evidence import evidence, grep, hosts, multi_node
from provisioner.explain.logs import Log, LogLine
from provisioner.explain.model import Cause
from provisioner.parsers._text import unique
from provisioner.parsers.nccl_tests import NcclTests

_DUPLICATE_GPU = re.compile(r"Duplicate GPU detected\s*:\s*rank (?P<a>[0-9]+) and rank (?P<b>[0-9]+) both on "
                            r"CUDA device (?P<device>\S+)")
_STORE_WAIT = re.compile(r"Timed out after (?P<s>[0-9.]+) seconds waiting for clients\.\s*(?P<have>[0-9]+)/"
                         r"(?P<want>[0-9]+) clients joined", re.I)
# torch: `[Rank 3] Watchdog caught ...` (2.0 to 2.2) and `[PG 0 (default_pg) Rank 3]` / `[PG ID 1 PG GUID 1
# Rank 3]` (2.3 on). That rank is the rank inside the process group; the global rank is torch's `[rank3]:`.
_PG_RANK = r"\[(?:PG (?:ID )?(?P<pg>[0-9]+)[^\]]*?)?Rank (?P<rank>[0-9]+)\]"
_WATCHDOG = re.compile(_PG_RANK + r".*?Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>[0-9]+), "
                       r"OpType=(?P<op>\w+).*?ran for (?P<ms>[0-9]+) milliseconds")
_GLOBAL_RANK = re.compile(_PG_RANK + r".*?\bglobal rank:?\s*(?P<global>[0-9]+)")
_DEAD_PEER = re.compile(
    r"Connection closed by (?:remote )?peer\s*(?:\[?(?P<peer>[0-9a-fA-F.:]*[0-9])\]?(?:[:<][0-9]+>?)?)?"
    r"|Connection reset by peer|remote process exited or there was a network error|ncclRemoteError"
    r"|NCCL communicator was aborted|Gloo connectFullMesh failed|Read error \[(?P<peer2>[0-9a-fA-F.:]+)\]"
    r"|Timed out waiting [0-9]+ ?ms for (?:recv|send) operation|socketProgress.*(?:closed|reset)",
    re.I,
)
# A shell reports a child it lost to SIGKILL as `Killed` alone on a line, or `line 1: 1234 Killed  python ...`.
CRASH = re.compile(r"Segmentation fault|core dumped|SIGSEGV|SIGBUS|SIGABRT|Bus error|Signal 9 \(SIGKILL\)|"
                    r"exitcode\s*:\s*-(?:9|11|6)\b|Killed process|Out of memory: Kill|^Killed$|"
                    r"\b[0-9]+\s+Killed\s+\S", re.I)
_CUDA = re.compile(r"Cuda failure\s*'?(?P<what>[^']+)'?|CUDA error: (?P<what2>.+)", re.I)
_NCCL_ERROR = re.compile(r"NCCL error.*?(?P<what>unhandled system error|unhandled cuda error|internal error|"
                         r"invalid usage|invalid argument)|ncclSystemError|ncclInternalError", re.I)
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
        detail=f"ranks {', '.join(map(str, ranks))} share CUDA device "
               f"{', '.join(unique([m['device'] for _, m in hits]))}: NCCL allows one rank per GPU, so the "
               "communicator was refused (invalid usage).",
        fix="Give each rank its own GPU: set the device from LOCAL_RANK (torch.cuda.set_device) and launch at "
            "most as many ranks per node as it has GPUs (CUDA_VISIBLE_DEVICES, --gpus-per-task).",
        score=95, hosts=hosts(lines), evidence=evidence(lines),
    )]


def version_mismatch(logs: list[Log]) -> list[Cause]:
    by_host: dict[str, str] = {}
    for log in logs:
        if log.nccl:
            by_host.update(log.nccl.nccl_versions_by_host)
            names = log.nccl.hosts
            if log.nccl.nccl_version and len(names) == 1 and names[0] not in by_host:
                by_host[names[0]] = log.nccl.nccl_version
    if len(set(by_host.values())) < 2:
        return []
    lines = [line for line, _ in grep(logs, re.compile(r"NCCL version [0-9]"))]
    listing = ", ".join(f"{host} {version}" for host, version in sorted(by_host.items()))
    return [Cause(
        id="nccl-version-mismatch", title="hosts run different NCCL versions",
        detail=f"{listing}: ranks of one job must run the same NCCL; protocols differ between versions.",
        fix="Install one NCCL version on every node (playbook: nccl: {version: '==X.Y.Z'}) and rebuild the "
            "job's environment so it loads that libnccl.",
        score=75, hosts=sorted(by_host), evidence=evidence(lines),
    )]


def _global_ranks(logs: list[Log]) -> dict[tuple[str | None, int], int]:
    """(process group, rank in it) -> global rank, from torch's `... global rank: G` init lines."""
    return {(m.group("pg"), int(m.group("rank"))): int(m.group("global")) for _, m in grep(logs, _GLOBAL_RANK)}


def watchdog(logs: list[Log]) -> list[Cause]:
    hits = grep(logs, _WATCHDOG)
    if not hits:
        return []
    mapping = _global_ranks(logs)
    pairs = []  # (global rank or None, process group, rank in the group)
    for line, m in hits:
        pg, rank = m.group("pg"), int(m.group("rank"))
        pairs.append((line.rank if line.rank is not None else mapping.get((pg, rank)), pg, rank))
    ops = unique([f"{m.group('op')} (SeqNum {m.group('seq')})" for _, m in hits])
    seconds = max(int(m.group("ms")) for _, m in hits) / 1000
    known = sorted({g for g, _, _ in pairs if g is not None})
    if known:
        who = f"global ranks {', '.join(map(str, known))}"
        differ = unique([f"global {g} is rank {r} of process group {pg or '?'}" for g, pg, r in pairs
                         if g is not None and (g != r or pg not in (None, "0"))])
        if differ:
            who += f" ({'; '.join(differ)})"
        seen = sorted({line.rank for log in logs for line in log.lines if line.rank is not None} | set(known))
    else:
        groups = unique([pg for _, pg, _ in pairs if pg])
        who = f"process-group ranks {', '.join(map(str, sorted({r for _, _, r in pairs})))}" + (
            f" (process group {', '.join(groups)}; global ranks not in the log)" if groups else "")
        seen = []
    detail = f"{who} waited {seconds:g} s in {', '.join(ops)} and gave up."
    absent = [r for r in seen if r not in known]
    if absent:
        detail += f" Global ranks {', '.join(map(str, absent))} never reported it: they did not reach the collective."
    else:
        detail += (" Every rank in the log reached it and waited: data stopped flowing between them "
                   "(network path, a stalled peer, or a rank missing from this log).")
    lines = [line for line, _ in hits]
    return [Cause(
        id="collective-timeout", title="a collective timed out (watchdog)", detail=detail,
        fix="Look for the first error before the timeout on every rank; audit the hosts' data path "
            "(link, MTU, PFC/ECN, port counters). Set TORCH_NCCL_TRACE_BUFFER_SIZE to record the stuck "
            "collective next time.",
        score=60, hosts=hosts(lines), evidence=evidence(lines),
    )]


def rendezvous_wait(logs: list[Log]) -> list[Cause]:
    hits = grep(logs, _STORE_WAIT)
    if not hits:
        return []
    _, m = hits[0]
    lines = [line for line, _ in hits]
    return [Cause(
        id="rendezvous-incomplete", title="not every rank joined the rendezvous",
        detail=f"only {m.group('have')} of {m.group('want')} ranks reached the store within {m.group('s')} s: "
               "the missing ones could not connect (see the connection errors) or never started.",
        fix="Check the hosts whose ranks are missing: that the job started there and that they reach the "
            "master address on the data network.",
        score=55, hosts=hosts(lines), evidence=evidence(lines),
    )]


def dead_peer(logs: list[Log]) -> list[Cause]:
    hits = grep(logs, _DEAD_PEER)
    if not hits:
        return []
    peers = unique([p for _, m in hits if (p := m.group("peer") or m.group("peer2"))])
    lines = [line for line, _ in hits]
    return [Cause(
        id="connection-lost", title="a peer process exited or its connection dropped",
        detail=(f"connections to {', '.join(peers)} " if peers else "a peer connection ")
        + "closed, reset or timed out mid-job: the other end's process died (its own log has the first "
          "error) or the path dropped the connection.",
        fix="Find the first failing rank (the peer named here; its log usually has the real error: OOM, "
            "a crash, a completion error); then check the path with the hosts' link state and port counters.",
        score=50, hosts=hosts(lines), addresses=peers, evidence=evidence(lines),
    )]


def crashes(logs: list[Log]) -> list[Cause]:
    causes = []
    if cuda := grep(logs, _CUDA):
        lines = [line for line, _ in cuda]
        what = unique([(m.group("what") or m.group("what2") or "").strip() for _, m in cuda])
        causes.append(Cause(
            id="cuda-failure", title=f"a CUDA call failed: {', '.join(what[:2])}",
            detail="the GPU side failed (memory, device state or driver), not the network.",
            fix="Check the GPU on the hosts named (`nvidia-smi`, XID errors in dmesg) and the job's memory use.",
            score=70, hosts=hosts(lines), evidence=evidence(lines),
        ))
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


def nccl_error(logs: list[Log]) -> list[Cause]:
    """NCCL's own error summary (`unhandled system error`, ...) with the `Last error:` torch quotes."""
    hits = grep(logs, _NCCL_ERROR)
    if not hits:
        return []
    lines: list[LogLine] = []
    for log in logs:
        for line, _ in log.grep(_NCCL_ERROR):
            lines.append(line)
            after = log.line(line.number + 1)
            if after and after.text.lower().startswith("last error") and (rest := log.line(line.number + 2)):
                lines += [after, rest]
    what = unique([(m.group("what") or m.group(0)).lower() for _, m in hits])
    return [Cause(
        id="nccl-error", title=f"NCCL failed: {', '.join(what[:2])}",
        detail="NCCL returned an error to the framework; the lines before it in the NCCL_DEBUG=INFO log name "
               "the call that failed.",
        fix="Rerun with NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,NET) and read the first WARN.",
        score=50, hosts=hosts(lines), evidence=evidence(lines),
    )]


def _stalled(tests: NcclTests) -> bool:
    """A run cut off before its largest size, after smaller sizes completed (`maxBytes` says the largest)."""
    if not tests.verdict.startswith("truncated") or not tests.rows or tests.failures:
        return False
    m = re.fullmatch(r"([0-9]+)([KMG]?)", tests.parameters.get("maxBytes", ""))
    return m is not None and tests.rows[-1].size < int(m[1]) * 1024 ** " KMG".index(m[2] or " ")


def mtu_blackhole(logs: list[Log]) -> list[Cause]:
    """Connections were made, then traffic stopped without an error: the signature of a path that
    passes small packets and drops large ones (an MTU mismatch), or of lost PFC."""
    causes = []
    for log in logs:
        tests = log.tests
        if tests and _stalled(tests):
            last = tests.rows[-1]
            lines = [line for line in log.lines if line.text.split()[:1] == [str(last.size)]]
            causes.append(Cause(
                id="mtu-blackhole", title="nccl-tests stopped after some message sizes completed",
                detail=f"sizes up to {last.size} bytes completed, then the run stalled without an error: a path "
                       "that passes small packets and drops large ones (MTU mismatch) or a lossy RoCE path.",
                fix=_MTU_FIX, score=62, evidence=evidence(lines[-1:] + log.lines[-2:]),
            ))
    connected = grep(logs, _INIT_DONE)
    stalled = grep(logs, _WATCHDOG)
    errors = grep(logs, _DEAD_PEER) or any(log.nccl and (log.nccl.completion_errors or log.nccl.call_failures)
                                           for log in logs)
    if connected and stalled and not errors and multi_node(logs):
        lines = [connected[-1][0]] + [line for line, _ in stalled]
        causes.append(Cause(
            id="mtu-blackhole", title="traffic stopped after the ranks connected",
            detail="NCCL connected the ranks, then a collective hung without a network error: a path that "
                   "passes small packets and drops large ones (MTU mismatch) is the usual cause.",
            fix=_MTU_FIX, score=62, hosts=hosts(lines), evidence=evidence(lines),
        ))
    return causes


def nccl_tests_results(logs: list[Log]) -> list[Cause]:
    causes = []
    for log in logs:
        tests = log.tests
        if tests is None:
            continue
        if tests.single_rank_runs > 1:
            lines = [line for line in log.lines if re.match(r"#\s*Rank\s+0\b", line.text)]
            causes.append(Cause(
                id="nccl-tests-not-mpi", title=f"nccl-tests ran as {tests.single_rank_runs} separate one-rank runs",
                detail=f"{tests.single_rank_runs} copies each initialised a communicator of one rank: the binary "
                       "was built without MPI but started by mpirun/srun, so nothing crossed the network and "
                       "the bandwidth is that of one GPU.",
                fix="Rebuild nccl-tests with MPI (`make MPI=1 MPI_HOME=/path/to/mpi`) and start it with "
                    "mpirun/srun again, or run one process per node with -g <GPUs per node>.",
                score=75, hosts=hosts(lines), evidence=evidence(lines),
            ))
        if tests.verdict == "ok" or _stalled(tests):
            continue  # a run that stalled after some sizes is the MTU rule's
        marker = {"wrong results": re.compile(r"^\s*[0-9]"), "out of bounds": re.compile(r"Out of bounds"),
                  "failed": re.compile(r"failure", re.I)}.get(tests.verdict, re.compile(r"^#\s*size|^\s*[0-9]"))
        lines = [line for line, _ in log.grep(marker)]
        if tests.verdict == "wrong results":
            bad = {f"{r.size}" for r in tests.rows if (r.oop_wrong or 0) > 0 or (r.ip_wrong or 0) > 0}
            lines = [line for line in lines if line.text.split()[:1] and line.text.split()[0] in bad]
        causes.append(Cause(
            id=f"nccl-tests-{tests.verdict.split(':')[0].replace(' ', '-')}",
            title=f"nccl-tests: {tests.verdict}",
            detail={"wrong results": "elements arrived with wrong values: data corruption on some path (GPU, "
                                     "NVLink, PCIe or the network)",
                    "out of bounds": "results outside the expected range",
                    "failed": "the test reported a failure",
                    }.get(tests.verdict, "the output stops before the run's footer: the test crashed, hung or "
                                         "was killed"),
            fix="Rerun with NCCL_DEBUG=INFO on the same hosts; bisect by host pairs to find the bad path.",
            score=80 if tests.verdict != "truncated: no footer" else 40,
            evidence=evidence(lines[-4:] if tests.verdict.startswith("truncated") else lines),
        ))
    return causes
