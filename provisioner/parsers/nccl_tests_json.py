"""Read nccl-tests' JSON report (`-J FILE.json`, nccl-tests 2.17.6 on) into the same facts as its text output.

Shape read from nccl-tests' writer (src/util.cu) across its history: `version` (the file format: 1 from
October 2025, 2 with per-iteration statistics, 3 with `per_iter_skip`), `args`, `env` (the whole process
environment: never copied into the result), `nccl_version` (a code, 22809), `config` (`ngpus`, `minimum_bytes`,
... and `devices`: one object per rank), `results` (per size: `size`, `count`, `type`, `redop`, `root` as
printed, `out_of_place` and `in_place` objects of `time` or, with `-C`, `cpu_time`, `alg_bw`, `bus_bw`,
`nwrong`; `out_of_place` is null for in-place-only runs and `nwrong` without validation), `out_of_bounds`
(`count`, `okay`), the average bus bandwidth (`average_bus_bandwidth` with `bandwidth`, spelt
`average_bus_bandwidith`/`bandwidith` before February 2026; `okay` is `"unchecked"` without
NCCL_TESTS_MIN_BW), `errors` (NCCL's last error, `""` when none) and `end_time`. Booleans are the strings
`"true"`/`"false"` and a NaN the string `"nan"`. A run that failed before its first size ends after `config`
(no `results`); a file cut while written is not JSON and is an error naming its line and column.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from pydantic import ValidationError

from provisioner.errors import ParseError
from provisioner.parsers.nccl_tests_table import NcclTestRow, version_from_code

KIND = "nccl_tests"

# Parameters under the names the text header prints them with (`# nThread 1 nGpus 1 minBytes ...`).
_PARAMETERS = {"nthreads": "nThread", "ngpus": "nGpus", "minimum_bytes": "minBytes", "maximum_bytes": "maxBytes",
               "step_factor": "step", "step_bytes": "step", "warmup_iters": "warmup iters",
               "iterations": "iters", "aggregated_iterations": "agg iters", "validation": "validation",
               "graph": "graph"}
_INTEGER = re.compile(r"^-?[0-9]+$", re.ASCII)  # `root` as printed (`    -1`), not `²` or `--1`


def looks_like_json(text: str) -> bool:
    """Whether `text` is a report, whole or cut while written: it starts with `{`, and is not one JSON object with
    more text after it (a log whose first line is a structured logger's record, nccl-tests' text below it)."""
    text = text.lstrip()
    if not text.startswith("{"):
        return False
    try:
        _, end = json.JSONDecoder().raw_decode(text)
    except ValueError:
        return True  # cut: read as a report, so the error says where it stops
    return not text[end:].strip()


def _number(value: Any) -> float | None:
    """A JSON number, or None for null and the string "nan" nccl-tests writes for NaN."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _okay(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    return {"true": True, "false": False}.get(value) if isinstance(value, str) else None  # a list or object: no


def invalid(exc: ValidationError, where: str) -> ParseError:
    """A value of a type nccl-tests never writes there (a report edited by hand): an error naming the key, not
    an internal one."""
    first = exc.errors()[0]
    key = ".".join(str(part) for part in first["loc"])
    return ParseError(KIND, f"{where}: `{key}` {first['msg'].lower()}", line=1)


def _half(row: dict[str, Any], prefix: str, half: Any, per_iter: Any) -> None:
    """One of a size's two halves (out-of-place `oop`, in-place `ip`), and its per-iteration statistics."""
    if isinstance(half, dict):
        row[f"{prefix}_time_us"] = _number(half.get("time", half.get("cpu_time")))
        row[f"{prefix}_algbw"] = _number(half.get("alg_bw"))
        row[f"{prefix}_busbw"] = _number(half.get("bus_bw"))
        wrong = _number(half.get("nwrong"))
        row[f"{prefix}_wrong"] = int(wrong) if wrong is not None and wrong.is_integer() else wrong
    if isinstance(per_iter, dict):  # format 2 on, with per-iteration timing
        for key in ("min", "max", "p99"):
            row[f"{prefix}_i_{key}_us"] = _number(per_iter.get(f"{key}_us"))
        row[f"{prefix}_i_cv_pct"] = _number(per_iter.get("cv_pct"))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _row(result: Any, number: int) -> NcclTestRow:
    if not isinstance(result, dict) or not isinstance(result.get("size"), int):
        raise ParseError(KIND, f"result {number} has no size", text=json.dumps(result)[:200])
    root = str(result.get("root", "")).strip()
    row: dict[str, Any] = {"size": result["size"], "count": result.get("count", 0), "type": result.get("type", ""),
                           "redop": result.get("redop"), "root": int(root) if _INTEGER.match(root) else None}
    _half(row, "oop", result.get("out_of_place"), result.get("out_of_place_per_iter"))
    _half(row, "ip", result.get("in_place"), result.get("in_place_per_iter"))
    try:
        return NcclTestRow.model_validate(row)
    except ValidationError as exc:
        raise invalid(exc, f"result {number}") from None


def _document(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        column = getattr(exc, "colno", None)
        raise ParseError(KIND, f"not a whole JSON report (a file cut while nccl-tests wrote it?): {exc.args[0]}"
                         + (f", column {column}" if column else ""), line=line) from None
    if not isinstance(data, dict) or "config" not in data or "nccl_version" not in data:
        raise ParseError(KIND, "JSON without nccl-tests' `nccl_version` and `config`: not an nccl-tests report",
                         line=1)
    return data


def fields_from_json(text: str) -> dict[str, Any]:
    """The fields of an NcclTests result read from the JSON report `text`."""
    data = _document(text)
    config = _dict(data["config"])
    code = data.get("nccl_version")
    version = version_from_code(code) if isinstance(code, int) else None
    devices = [{"rank": d.get("rank"), "group": d.get("group"), "pid": d.get("pid"), "host": d.get("hostname"),
                "device": d.get("device"), "bus_id": d.get("device_hex"), "name": d.get("device_info")}
               for d in config.get("devices") or [] if isinstance(d, dict)]
    rows = [_row(result, n) for n, result in enumerate(data.get("results") or [], start=1)]
    bounds = _dict(data.get("out_of_bounds"))
    average = _dict(data.get("average_bus_bandwidth", data.get("average_bus_bandwidith")))
    errors = [e for e in data.get("errors") or [] if isinstance(e, str) and e.strip()]
    missing = [] if "results" in data else ["result table (the run stopped before its first size)"]
    if "results" in data and not (bounds and average):
        # The writer closes its report on an error exit too: a report without its footer is a run that stopped.
        missing.append("footer (out_of_bounds, average_bus_bandwidth): the run stopped after its last size")
    args = data.get("args") if isinstance(data.get("args"), list) else []
    verdict = _verdict(rows, missing, bounds, average)
    footer = {
        "out_of_bounds": bounds.get("count") if isinstance(bounds.get("count"), int) else None,
        "out_of_bounds_ok": _okay(bounds.get("okay")),
        "avg_busbw": _number(average.get("bandwidth", average.get("bandwidith"))),
        "avg_busbw_ok": _okay(average.get("okay")),
    }
    collective = os.path.basename(str(args[0])) if args else None
    parameters = {_PARAMETERS[k]: str(v) for k, v in config.items() if k in _PARAMETERS}
    return {
        "complete": not missing, "missing": missing, "rows": rows, "devices": devices,
        "nccl_version": version, "nccl_library_version": version,
        "parameters": parameters,
        "collective": collective,
        "columns": ["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
                    "busbw", "#wrong"],
        "wrong_column": "#wrong",
        **footer,
        "nccl_last_error": errors[-1] if errors else None,
        "runs": 1 if rows else 0,
        "verdict": verdict,
        # A report is one run's: it is the whole list, without line numbers (a report has no log lines).
        "run_verdicts": [verdict],
        "run_results": [{"verdict": verdict, "collective": collective, "parameters": parameters, "rows": len(rows),
                         **footer}],
    }


def _verdict(rows: list[NcclTestRow], missing: list[str], bounds: dict[str, Any], average: dict[str, Any]) -> str:
    if not rows and missing:
        return "failed"
    if any((r.oop_wrong or 0) > 0 or (r.ip_wrong or 0) > 0 for r in rows):
        return "wrong results"
    if _okay(bounds.get("okay")) is False:
        return "out of bounds"
    if missing:
        return "failed"
    if _okay(average.get("okay")) is False:
        return "below minimum bandwidth"
    return "ok"
