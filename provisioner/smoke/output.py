"""A smoke outcome as data for programs: JSON (schema fabnet/smoke/v1) and JUnit XML (pure).

Ranks' output and error text come from the hosts: print_json and `output.junit_xml` clean them."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from provisioner.output.core import junit_xml
from provisioner.smoke.busbw import SizeResult
from provisioner.smoke.run import SmokeOutcome

SCHEMA = "fabnet/smoke/v1"


def _row(row: SizeResult) -> dict[str, Any]:
    return {"size": row.size, "time_us": round(row.time_us, 3), "algbw": round(row.algbw, 6),
            "busbw": round(row.busbw, 6), "wrong": row.wrong}


def _host(outcome: SmokeOutcome, host: str) -> dict[str, Any]:
    figure = next((f for f in outcome.judgement.figures if f.host == host), None) if outcome.judgement else None
    return {"name": host, "verdict": outcome.host_verdict(host), "mtu": outcome.mtus.get(host),
            "link_mbps": outcome.link_mbps.get(host), "failed": host in outcome.failed_hosts,
            "reason": outcome.failed_hosts.get(host),
            "busbw": None if figure is None or figure.busbw is None else round(figure.busbw, 6),
            "best_partner": figure.partner if figure else None, "comparison": figure.message if figure else None}


def to_json(outcome: SmokeOutcome, *, inventory: str, playbook: str | None, limit: str | None) -> dict[str, Any]:
    s = outcome.settings
    job = outcome.job
    judgement = outcome.judgement
    return {
        "schema": SCHEMA,
        "inventory": inventory, "playbook": playbook, "limit": limit,
        "verdict": outcome.verdict, "exit_code": outcome.exit_code, "reason": outcome.reason,
        "seconds": round(outcome.seconds, 3), "preflight_seconds": round(outcome.preflight_seconds, 3),
        "settings": {"runner": s.runner, "backend": outcome.backend or s.backend, "sizes": list(s.sizes),
                     "iters": s.iters, "min_busbw": s.min_busbw, "timeout": s.timeout,
                     "slow_fraction": s.slow_fraction, "link_fraction": s.link_fraction},
        "hosts": [_host(outcome, h) for h in outcome.hosts],
        "checks": [c.to_json() for c in judgement.checks] if judgement else [],
        "pair_figures": [{"hosts": list(pair), "busbw": round(value, 6)} for pair, value in
                         (job.pairs.items() if job else [])],
        "ranks": (len(outcome.hosts) * outcome.ranks_per_host) if outcome.backend else None,
        "preflight": {"passed": not outcome.findings and not outcome.unreachable,
                      "findings": [f.to_json() for f in outcome.findings],
                      "unreachable": outcome.unreachable,
                      "after_failure": [f.to_json() for f in outcome.findings_after]},
        "results": [_row(r) for r in outcome.rows],
        "avg_busbw": None if outcome.avg_busbw is None else round(outcome.avg_busbw, 6),
        "progress": [p.to_json() for p in job.progress] if job and not job.ok else [],
        "left_running": job.left_running if job else {},
        "rank_output": {str(rank): text for rank, text in job.outputs.items()} if job else {},
        "localisation": None if outcome.localisation is None else {
            "pairs": outcome.pairs,
            "slow_hosts": outcome.localisation.slow_hosts,
            "reference_busbw": outcome.localisation.reference,
            "undecided": outcome.localisation.undecided,
            "message": outcome.localisation.message,
        },
        "drained": [d.to_json() for d in outcome.drained],
        "launch": outcome.launch or None,
        "notes": outcome.notes,
    }


def to_junit(outcome: SmokeOutcome) -> str:
    """One test case per pre-flight check, per host and per message size, plus the verdict."""
    cases: list[tuple[str, str, str | None, str]] = []  # (classname, name, failure message or None, output)
    failed_checks = {f.check: f for f in outcome.findings}
    for check in ("probe", "interface", "address", "mtu", "data_path", "path_mtu", "env", "python", "gpus",
                  "tools"):
        finding = failed_checks.get(check)
        cases.append(("smoke.preflight", check, f"{finding.message}; fix: {finding.fix}" if finding else None, ""))
    for host in outcome.hosts:
        reason = outcome.failed_hosts.get(host)
        cases.append(("smoke.hosts", host, reason, ""))
    for row in outcome.rows:
        text = f"time {row.time_us:.1f} us algbw {row.algbw:.4f} GB/s busbw {row.busbw:.4f} GB/s"
        cases.append(("smoke.sizes", f"all_reduce {row.size} bytes",
                      f"{row.wrong} wrong elements" if row.wrong else None, text))
    cases.append(("smoke", "verdict", None if outcome.verdict == "pass" else f"{outcome.verdict}: {outcome.reason}",
                  outcome.reason))
    suite = ET.Element("testsuite", name="fabnet smoke", tests=str(len(cases)),
                       failures=str(sum(1 for c in cases if c[2])), time=f"{outcome.seconds:.3f}")
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="avg_busbw", value="" if outcome.avg_busbw is None else
                  f"{outcome.avg_busbw:.6f}")
    ET.SubElement(props, "property", name="verdict", value=outcome.verdict)
    for classname, name, failure, text in cases:
        case = ET.SubElement(suite, "testcase", classname=classname, name=name)
        if failure:
            ET.SubElement(case, "failure", message=failure[:1000]).text = failure
        if text:
            ET.SubElement(case, "system-out").text = text
    root = ET.Element("testsuites")
    root.append(suite)
    return junit_xml(root)
