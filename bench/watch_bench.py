"""Time one `fabnet watch` cycle over kept-open sessions against a cold `fabnet audit` of the same fleet,
and the watch's controller CPU per host per cycle, in one run on one lab of virtual GPU nodes.

For each workload (`site`, `mtu`: the audit bench's): cold `fabnet audit INV -p PLAYBOOK --json` runs
(the whole command, start-up included), each followed by a pair of real `fabnet watch INV -p PLAYBOOK
--json --history FILE --every E --for T` processes, a short and a long one. Each watch records every host
cycle in its history: when it started (`at`) and how long it took (`seconds`). Every host's first cycle
starts at once and each next one `--every` after its previous one started, so the hosts' k-th cycles
form rounds; a round's wall time is from its first host's start to its last host's end. Round 1 logs
in (cold) and is left out; the figure is the median of the later rounds. The controller's CPU per host
per cycle is (CPU of the long watch - CPU of the short one) / (host cycles of the long one - of the
short one): start-up, loading and the first logins are in both and cancel out. Run as root via
`bench/run.sh --watch` (see bench/README.md). Prints a table and writes
bench/results/<date>-watch-<nodes>-<rtt>ms.json. The lab is removed at the end, on errors and on
Ctrl-C too. Never part of the test suite.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import audit_bench as ab

GOAL = 1 / 3  # a watch cycle should cost at most this share of a cold audit's wall time
# Checks across hosts (one MTU on every host of a play): a watch cycle judges its host against the other
# hosts' last readings, which in the first round may not all be there yet; compared from the second on.
FLEET_WIDE = ("mtu_uniform",)


@dataclass
class WatchRun:
    rounds_asked: int
    seconds: float
    user_s: float
    sys_s: float
    exit_code: int
    host_cycles: int
    rounds: list[dict[str, float]] = field(default_factory=list)  # every complete round: start, wall, skew
    cycle_seconds: list[float] = field(default_factory=list)  # each warm host cycle's own duration
    overlapped: int = 0  # warm rounds that had not ended when a host began the next one
    busy: float = 0.0  # share of the machine's CPUs busy meanwhile (nodes, watch and anything else)
    problems: list[str] = field(default_factory=list)

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.sys_s


def cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of all the machine's CPUs, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return float(sum(fields) - idle), float(sum(fields))


def run_watch(inventory: Path, workload: ab.Workload, every: float, rounds: int, history: Path,
              state: Path, reference: ab.Drift) -> WatchRun:
    """One `fabnet watch` process for `rounds` intervals, read back from its history."""
    argv = [str(ab.FABNET), "watch", str(inventory), "-p", str(workload.fabnet_playbook), "--json",
            "--history", str(history), "--every", f"{every:g}s", "--for", f"{every * rounds:g}s"]
    # Its own state folder: the watch lock of this inventory is nobody else's business.
    env = dict(os.environ, XDG_STATE_HOME=str(state))
    before, busy_before = resource.getrusage(resource.RUSAGE_CHILDREN), cpu_times()
    start = time.perf_counter()
    try:
        proc = subprocess.run(argv, cwd=ab.REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=every * rounds + 300, check=False)
        code, err = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, err = 124, ab._text(exc.stderr)
    seconds = time.perf_counter() - start
    after, busy_after = resource.getrusage(resource.RUSAGE_CHILDREN), cpu_times()
    run = WatchRun(rounds, seconds, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, code, 0)
    run.busy = (busy_after[0] - busy_before[0]) / max(1.0, busy_after[1] - busy_before[1])
    if code != 0:
        run.problems.append(f"exit {code}: {ab.tail(err, lines=5)}")
    read_history(run, history, reference, every)
    return run


def read_history(run: WatchRun, path: Path, reference: ab.Drift, every: float) -> None:
    from provisioner.history.store import History

    if not path.exists():
        run.problems.append("no history written")
        return
    with History(path) as history:
        results = [r for r in history.results() if r.command == "watch"]
    by_host: dict[str, list[tuple[float, float]]] = {}
    for r in results:
        first = r.host not in by_host
        found = frozenset(f"{item['target']}.{item['attribute']}" for item in r.drift
                          if not (first and str(item['target']).startswith(FLEET_WIDE)))
        wanted = frozenset(key for host, key in reference
                           if host == r.host and not (first and key.startswith(FLEET_WIDE)))
        if r.verdict not in ("in_sync", "drifted") or r.seconds is None:
            run.problems.append(f"{r.host} at {r.at:.3f}: {r.verdict} {r.error or ''}".strip())
        elif found != wanted:
            run.problems.append(f"{r.host}: the watch found other drift than the audit: {sorted(found ^ wanted)}")
        by_host.setdefault(r.host, []).append((r.at, r.seconds or 0.0))
    run.host_cycles = len(results)
    cycles = [sorted(c) for c in by_host.values()]
    complete = min((len(c) for c in cycles), default=0)
    for k in range(1, complete):  # the hosts' k-th cycles (0 is the first, cold one: left out)
        starts = [c[k][0] for c in cycles]
        ends = [c[k][0] + c[k][1] for c in cycles]
        run.rounds.append({"start": min(starts), "wall_s": max(ends) - min(starts),
                           "skew_s": max(starts) - min(starts)})
        run.cycle_seconds += [c[k][1] for c in cycles]
        if k + 1 < complete and max(ends) > min(c[k + 1][0] for c in cycles):
            run.overlapped += 1
    if complete < 3:
        run.problems.append(f"only {complete} complete rounds (at least 3 needed; --every {every:g} too short?)")


def warm_up(runner: ab.FabnetRunner, workload: ab.Workload, args: argparse.Namespace, nodes: int) -> ab.Drift:
    """Untimed audits; the first one's drift is what every later audit and watch cycle must find."""
    reference: ab.Drift | None = None
    for _ in range(args.warmup):
        run = runner.run(workload)
        reference = run.drift if reference is None else reference
        ab.log(f"warm-up  audit {run.seconds:7.2f} s  exit {run.exit_code}  hosts {run.hosts_checked}/{nodes}  "
               f"drift items {len(run.drift)}")
    assert reference is not None
    return reference


def measure(inventory: Path, workload: ab.Workload, args: argparse.Namespace, nodes: int,
            workdir: Path) -> dict[str, Any]:
    ab.log(f"\n== {workload.name}: {workload.description}")
    entry: dict[str, Any] = {"name": workload.name, "load_before": list(os.getloadavg())}
    runner = ab.FabnetRunner(inventory)
    reference = warm_up(runner, workload, args, nodes)
    every = args.every
    audits: list[ab.Run] = []
    short, long = args.rounds
    pairs: list[tuple[WatchRun, WatchRun]] = []
    # Each repeat is a cold audit then a short and a long watch, so both see the same load on a shared machine.
    for i in range(args.repeat):
        run = runner.run(workload)
        audits.append(run)
        ab.log(f"run {i + 1}/{args.repeat}  audit {run.seconds:7.2f} s  CPU {run.cpu_seconds:5.2f} s  "
               f"hosts {run.hosts_checked}/{nodes}  same drift {run.drift == reference}")
        # Rounds must not overlap: by default each round gets the first cold audit's time (a watch cycle
        # slower than that misses the goal anyway; an overlap is counted and said).
        every = every or max(1.0, math.ceil(run.seconds * 2) / 2)
        pair = []
        for rounds in (short, long):
            history = workdir / f"{workload.name}-{i}-{rounds}.sqlite"
            watch = run_watch(inventory, workload, every, rounds, history, workdir / "state", reference)
            pair.append(watch)
            walls = [r["wall_s"] for r in watch.rounds]
            ab.log(f"watch {i + 1}/{args.repeat} --for {rounds}x{every:g}s  {watch.seconds:6.2f} s  "
                   f"CPU {watch.cpu_s:5.2f} s  host cycles {watch.host_cycles}  warm rounds {len(walls)}  "
                   f"median round {ab.median(walls):.3f} s  busy {watch.busy:.0%}  "
                   + (f"PROBLEMS {watch.problems[:3]}" if watch.problems else "ok"))
        pairs.append((pair[0], pair[1]))
    audit_median = ab.median([r.seconds for r in audits])
    slopes = []
    for a, b in pairs:
        cycles = b.host_cycles - a.host_cycles
        if cycles > 0:
            slopes.append({"cpu": (b.cpu_s - a.cpu_s) / cycles, "user": (b.user_s - a.user_s) / cycles,
                           "sys": (b.sys_s - a.sys_s) / cycles,
                           "fixed": a.cpu_s - a.host_cycles * (b.cpu_s - a.cpu_s) / cycles})
    runs = [run for pair in pairs for run in pair]
    walls = [r["wall_s"] for run in runs for r in run.rounds]
    cycle_seconds = sorted(s for run in runs for s in run.cycle_seconds)
    watch_median = ab.median(walls)
    problems = [p for run in runs for p in run.problems]
    problems += [f"cold audit: {r.hosts_checked}/{nodes} hosts, same drift {r.drift == reference}: {r.output_tail}"
                 for r in audits if r.hosts_checked != nodes or r.drift != reference]
    ratio = watch_median / audit_median
    entry.update({
        "playbook": str(workload.fabnet_playbook),
        "reference_drift_items": len(reference),
        "fleet_wide_drift_items": sorted(f"{h} {k}" for h, k in reference if k.startswith(FLEET_WIDE)),
        "cold_audit": {
            "command": ab.FabnetRunner(inventory).command(workload),
            "runs_s": [round(r.seconds, 3) for r in audits], "median_s": round(audit_median, 3),
            "min_s": round(min(r.seconds for r in audits), 3),
            "cpu_median_s": round(ab.median([r.cpu_seconds for r in audits]), 3),
            "all_hosts_checked": all(r.hosts_checked == nodes for r in audits),
            "same_drift": all(r.drift == reference for r in audits),
        },
        "watch": {
            "every_s": every, "rounds_asked": [short, long],
            "round_wall_median_s": round(watch_median, 3), "round_wall_min_s": round(min(walls, default=math.nan), 3),
            "round_wall_max_s": round(max(walls, default=math.nan), 3), "warm_rounds": len(walls),
            "host_cycle_median_s": round(ab.median(cycle_seconds), 3),
            "host_cycle_p90_s": round(cycle_seconds[int(0.9 * (len(cycle_seconds) - 1))], 3) if cycle_seconds
            else None,
            "rounds_overlapped": sum(run.overlapped for run in runs),
            "machine_busy_median": round(ab.median([run.busy for run in runs]), 3),
            "runs": [{"rounds_asked": run.rounds_asked, "seconds": round(run.seconds, 3),
                      "user_s": round(run.user_s, 3), "sys_s": round(run.sys_s, 3), "exit_code": run.exit_code,
                      "host_cycles": run.host_cycles, "busy": round(run.busy, 3),
                      "round_walls_s": [round(r["wall_s"], 4) for r in run.rounds],
                      "round_skews_s": [round(r["skew_s"], 4) for r in run.rounds]} for run in runs],
            "problems": problems[:20],
        },
        "cpu_per_host_cycle_ms": {
            key: round(ab.median([s[key] for s in slopes]) * 1000, 2) for key in ("cpu", "user", "sys")
        } | {"pairs": [round(s["cpu"] * 1000, 2) for s in slopes],
             "fixed_cpu_s": round(ab.median([s["fixed"] for s in slopes]), 3)},
        "ratio": round(ratio, 3),
        "goal": f"<= {GOAL:.3f}",
        # Measured wrong (a host failed, other drift, too few rounds) is not the same as measured slow.
        "verdict": "INVALID" if problems else "pass" if ratio <= GOAL else "MISSED",
        "load_after": list(os.getloadavg()),
    })
    return entry


def render(doc: dict[str, Any]) -> str:
    out = [f"\nfabnet watch vs cold audit: {doc['nodes']} nodes at {doc['rtt_ms']:g} ms round-trip time, "
           f"{doc['machine']['cpus']} CPUs, {doc['date']}, {doc['repeat']} cold audits and watch pairs"]
    header = ("workload", "cold audit s", "watch round s", "ratio", "goal", "verdict", "CPU ms/host/cycle",
              "busy")
    rows = []
    for w in doc["workloads"]:
        a, c, cpu = w["cold_audit"], w["watch"], w["cpu_per_host_cycle_ms"]
        rows.append((w["name"], f"{a['median_s']:.2f} (min {a['min_s']:.2f})",
                     f"{c['round_wall_median_s']:.3f} ({c['round_wall_min_s']:.3f}-{c['round_wall_max_s']:.3f})",
                     f"{w['ratio']:.3f}", "1/3", w["verdict"],
                     f"{cpu['cpu']:.2f} (user {cpu['user']:.2f}, sys {cpu['sys']:.2f})",
                     f"{c['machine_busy_median']:.0%}"))
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    out.append("  ".join(h.ljust(wd) for h, wd in zip(header, widths, strict=True)))
    out += ["  ".join(v.ljust(wd) for v, wd in zip(r, widths, strict=True)) for r in rows]
    out.append("watch round = wall time of one warm round (every host's cycle, started together, first start to "
               "last end), median (min-max); ratio = watch round median / cold audit median; busy = share of the "
               "machine's CPUs busy during the watches (the nodes run on them too)")
    for w in doc["workloads"]:
        c = w["watch"]
        out.append(f"{w['name']}: --every {c['every_s']:g}s, {c['warm_rounds']} warm rounds, host cycle median "
                   f"{c['host_cycle_median_s']:.3f} s (p90 {c['host_cycle_p90_s']}), rounds overlapped "
                   f"{c['rounds_overlapped']}, fixed CPU per watch {w['cpu_per_host_cycle_ms']['fixed_cpu_s']} s"
                   + (f"; problems: {c['problems'][:3]}" if c["problems"] else ""))
    return "\n".join(out)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=64, help="lab size (default 64)")
    parser.add_argument("--rtt", type=float, default=20.0, help="round-trip time on the management path, ms (20)")
    parser.add_argument("--repeat", type=int, default=3, help="timed cold audits, and watch pairs (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed audits first; the first sets the drift (1)")
    parser.add_argument("--every", type=float, default=None,
                        help="watch --every, s (default: the first cold audit's time, rounded up to 0.5 s, >= 1)")
    parser.add_argument("--rounds", default="4,10", help="the short and the long watch, in intervals (4,10)")
    parser.add_argument("--workloads", default=",".join(w.name for w in ab.WORKLOADS))
    parser.add_argument("--lab", default="benchw", help="lab name (default benchw); must not exist yet")
    parser.add_argument("--output", type=Path, default=None,
                        help="results JSON (default bench/results/DATE-watch-NODES-RTTms.json)")
    args = parser.parse_args(argv)
    args.workloads = [w for w in ab.WORKLOADS if w.name in args.workloads.split(",")]
    try:
        short, long = (int(v) for v in args.rounds.split(","))
    except ValueError:
        parser.error("--rounds: two whole numbers, SHORT,LONG")
    args.rounds = (short, long)
    if args.nodes < 2 or args.repeat < 1 or args.warmup < 1 or not args.workloads or not 3 <= short < long:
        parser.error("need --nodes >= 2, --repeat >= 1, --warmup >= 1, a workload, and 3 <= SHORT < LONG rounds")
    if args.every is not None and args.every < 0.5:
        parser.error("--every: at least 0.5 (watch's minimum)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if os.geteuid() != 0:
        ab.log("error: run as root (the lab needs it): bench/run.sh --watch")
        return 64
    if ab.lab_exists(args.lab):
        ab.log(f"error: a lab named {args.lab!r} exists already; remove it (fabnet lab down --name {args.lab}) "
               "or pass --lab NAME")
        return 1
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, ab._interrupt)
    started = dt.datetime.now().astimezone()
    clock = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="fabnet-watch-bench-"))
    created = False
    results: list[dict[str, Any]] = []
    try:
        ab.log(f"bringing up lab {args.lab!r}: {args.nodes} nodes at {args.rtt:g} ms")
        created = True  # from here on a half-built lab must be removed too
        proc = ab.fabnet_cli("lab", "up", "--name", args.lab, "--nodes", str(args.nodes), "--rtt", f"{args.rtt:g}ms")
        if proc.returncode != 0:
            ab.log(f"error: fabnet lab up failed:\n{ab.tail(proc.stdout, proc.stderr)}")
            return 1
        status = ab.lab_status(args.lab)
        inventory = Path(status["inventory"])
        for workload in args.workloads:
            results.append(measure(inventory, workload, args, len(status["nodes"]), workdir))
    except KeyboardInterrupt:
        ab.log("\ninterrupted")
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not stop the teardown
        if created:
            ab.remove_lab(args.lab)
        shutil.rmtree(workdir, ignore_errors=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    document = {
        "schema": "fabnet/bench/watch/v1",
        "date": started.isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version(),
                    "load_average_at_start": results[0]["load_before"] if results else None},
        "nodes": len(status["nodes"]), "rtt_ms": args.rtt, "repeat": args.repeat, "warmup": args.warmup,
        "version": ab.fabnet_cli("--version").stdout.strip().split()[-1],
        "duration_s": round(time.perf_counter() - clock, 1),
        "workloads": results,
    }
    output = args.output or ab.RESULTS / f"{started.date().isoformat()}-watch-{document['nodes']}-{args.rtt:g}ms.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(document, indent=2) + "\n"
    for path, name in ((workdir, "<tmp>"), (inventory.parent, "<lab>"), (ab.REPO, ".")):
        text = text.replace(str(path), name)
    output.write_text(text)
    print(render(document))
    print(f"results: {output.relative_to(ab.REPO) if output.is_relative_to(ab.REPO) else output}")
    verdicts = {w["verdict"] for w in results}
    return 1 if "INVALID" in verdicts else 2 if "MISSED" in verdicts else 0


if __name__ == "__main__":
    sys.exit(main())
