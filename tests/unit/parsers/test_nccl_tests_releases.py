# ruff: noqa: E501, W291  (the tables are as wide as nccl-tests prints them, with its trailing blanks)
"""nccl-tests output of each release's shape. The inputs are built from the printf formats in nccl-tests'
own source (src/common.cu, src/common.h, src/util.cu and the *_perf headers of v1.0.0, v2.0.0, v2.10.0,
v2.13.x, v2.17.x) and rccl-tests' src/common.cu; the figures are made up. Real outputs are in
tests/samples (INDEX.md)."""

from __future__ import annotations

from provisioner.parsers.nccl_tests import parse_nccl_tests

from ._samples import read

# v1.0.0 (2017-2018): `nThread` and the footer without `#`, `#   Rank N on HOST` (no Pid), a `bytes N`
# header without a units line, the time in milliseconds (`%7.3f`), `res` as `%7.0le`.
_V1 = """\
nThread 1 nGpus 2 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20 validation: 1 
# NCCL Tests compiled with NCCL 2.2
# Using devices
#   Rank  0 on      node1 device  0 [0x06] Tesla V100-SXM2-16GB
#   Rank  1 on      node1 device  1 [0x07] Tesla V100-SXM2-16GB

#                                 out-of-place                    in-place
#       bytes             N    type      op     time  algbw  busbw      res     time  algbw  busbw      res
           8             2   float     sum    0.013   0.00   0.00    0e+00    0.012   0.00   0.00    0e+00
     1048576        262144   float     sum    0.081  12.95  12.95    0e+00    0.080  13.11  13.11    0e+00
 Out of bounds values : 0 OK
 Avg bus bandwidth    : 6.5025 
"""


def test_2017_builds_footer_without_hash_and_time_in_milliseconds() -> None:
    facts = parse_nccl_tests(_V1)
    assert facts.verdict == "ok" and facts.complete and facts.unplaced == []
    assert facts.avg_busbw == 6.5025 and facts.out_of_bounds == 0
    assert facts.parameters["nGpus"] == "2" and facts.nccl_headers_version == "2.2"
    assert [r.oop_time_us for r in facts.rows] == [13.0, 81.0] and facts.rows[1].ip_time_us == 80.0
    assert facts.rows[1].ip_busbw == 13.11


def test_2017_broadcast_prints_the_out_of_place_group_alone() -> None:
    text = """\
#                                 out-of-place
#       bytes             N    type    root     time  algbw  busbw      res
     1048576        262144   float       0    0.081  12.95  12.95    0e+00
 Out of bounds values : 0 OK
 Avg bus bandwidth    : 12.95 
"""
    facts = parse_nccl_tests(text)
    assert facts.verdict == "ok" and facts.complete
    row = facts.rows[0]
    assert (row.root, row.oop_time_us, row.oop_busbw, row.ip_time_us) == (0, 81.0, 12.95, None)


def test_2017_failure_lines_fail_the_run() -> None:
    cut = _V1.split(" Out of bounds")[0]
    for line in ("NCCL failure common.cu:393 'unhandled system error'", "Cuda failure common.cu:512 'out of memory'"):
        facts = parse_nccl_tests(cut + line + "\n")
        assert facts.verdict == "failed" and facts.failures == [line] and not facts.complete


_V2_HEAD = """\
# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1 
#
# Using devices
#   Rank  0 Pid  41523 on     node01 device  0 [0x07] Tesla V100-SXM2-32GB
#
"""


def test_2019_broadcast_has_a_root_and_no_reduction_column() -> None:
    # v2.0.0-v2.12: broadcast, gather and scatter print `root` where all_reduce prints `redop`.
    table = """\
           8             2   float       0    10.51    0.00    0.00  0e+00    10.40    0.00    0.00  0e+00
   134217728      33554432   float       0   1523.2   88.12   88.12  0e+00   1520.1   88.30   88.30  0e+00
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 44.13 
"""
    header = """\
#                                             out-of-place                       in-place          
#       size         count    type    root     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
"""
    whole = parse_nccl_tests(_V2_HEAD + header + table)
    assert whole.verdict == "ok" and whole.complete and whole.wrong_column == "error"
    # The rows alone (an excerpt) are read by their shape: a root, no reduction.
    fragment = parse_nccl_tests(table)
    for facts in (whole, fragment):
        assert [(r.root, r.redop, r.oop_busbw) for r in facts.rows] == [(0, None, 0.0), (0, None, 88.12)]
    assert not fragment.complete


def test_2019_out_of_bounds_footer_fails_a_float_error_column() -> None:
    text = _V2_HEAD + """\
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
           8             2   float     sum    10.51    0.00    0.00  2e+00    10.40    0.00    0.00  2e+00
# Out of bounds values : 2 FAILED
# Avg bus bandwidth    : 0 
"""
    facts = parse_nccl_tests(text)
    assert facts.verdict == "out of bounds" and facts.out_of_bounds_ok is False


_V17_HEAD = """\
# nccl-tests version 2.17.6 nccl-headers=22707 nccl-library=22707
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 1073741824 maxBytes 2147483648 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  41523 on     node01 device  0 [0000:07:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong 
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         
"""
_ROW = "  1073741824     268435456     float     sum      -1  10094.3  106.37  186.15       0   9999.12  107.38  187.92       0\n"
_END = "#\n# Collective test concluded: all_reduce_perf\n"


def test_average_below_nccl_tests_min_bw_fails() -> None:
    # NCCL_TESTS_MIN_BW set: the average line ends in OK or FAILED (and the exit status follows it).
    passed = parse_nccl_tests(_V17_HEAD + _ROW + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 186.15 OK\n" + _END)
    assert passed.verdict == "ok" and passed.avg_busbw_ok is True
    failed = parse_nccl_tests(_V17_HEAD + _ROW + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 186.15 FAILED\n" + _END)
    assert failed.verdict == "below minimum bandwidth" and failed.avg_busbw_ok is False


def test_last_error_line_and_memory_report_are_read_without_failing() -> None:
    # 2.17.3+: `# error: ...` (NCCL's last error message) after the footer; 2.17.7+: `-M` memory report.
    text = (_V17_HEAD + _ROW + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 186.15 \n" + _END
            + "# GPU memory usage     : Initialization 1.02 GB | User-Allocated 16.0 GB | Collective 512 MB | Total  17.5 GB\n"
            + "#\n# error: NET/IB : some warning\n")
    facts = parse_nccl_tests(text)
    assert facts.verdict == "ok" and facts.complete and facts.nccl_last_error == "NET/IB : some warning"


def test_a_row_that_does_not_fit_its_header_fails_the_run() -> None:
    # A size whose figures lost a cell (output of another process mixed in): never a pass, even with a footer.
    broken = "  2147483648     536870912     float     sum      -1  20188.6  106.37  186.15   19998.2  107.38  187.92       0\n"
    facts = parse_nccl_tests(_V17_HEAD + _ROW + broken + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 186.15 \n" + _END)
    assert facts.verdict == "unreadable row" and not facts.complete
    assert facts.unreadable_rows == [12] and len(facts.rows) == 1
    # A run cut inside a row is truncated.
    cut = parse_nccl_tests(_V17_HEAD + _ROW + broken[:40] + "\n")
    assert cut.verdict == "truncated: no footer" and not cut.complete


def test_a_line_of_numbers_after_the_footer_is_no_row_of_the_table() -> None:
    # A launch template under `/usr/bin/time -f '%e %M'` prints the seconds and the peak RSS once the run ended.
    facts = parse_nccl_tests(_V17_HEAD + _ROW + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 186.15 \n" + _END
                             + "12.31 524288\n")
    assert facts.verdict == "ok" and facts.complete and facts.unreadable_rows == [] and len(facts.rows) == 1


def test_wrong_elements_in_place_only_are_wrong_results() -> None:
    # `%6g` prints a large count in exponent notation.
    row = _ROW.replace("187.92       0", "187.92  1.04858e+06")
    facts = parse_nccl_tests(_V17_HEAD + row + "# Out of bounds values : 1 FAILED\n# Avg bus bandwidth    : 186.15 \n" + _END)
    assert facts.verdict == "wrong results" and facts.rows[0].ip_wrong == 1048580


def test_launch_errors_before_the_table_are_failures() -> None:
    for line in ("Invalid number of GPUs: 16 requested but only 8 were found.",
                 "[ERROR] The number of requested GPUs (16) is greater than the number of GPUs available (8) on node (n1)",
                 "Incompatible NCCL versions. nccl-tests was compiled with NCCL 2.28, but is running with NCCL 22703. "):
        facts = parse_nccl_tests(line + "\n")
        assert facts.verdict == "failed" and facts.failures == [line.strip()]


def test_rccl_in_place_only_table() -> None:
    # rccl-tests `-O 0`: one group, labelled in-place; `rccl-tests: Version ...` without `#`.
    text = """\
# nThread 1 nGpus 8 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
rccl-tests: Version develop:33cc4df
# Using devices
#   Rank  0 Pid   6081 on     node01 device  0 [0000:c1:00.0] AMD Instinct MI300X
#
#                                                        in-place          
#       size         count      type   redop    root     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)      
           8             2     float     sum      -1    31.02    0.00    0.00      0
          16             4     float     sum      -1    30.77    0.00    0.00      0
# Errors with asterisks indicate errors that have exceeded the maximum threshold.
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0 
#
"""
    facts = parse_nccl_tests(text)
    assert facts.verdict == "ok" and facts.complete and facts.unplaced == []
    assert facts.rccl_tests_version == "develop:33cc4df"
    assert [(r.ip_time_us, r.oop_time_us) for r in facts.rows] == [(31.02, None), (30.77, None)]
    assert facts.devices[0].bus_id == "0000:c1:00.0"


def test_recorded_rccl_alltoall_and_one_gpu_alltoall() -> None:
    rccl = parse_nccl_tests(read("alltoall_perf-20-rccl-mi355x-version-line.txt"))
    assert rccl.verdict == "ok" and rccl.complete and rccl.unplaced == []
    assert rccl.rccl_tests_version == "HEAD:e1b8a3a" and len(rccl.devices) == 8
    assert [(r.size, r.oop_time_us, r.oop_wrong, r.ip_wrong) for r in rccl.rows] == [
        (8589934592, 20837.0, 0, None), (17179869184, 41593.0, 0, None)]
    assert rccl.avg_busbw == 236.187
    one = parse_nccl_tests(read("alltoall_perf-19-rtx5090-one-gpu-inplace-na.txt"))
    assert one.verdict == "ok" and one.complete
    assert (one.rows[0].ip_algbw, one.rows[0].ip_wrong, one.rows[0].oop_wrong) == (43046.10, None, 0)
