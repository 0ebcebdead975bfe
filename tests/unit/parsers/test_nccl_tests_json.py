"""nccl-tests' JSON report (`-J FILE.json`): two real reports from one H200 (tests/samples/INDEX.md), and the
shapes its writer produced over its history (src/util.cu of nccl-tests: the key spelt `bandwidith` before
February 2026, `cpu_time` under `-C`, `null` halves and counts, `"nan"`, per-iteration statistics)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from provisioner.errors import ParseError
from provisioner.parsers.nccl_tests import parse_nccl_tests
from tests.unit.parsers._samples import read


def test_a_real_report_reads_as_the_table_does() -> None:
    run = parse_nccl_tests(read("nccl-tests-32-h200-all-reduce.json"))
    assert run.complete and run.verdict == "ok" and run.missing == []
    assert run.collective == "all_reduce_perf" and run.nccl_version == run.nccl_library_version == "2.28.9"
    assert [row.size for row in run.rows] == [1 << 20, 1 << 22, 1 << 24]
    first = run.rows[0]
    assert (first.count, first.type, first.redop, first.root) == (262144, "float", "sum", -1)
    assert first.oop_busbw == 0.0 and first.oop_wrong == 0 and first.oop_time_us and first.ip_algbw
    [device] = run.devices
    assert (device.rank, device.host, device.bus_id, device.name) == (0, "vm", "0000:00:06", "NVIDIA H200")
    assert run.parameters["nGpus"] == "1" and run.parameters["minBytes"] == str(1 << 20)
    assert (run.out_of_bounds, run.out_of_bounds_ok, run.avg_busbw, run.avg_busbw_ok) == (0, True, 0.0, None)
    assert run.nccl_last_error is None  # `errors: [""]`: none


def test_a_report_of_a_run_that_failed_before_its_first_size() -> None:
    run = parse_nccl_tests(read("nccl-tests-32-h200-failed-before-results.json"))
    assert run.verdict == "failed" and not run.complete and run.rows == []
    assert run.missing == ["result table (the run stopped before its first size)"]
    assert run.devices[0].host == "vm"


def _report(**changes: Any) -> dict[str, Any]:
    """A report in the writer's shape (format 3), with `changes` applied at the top level."""
    half = {"time": 10.5, "alg_bw": 99.0, "bus_bw": 185.6, "nwrong": 0}
    doc: dict[str, Any] = {
        "version": 3, "start_time": "2026-01-01 00:00:00", "args": ["./build/all_reduce_perf", "-g", "8"],
        "env": ["HF_TOKEN=secret-value-1", 'QUOTED=a "b" c'], "nccl_version": 22704,
        "config": {"nthreads": 1, "ngpus": 8, "minimum_bytes": 8, "maximum_bytes": 1024, "step_factor": 2,
                   "devices": [{"rank": r, "group": 0, "pid": 100 + r, "hostname": "gpu01", "device": r,
                                "device_hex": f"0000:{r:02x}:00", "device_info": "NVIDIA H100"} for r in range(8)]},
        "results": [{"size": 1024, "count": 256, "type": "float", "redop": "sum", "root": "    -1",
                     "out_of_place": dict(half), "in_place": dict(half), "actual_iterations": 20,
                     "experiment_name": ""}],
        "out_of_bounds": {"count": 0, "okay": "true"},
        "average_bus_bandwidth": {"bandwidth": 185.6, "okay": "unchecked"}, "errors": [""],
        "end_time": "2026-01-01 00:00:01",
    }
    doc.update(changes)
    return doc


def test_the_first_formats_spelling_of_the_average() -> None:
    doc = _report(version=1)
    doc["average_bus_bandwidith"] = {"bandwidith": 185.6, "okay": "true"}
    del doc["average_bus_bandwidth"]
    run = parse_nccl_tests(json.dumps(doc))
    assert run.complete and (run.avg_busbw, run.avg_busbw_ok) == (185.6, True)
    assert run.nccl_version == "2.27.4" and len(run.devices) == 8


def test_cpu_time_null_halves_unvalidated_counts_and_nan() -> None:
    doc = _report()
    doc["results"][0]["out_of_place"] = None  # in-place only
    doc["results"][0]["in_place"] = {"cpu_time": 12.0, "alg_bw": "nan", "bus_bw": 1.5, "nwrong": None}
    [row] = parse_nccl_tests(json.dumps(doc)).rows
    assert row.oop_time_us is None and row.oop_busbw is None
    assert (row.ip_time_us, row.ip_algbw, row.ip_busbw, row.ip_wrong) == (12.0, None, 1.5, None)


def test_per_iteration_statistics_of_format_two() -> None:
    doc = _report(version=2)
    doc["results"][0]["out_of_place_per_iter"] = {"skipped_iterations": 0, "min_us": 9.0, "max_us": 30.0,
                                                   "p99_us": 29.0, "cv_pct": 12.5, "times_us": [9.0, 30.0]}
    [row] = parse_nccl_tests(json.dumps(doc)).rows
    assert (row.oop_i_min_us, row.oop_i_max_us, row.oop_i_p99_us, row.oop_i_cv_pct) == (9.0, 30.0, 29.0, 12.5)
    assert row.ip_i_min_us is None


@pytest.mark.parametrize(("change", "verdict"), [
    ({"out_of_bounds": {"count": 2, "okay": "false"}}, "out of bounds"),
    ({"average_bus_bandwidth": {"bandwidth": 10.0, "okay": "false"}}, "below minimum bandwidth"),
    # The writer closes its report when the run stops on an error: results without the footer are a failed run.
    ({"end_time": None, "out_of_bounds": None, "average_bus_bandwidth": None}, "failed"),
])
def test_verdicts_from_the_report(change: dict[str, Any], verdict: str) -> None:
    doc = _report(**change)
    doc = {k: v for k, v in doc.items() if v is not None}
    assert parse_nccl_tests(json.dumps(doc)).verdict == verdict


def test_wrong_elements_fail_the_run_and_last_error_is_kept() -> None:
    doc = _report(errors=["NET/IB : Got completion from peer 10.0.0.2 with status=12"])
    doc["results"][0]["in_place"]["nwrong"] = 3
    run = parse_nccl_tests(json.dumps(doc))
    assert run.verdict == "wrong results" and run.rows[0].ip_wrong == 3
    assert run.nccl_last_error == "NET/IB : Got completion from peer 10.0.0.2 with status=12"


def test_the_environment_in_the_report_never_reaches_the_result() -> None:
    shown = parse_nccl_tests(json.dumps(_report())).model_dump_json()
    assert "secret-value-1" not in shown and "HF_TOKEN" not in shown and "QUOTED" not in shown


def test_a_report_cut_while_written_is_an_error_with_its_line() -> None:
    text = json.dumps(_report(), indent=1)
    cut = text[: text.index('"results"') + 40]
    with pytest.raises(ParseError) as err:
        parse_nccl_tests(cut)
    assert err.value.line is not None and err.value.line > 1
    assert "not a whole JSON report" in str(err.value)


def test_json_that_is_no_report_is_refused() -> None:
    with pytest.raises(ParseError, match="not an nccl-tests report"):
        parse_nccl_tests('{"schema": "fabnet/explain/v1", "causes": []}')


def test_a_log_that_starts_with_a_json_record_is_read_as_text() -> None:
    # A wrapper's structured log line above nccl-tests' text output: the text is the run, not a cut report.
    text = read("all_reduce_perf-12-failure-large-sizes.txt")
    run = parse_nccl_tests('{"level": "info", "msg": "starting all_reduce_perf"}\n' + text)
    assert run.verdict == parse_nccl_tests(text).verdict == "failed" and len(run.rows) == 5


def _edited(path: tuple[Any, ...], value: Any) -> str:
    doc = _report()
    *parents, key = path
    inner = doc
    for part in parents:
        inner = inner[part]
    inner[key] = value
    return json.dumps(doc)


@pytest.mark.parametrize(("path", "value", "named"), [
    (("results", 0, "count"), None, "result 1: `count`"),
    (("config", "devices", 0, "hostname"), None, "`devices.0.host`"),
])
def test_a_value_of_another_type_is_a_parse_error_naming_its_key(path: tuple[Any, ...], value: Any,
                                                                  named: str) -> None:
    with pytest.raises(ParseError, match=re.escape(named)):
        parse_nccl_tests(_edited(path, value))


@pytest.mark.parametrize(("path", "value"), [(("out_of_bounds", "okay"), []), (("results", 0, "root"), "²")])
def test_an_odd_flag_or_root_reads_as_unknown(path: tuple[Any, ...], value: Any) -> None:
    run = parse_nccl_tests(_edited(path, value))
    assert run.out_of_bounds_ok is None if path[0] == "out_of_bounds" else run.rows[0].root is None


# The same runs as text and as JSON (one H200, tests/samples/INDEX.md): both read to one answer.
PAIRS = [
    ("all_reduce_perf-33-h200-per-iteration.txt", "nccl-tests-33-h200-per-iteration.json", "ok"),
    ("all_reduce_perf-33-h200-min-bw-failed.txt", "nccl-tests-33-h200-min-bw-failed.json", "below minimum bandwidth"),
    ("all_reduce_perf-33-h200-all-ops-types-invalid-argument.txt", "nccl-tests-33-h200-stopped-after-rows.json",
     "failed"),
]


@pytest.mark.parametrize(("text", "report", "verdict"), PAIRS)
def test_text_and_report_of_one_run_agree(text: str, report: str, verdict: str) -> None:
    a, b = parse_nccl_tests(read(text)), parse_nccl_tests(read(report))
    assert a.verdict == b.verdict == verdict
    assert [(r.size, r.type, r.redop) for r in a.rows] == [(r.size, r.type, r.redop) for r in b.rows]
    for x, y in zip(a.rows, b.rows, strict=True):  # the text rounds what the report keeps whole
        for field in ("oop_time_us", "oop_algbw", "ip_time_us", "oop_i_min_us", "oop_i_p99_us", "ip_i_cv_pct"):
            left, right = getattr(x, field), getattr(y, field)
            assert (left is None) == (right is None), field
            if left is not None and right is not None:
                assert abs(left - right) <= max(0.01 * abs(right), 0.006), (field, left, right)
    assert a.avg_busbw_ok == b.avg_busbw_ok and [d.bus_id for d in a.devices] == [d.bus_id for d in b.devices]


def test_cpu_time_of_a_real_report() -> None:
    run = parse_nccl_tests(read("nccl-tests-33-h200-cputime.json"))
    assert run.complete and all(r.oop_time_us and r.ip_time_us for r in run.rows)
