"""nccl-tests result tables (all_reduce_perf and friends)."""

from __future__ import annotations

import re

import pytest

from provisioner.parsers.nccl_tests import parse_nccl_tests

from ._samples import read, rejected


def test_all_reduce_perf_1_older_error_column() -> None:
    result = parse_nccl_tests(read("all_reduce_perf-1.txt"))
    assert len(result.rows) == 30
    assert result.avg_busbw == 53.7098
    assert (result.out_of_bounds, result.out_of_bounds_ok) == (0, True)
    assert result.wrong_column == "error"
    assert result.columns[:4] == ["size", "count", "type", "redop"]
    assert "root" not in result.columns
    first, last = result.rows[0], result.rows[-1]
    assert (first.size, first.count, first.type, first.redop, first.root) == (8, 2, "float", "sum", None)
    assert (first.oop_time_us, first.oop_wrong, first.ip_time_us, first.ip_wrong) == (38.63, 2e-07, 38.85, 1e-07)
    assert (last.size, last.count) == (4294967296, 1073741824)
    assert (last.oop_time_us, last.oop_algbw, last.oop_busbw) == (42715.0, 100.55, 188.53)
    assert (last.ip_time_us, last.ip_algbw, last.ip_busbw) == (42677.0, 100.64, 188.70)
    assert isinstance(last.oop_wrong, float)
    assert result.devices == [] and result.nccl_version is None


def test_all_reduce_perf_2_roce() -> None:
    result = parse_nccl_tests(read("all_reduce_perf-2.txt"))
    assert len(result.rows) == 29
    assert result.avg_busbw == 7.76739
    assert max(r.oop_busbw for r in result.rows) == 22.92
    assert result.rows[-1].size == 2147483648


def test_all_reduce_perf_3() -> None:
    result = parse_nccl_tests(read("all_reduce_perf-3.txt"))
    assert len(result.rows) == 13
    assert result.rows[0].size == 1048576
    assert result.avg_busbw == 113.289
    assert result.rows[-1].ip_busbw == 191.56
    assert {r.oop_wrong for r in result.rows} == {7e-07, 1e-06}


def test_all_reduce_perf_4_newer_format_with_root_and_wrong_count() -> None:
    result = parse_nccl_tests(read("all_reduce_perf-4.txt"))
    assert result.wrong_column == "#wrong"
    assert len(result.rows) == 6
    assert result.avg_busbw == 210.99
    assert result.out_of_bounds == 0
    assert (result.nccl_version, result.cuda_version) == ("2.16.2", "11.6")
    row = result.rows[0]
    assert (row.size, row.root, row.oop_time_us, row.oop_busbw, row.oop_wrong, row.ip_wrong) == (
        33554432, -1, 344.8, 170.31, 0, 0)
    assert isinstance(row.oop_wrong, int)
    assert len(result.devices) == 8
    assert result.devices[0].model_dump() == {
        "rank": 0, "group": 0, "pid": 66421, "host": "{hostname}", "device": 0, "bus_id": "0x00",
        "name": "NVIDIA A100-SXM4-80GB",
    }
    assert result.parameters["nThread"] == "1"
    assert result.parameters["minBytes"] == "33554432"
    assert result.parameters["warmup iters"] == "5"


def test_all_reduce_perf_5_two_hosts() -> None:
    result = parse_nccl_tests(read("all_reduce_perf-5.txt"))
    assert len(result.devices) == 16
    assert {d.host for d in result.devices} == {"{host1}", "{host2}"}
    assert result.devices[15].pid == 73339
    assert (result.nccl_version, result.cuda_version) == ("2.12.12", "11.6")
    assert result.avg_busbw == 150.209
    assert result.rows[-1].oop_busbw == 182.80


def test_all_reduce_perf_8_header_only() -> None:
    result = parse_nccl_tests(read("all_reduce_perf-8-header.txt"))
    assert result.rows == []
    assert result.avg_busbw is None
    assert len(result.devices) == 12
    assert result.devices[4].bus_id == "0003:00:01"
    assert result.devices[8].host == "h100-4"
    assert result.devices[0].name == "NVIDIA H100 80GB HBM3"
    assert result.parameters["maxBytes"] == "2147483648"


def test_interleaved_nccl_log_lines_and_na_cells() -> None:
    text = (
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
        "   busbw #wrong\n"
        "node1:100:100 [0] NCCL INFO Using network IB\n"
        "        1024           256     float     sum      -1    20.11    0.05    0.09    N/A    19.80    0.05"
        "    0.09    N/A\n"
        "# Out of bounds values : 1 FAILED\n"
    )
    result = parse_nccl_tests(text)
    [row] = result.rows
    assert (row.oop_wrong, row.ip_wrong, row.ip_time_us) == (None, None, 19.80)
    assert (result.out_of_bounds, result.out_of_bounds_ok) == (1, False)


def test_test_failure_lines_are_collected() -> None:
    text = (
        "#       size  count  type  redop  time  algbw  busbw  error  time  algbw  busbw  error\n"
        "node1: Test NCCL failure common.cu:958 'unhandled system error (run with NCCL_DEBUG=INFO for details)'\n"
    )
    result = parse_nccl_tests(text)
    assert result.failures == [
        "node1: Test NCCL failure common.cu:958 'unhandled system error (run with NCCL_DEBUG=INFO for details)'"
    ]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("", None, "no nccl-tests header"),
        ("#\n#\n", 1, "no nccl-tests header"),
        ("           8             2     float     sum    38.63\n", 1, "before the column header"),
        ("#  size count type redop time algbw busbw error time algbw busbw error\n8 2 float sum 1 2\n", 2,
         "6 cells but the header names 12"),
        ("#  size count type redop time algbw busbw error time algbw busbw error\n"
         "8 2 float sum 1.0 x 3 4 5 6 7 8\n", 2, "oop_algbw is not a number"),
        ("#  size count type redop time algbw busbw #wrong time algbw busbw #wrong\n"
         "8 2 float sum 1.0 2 3 0.5 5 6 7 0\n", 2, "oop_wrong is not an integer"),
        ("#  size count type redop time algbw error time algbw busbw error\n", 1, "time algbw busbw"),
        ("#  size count type redop time algbw busbw error time algbw busbw error extra\n", 1,
         "unexpected columns"),
        ("#  size count redop time algbw busbw error time algbw busbw error\n", 1, "no type column"),
        ("# Avg bus bandwidth    : fast\n", 1, "average bus bandwidth"),
    ],
)
def test_malformed_nccl_tests(text: str, line: int | None, message: str) -> None:
    found_line, reason = rejected(parse_nccl_tests, text)
    assert re.search(message, reason)
    assert found_line == line


def test_truncated_row_names_the_line() -> None:
    lines = read("all_reduce_perf-1.txt").splitlines(keepends=True)
    cut = "".join(lines[:10]) + lines[10][:60] + "\r\n"
    result = parse_nccl_tests(cut)
    assert [(u.line, u.reason) for u in result.unplaced] == [
        (11, "data row has 6 cells but the header names 12 columns")
    ]
    assert len(result.rows) == 6  # every complete row before the cut
    assert result.complete is False
    assert result.verdict == "truncated: no footer"
