"""Time `fabnet audit` against Ansible and pyinfra doing the same read-only check of a lab of virtual GPU nodes.

Run as root, through bench/run.sh (see bench/README.md). It installs ansible-core and pyinfra into
bench/.venv, brings up a lab, checks that every tool refuses a host whose key is not known and finds
the same drift as fabnet, times each tool on two workloads, prints a table and writes the numbers to
bench/results/<date>-<nodes>.json. The lab is removed at the end, on errors and on Ctrl-C too.
Never part of the test suite: timings depend on the machine and on whatever else it is doing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import pprint
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
FABNET = REPO / ".venv" / "bin" / "fabnet"
VENV = BENCH / ".venv"
RESULTS = BENCH / "results"
PINS = {"ansible-core": "2.19.14", "pyinfra": "3.10.0"}
TOOLS = ("fabnet", "ansible", "pyinfra")
PACKAGE_OF = {"ansible": "ansible-core", "pyinfra": "pyinfra"}
RUN_TIMEOUT = 900.0

Drift = frozenset[tuple[str, str]]  # (host, "resource[target].attribute") pairs that are not in sync


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------ workloads


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    fabnet_playbook: Path
    ansible_playbook: Path
    pyinfra_deploys: tuple[str, ...]  # files in bench/pyinfra, run in this order


WORKLOADS = (
    Workload(
        "site",
        "playbooks/site.yml: 12 resources, 34 checks per host from 19 read commands",
        REPO / "playbooks" / "site.yml",
        BENCH / "ansible" / "site.yml",
        ("site.py", "fleet.py"),
    ),
    Workload(
        "mtu",
        "MTU and link state of eth1 only: 2 checks per host from 1 read command",
        BENCH / "fabnet" / "mtu.yml",
        BENCH / "ansible" / "mtu.yml",
        ("mtu.py",),
    ),
)


# ------------------------------------------------------------------------------------ one timed run


@dataclass
class Run:
    seconds: float
    cpu_seconds: float  # user + system time of the tool and everything it waited for (ssh clients)
    exit_code: int
    hosts_checked: int
    drift: Drift = field(default_factory=frozenset)
    output_tail: str = ""
    reported_seconds: float | None = None  # the tool's own measure of its work, where it prints one


def timed(argv: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float, int, str, str]:
    """(wall seconds, child CPU seconds, exit code, stdout, stderr) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=RUN_TIMEOUT, check=False,
        )
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, out, err = 124, _text(exc.stdout), _text(exc.stderr) + f"\ntimed out after {RUN_TIMEOUT:.0f} s"
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu, code, out, err


def _text(data: str | bytes | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else data or ""


def tail(*texts: str, lines: int = 15) -> str:
    return "\n".join("\n".join(texts).strip().splitlines()[-lines:])


class Runner:
    """How to run one tool on a workload and read which hosts it checked and what drift it found."""

    name: str

    def command(self, workload: Workload, limit: str | None = None) -> list[str]:
        raise NotImplementedError

    def run(self, workload: Workload, limit: str | None = None) -> Run:
        raise NotImplementedError

    def cleanup(self) -> None:
        pass


class FabnetRunner(Runner):
    name = "fabnet"

    def __init__(self, inventory: Path) -> None:
        self.inventory = inventory

    def command(self, workload: Workload, limit: str | None = None) -> list[str]:
        argv = [str(FABNET), "audit", str(self.inventory), "-p", str(workload.fabnet_playbook), "--json"]
        return argv + (["-l", limit] if limit else [])

    def run(self, workload: Workload, limit: str | None = None) -> Run:
        seconds, cpu, code, out, err = timed(self.command(workload, limit), REPO)
        try:
            report = json.loads(out)
        except ValueError:
            return Run(seconds, cpu, code, 0, output_tail=tail(out, err))
        drift = frozenset(
            (host["name"], f"{resource['target']}.{check['attribute']}")
            for host in report.get("hosts", [])
            for resource in host.get("resources", [])
            for check in resource.get("checks", [])
            if check.get("status") != "ok"
        )
        checked = sum(1 for host in report.get("hosts", []) if host.get("status") in ("in_sync", "drifted"))
        errors = [f"{host['name']}: {host['error']}" for host in report.get("hosts", []) if host.get("error")]
        return Run(seconds, cpu, code, checked, drift, tail(err, *errors), report.get("seconds"))


_FATAL = re.compile(r"^fatal: \[(?P<host>[^\]]+)\]: FAILED! => (?P<body>\{.*\})\s*$", re.MULTILINE)
_RECAP = re.compile(
    r"^(?P<host>\S+)\s+: ok=\d+\s+changed=\d+\s+unreachable=(?P<unreachable>\d+)\s+failed=(?P<failed>\d+)",
    re.MULTILINE,
)


class AnsibleRunner(Runner):
    name = "ansible"

    def __init__(self, inventory: Path, workdir: Path) -> None:
        self.inventory = inventory
        self.workdir = workdir
        self.control_dirs: list[Path] = []

    def command(self, workload: Workload, limit: str | None = None) -> list[str]:
        argv = [str(VENV / "bin" / "ansible-playbook"), "-i", str(self.inventory), "--forks", "50",
                str(workload.ansible_playbook)]
        return argv + (["--limit", limit] if limit else [])

    def environment(self, home: Path) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "ANSIBLE_CONFIG": str(BENCH / "ansible" / "ansible.cfg"),
            "ANSIBLE_HOME": str(home / "home"),
            "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(home / "cp"),
            "ANSIBLE_NOCOLOR": "1",
        })
        return env

    def run(self, workload: Workload, limit: str | None = None) -> Run:
        # A fresh folder per run: no run finds SSH master connections left by the one before.
        home = Path(tempfile.mkdtemp(prefix="ansible-", dir=self.workdir))
        self.control_dirs.append(home / "cp")
        try:
            seconds, cpu, code, out, err = timed(self.command(workload, limit), BENCH / "ansible",
                                                 self.environment(home))
        finally:
            self.cleanup()
        drift: set[tuple[str, str]] = set()
        for match in _FATAL.finditer(out):
            try:
                message = json.loads(match["body"]).get("msg")
            except ValueError:
                message = None
            keys = message if isinstance(message, list) else [f"error: {message}"]
            drift.update((match["host"], str(key)) for key in keys)
        checked = sum(1 for m in _RECAP.finditer(out) if m["unreachable"] == "0")
        return Run(seconds, cpu, code, checked, frozenset(drift), tail(out, err))

    def cleanup(self) -> None:
        """Close the SSH master connections (ControlPersist) this runner's runs left behind."""
        for control_dir in self.control_dirs:
            for socket in control_dir.glob("*") if control_dir.is_dir() else ():
                subprocess.run(["ssh", "-o", f"ControlPath={socket}", "-O", "exit", "bench-control-socket"],
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=30, check=False)
        self.control_dirs = [d for d in self.control_dirs if d.is_dir() and any(d.iterdir())]


class PyinfraRunner(Runner):
    name = "pyinfra"

    def __init__(self, inventory: Path) -> None:
        self.inventory = inventory

    def command(self, workload: Workload, limit: str | None = None) -> list[str]:
        argv = [str(VENV / "bin" / "pyinfra"), str(self.inventory), *workload.pyinfra_deploys, "--dry", "--json"]
        return argv + (["--limit", limit] if limit else [])

    def run(self, workload: Workload, limit: str | None = None) -> Run:
        env = dict(os.environ, PYINFRA_PROGRESS="off")
        seconds, cpu, code, out, err = timed(self.command(workload, limit), BENCH / "pyinfra", env)
        try:
            plan = json.loads(out).get("plan") or []
        except ValueError:
            return Run(seconds, cpu, code, 0, output_tail=tail(out, err))
        drift = frozenset(
            (host, op["name"].removeprefix("check "))
            for op in plan
            for host in op.get("hosts_with_change", [])
        )
        last = re.escape(workload.pyinfra_deploys[-1])
        checked = len(set(re.findall(rf"\[(\S+)\] Ready: {last}", err)))
        return Run(seconds, cpu, code, checked, drift, tail(err))


# ------------------------------------------------------------------------------------------------ lab


def fabnet_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(FABNET), *args], cwd=REPO, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=timeout, check=False)


def remove_lab(name: str) -> None:
    """`fabnet lab down`, saying so; a failure is a warning with what to run by hand (the harness ends anyway)."""
    log(f"removing lab {name!r}")
    proc = fabnet_cli("lab", "down", "--name", name)
    if proc.returncode != 0:
        log(f"warning: fabnet lab down failed; run it again by hand:\n{tail(proc.stdout, proc.stderr)}")


def lab_exists(name: str) -> bool:
    return fabnet_cli("lab", "status", "--name", name, "--json").returncode == 0


def lab_status(name: str) -> dict[str, Any]:
    proc = fabnet_cli("lab", "status", "--name", name, "--json")
    if proc.returncode != 0:
        raise RuntimeError(f"fabnet lab status failed: {tail(proc.stdout, proc.stderr)}")
    return json.loads(proc.stdout)


def write_pyinfra_inventory(status: dict[str, Any], path: Path, known_hosts: str | None = None) -> None:
    """A pyinfra inventory (Python) of the lab's nodes, group `gpu`, with strict host-key checking."""
    inventory = yaml.safe_load(Path(status["inventory"]).read_text())
    lab_vars = inventory.get("all", {}).get("vars", {})
    hosts = []
    for node in status["nodes"]:
        hosts.append((node["name"], {
            "ssh_hostname": node["mgmt_ip"],
            "ssh_user": status["user"],
            "ssh_key": status["private_key"],
            "ssh_known_hosts_file": known_hosts or status["known_hosts"],
            "ssh_strict_host_key_checking": "yes",
            "data_iface": lab_vars.get("data_iface", node["data_interfaces"][0]["name"]),
            "rdma_device": lab_vars.get("rdma_device", "mlx5_0"),
            "sysfs_root": lab_vars.get("fabnet_sysfs_root", "/sys"),
        }))
    path.write_text(
        "# pyinfra inventory of a fabnet lab, written by bench/audit_bench.py\n"
        f"gpu = {pprint.pformat(hosts, width=110, sort_dicts=False)}\n"
    )


def write_untrusting_inventory(status: dict[str, Any], path: Path, known_hosts: Path) -> None:
    """The lab's inventory with every known_hosts setting pointed at `known_hosts` (an empty file)."""
    inventory = yaml.safe_load(Path(status["inventory"]).read_text())
    lab_vars = inventory.setdefault("all", {}).setdefault("vars", {})
    lab_vars["fabnet_known_hosts"] = str(known_hosts)
    lab_vars["ansible_ssh_common_args"] = f"-o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking=yes"
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))


# ------------------------------------------------------------------------------------------- install


def venv_version(package: str) -> str | None:
    python = VENV / "bin" / "python"
    if not python.exists():
        return None
    proc = subprocess.run([str(python), "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
                          capture_output=True, text=True, timeout=60, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def install_tools(wanted: Sequence[str], pins: dict[str, str], skip: bool) -> tuple[dict[str, str], dict[str, str]]:
    """Make sure bench/.venv has the pinned packages. Returns ({tool: version}, {tool: why unavailable})."""
    versions: dict[str, str] = {}
    missing: dict[str, str] = {}
    if not (VENV / "bin" / "python").exists() and not skip:
        log(f"creating {VENV.relative_to(REPO)}")
        proc = subprocess.run([sys.executable, "-m", "venv", str(VENV)], capture_output=True, text=True,
                              check=False)
        if proc.returncode != 0:
            reason = f"cannot create the virtualenv: {tail(proc.stderr, lines=2)}"
            return {}, {tool: reason for tool in wanted}
    for tool in wanted:
        package = PACKAGE_OF[tool]
        have = venv_version(package)
        if have != pins[package] and not skip and (VENV / "bin" / "python").exists():
            log(f"installing {package}=={pins[package]} from PyPI")
            proc = subprocess.run(
                [str(VENV / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q",
                 f"{package}=={pins[package]}"],
                capture_output=True, text=True, timeout=900, check=False,
            )
            if proc.returncode != 0:
                errors = [line for line in proc.stderr.splitlines() if "ERROR" in line] or proc.stderr.splitlines()
                short = [re.sub(r" \(from versions: [^)]*\)", "", line)[:200] for line in errors[-2:]]
                missing[tool] = f"pip install {package}=={pins[package]} failed: {' / '.join(short)}"
                continue
            have = venv_version(package)
        if have is None:
            missing[tool] = f"{package} is not installed in {VENV.relative_to(REPO)}"
        else:
            versions[tool] = have
    return versions, missing


# ----------------------------------------------------------------------------------------- reporting


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def table(rows: list[dict[str, Any]]) -> str:
    header = ["workload", "tool", "median s", "min s", "ratio", "tool CPU s", "hosts", "same drift"]
    lines = [[r["workload"], r["tool"], f"{r['median']:.2f}", f"{r['min']:.2f}", f"{r['ratio']:.2f}",
              f"{r['cpu_median']:.2f}", f"{r['hosts']}/{r['nodes']}", r["same_drift"]] for r in rows]
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]

    def fmt(cells: list[str]) -> str:
        # Names left-aligned, numbers right-aligned.
        pairs = enumerate(zip(cells, widths, strict=True))
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in pairs)

    return "\n".join([fmt(header), "  ".join("-" * w for w in widths), *(fmt(line) for line in lines)])


# ---------------------------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=16, help="lab size (default 16)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per tool and workload (default 5)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="untimed runs per tool and workload first; the first one also checks the drift "
                             "each tool finds (default 1)")
    parser.add_argument("--lab", default="bench", help="lab name (default bench); must not exist yet")
    parser.add_argument("--rtt", type=float, default=0.0,
                        help="round-trip time on the lab's management path, ms (default 0; see lab up --rtt)")
    parser.add_argument("--slow-repeat", type=int, default=None,
                        help="timed runs for a tool whose warm-up took longer than --slow-after (default --repeat)")
    parser.add_argument("--slow-after", type=float, default=60.0, help="seconds; see --slow-repeat (60)")
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated subset of " + ",".join(TOOLS))
    parser.add_argument("--workloads", default=",".join(w.name for w in WORKLOADS),
                        help="comma-separated subset of " + ",".join(w.name for w in WORKLOADS))
    parser.add_argument("--skip-install", action="store_true", help="use bench/.venv as it is")
    parser.add_argument("--ansible-core-version", default=PINS["ansible-core"],
                        help=f"ansible-core to install (default {PINS['ansible-core']})")
    parser.add_argument("--pyinfra-version", default=PINS["pyinfra"],
                        help=f"pyinfra to install (default {PINS['pyinfra']})")
    parser.add_argument("--output", type=Path, default=None,
                        help="results JSON (default bench/results/DATE-NODES.json)")
    args = parser.parse_args(argv)
    args.tools = [t for t in args.tools.split(",") if t]
    args.workloads = [w for w in WORKLOADS if w.name in args.workloads.split(",")]
    unknown = set(args.tools) - set(TOOLS)
    if unknown or "fabnet" not in args.tools:
        parser.error(f"--tools: unknown {sorted(unknown)}" if unknown else "--tools must include fabnet")
    if args.slow_repeat is None:
        args.slow_repeat = args.repeat
    if args.nodes < 2 or args.repeat < 1 or args.warmup < 1 or not args.workloads or args.slow_repeat < 1:
        parser.error("need --nodes >= 2, --repeat >= 1, --warmup >= 1 and at least one workload")
    return args


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


_HOST_KEY_ERROR = re.compile(r"host key|known_hosts", re.IGNORECASE)


def host_key_check(runners: dict[str, Runner], status: dict[str, Any], workdir: Path,
                   workload: Workload) -> dict[str, str]:
    """Point each tool at an empty known_hosts and check that it refuses to audit the first node."""
    empty = workdir / "empty_known_hosts"
    empty.write_text("")
    untrusting = workdir / "untrusting_inventory.yml"
    write_untrusting_inventory(status, untrusting, empty)
    first = status["nodes"][0]["name"]
    untrusting_py = workdir / "untrusting_inventory.py"
    write_pyinfra_inventory(status, untrusting_py, known_hosts=str(empty))
    probes: dict[str, Runner] = {}
    if "fabnet" in runners:
        probes["fabnet"] = FabnetRunner(untrusting)
    if "ansible" in runners:
        probes["ansible"] = AnsibleRunner(untrusting, workdir)
    if "pyinfra" in runners:
        probes["pyinfra"] = PyinfraRunner(untrusting_py)
    verdicts = {}
    for name, runner in probes.items():
        run = runner.run(workload, limit=first)
        reason = next((line.strip() for line in run.output_tail.splitlines() if _HOST_KEY_ERROR.search(line)), None)
        if run.hosts_checked or run.drift:
            verdicts[name] = f"ACCEPTED an unknown host key (exit {run.exit_code})"
        elif reason:
            verdicts[name] = f"refused: {reason[:160]}"
        else:
            verdicts[name] = f"INCONCLUSIVE: failed without naming the host key: {run.output_tail[-300:]!r}"
        log(f"host-key check  {name:8} {verdicts[name]}")
    return verdicts


def measure(
    args: argparse.Namespace, runners: dict[str, Runner], nodes: int, limit: str | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Warm-up and timed runs of every tool on every workload (on `limit`'s hosts only, if given; `nodes`
    is how many that is); (workload results, table rows)."""
    results: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for workload in args.workloads:
        log(f"\n== {workload.name}: {workload.description}")
        entry: dict[str, Any] = {"name": workload.name, "description": workload.description,
                                 "load_before": list(os.getloadavg()), "tools": {}}
        reference: Drift | None = None
        warm: dict[str, Run] = {}
        for name, runner in runners.items():
            for i in range(args.warmup):
                run = runner.run(workload, limit)
                log(f"warm-up  {name:8} {run.seconds:7.2f} s  exit {run.exit_code}  hosts {run.hosts_checked}/{nodes}  "
                    f"drift items {len(run.drift)}")
                if i == 0:
                    warm[name] = run
            if name == "fabnet":
                reference = warm[name].drift
        assert reference is not None
        entry["reference_drift"] = sorted(f"{host} {key}" for host, key in reference)
        timed_runs: dict[str, list[Run]] = {name: [] for name in runners}
        order = list(runners)
        # A tool whose warm-up took minutes gets fewer timed runs (--slow-repeat): its ratio is far from any
        # target, and its runs would otherwise be most of the benchmark's hour.
        slow_after, slow_repeat = getattr(args, "slow_after", None), getattr(args, "slow_repeat", args.repeat)
        wanted = {name: slow_repeat if slow_after is not None and warm[name].seconds > slow_after else args.repeat
                  for name in order}
        for round_number in range(args.repeat):
            shift = round_number % len(order)  # rotate who goes first, so no tool always runs after the same one
            for name in order[shift:] + order[:shift]:
                if len(timed_runs[name]) >= wanted[name]:
                    continue
                run = runners[name].run(workload, limit)
                timed_runs[name].append(run)
                log(f"run {round_number + 1}/{wanted[name]}  {name:8} {run.seconds:7.2f} s  exit {run.exit_code}  "
                    f"hosts {run.hosts_checked}/{nodes}")
        fabnet_median = median([r.seconds for r in timed_runs["fabnet"]])
        for name, runs in timed_runs.items():
            seconds = [r.seconds for r in runs]
            complete = all(r.hosts_checked == nodes for r in [warm[name], *runs])
            same = all(r.drift == reference for r in [warm[name], *runs])
            summary = {
                "command": runners[name].command(workload, limit),
                "runs": [
                    {k: v for k, v in asdict(r).items() if k not in ("drift", "output_tail") and v is not None}
                    for r in runs
                ],
                "median_s": round(median(seconds), 3),
                "min_s": round(min(seconds), 3),
                "ratio_to_fabnet": round(median(seconds) / fabnet_median, 2),
                "cpu_median_s": round(median([r.cpu_seconds for r in runs]), 3),
                "all_hosts_checked": complete,
                "same_drift_as_fabnet": same,
            }
            if not same:
                found = warm[name].drift
                summary["drift_missing"] = sorted(f"{h} {k}" for h, k in reference - found)
                summary["drift_extra"] = sorted(f"{h} {k}" for h, k in found - reference)
                summary["output_tail"] = warm[name].output_tail
            entry["tools"][name] = summary
            rows.append({"workload": workload.name, "tool": name, "median": median(seconds), "min": min(seconds),
                         "ratio": summary["ratio_to_fabnet"], "cpu_median": summary["cpu_median_s"],
                         "hosts": min(r.hosts_checked for r in runs), "nodes": nodes,
                         "same_drift": "reference" if name == "fabnet" else ("yes" if same else "NO")})
        entry["load_after"] = list(os.getloadavg())
        results.append(entry)
    return results, rows


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if os.geteuid() != 0:
        log("error: run as root (the lab needs it): sudo bench/run.sh")
        return 64
    if not FABNET.exists():
        log(f"error: {FABNET.relative_to(REPO)} not found: install fabnet into .venv first")
        return 1
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)

    started = dt.datetime.now().astimezone()
    clock = time.perf_counter()
    others = [t for t in args.tools if t != "fabnet"]
    pins = {"ansible-core": args.ansible_core_version, "pyinfra": args.pyinfra_version}
    versions, unavailable = install_tools(others, pins, args.skip_install)
    for tool, reason in unavailable.items():
        log(f"warning: {tool} unavailable, measuring without it: {reason}")
    fabnet_version = fabnet_cli("--version").stdout.strip().split()[-1]

    if lab_exists(args.lab):
        log(f"error: a lab named {args.lab!r} exists already; remove it (fabnet lab down --name {args.lab}) "
            "or pass --lab NAME")
        return 1
    workdir = Path(tempfile.mkdtemp(prefix="fabnet-bench-"))
    created = False
    runners: dict[str, Runner] = {}
    try:
        log(f"bringing up lab {args.lab!r} with {args.nodes} nodes")
        created = True  # from here on a half-built lab must be removed too
        up_start = time.perf_counter()
        proc = fabnet_cli("lab", "up", "--name", args.lab, "--nodes", str(args.nodes), "--rtt", f"{args.rtt:g}ms")
        if proc.returncode != 0:
            log(f"error: fabnet lab up failed:\n{tail(proc.stdout, proc.stderr)}")
            return 1
        log(f"lab up in {time.perf_counter() - up_start:.1f} s")
        status = lab_status(args.lab)
        inventory = Path(status["inventory"])
        pyinfra_inventory = workdir / "pyinfra_inventory.py"
        write_pyinfra_inventory(status, pyinfra_inventory)

        runners["fabnet"] = FabnetRunner(inventory)
        if "ansible" in versions:
            runners["ansible"] = AnsibleRunner(inventory, workdir)
        if "pyinfra" in versions:
            runners["pyinfra"] = PyinfraRunner(pyinfra_inventory)

        smallest = next(w for w in WORKLOADS if w.name == "mtu")
        host_keys = host_key_check(runners, status, workdir, smallest)
        results, rows = measure(args, runners, len(status["nodes"]))
    except KeyboardInterrupt:
        log("\ninterrupted")
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not stop the teardown
        for runner in runners.values():
            runner.cleanup()
        if created:
            remove_lab(args.lab)
        shutil.rmtree(workdir, ignore_errors=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    document = {
        "schema": "fabnet/bench/audit/v1",
        "date": started.isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version(),
                    "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)},
        "nodes": len(status["nodes"]),
        "rtt_ms": args.rtt,
        "repeat": args.repeat,
        "slow_repeat": {"runs": args.slow_repeat, "after_s": args.slow_after},
        "warmup": args.warmup,
        "versions": {"fabnet": fabnet_version, **{PACKAGE_OF[t]: v for t, v in versions.items()}},
        "unavailable": unavailable,
        "host_key_check": host_keys,
        "duration_s": round(time.perf_counter() - clock, 1),
        "workloads": results,
    }
    rtt = f"-{args.rtt:g}ms" if args.rtt else ""
    output = args.output or RESULTS / f"{started.date().isoformat()}-{len(status['nodes'])}{rtt}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    # Results may be committed: no machine-specific paths in them.
    text = json.dumps(document, indent=2) + "\n"
    for path, name in ((workdir, "<tmp>"), (Path(status["inventory"]).parent, "<lab>"), (REPO, ".")):
        text = text.replace(str(path), name)
    output.write_text(text)

    print(f"\nfabnet audit vs Ansible and pyinfra: {len(status['nodes'])} nodes at {args.rtt:g} ms round-trip time, "
          f"{args.repeat} timed runs each (a tool whose warm-up took over {args.slow_after:g} s: {args.slow_repeat}), "
          f"{os.cpu_count()} CPUs, {started:%Y-%m-%d %H:%M %Z}")
    print(table(rows))
    print("ratio = tool median / fabnet median (above 1: slower than fabnet); tool CPU = CPU time of the tool's "
          "own processes (the nodes' work is not in it)")
    loads = ", ".join(f"{w['name']} {w['load_before'][0]:.1f} -> {w['load_after'][0]:.1f}" for w in results)
    print(f"1-minute load average before -> after each workload: {loads}; whole run {document['duration_s']:.0f} s")
    for tool, reason in unavailable.items():
        print(f"not measured: {tool}: {reason}")
    print(f"results: {output.relative_to(REPO) if output.is_relative_to(REPO) else output}")
    bad = [r for r in rows if r["same_drift"] == "NO" or r["hosts"] != r["nodes"]]
    return 1 if bad or not all(v.startswith("refused") for v in host_keys.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
