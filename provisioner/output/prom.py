"""Prometheus textfile (node_exporter's textfile collector format) with per-host counts from audit and apply.

Written atomically (temporary file + rename in the same directory), as the collector requires, so a
scrape never reads half a file. Label values are escaped as the exposition format says; values keep
full precision (a timestamp in seconds needs 13 digits or more).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from provisioner.output.files import write_report


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _value(value: float) -> str:
    """A sample value as the exposition format writes it: integers exactly, other floats with the
    shortest text that reads back as the same float (never `%g`'s six digits), NaN and +Inf/-Inf spelled
    as Prometheus spells them."""
    if isinstance(value, int):  # bool included: True is 1
        return str(int(value))
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _metric(lines: list[str], name: str, help_text: str, samples: list[tuple[dict[str, str], float]]) -> None:
    lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
    for labels, value in samples:
        rendered = ",".join(f'{key}="{_label(val)}"' for key, val in labels.items())
        lines.append(f"{name}{{{rendered}}} {_value(value)}" if rendered else f"{name} {_value(value)}")


def audit_text(outcome: Any, now: float | None = None) -> str:
    lines: list[str] = []
    hosts = outcome.hosts
    _metric(lines, "fabnet_audit_drifted_resources", "Resources not in sync with the playbook, per host.",
            [({"host": h.name}, sum(1 for r in h.resources if r.status == "drift")) for h in hosts])
    _metric(lines, "fabnet_audit_error_resources", "Resources that could not be read, per host.",
            [({"host": h.name}, sum(1 for r in h.resources if r.status == "error")) for h in hosts])
    _metric(lines, "fabnet_audit_host_status", "1 for the host's audit status.",
            [({"host": h.name, "status": h.status}, 1) for h in hosts])
    _metric(lines, "fabnet_audit_last_run_timestamp_seconds", "When the audit ran.",
            [({}, time.time() if now is None else now)])
    _metric(lines, "fabnet_audit_duration_seconds", "How long the audit took.", [({}, round(outcome.seconds, 3))])
    return "\n".join(lines) + "\n"


def apply_text(outcome: Any, now: float | None = None) -> str:
    lines: list[str] = []
    hosts = outcome.hosts
    for status in ("changed", "failed"):
        _metric(lines, f"fabnet_apply_{status}_resources", f"Resources {status} by the last apply, per host.",
                [({"host": h.name}, h.count(status)) for h in hosts])
    _metric(lines, "fabnet_apply_host_status", "1 for the host's apply status.",
            [({"host": h.name, "status": h.status}, 1) for h in hosts])
    _metric(lines, "fabnet_apply_execs", "SSH execs the last apply made, per host.",
            [({"host": h.name}, h.execs) for h in hosts])
    _metric(lines, "fabnet_apply_last_run_timestamp_seconds", "When the apply ran.",
            [({}, time.time() if now is None else now)])
    _metric(lines, "fabnet_apply_duration_seconds", "How long the apply took.", [({}, round(outcome.seconds, 3))])
    return "\n".join(lines) + "\n"


def smoke_text(outcome: Any, now: float | None = None) -> str:
    """A smoke outcome (smoke.run.SmokeOutcome) in base units: bytes per second, bytes, seconds."""
    lines: list[str] = []
    hosts = outcome.hosts
    figures = {f.host: f.busbw for f in outcome.judgement.figures} if outcome.judgement else {}
    _metric(lines, "fabnet_smoke_verdict", "1 for the smoke run's verdict.", [({"verdict": outcome.verdict}, 1)])
    _metric(lines, "fabnet_smoke_exit_code", "The exit code of the smoke run (0 pass, 1 not run, 2 failed or "
            "slow, 4 unreachable).", [({}, outcome.exit_code)])
    if outcome.avg_busbw is not None:
        _metric(lines, "fabnet_smoke_busbw_bytes_per_second", "Average all-reduce bus bandwidth over the sweep.",
                [({}, outcome.avg_busbw * 1e9)])
    if outcome.rows:
        _metric(lines, "fabnet_smoke_size_busbw_bytes_per_second", "All-reduce bus bandwidth per message size.",
                [({"size_bytes": str(r.size)}, r.busbw * 1e9) for r in outcome.rows])
        _metric(lines, "fabnet_smoke_size_duration_seconds", "Time of one all-reduce per message size.",
                [({"size_bytes": str(r.size)}, r.time_us / 1e6) for r in outcome.rows])
    _metric(lines, "fabnet_smoke_host_ok", "1 when the host passed the smoke run, else 0.",
            [({"host": h}, int(outcome.host_verdict(h) == "pass")) for h in hosts])
    _metric(lines, "fabnet_smoke_host_verdict", "1 for the host's verdict.",
            [({"host": h, "verdict": outcome.host_verdict(h)}, 1) for h in hosts])
    measured = [({"host": h}, v * 1e9) for h, v in figures.items() if v is not None]
    if measured:
        _metric(lines, "fabnet_smoke_host_busbw_bytes_per_second", "Bus bandwidth of the host with its best "
                "partner (pairs measured after the sweep).", measured)
    speeds = [({"host": h}, v * 1e6 / 8) for h, v in outcome.link_mbps.items() if v is not None]
    if speeds:
        _metric(lines, "fabnet_smoke_link_speed_bytes_per_second", "Speed of the host's data links, summed.",
                speeds)
    if outcome.judgement:
        _metric(lines, "fabnet_smoke_check_status", "1 for each verdict's status (pass, slow or skipped).",
                [({"check": c.name, "status": c.status}, 1) for c in outcome.judgement.checks])
    _metric(lines, "fabnet_smoke_last_run_timestamp_seconds", "When the smoke run ran.",
            [({}, time.time() if now is None else now)])
    _metric(lines, "fabnet_smoke_duration_seconds", "How long the smoke run took.",
            [({}, round(outcome.seconds, 3))])
    return "\n".join(lines) + "\n"


def write(path: Path, text: str) -> None:
    write_report(path, text)
