"""From the ranks' events to figures, or to a named cause (pure).

Every rank leaves a trail: started, connected (reached the rendezvous), joined (process group
built), one event per message size, done, or an error. When a job fails or runs out of time, the
furthest point each rank reached tells which host held the others up.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from provisioner.explain import rules as log_rules
from provisioner.smoke.busbw import SizeResult, size_result
from provisioner.smoke.plan import Job


@dataclass(frozen=True)
class RankProgress:
    rank: int
    host: str
    stage: str  # the furthest point reached: not_started, started, connected, joined, done
    sizes_done: int
    error: str | None = None
    missing: tuple[int, ...] = ()  # rank 0 only: the ranks it never saw at the rendezvous
    status: int | None = None  # the process's exit status as its wrapper saw it (128+N: signal N)
    state: str | None = None  # its process state when the run was cut off (`T` stopped, `D` in the kernel...)
    wchan: str | None = None  # where in the kernel it (or its thread in `D`) waited then

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "host": self.host, "stage": self.stage, "sizes_done": self.sizes_done,
                "error": self.error, "exit_status": self.status, "exit": exit_words(self.status),
                "state_at_kill": self.state, "wchan_at_kill": self.wchan, "held_up": held_words(self)}


@dataclass
class JobResult:
    hosts: tuple[str, ...]
    ok: bool
    rows: list[SizeResult] = field(default_factory=list)
    progress: list[RankProgress] = field(default_factory=list)
    failed_hosts: list[str] = field(default_factory=list)
    cause: str | None = None
    timed_out: bool = False
    seconds: float = 0.0
    left_running: dict[str, list[int]] = field(default_factory=dict)  # host -> pids still alive after the kill
    unreachable: dict[str, str] = field(default_factory=dict)  # host -> why SSH failed during the run
    outputs: dict[int, str] = field(default_factory=dict)  # rank -> the tail of what it printed (failed runs)
    pairs: dict[tuple[str, str], float] = field(default_factory=dict)  # host pair -> busbw (GB/s), after the sweep


_ORDER = ("not_started", "started", "connected", "joined", "done")

# A rank that gave up on a peer's connection (gloo's "Read error [peer]: Connection timed out", a reset,
# NCCL's watchdog) says the collective broke somewhere between hosts, not that its own host did: which
# rank notices first is a race. Such errors do not single out their host.
# A rank that ran out its own deadline (node_script's budget) only waited on the others the longest: on a
# loaded machine some ranks reach it before fabnet's kill ends the rest, and which is again a race.
_PEER_FAILURE = re.compile(r"timed out|timeout|connection (?:reset|closed|refused)|broken pipe|reset by peer"
                           r"|own deadline of [0-9.]+ s reached", re.IGNORECASE)


def rank_progress(job: Job, events: Mapping[int, Sequence[dict[str, Any]]],
                  states: Mapping[int, tuple[str, str]] | None = None) -> list[RankProgress]:
    """How far each rank got (`stage` is the furthest point reached, even when it then failed), and its process
    state where the run was cut off (`states`: rank -> state letter and wchan, from the kill)."""
    progress = []
    for rank in job.ranks():
        stage, sizes, error, missing, status = 0, 0, None, [], None
        for event in events.get(rank.rank, []):
            kind = event.get("event")
            if kind == "exit" and isinstance(event.get("status"), int):
                status = int(event["status"])
            elif kind in _ORDER:
                stage = max(stage, _ORDER.index(kind))
            elif kind == "size":
                sizes += 1
            elif kind == "error":
                error = str(event.get("message", "error"))
                missing = [int(r) for r in event.get("missing") or [] if isinstance(r, int)]
        state, wchan = (states or {}).get(rank.rank, (None, None))
        progress.append(RankProgress(rank.rank, rank.host, _ORDER[stage], sizes, error, tuple(missing), status,
                                     state, wchan if wchan not in (None, "", "?", "0") else None))
    return progress


def held_words(p: RankProgress) -> str | None:
    """What a rank's process state when the run was cut off says: stopped or stuck in the kernel holds the
    others up (their timeouts only follow from it); any other state says nothing."""
    where = f" in {p.wchan}" if p.wchan else ""
    if p.state == "T":
        return "was stopped (SIGSTOP, job control or a debugger)"
    if p.state == "t":
        return "was stopped by a debugger (tracing)"
    if p.state == "D":
        return (f"was stuck in the kernel (uninterruptible sleep{where}): a driver call that did not return "
                "(GPU, NIC or storage)")
    return None


def exit_words(status: int | None) -> str | None:
    """'killed by signal 9 (SIGKILL)', 'exited with code 1'; None when no status was recorded. The
    shell reports a child killed by signal N as 128+N."""
    if status is None:
        return None
    if status > 128:
        number = status - 128
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "unknown signal"
        return f"killed by signal {number} ({name})"
    return f"exited with code {status}"


def _crashed(p: RankProgress) -> bool:
    """The rank's process died under it (a signal) or ended with a failure it never reported itself;
    not a rank that gave up with an error of its own (those exit 2 or 3 after saying why)."""
    return p.status is not None and (p.status > 128 or (p.status != 0 and p.error is None))


def _last_lines(text: str, count: int = 3) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-count:])


def pair_figures(job: Job, events: Mapping[int, Sequence[dict[str, Any]]]) -> dict[tuple[str, str], float]:
    """Per pair of hosts measured after the sweep: bytes / the slower side's time, in GB/s (the busbw
    of a 2-rank all-reduce of that size)."""
    host_of = {r.rank: r.host for r in job.ranks()}
    slowest: dict[tuple[int, int], tuple[int, float]] = {}
    for rank, rank_events in events.items():
        for event in rank_events:
            if event.get("event") != "pair" or int(event.get("partner", -1)) not in host_of:
                continue
            key = (min(rank, int(event["partner"])), max(rank, int(event["partner"])))
            seconds = float(event["seconds"])
            if key not in slowest or seconds > slowest[key][1]:
                slowest[key] = (int(event["bytes"]), seconds)
    return {(host_of[a], host_of[b]): (size / seconds / 1e9 if seconds > 0 else 0.0)
            for (a, b), (size, seconds) in sorted(slowest.items())}


def figures(job: Job, events: Mapping[int, Sequence[dict[str, Any]]]) -> list[SizeResult]:
    """Per size: the slowest rank's time (the collective is done when the last rank is), with its
    bandwidths; the count of wrong elements summed over ranks."""
    times: dict[int, list[float]] = {}
    wrong: dict[int, int] = {}
    for rank_events in events.values():
        for event in rank_events:
            if event.get("event") == "size":
                size = int(event["bytes"])
                times.setdefault(size, []).append(float(event["seconds"]))
                wrong[size] = wrong.get(size, 0) + int(event.get("wrong", 0))
    return [size_result(size, max(times[size]), job.world, wrong[size])
            for size in sorted(times) if len(times[size]) == job.world]


def iface_state(text: str) -> str | None:
    """'down', 'missing' or 'up' from `ip -j addr show dev X` output; None when unknown."""
    text = text.strip()
    if not text:
        return None
    if "does not exist" in text:
        return "missing"
    try:
        entries = json.loads(text)
    except ValueError:
        return None
    if not entries:
        return "missing"
    flags = set(entries[0].get("flags", []))
    return "up" if "UP" in flags and "LOWER_UP" in flags else "down"


def _level(stage: str) -> int:
    return _ORDER.index(stage)


def explain(job: Job, progress: Sequence[RankProgress], ifaces: Mapping[str, str | None], *, timed_out: bool,
            unreachable: Mapping[str, str], deadline: float,
            outputs: Mapping[int, str] | None = None) -> tuple[list[str], str]:
    """The hosts to blame and the most likely cause, in words an operator can act on."""
    hosts = list(job.host_names)
    by_host: dict[str, list[RankProgress]] = {h: [] for h in hosts}
    for p in progress:
        by_host[p.host].append(p)
    iface = {t.name: t.data_iface or "the data interface" for t in job.hosts}
    ended = f"ran out of time ({deadline:.0f} s)" if timed_out else "failed"
    if unreachable:
        return list(unreachable), "; ".join(f"{h} could not be reached over SSH: {r}" for h, r in unreachable.items())
    # A rank whose process died (kill -9, the OOM killer, a segfault) is the cause: its peers' errors
    # (connection closed, timeouts) only follow from it. Nothing about the network is to blame.
    crashed = [p for p in progress if _crashed(p)]
    if crashed:
        words = []
        for p in crashed:
            where = (f"during the all-reduce of {job.sizes[p.sizes_done]} bytes" if p.stage == "joined"
                     and p.sizes_done < len(job.sizes) else f"after reaching {p.stage}")
            tail = _last_lines((outputs or {}).get(p.rank, ""))
            words.append(f"{p.host}: rank {p.rank} {exit_words(p.status)} {where}"
                         + (f"; its last output: {tail}" if tail else "; it printed nothing"))
        return list(dict.fromkeys(p.host for p in crashed)), "; ".join(words)
    # A rank stopped or stuck in the kernel when the run was cut off held the others up: they wait for it,
    # and their timeouts (or the deadline) only follow. Nothing about the network is to blame either.
    held = [p for p in progress if held_words(p)]
    if held:
        words = [f"{p.host}: rank {p.rank} {held_words(p)} when the run was cut off, "
                 + (f"in the all-reduce of {job.sizes[p.sizes_done]} bytes" if p.stage == "joined"
                    and p.sizes_done < len(job.sizes) else f"after reaching {p.stage}") for p in held]
        return list(dict.fromkeys(p.host for p in held)), "; ".join(words) + "; the other ranks waited for it"

    # Who never made it into the process group: rank 0's own list when it has one, else the hosts
    # that stayed behind while another host got further.
    missing = {r for p in progress for r in p.missing}
    if missing:
        not_joined = [h for h in hosts if any(p.rank in missing for p in by_host[h])]
    else:
        furthest = max((_level(p.stage) for p in progress), default=0)
        not_joined = [h for h in hosts if furthest >= _level("connected")
                      and all(_level(p.stage) < _level("joined") for p in by_host[h])
                      and max(_level(p.stage) for p in by_host[h]) < furthest]

    broken = [h for h in hosts if ifaces.get(h) in ("down", "missing")]
    if broken:
        words = []
        for h in broken:
            state = "is down" if ifaces.get(h) == "down" else "does not exist"
            joined = any(_level(p.stage) >= _level("joined") for p in by_host[h])
            what = "stopped during the all-reduce" if joined else "never joined the rendezvous"
            words.append(f"{h} {what}: its data interface {iface[h]} {state}")
        return broken, "; ".join(words) + f"; the run {ended}"
    if not_joined and len(not_joined) < len(hosts):
        errors = "; ".join(f"{p.host}: {p.error}" for p in progress if p.error and p.host in not_joined)
        errors = f" [{errors}]" if errors else ""
        names = ", ".join(not_joined)
        if all(_level(p.stage) >= _level("connected") for h in not_joined for p in by_host[h]):
            # They reached the rendezvous store, then failed to open the collective's own connections.
            return not_joined, (f"{names} reached the rendezvous but could not connect to their peers (the "
                                "gloo/NCCL connections): a route or firewall on the data network between them; "
                                f"the run {ended}{errors}")
        return not_joined, (f"{names} never joined the rendezvous on {job.master}:{job.port}: its path over the "
                            f"data network, or a firewall dropping the rendezvous port; the run {ended}{errors}")
    never = [h for h in hosts if all(p.stage == "not_started" for p in by_host[h])]
    if never:
        return never, f"{', '.join(never)}: the rank never started (its output is in the JSON report)"
    done = [p.sizes_done for p in progress]
    if all(_level(p.stage) >= _level("joined") for p in progress) and max(done) > min(done):
        behind = sorted({p.host for p in progress if p.sizes_done == min(done)}, key=hosts.index)
        if len(behind) < len(hosts):
            return behind, (f"{', '.join(behind)} fell behind in the sweep (stuck at size {min(done) + 1} of "
                            f"{len(job.sizes)}) while the others went on; the run {ended}")
    errored = [h for h in hosts if any(p.error and not _PEER_FAILURE.search(p.error) for p in by_host[h])]
    if errored and len(errored) == len(hosts) and (named := _named_in_output(progress, outputs or {}, hosts)):
        return named
    if errored and len(errored) < len(hosts):
        first = next(p for p in progress if p.error and p.host in errored)
        return errored, f"rank {first.rank} on {first.host} failed: {first.error}"
    if all(_level(p.stage) >= _level("joined") for p in progress):
        size = job.sizes[min(min(done), len(job.sizes) - 1)]
        return hosts, (f"every rank joined, then the all-reduce of {size} bytes {ended}: typical of a hop with a "
                       "smaller MTU on the data path, or a firewall dropping the collective's connections")
    failed = next((p for p in progress if p.error), None)
    if failed is not None:
        return hosts, f"rank {failed.rank} on {failed.host} failed: {failed.error}"
    return hosts, f"the run {ended} before every rank joined"


# explain's causes this sure of say what failed better than a guess about the network: two ranks on one GPU
# (95), a CUDA fault, a library that would not load. The network's own causes score lower.
_SURE = 90


def _named_in_output(progress: Sequence[RankProgress], outputs: Mapping[int, str],
                     hosts: Sequence[str]) -> tuple[list[str], str] | None:
    """Every rank failed with an error of its own: what they printed, read as `fabnet explain` reads any log,
    names the cause when one is sure (NCCL refusing two ranks that share a GPU fails every rank alike at
    its first collective, after every rank joined)."""
    logs = [(f"rank {p.rank} on {p.host}", outputs[p.rank]) for p in progress if outputs.get(p.rank)]
    causes = log_rules.explain(logs).causes if logs else []
    if not causes or causes[0].score < _SURE:
        return None
    top = causes[0]
    named = [h for h in hosts if h in top.hosts] or [h for h in hosts if any(p.host == h and p.error for p in progress)]
    return named, f"{top.title}: {top.detail} Fix: {top.fix}"
