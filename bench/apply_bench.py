"""Time `fabnet apply` against an Ansible playbook doing the same fixes, on the same drifted lab.

Run as root: `.venv/bin/python bench/apply_bench.py [--nodes N] [--skip-install]`. For each tool a
fresh drifted lab is brought up (the default profile), the tool converges it, the run is timed, and
fabnet's audit confirms the result; then the same tool runs again on the converged lab (the
idempotent re-run). SSH execs per host are counted on the nodes (sshd's journal) for fabnet.
Prints a table with the ratio and writes bench/results/apply-<date>-<nodes>.json. Never part of the
test suite: timings depend on the machine and whatever else it is doing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_bench import (
    BENCH,
    FABNET,
    PINS,
    REPO,
    RESULTS,
    AnsibleRunner,
    Workload,
    fabnet_cli,
    install_tools,
    lab_status,
    log,
    timed,
)

SITE = REPO / "playbooks" / "site.yml"
WORKLOAD = Workload("apply", "converge the drifted lab to playbooks/site.yml", SITE,
                    BENCH / "ansible" / "apply.yml", ())


def sessions(status: dict, key: str, known_hosts: str) -> dict[str, int]:
    counts = {}
    for node in status["nodes"]:
        out = subprocess.run(["ssh", "-i", key, "-o", f"UserKnownHostsFile={known_hosts}", "-o", "BatchMode=yes",
                              f"root@{node['mgmt_ip']}",
                              "journalctl -u ssh --no-pager -o cat | grep -c 'Starting session: command'"],
                             capture_output=True, text=True, timeout=60).stdout
        counts[node["name"]] = int(out.strip() or 0)
    return counts


def one_tool(tool: str, lab: str, nodes: int, workdir: Path) -> dict:
    fabnet_cli("lab", "down", "--name", lab)
    up = fabnet_cli("lab", "up", "--name", lab, "--nodes", str(nodes))
    if up.returncode != 0:
        raise SystemExit(f"lab up failed: {up.stderr[-2000:]}")
    status = lab_status(lab)
    inventory = Path(status["inventory"])
    result: dict = {"tool": tool}
    try:
        for attempt in ("drifted", "converged"):
            before = sessions(status, status["private_key"], status["known_hosts"]) if tool == "fabnet" else {}
            if tool == "fabnet":
                argv = [str(FABNET), "apply", str(inventory), "-p", str(SITE), "--yes", "--json",
                        "--journal", str(workdir / "journal.jsonl")]
                seconds, cpu, code, out, err = timed(argv, REPO)
            else:
                runner = AnsibleRunner(inventory, workdir)
                home = Path(tempfile.mkdtemp(prefix="ansible-", dir=workdir))
                seconds, cpu, code, out, err = timed(runner.command(WORKLOAD), BENCH / "ansible",
                                                     runner.environment(home))
            entry = {"seconds": round(seconds, 3), "cpu_seconds": round(cpu, 3), "exit_code": code}
            if tool == "fabnet":
                after = sessions(status, status["private_key"], status["known_hosts"])
                entry["execs_per_host"] = {n: after[n] - before[n] - 1 for n in after}
            audit = fabnet_cli("audit", str(inventory), "-p", str(SITE))
            entry["audit_exit_code_after"] = audit.returncode
            if code != 0:
                entry["error"] = (out + err)[-1500:]
            result[attempt] = entry
            log(f"{tool} on the {attempt} lab: {seconds:.2f} s (exit {code}), audit after: {audit.returncode}")
    finally:
        fabnet_cli("lab", "down", "--name", lab)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=6)
    parser.add_argument("--lab", default="bench-apply")
    parser.add_argument("--skip-install", action="store_true")
    args = parser.parse_args()
    install_tools(["ansible"], PINS, args.skip_install)
    RESULTS.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fabnet-apply-bench-") as tmp:
        results = [one_tool(tool, args.lab, args.nodes, Path(tmp)) for tool in ("fabnet", "ansible")]
    fab, ans = results
    print(f"{'tool':<8} {'drifted lab (s)':>16} {'re-run (s)':>11} {'audit after':>12}")
    for r in results:
        print(f"{r['tool']:<8} {r['drifted']['seconds']:>16.2f} {r['converged']['seconds']:>11.2f} "
              f"{r['drifted']['audit_exit_code_after']:>12}")
    print(f"ratio ansible/fabnet: {ans['drifted']['seconds'] / fab['drifted']['seconds']:.1f}x on the drifted lab, "
          f"{ans['converged']['seconds'] / fab['converged']['seconds']:.1f}x on the re-run")
    print(f"fabnet SSH execs per host: {fab['drifted'].get('execs_per_host')} (drifted), "
          f"{fab['converged'].get('execs_per_host')} (re-run)")
    out = RESULTS / f"apply-{dt.date.today().isoformat()}-{args.nodes}.json"
    out.write_text(json.dumps({"nodes": args.nodes, "results": results}, indent=1) + "\n")
    log(f"written {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
