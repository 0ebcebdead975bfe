"""One run that answers the fleet-scale questions about `fabnet audit`, on labs of virtual GPU nodes.

In order: start-up time of `fabnet --help`, `fabnet parse` and `fabnet audit`; then, on a lab at 0 ms
and again on one at `--rtt` (20 ms) round-trip time on the management path:
  - what one emulated tool call costs on a node (each tool, median of many calls);
  - fabnet's controller CPU per host, by phase (connect = TCP + key exchange + auth; exec = channel,
    script, output; split; evaluate; plan; render), hosts one at a time in this process;
  - fabnet's time and CPU for 4, 8, 16, 32 and 64 nodes at a fixed --forks (scaling exponent, marginal
    CPU per host), and at 64 nodes with two worker processes;
  - `fabnet audit` vs Ansible and pyinfra on the `site` and `mtu` workloads at 16 and 64 nodes, with
    the drift each tool finds verified equal to fabnet's (audit_bench.measure);
and last a projection to 1000 hosts from the measured CPU per host and round trips, with its
assumptions. Prints the tables and writes bench/results/<date>-fleet.json (-2, -3... for later runs
that day). Labs are removed at the end, on errors and on Ctrl-C too. Run as root via
`bench/run.sh --fleet` (see bench/README.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import audit_bench as ab

SAMPLE = ab.REPO / "tests" / "samples" / "ofed_info-s-1.txt"
MTU_PLAYBOOK = ab.BENCH / "fabnet" / "mtu.yml"
SITE_PLAYBOOK = ab.REPO / "playbooks" / "site.yml"
SIZES = (4, 8, 16, 32, 64)
SCALING_FORKS = 64
EXEC_ROUND_TRIPS = 2
TOOL_CALLS = [
    ["ofed_info", "-s"], ["ibv_devinfo"], ["ibv_devinfo", "-v"], ["ibstat"], ["ibdev2netdev"], ["show_gids"],
    ["rdma", "link", "show"], ["nvidia-smi", "topo", "-m"], ["cma_roce_tos", "-d", "mlx5_0"], ["lsmod"],
    ["mlnx_qos", "-i", "eth1"],
]
# Runs on a node with its own python3: times each tool as a process start, as a probe script does.
NODE_TIMER = r"""
import json, statistics, subprocess, sys, time
calls = json.loads(sys.argv[1])
out = {}
for call in [["true"]] + calls:
    subprocess.run(call, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    times = []
    for _ in range(int(sys.argv[2])):
        start = time.perf_counter()
        subprocess.run(call, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append((time.perf_counter() - start) * 1000)
    out[" ".join(call)] = round(statistics.median(times), 2)
print(json.dumps(out))
"""


def names(count: int) -> str:
    return ",".join(f"gpu{i:02d}" for i in range(1, count + 1))


class Limited(ab.Runner):
    """A runner restricted to some hosts with the tool's own --limit."""

    def __init__(self, inner: ab.Runner, limit: str) -> None:
        self.inner, self.limit, self.name = inner, limit, inner.name

    def command(self, workload: ab.Workload, limit: str | None = None) -> list[str]:
        return self.inner.command(workload, self.limit)

    def run(self, workload: ab.Workload, limit: str | None = None) -> ab.Run:
        return self.inner.run(workload, self.limit)

    def cleanup(self) -> None:
        self.inner.cleanup()


def startup(inventory: Path, repeat: int) -> dict[str, Any]:
    """Median wall and CPU of commands that connect to nothing; `audit` stops after loading its plans
    (a --limit that matches no host: imports, inventory and playbook), so no address is contacted."""
    commands = {
        "fabnet --help": [str(ab.FABNET), "--help"],
        "fabnet parse": [str(ab.FABNET), "parse", "ofed_info", str(SAMPLE)],
        "fabnet audit": [str(ab.FABNET), "audit", str(inventory), "-p", str(SITE_PLAYBOOK), "-l", "no-such-host"],
    }
    found: dict[str, Any] = {}
    for label, argv in commands.items():
        ab.timed(argv, ab.REPO)
        runs = [ab.timed(argv, ab.REPO) for _ in range(repeat)]
        found[label] = {"median_s": round(statistics.median(r[0] for r in runs), 3),
                        "min_s": round(min(r[0] for r in runs), 3),
                        "cpu_median_s": round(statistics.median(r[1] for r in runs), 3),
                        "exit_code": runs[0][2]}
        best = found[label]["min_s"] * 1000
        ab.log(f"start-up  {label:14} {found[label]['median_s'] * 1000:6.0f} ms (min {best:.0f})")
    return found


def ssh_argv(status: dict[str, Any], node: dict[str, Any]) -> list[str]:
    return ["ssh", "-i", status["private_key"], "-o", f"UserKnownHostsFile={status['known_hosts']}",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", f"{status['user']}@{node['mgmt_ip']}"]


def tool_costs(status: dict[str, Any], calls: int) -> dict[str, float]:
    node = status["nodes"][0]
    remote = f"python3 -c {_quote(NODE_TIMER)} {_quote(json.dumps(TOOL_CALLS))} {calls}"
    proc = subprocess.run([*ssh_argv(status, node), remote], capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"timing the tools on {node['name']} failed: {ab.tail(proc.stdout, proc.stderr)}")
    costs: dict[str, float] = json.loads(proc.stdout)
    for call, ms in costs.items():
        ab.log(f"tool on {node['name']}  {call:26} {ms:7.2f} ms")
    return costs


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def cpu_phases(inventory: Path, hosts: int) -> dict[str, float]:
    """Controller CPU per host by phase, hosts one at a time (in a child, so imports are counted apart),
    and the wall time of connecting (TCP, SSH key exchange, auth) and of the exec (channel, script)."""
    code = f"""
import json, resource, sys, time
from pathlib import Path
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime
c0 = cpu()
from provisioner.facts import batch
from provisioner.evaluate import engine
from provisioner.output import report
from provisioner.run import transport
from provisioner.load.inventory import load_inventory
from provisioner.load.hostplans import resolve
from provisioner.load.playbook import load_playbook
imports = cpu() - c0
c = cpu(); plans = resolve(load_playbook(Path({str(SITE_PLAYBOOK)!r})), load_inventory(Path({str(inventory)!r})), None)
plans = plans[:{hosts}]; n = len(plans); ph = dict(plan=(cpu() - c) / n)
for key in ("connect", "exec", "close", "split", "evaluate"): ph[key] = 0.0
outcomes = {{}}
wall = {{"connect": 0.0, "exec": 0.0, "exec true": 0.0}}
for plan in plans:
    c = cpu(); probes = engine.plan_probes(plan); nonce = batch.new_nonce(); script = batch.build_script(probes, nonce)
    ph["plan"] += (cpu() - c) / n
    c = cpu(); w = time.perf_counter(); conn = transport.connect(plan.host); ph["connect"] += (cpu() - c) / n
    wall["connect"] += (time.perf_counter() - w) / n
    c = cpu(); w = time.perf_counter(); res = transport.run(conn, script); ph["exec"] += (cpu() - c) / n
    wall["exec"] += (time.perf_counter() - w) / n
    w = time.perf_counter(); transport.run(conn, "true"); wall["exec true"] += (time.perf_counter() - w) / n
    c = cpu(); conn.close(); ph["close"] += (cpu() - c) / n
    c = cpu(); by_key = batch.split_output(res.stdout, nonce); ph["split"] += (cpu() - c) / n
    c = cpu(); o = engine.HostOutcome(plan.host.name, plan.host.address, "in_sync",
                                      resources=engine.evaluate(plan, engine.Results(by_key)))
    ph["evaluate"] += (cpu() - c) / n; outcomes[o.name] = o
c = cpu(); engine.apply_fleet_checks(plans, outcomes)
for o in outcomes.values(): engine.finish_status(o)
doc = report.audit_json(engine.AuditOutcome(list(outcomes.values()), 0.0), inventory="", playbook="", limit=None,
                        exit_code=2)
json.dumps(doc); ph["fleet+render"] = (cpu() - c) / n
out = {{k: round(v * 1000, 2) for k, v in ph.items()}}
out["total"] = round(sum(out.values()), 2); out["imports (once)"] = round(imports * 1000, 1)
out["connect wall"] = round(wall["connect"] * 1000, 1); out["exec wall"] = round(wall["exec"] * 1000, 1)
out["exec true wall"] = round(wall["exec true"] * 1000, 1)
print(json.dumps(out))
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=ab.REPO, capture_output=True, text=True, timeout=600,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"CPU phases failed: {ab.tail(proc.stdout, proc.stderr)}")
    phases: dict[str, float] = json.loads(proc.stdout)
    ab.log("controller CPU per host (ms): " + ", ".join(f"{k} {v}" for k, v in phases.items()))
    return phases


def fit_exponent(sizes: Sequence[int], seconds: Sequence[float]) -> float:
    """Least-squares slope of log(time) against log(hosts): 1 = time grows in proportion to the fleet."""
    xs, ys = [math.log(n) for n in sizes], [math.log(s) for s in seconds]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def fit_slope(sizes: Sequence[int], values: Sequence[float]) -> float:
    mx, my = statistics.fmean(sizes), statistics.fmean(values)
    return sum((x - mx) * (y - my) for x, y in zip(sizes, values, strict=True)) / sum((x - mx) ** 2 for x in sizes)


def scaling(inventory: Path, repeat: int, nodes: int) -> dict[str, Any]:
    """fabnet `site` for growing fleets at fixed forks; then 64 nodes with two worker processes."""
    rows = []
    sizes = [n for n in SIZES if n <= nodes]
    for count, workers in [*((n, "1") for n in sizes), (sizes[-1], "2")]:
        argv = [str(ab.FABNET), "audit", str(inventory), "-p", str(SITE_PLAYBOOK), "--json", "--forks",
                str(SCALING_FORKS), "-l", names(count)]
        env = dict(os.environ, FABNET_WORKERS=workers)
        ab.timed(argv, ab.REPO, env)
        runs = []
        for _ in range(repeat):
            seconds, cpu, code, out, _err = ab.timed(argv, ab.REPO, env)
            report = json.loads(out) if out.strip().startswith("{") else {}
            hosts = report.get("hosts", [])
            one = statistics.median(h.get("seconds", 0) for h in hosts) if hosts else None
            runs.append({"seconds": seconds, "cpu_seconds": cpu, "exit_code": code, "host_seconds_median": one,
                         "checked": sum(1 for h in hosts if h.get("status") in ("in_sync", "drifted"))})
        row = {"hosts": count, "workers": int(workers),
               "median_s": round(statistics.median(r["seconds"] for r in runs), 3),
               "cpu_median_s": round(statistics.median(r["cpu_seconds"] for r in runs), 3),
               "host_seconds_median": round(statistics.median(r["host_seconds_median"] or 0 for r in runs), 3),
               "all_checked": all(r["checked"] == count for r in runs)}
        row["per_host_ms"] = round(row["median_s"] * 1000 / count, 1)
        rows.append(row)
        ab.log(f"scaling  {count:3} hosts  workers {workers}  {row['median_s']:6.2f} s  "
               f"{row['per_host_ms']:6.1f} ms/host  CPU {row['cpu_median_s']:.2f} s  "
               f"one host's audit {row['host_seconds_median']:.3f} s")
    series = [r for r in rows if r["workers"] == 1]
    return {"forks": SCALING_FORKS, "rows": rows,
            "exponent": round(fit_exponent(sizes, [r["median_s"] for r in series]), 3),
            "cpu_ms_per_host": round(fit_slope(sizes, [r["cpu_median_s"] for r in series]) * 1000, 2)}


def compare(status: dict[str, Any], runners: dict[str, ab.Runner], workdir: Path, count: int,
            args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every tool on both workloads, on the first `count` nodes (pyinfra: an inventory of just those)."""
    chosen: dict[str, ab.Runner] = {}
    total = len(status["nodes"])
    for name, runner in runners.items():
        if name == "pyinfra":
            subset = dict(status, nodes=status["nodes"][:count])
            path = workdir / f"pyinfra_{count}.py"
            ab.write_pyinfra_inventory(subset, path)
            chosen[name] = ab.PyinfraRunner(path)
        else:
            chosen[name] = runner if count == total else Limited(runner, names(count))
    return ab.measure(args, chosen, count)


def project(lab0: dict[str, Any], lab20: dict[str, Any], rtt_ms: float, startup_s: float,
            hosts: int = 1000) -> dict[str, Any]:
    """fabnet at 1000 hosts from the measured CPU per host and round trips, with its assumptions."""
    cpu_ms = lab0["scaling"]["cpu_ms_per_host"]
    p0, p20 = lab0["cpu_phases_ms"], lab20["cpu_phases_ms"]
    wall0 = (p0["connect wall"] + p0["exec wall"]) / 1000
    # Round trips from what does not depend on the node's work: the connection, and an exec of `true`
    # (runs before it was measured count the exec's 2 by the protocol: channel open, exec request).
    if "exec true wall" in p0 and "exec true wall" in p20:
        exec_trips = (p20["exec true wall"] - p0["exec true wall"]) / rtt_ms
        how = f"measured with `true` ({exec_trips:.1f})"
    else:
        exec_trips, how = EXEC_ROUND_TRIPS, f"{EXEC_ROUND_TRIPS} by the protocol (channel open, exec request)"
    connect_trips = (p20["connect wall"] - p0["connect wall"]) / rtt_ms
    round_trips = max(0.0, connect_trips + exec_trips)
    cores = len(os.sched_getaffinity(0))
    out: dict[str, Any] = {
        "hosts": hosts, "cpu_ms_per_host": cpu_ms, "round_trips_per_host": round(round_trips, 1),
        "host_seconds_at_0ms": round(wall0, 3),
        "assumptions": [
            f"controller CPU per host stays {cpu_ms} ms: the marginal CPU of `site` from {SIZES[0]} to "
            f"{SIZES[-1]} nodes at 0 ms (on this machine, where the nodes compete for the same {cores} cores)",
            f"one host takes {wall0:.3f} s at 0 ms (connect {p0['connect wall']:.0f} ms + exec "
            f"{p0['exec wall']:.0f} ms, hosts one at a time on the lab; the exec is mostly the node running its "
            f"probes) plus {round_trips:.1f} round trips: {connect_trips:.1f} to connect (TCP, SSH key exchange, "
            f"auth; connect's extra time at {rtt_ms:g} ms) and for the exec {how}",
            "the nodes run their probes in parallel, each on its own CPUs (a real fleet)",
            "--forks connections at once; P worker processes on P free cores split the CPU work",
            "start-up counted once; enough bandwidth; no host slow or unreachable",
        ],
        "projections": [],
    }
    for rtt in (0.0, rtt_ms, 50.0):
        latency = wall0 + round_trips * rtt / 1000
        for forks, processes in ((50, 1), (200, 1), (200, 8)):
            cpu_bound = hosts * cpu_ms / 1000 / processes
            latency_bound = math.ceil(hosts / forks) * latency
            out["projections"].append({
                "rtt_ms": rtt, "forks": forks, "processes": processes, "cpu_bound_s": round(cpu_bound, 1),
                "latency_bound_s": round(latency_bound, 1),
                "seconds": round(startup_s + max(cpu_bound, latency_bound), 1)})
    return out


def _unused(path: Path) -> Path:
    """`path`, or the first of path-2, path-3... that does not exist: a second run of the day keeps the first."""
    candidate, number = path, 1
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.stem}-{number}{path.suffix}")
    return candidate


def phase_table(phases: dict[str, dict[str, float]]) -> str:
    keys = list(next(iter(phases.values())))
    lines = ["phase (ms/host)   " + "  ".join(f"{label:>8}" for label in phases)]
    for key in keys:
        lines.append(f"{key:17} " + "  ".join(f"{phases[label][key]:8.2f}" for label in phases))
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=64, help="lab size (default 64); comparisons at 16 and this")
    parser.add_argument("--rtt", type=float, default=20.0, help="round-trip time of the second lab, ms (20)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per tool, workload and size (3)")
    parser.add_argument("--slow-repeat", type=int, default=1,
                        help="timed runs for a tool whose warm-up took longer than --slow-after (1)")
    parser.add_argument("--slow-after", type=float, default=60.0, help="seconds; see --slow-repeat (60)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs first; checks the drift (1)")
    parser.add_argument("--scaling-repeat", type=int, default=3, help="timed runs per size of the scaling series")
    parser.add_argument("--tool-calls", type=int, default=21, help="calls per emulated tool on a node (21)")
    parser.add_argument("--tools", default=",".join(ab.TOOLS))
    parser.add_argument("--lab", default="benchf", help="lab name (default benchf); must not exist yet")
    parser.add_argument("--skip-install", action="store_true", help="use bench/.venv as it is")
    parser.add_argument("--output", type=Path, default=None, help="default bench/results/DATE-fleet.json, "
                        "or DATE-fleet-2.json and on when that day has one")
    parser.add_argument("--reproject", type=Path, default=None, metavar="JSON",
                        help="recompute the projection of a recorded run and print its tables; nothing is measured")
    args = parser.parse_args(argv)
    args.tools = [t for t in args.tools.split(",") if t]
    args.workloads = list(ab.WORKLOADS)
    if args.nodes < 16 or args.nodes > 200 or "fabnet" not in args.tools:
        parser.error("need 16 <= --nodes <= 200 and fabnet among --tools")
    if args.repeat < 1 or not 1 <= args.slow_repeat <= args.repeat:
        parser.error("need --repeat >= 1 and 1 <= --slow-repeat <= --repeat")
    return args


def one_lab(args: argparse.Namespace, rtt: float, versions: dict[str, str], workdir: Path,
            host_keys: dict[str, str] | None) -> dict[str, Any]:
    proc = ab.fabnet_cli("lab", "up", "--name", args.lab, "--nodes", str(args.nodes), "--rtt", f"{rtt:g}ms")
    if proc.returncode != 0:
        raise RuntimeError(f"fabnet lab up failed:\n{ab.tail(proc.stdout, proc.stderr)}")
    status = ab.lab_status(args.lab)
    inventory = Path(status["inventory"])
    pyinfra_inventory = workdir / "pyinfra_inventory.py"
    ab.write_pyinfra_inventory(status, pyinfra_inventory)
    runners: dict[str, ab.Runner] = {"fabnet": ab.FabnetRunner(inventory)}
    if "ansible" in versions:
        runners["ansible"] = ab.AnsibleRunner(inventory, workdir)
    if "pyinfra" in versions:
        runners["pyinfra"] = ab.PyinfraRunner(pyinfra_inventory)
    try:
        result: dict[str, Any] = {"rtt_ms": rtt, "load_before": list(os.getloadavg())}
        if host_keys is not None:
            host_keys.update(ab.host_key_check(runners, status, workdir, ab.WORKLOADS[1]))
        result["tool_ms"] = tool_costs(status, args.tool_calls)
        result["cpu_phases_ms"] = cpu_phases(inventory, 16)
        result["scaling"] = scaling(inventory, args.scaling_repeat, args.nodes)
        result["compare"] = {}
        for count in sorted({16, args.nodes}):
            ab.log(f"\n=== {count} nodes at {rtt:g} ms")
            workloads, rows = compare(status, runners, workdir, count, args)
            result["compare"][str(count)] = {"workloads": workloads, "rows": rows}
        result["load_after"] = list(os.getloadavg())
        return result
    finally:
        for runner in runners.values():
            runner.cleanup()
        ab.remove_lab(args.lab)


def reproject(path: Path) -> int:
    document = json.loads(path.read_text())
    labs = document["labs"]
    rtt = labs[1]["rtt_ms"]
    startup_times = document.get("startup") or labs[0]["startup"]
    document["projection"] = project(labs[0], labs[1], rtt, startup_times["fabnet audit"]["median_s"])
    path.write_text(json.dumps(document, indent=2) + "\n")
    print(render(document, dt.datetime.fromisoformat(document["date"])))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.reproject:
        return reproject(args.reproject)
    if os.geteuid() != 0:
        ab.log("error: run as root (the lab needs it)")
        return 64
    if ab.lab_exists(args.lab):
        ab.log(f"error: a lab named {args.lab!r} exists already; remove it or pass --lab NAME")
        return 1
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, ab._interrupt)
    started = dt.datetime.now().astimezone()
    clock = time.perf_counter()
    others = [t for t in args.tools if t != "fabnet"]
    versions, unavailable = ab.install_tools(others, dict(ab.PINS), args.skip_install)
    workdir = Path(tempfile.mkdtemp(prefix="fabnet-fleet-"))
    host_keys: dict[str, str] = {}
    labs: list[dict[str, Any]] = []
    # Before any lab exists: a lab's 64 booted nodes are load of their own.
    inventory = workdir / "startup_inventory.yml"
    inventory.write_text("all:\n  hosts:\n    gpu01:\n      ansible_host: 198.18.0.1\n")
    startup_times = startup(inventory, args.scaling_repeat * 3)
    try:
        for rtt in (0.0, args.rtt):
            ab.log(f"\n##### lab of {args.nodes} nodes at {rtt:g} ms round-trip time")
            labs.append(one_lab(args, rtt, versions, workdir, host_keys if not labs else None))
    except KeyboardInterrupt:
        ab.log("\ninterrupted")
        ab.remove_lab(args.lab)
        return 130
    finally:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    projection = project(labs[0], labs[1], args.rtt, startup_times["fabnet audit"]["median_s"])
    document = {
        "schema": "fabnet/bench/fleet/v1",
        "date": started.isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version(),
                    "load_average_at_start": labs[0]["load_before"]},
        "nodes": args.nodes, "repeat": args.repeat, "warmup": args.warmup,
        "versions": {"fabnet": ab.fabnet_cli("--version").stdout.strip().split()[-1],
                     **{ab.PACKAGE_OF[t]: v for t, v in versions.items()}},
        "unavailable": unavailable, "host_key_check": host_keys,
        "duration_s": round(time.perf_counter() - clock, 1),
        "startup": startup_times, "labs": labs, "projection": projection,
    }
    output = args.output or _unused(ab.RESULTS / f"{started.date().isoformat()}-fleet.json")
    output.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(document, indent=2) + "\n"
    from provisioner.lab.state import labs_root

    for path, label in ((workdir, "<tmp>"), (labs_root(), "<labs>"), (ab.REPO, ".")):
        text = text.replace(str(path), label)
    output.write_text(text)
    print(render(document, started))
    print(f"results: {output.relative_to(ab.REPO) if output.is_relative_to(ab.REPO) else output}")
    bad = [row for lab in labs for size in lab["compare"].values() for row in size["rows"]
           if row["same_drift"] == "NO" or row["hosts"] != row["nodes"]]
    return 1 if bad or not all(v.startswith("refused") for v in host_keys.values()) else 0


def render(doc: dict[str, Any], started: dt.datetime) -> str:
    out = [f"\nfabnet at fleet scale: labs of {doc['nodes']} nodes, {doc['machine']['cpus']} CPUs, "
           f"{started:%Y-%m-%d %H:%M %Z}, {doc['repeat']} timed runs per cell"]
    lab0 = doc["labs"][0]
    startup_times = doc.get("startup") or lab0["startup"]
    out.append("\nstart-up, median wall (CPU): " + ", ".join(
        f"{k} {v['median_s'] * 1000:.0f} ms ({v['cpu_median_s'] * 1000:.0f} ms)" for k, v in startup_times.items()))
    tools = lab0["tool_ms"]
    c_tools = [ms for call, ms in tools.items() if call not in ("true",) and not call.startswith("mlnx_qos")]
    out.append("\nemulated tool call on a node, median ms: " + ", ".join(f"{k} {v}" for k, v in tools.items()))
    out.append(f"median over the C-priced tools: {statistics.median(c_tools):.2f} ms; mlnx_qos (Python, as on real "
               f"nodes): {tools.get('mlnx_qos -i eth1')} ms; process start alone (`true`): {tools.get('true')} ms")
    out.append("\n" + phase_table({f"{lab['rtt_ms']:g} ms": lab["cpu_phases_ms"] for lab in doc["labs"]}))
    for lab in doc["labs"]:
        sc = lab["scaling"]
        out.append(f"\nscaling at {lab['rtt_ms']:g} ms, --forks {sc['forks']} (`site`): exponent {sc['exponent']}, "
                   f"marginal controller CPU {sc['cpu_ms_per_host']} ms/host")
        out.append("hosts  workers  wall s  ms/host  CPU s  one host's audit s")
        for r in sc["rows"]:
            out.append(f"{r['hosts']:5}  {r['workers']:7}  {r['median_s']:6.2f}  {r['per_host_ms']:7.1f}  "
                       f"{r['cpu_median_s']:5.2f}  {r['host_seconds_median']:.3f}")
    for lab in doc["labs"]:
        for size, block in lab["compare"].items():
            out.append(f"\n{size} nodes at {lab['rtt_ms']:g} ms round-trip time")
            out.append(ab.table(block["rows"]))
    proj = doc["projection"]
    out.append(f"\nprojection to {proj['hosts']} hosts (fabnet): {proj['cpu_ms_per_host']} ms CPU/host, "
               f"{proj['round_trips_per_host']} round trips/host, {proj['host_seconds_at_0ms']} s per host at 0 ms")
    for p in proj["projections"]:
        out.append(f"  {p['rtt_ms']:4g} ms  --forks {p['forks']:3}  {p['processes']} process(es): "
                   f"{p['seconds']:6.1f} s "
                   f"(CPU-bound {p['cpu_bound_s']} s, latency-bound {p['latency_bound_s']} s)")
    out += ["assumptions:"] + [f"  - {a}" for a in proj["assumptions"]]
    out.append(f"host-key check: {doc['host_key_check']}; whole run {doc['duration_s']:.0f} s")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
