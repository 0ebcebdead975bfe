"""Distil the log of a `bench/run.sh --fleet` run (its stderr) into JSON, for a run that ended before
writing its own: python bench/fleet_log.py LOG OUT.json. Medians from the runs in the log; the
projection by fleet_bench.project. The log has no CPU time per comparison run, so that is absent."""

import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import fleet_bench as fb

log = Path(sys.argv[1]).read_text().splitlines()
doc = {"schema": "fabnet/bench/fleet-log/v1", "source": Path(sys.argv[1]).name, "startup": {}, "labs": []}
lab = None
size = None
wl = None
for line in log:
    m = re.match(r"##### lab of (\d+) nodes at ([\d.]+) ms", line)
    if m:
        lab = {"rtt_ms": float(m[2]), "tool_ms": {}, "scaling_rows": [], "compare": {}}
        doc["labs"].append(lab)
        continue
    m = re.match(r"start-up  (.+?)\s+(\d+) ms \(min (\d+)\)", line)
    if m:
        doc["startup"][m[1]] = {"median_ms": int(m[2]), "min_ms": int(m[3])}
        continue
    m = re.match(r"tool on gpu01  (.+?)\s+([\d.]+) ms", line)
    if m:
        lab["tool_ms"][m[1]] = float(m[2])
        continue
    m = re.match(r"controller CPU per host \(ms\): (.*)", line)
    if m:
        lab["cpu_phases_ms"] = {k: float(v) for k, v in (part.rsplit(" ", 1) for part in m[1].split(", "))}
        continue
    m = re.match(
        r"scaling\s+(\d+) hosts  workers (\d)\s+([\d.]+) s\s+([\d.]+) ms/host  CPU ([\d.]+) s  "
        r"one host's audit ([\d.]+) s",
        line,
    )
    if m:
        lab["scaling_rows"].append(
            {
                "hosts": int(m[1]),
                "workers": int(m[2]),
                "median_s": float(m[3]),
                "per_host_ms": float(m[4]),
                "cpu_median_s": float(m[5]),
                "host_seconds_median": float(m[6]),
            }
        )
        continue
    m = re.match(r"=== (\d+) nodes at", line)
    if m:
        size = lab["compare"].setdefault(m[1], {})
        continue
    m = re.match(r"== (\w+):", line)
    if m:
        wl = size.setdefault(m[1], {})
        continue
    m = re.match(
        r"(warm-up|run \d/\d)\s+(\w+)\s+([\d.]+) s\s+exit (\d+)\s+hosts (\d+)/(\d+)(?:\s+drift items (\d+))?", line
    )
    if m:
        tool = wl.setdefault(m[2], {"warmup_s": [], "runs_s": [], "hosts": [], "drift_items": []})
        (tool["warmup_s"] if m[1] == "warm-up" else tool["runs_s"]).append(float(m[3]))
        tool["hosts"].append(f"{m[5]}/{m[6]}")
        if m[7]:
            tool["drift_items"].append(int(m[7]))
for lab in doc["labs"]:
    rows = [r for r in lab["scaling_rows"] if r["workers"] == 1]
    lab["scaling"] = {
        "forks": 64,
        "rows": lab.pop("scaling_rows"),
        "exponent": round(fb.fit_exponent([r["hosts"] for r in rows], [r["median_s"] for r in rows]), 3),
        "cpu_ms_per_host": round(fb.fit_slope([r["hosts"] for r in rows], [r["cpu_median_s"] for r in rows]) * 1000, 2),
    }
    for wls in lab["compare"].values():
        for tools in wls.values():
            for t in tools.values():
                allruns = t["warmup_s"] + t["runs_s"]
                t["median_s"] = round(statistics.median(t["runs_s"]), 2) if t["runs_s"] else None
                t["median_all_s"] = round(statistics.median(allruns), 2)
for lab in doc["labs"]:
    lab["cpu_phases_ms"].setdefault("connect wall", None)
proj = fb.project(doc["labs"][0], doc["labs"][1], 20.0, doc["startup"]["fabnet audit"]["median_ms"] / 1000)
doc["projection"] = proj
Path(sys.argv[2]).write_text(json.dumps(doc, indent=2) + "\n")
# print summary
print(json.dumps(doc["startup"]))
for lab in doc["labs"]:
    print("LAB", lab["rtt_ms"], "tools", lab["tool_ms"])
    print(" phases", lab["cpu_phases_ms"])
    print(" scaling exp", lab["scaling"]["exponent"], "cpu/host", lab["scaling"]["cpu_ms_per_host"])
    for s, wls in lab["compare"].items():
        for w, tools in wls.items():
            f = tools["fabnet"]["median_s"] or tools["fabnet"]["median_all_s"]
            print(
                f"  {s:>3} {w:5} "
                + "  ".join(
                    f"{n} med {t['median_s']} all {t['median_all_s']} "
                    f"ratio {round((t['median_s'] or t['median_all_s']) / f, 2)} hosts {t['hosts']}"
                    for n, t in tools.items()
                )
            )
for p in proj["projections"]:
    print(p)
print(proj["assumptions"])
