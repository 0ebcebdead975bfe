"""`fabnet smoke --json` output (schema fabnet/smoke/v1) as input to explain: its verdict, pre-flight
findings, failed and slow hosts become causes, and each rank's captured output is read as a log."""

from __future__ import annotations

import json
from typing import Any

from provisioner.explain.model import Cause, Evidence

SCHEMA = "fabnet/smoke/v1"


def load(text: str) -> dict[str, Any] | None:
    """The smoke result when `text` is one, else None."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) and data.get("schema") == SCHEMA else None


def _where(name: str, text: str, needle: str) -> list[Evidence]:
    for number, line in enumerate(text.splitlines(), start=1):
        if needle and needle in line:
            return [Evidence(file=name, line=number, text=line.strip())]
    return []


def rank_outputs(name: str, data: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """(name, text, host) of each rank's output: its host from the run's per-rank progress, so causes
    found in a rank's lines name where it ran."""
    hosts = {str(p.get("rank")): str(p["host"]) for p in data.get("progress") or []
             if isinstance(p, dict) and p.get("host")}
    return [(f"{name}[rank {rank}]", out, hosts.get(str(rank)))
            for rank, out in sorted((data.get("rank_output") or {}).items()) if isinstance(out, str) and out.strip()]


def causes(name: str, text: str, data: dict[str, Any]) -> list[Cause]:
    found = []
    preflight = data.get("preflight") or {}
    for finding in (preflight.get("findings") or []) + (preflight.get("after_failure") or []):
        message = str(finding.get("message", ""))
        found.append(Cause(
            id=f"smoke-preflight-{finding.get('check', 'check')}", title=f"smoke pre-flight: {message}",
            detail=message, fix=str(finding.get("fix") or "see the smoke report"), score=85,
            hosts=[str(h) for h in finding.get("hosts") or []], evidence=_where(name, text, json.dumps(message)[1:-1]),
        ))
    for pair in preflight.get("unreachable") or []:
        peers = [str(p) for p in pair] if isinstance(pair, list) else [str(pair)]
        found.append(Cause(
            id="peer-unreachable", title="smoke: hosts cannot reach each other on the data network",
            detail=f"{' -> '.join(peers)} did not answer on the data network.", score=85, hosts=peers,
            fix="Check the data interface's link, addresses and routes on both hosts (`ip -br addr`, `ip route`).",
        ))
    failed = [h for h in data.get("hosts") or [] if h.get("failed")]
    if failed:
        found.append(Cause(
            id="smoke-host-failed", title="smoke: ranks failed on some hosts",
            detail="; ".join(f"{h.get('name')}: {h.get('reason') or 'failed'}" for h in failed),
            fix="Read those ranks' output (below) and audit the hosts.", score=80,
            hosts=[str(h.get("name")) for h in failed], evidence=_where(name, text, '"failed": true'),
        ))
    local = data.get("localisation") or {}
    if local.get("slow_hosts"):
        found.append(Cause(
            id="smoke-slow-hosts", title="smoke: some hosts are slow",
            detail=str(local.get("message") or f"slow: {', '.join(local['slow_hosts'])}"),
            fix="Audit the slow hosts' data path: link speed, PFC/ECN, MTU, port counters, GPUDirect.",
            score=70, hosts=[str(h) for h in local["slow_hosts"]], evidence=_where(name, text, '"slow_hosts"'),
        ))
    verdict = data.get("verdict")
    if verdict not in (None, "pass") and not found:
        found.append(Cause(
            id=f"smoke-{verdict}", title=f"smoke: {verdict}", detail=str(data.get("reason") or verdict),
            fix="Read the smoke report's reason and the ranks' output.", score=75,
            evidence=_where(name, text, '"verdict"'),
        ))
    return found
