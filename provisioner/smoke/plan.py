"""Planning one all-reduce job (pure): its ranks, their environment, and the one script per host that
uploads the node-side program and starts that host's ranks; the script that collects and kills.

Each rank runs in its own session (`setsid`), so its process group can be killed whole; the pids go
to a file in the job's directory before anything else happens, so the kill script finds them even
when the run is cut off at its deadline. A small shell wrapper waits for the rank and appends its exit
status to the rank's events: a rank killed by a signal (kill -9, the OOM killer, a crash) cannot say
so itself.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provisioner.load.ansible_tags import HIDDEN
from provisioner.resources.base import sh
from provisioner.smoke.targets import Target

NODE_SCRIPT = Path(__file__).with_name("node_script.py")
_RUN_ID = re.compile(r"^[a-z0-9-]{1,64}$")
MARK = "@@fabnet-smoke"


@dataclass(frozen=True)
class Rank:
    rank: int
    host: str
    local_rank: int


@dataclass(frozen=True)
class Job:
    """One all-reduce across some hosts (the whole fleet, or a pair during localisation)."""

    run_id: str  # unique per job: names the directory on every node
    hosts: tuple[Target, ...]
    master: str  # data address of the first host: the rendezvous
    port: int
    backend: str
    ranks_per_host: int
    sizes: tuple[int, ...]
    iters: int
    warmup: int
    timeout: float  # each rank's limit on the rendezvous and on every collective
    deadline: float  # each rank exits after this many seconds whatever it is doing
    extra_env: Mapping[str, str] = field(default_factory=dict)
    # Rounds of disjoint rank pairs measured after the sweep (verdicts.pair_rounds), and their size.
    pairs: tuple[tuple[tuple[int, int], ...], ...] = ()
    pair_bytes: int = 0

    def __post_init__(self) -> None:
        if not _RUN_ID.match(self.run_id):
            raise ValueError(f"bad run id {self.run_id!r}")

    @property
    def world(self) -> int:
        return len(self.hosts) * self.ranks_per_host

    @property
    def host_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.hosts)

    def ranks(self) -> list[Rank]:
        return [Rank(h * self.ranks_per_host + local, target.name, local)
                for h, target in enumerate(self.hosts) for local in range(self.ranks_per_host)]

    @property
    def directory(self) -> str:
        return f"/tmp/fabnet-smoke-{self.run_id}"


def rank_env(job: Job, target: Target) -> dict[str, str]:
    """The playbook's NCCL environment, plus what gloo needs to stay on the data network."""
    env = {k: v for k, v in target.env.items() if re.match(r"^(NCCL|GLOO)_[A-Z0-9_]+$", k)}
    # Without it gloo binds to the address the hostname resolves to (often 127.0.1.1) and the mesh fails.
    if "GLOO_SOCKET_IFNAME" not in env and target.data_iface:
        env["GLOO_SOCKET_IFNAME"] = target.data_iface
    env.update(job.extra_env)
    env["PYTHONWARNINGS"] = "ignore"
    return env


def exports(env: Mapping[str, str]) -> str:
    """Shell giving `env` to what the script starts next: `export`, a builtin of the shell that reads the
    script on its standard input, so no value is on any process's command line (`env K=V prog` put them
    in one that every user of the node can read, secrets of the NCCL environment included)."""
    return "export " + " ".join(sh(f"{k}={v}") for k, v in sorted(env.items())) if env else ":"


def shown_env(env: Mapping[str, str], secret: frozenset[str]) -> dict[str, str]:
    """`env` as reports may show it: the values of `secret` keys hidden."""
    return {k: HIDDEN if k in secret else v for k, v in env.items()}


def rank_command(job: Job, target: Target, rank: Rank) -> list[str]:
    return [
        target.python, f"{job.directory}/node.py",
        "--rank", str(rank.rank), "--world", str(job.world), "--local-rank", str(rank.local_rank),
        "--master", job.master, "--port", str(job.port), "--backend", job.backend,
        "--sizes", ",".join(str(s) for s in job.sizes), "--iters", str(job.iters), "--warmup", str(job.warmup),
        "--timeout", f"{job.timeout:g}", "--deadline", f"{job.deadline:g}",
        "--events", f"{job.directory}/rank-{rank.rank}.events",
        *(["--pairs", ";".join(",".join(f"{a}-{b}" for a, b in r) for r in job.pairs),
           "--pair-bytes", str(job.pair_bytes)] if job.pairs and job.pair_bytes else []),
    ]


# Runs the rank ("$@") with its output in $1.out, then appends its exit status to $1.events (128+N
# for signal N, as the shell reports it). Killed with its rank's process group, it then writes nothing.
WRAPPER = ('r=$1; shift; "$@" </dev/null >"$r.out" 2>&1; s=$?; '
           'printf \'{"event": "exit", "status": %d}\\n\' "$s" >>"$r.events"')


def launch_script(job: Job, target: Target, node_script: str | None = None) -> str:
    """The ONE exec for a host: write the node program, start the host's ranks, wait, print events."""
    code = node_script if node_script is not None else NODE_SCRIPT.read_text()
    payload = base64.b64encode(code.encode()).decode()
    directory = sh(job.directory)
    env = exports(rank_env(job, target))
    lines = [
        "umask 077",
        f"mkdir -p {directory} || exit 70",
        f"printf '%s' {sh(payload)} | base64 -d > {directory}/node.py || exit 71",
    ]
    for rank in job.ranks():
        if rank.host != target.name:
            continue
        command = " ".join(sh(part) for part in rank_command(job, target, rank))
        prefix = sh(f"{job.directory}/rank-{rank.rank}")
        # The subshell is no process group leader, so setsid needs no fork: `$!` is the rank's session.
        lines.append(f"( {env}; exec setsid sh -c {sh(WRAPPER)} fabnet-rank {prefix} {command} ) </dev/null "
                     f">/dev/null 2>&1 &")
        lines.append(f"echo $! >> {directory}/pids")
    lines += [
        "wait",
        collect_snippet(job),
        # Every rank has ended: nothing is left to kill, so the job cleans up after itself.
        f"rm -rf {directory}",
    ]
    return "\n".join(lines) + "\n"


def collect_snippet(job: Job) -> str:
    directory = sh(job.directory)
    return (
        f"for f in {directory}/rank-*.events; do [ -e \"$f\" ] || continue; "
        f"printf '%s %s\\n' '{MARK}:events' \"$f\"; cat \"$f\"; done; "
        f"for f in {directory}/rank-*.out; do [ -s \"$f\" ] || continue; "
        f"printf '%s %s\\n' '{MARK}:output' \"$f\"; tail -c 2000 \"$f\"; echo; done"
    )


def kill_script(job: Job, target: Target) -> str:
    """Kill every process group this job started on the host, then print the ranks' events, the data
    interface's state (to explain a failure) and the processes still alive (to prove there are none)."""
    directory = sh(job.directory)
    iface = sh(target.data_iface or "lo")
    return "\n".join([
        # Read first: once its ranks are dead the launch exec removes the directory (its own output
        # then carries the events), and the pids are still needed to prove nothing survived.
        f"pids=$(cat {directory}/pids 2>/dev/null)",
        # Ranks record their own process group too, in case setsid had to fork.
        f"groups=$(sed -n 's/.*\"pgid\": \\([0-9]*\\).*/\\1/p' {directory}/rank-*.events 2>/dev/null)",
        # Each rank's state before the kill, from its own pid (its `started` event): one stopped (T) or stuck
        # in the kernel (D, in any of its threads: NCCL's proxy and the driver's run in their own) is what held
        # the others up; `wchan` names where in the kernel it waits.
        f"for f in {directory}/rank-*.events; do [ -e \"$f\" ] || continue; "
        "p=$(sed -n '/\"started\"/s/.*\"pid\": \\([0-9]*\\).*/\\1/p' \"$f\" | head -n 1); [ -n \"$p\" ] || continue; "
        "s=; read -r s </proc/\"$p\"/stat 2>/dev/null || continue; s=${s##*) }; s=${s%% *}; w=/proc/$p; "
        "case $s in T|t) ;; *) for t in /proc/\"$p\"/task/*; do u=; read -r u <\"$t/stat\" 2>/dev/null; "
        "u=${u##*) }; [ \"${u%% *}\" = D ] && { s=D; w=$t; break; }; done;; esac; "
        "c=$(cat \"$w/wchan\" 2>/dev/null); "
        f"printf '%s %s %s %s\\n' '{MARK}:state' \"$f\" \"$s\" \"${{c:-?}}\"; done",
        "for p in $pids $groups; do kill -s KILL -- -\"$p\" 2>/dev/null; kill -s KILL \"$p\" 2>/dev/null; done",
        "[ -n \"$pids\" ] && sleep 0.2",
        collect_snippet(job),
        f"printf '%s\\n' '{MARK}:iface'; ip -j addr show dev {iface} 2>&1",
        f"printf '%s\\n' '{MARK}:alive'",
        # A zombie is not running: a rank whose wrapper died with it waits for init to reap it.
        "for p in $pids $groups; do ps -o pid=,stat= -s \"$p\" 2>/dev/null; done | sort -u | "
        "while read -r pid stat; do case $stat in Z*) ;; *) echo \"$pid\" ;; esac; done",
        f"rm -rf {directory}",
    ]) + "\n"


# ------------------------------------------------------------------------------------- reading back


@dataclass
class HostReport:
    """What one host's exec (launch or kill) printed, split into the ranks' events and the rest."""

    events: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    outputs: dict[int, str] = field(default_factory=dict)
    iface: str = ""
    alive: list[int] = field(default_factory=list)
    states: dict[int, tuple[str, str]] = field(default_factory=dict)  # rank -> (state letter, wchan) at the kill


def parse_host_output(stdout: str) -> HostReport:
    report = HostReport()
    section, rank = "", -1
    buffers: dict[str, list[str]] = {"iface": [], "alive": []}
    for line in stdout.splitlines():
        if line.startswith(MARK + ":"):
            head, _, path = line.partition(" ")
            section = head.split(":", 1)[1]
            if section == "state":  # one line: path, state letter, wchan
                path, state, wchan = [*path.split(), "", "", ""][:3]
            found = re.search(r"rank-([0-9]+)\.", path)
            rank = int(found.group(1)) if found else -1
            if section == "state" and rank >= 0 and re.fullmatch(r"[A-Za-z]", state):
                report.states[rank] = (state, wchan if re.fullmatch(r"[\w.]+", wchan) else "?")
            continue
        if section == "events":
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line cut off by a kill
            if isinstance(record, dict):
                report.events.setdefault(rank, []).append(record)
        elif section == "output":
            report.outputs[rank] = report.outputs.get(rank, "") + line + "\n"
        elif section in buffers:
            buffers[section].append(line)
    report.iface = "\n".join(buffers["iface"])
    report.alive = [int(w) for w in " ".join(buffers["alive"]).split() if w.isdigit()]
    return report


def merge(reports: Sequence[HostReport]) -> HostReport:
    merged = HostReport()
    for report in reports:
        for rank, events in report.events.items():
            known = merged.events.setdefault(rank, [])
            known.extend(e for e in events if e not in known)
        merged.outputs.update(report.outputs)
        merged.iface = merged.iface or report.iface
        merged.alive += report.alive
        merged.states.update(report.states)
    return merged
