# ruff: noqa: E501  (the tables are as wide as nccl-tests prints them)
"""nccl-tests output variants: real samples (one-rank copies under a launcher, failures after large sizes,
Open MPI tags, rccl's footer) and the columns later nccl-tests builds print on request, built from the
printf formats of src/util.cu (`cputime`, per-iteration `i_min i_max i_p99 i_cv%`, `timestamp`, `-c 0`)."""

from __future__ import annotations

from provisioner.parsers.nccl_tests import parse_nccl_tests

from ._samples import read


def test_one_rank_copies_under_mpirun_are_named_and_incomplete() -> None:
    facts = parse_nccl_tests(read("all_reduce_perf-11-two-one-rank-runs-cut.txt"))
    assert facts.single_rank_runs == 2
    assert [(d.rank, d.host, d.pid) for d in facts.devices] == [
        (0, "ip-172-31-20-228", 1320), (0, "ip-172-31-22-230", 2066)]
    assert facts.wrong_column == "error"
    assert not facts.rows and not facts.complete
    assert facts.verdict == "truncated: no footer"
    assert "result table" in facts.missing


def test_failure_after_large_sizes_keeps_rows_and_every_failure() -> None:
    facts = parse_nccl_tests(read("all_reduce_perf-12-failure-large-sizes.txt"))
    assert [r.size for r in facts.rows] == [2**30, 2**31, 2**32, 2**33, 2**34]
    assert facts.rows[-1].count == 4294967296 and facts.rows[-1].ip_busbw == 367.44
    assert facts.verdict == "failed" and not facts.complete
    assert len(facts.failures) == 8
    assert facts.failures[0].startswith("HCA-128: Test NCCL failure common.cu:1204")
    assert facts.failures[1] == ".. HCA-128 pid 757466: Test failure common.cu:915"


def test_open_mpi_tagged_output_cut_after_three_rows() -> None:
    facts = parse_nccl_tests(read("all_reduce_perf-13-mpi-tag-cut.txt"))
    assert [r.size for r in facts.rows] == [8, 16, 32]
    assert facts.rows[2].oop_time_us == 22.25 and facts.rows[2].ip_time_us == 13.34
    assert facts.wrong_column == "#wrong" and facts.rows[0].root == -1
    assert not facts.complete and facts.verdict == "truncated: no footer"


def test_rccl_broadcast_rows_without_header_read_by_shape() -> None:
    facts = parse_nccl_tests(read("broadcast_perf-14-rccl-footer.txt"))
    assert len(facts.rows) == 10
    assert {(r.redop, r.root) for r in facts.rows} == {("none", 0)}
    assert facts.rows[-1].oop_time_us == 18781 and facts.rows[-1].ip_busbw == 7.16
    assert facts.avg_busbw == 3.41227 and facts.out_of_bounds == 0
    assert facts.collective == "broadcast_perf"
    assert facts.verdict == "ok"
    # The header is not there: the rows are read, but the output is a fragment.
    assert not facts.complete


_TABLE_HEAD = """\
# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 8 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 0 graph: 1 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid  12345 on     host-a device  0 [0000:1b:00] NVIDIA H100 80GB HBM3
#
"""
_FOOTER = """\
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.0123
#
# Collective test concluded: all_reduce_perf
"""


def test_check_disabled_cputime_and_timestamp_columns() -> None:
    # `-c 0 -C 1 -T 1`: `cputime` columns, `N/A` for #wrong, a date and a time after the in-place group.
    text = _TABLE_HEAD + """\
#                                                              out-of-place                       in-place
#       size         count      type   redop    root  cputime   algbw   busbw #wrong  cputime   algbw   busbw #wrong           timestamp
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)         %Y-%m-%d %H:%M:%S
           8             2      half     max      -1    19.12    0.00    0.00    N/A    18.26    0.00    0.00    N/A  2025-10-28 12:01:02
          16             4  bfloat16     avg      -1    17.72    0.00    0.00    N/A    19.53    0.00    0.00    N/A  2025-10-28 12:01:03
""" + _FOOTER
    facts = parse_nccl_tests(text)
    assert facts.complete and facts.verdict == "ok"
    assert [(r.type, r.redop) for r in facts.rows] == [("half", "max"), ("bfloat16", "avg")]
    assert all(r.oop_wrong is None and r.ip_wrong is None for r in facts.rows)
    assert facts.rows[1].timestamp == "2025-10-28 12:01:03" and facts.rows[1].ip_time_us == 19.53
    assert facts.parameters["validation"] == "0" and facts.parameters["graph"] == "1"


def test_per_iteration_columns() -> None:
    text = _TABLE_HEAD + """\
#                                                 out-of-place (+ per-iteration)                                in-place (+ per-iteration)
#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)     (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)
           8             2      int8     sum      -1    19.12    0.00    0.00       0    18.50    21.00    20.90     3.10    18.26    0.00    0.00       0    17.90    19.80    19.70     2.40
""" + _FOOTER
    facts = parse_nccl_tests(text)
    row = facts.rows[0]
    assert facts.complete and row.type == "int8"
    assert (row.oop_i_min_us, row.oop_i_max_us, row.oop_i_p99_us, row.oop_i_cv_pct) == (18.5, 21.0, 20.9, 3.1)
    assert (row.ip_time_us, row.ip_i_cv_pct) == (18.26, 2.4)


def test_test_timeout_is_a_failure_and_a_hung_run_is_incomplete() -> None:
    text = _TABLE_HEAD + """\
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
           8             2     float     sum      -1    19.12    0.00    0.00      0    18.26    0.00    0.00      0
host-a: Test timeout (300s) common.cu:523
"""
    facts = parse_nccl_tests(text)
    assert facts.verdict == "failed" and not facts.complete
    assert facts.failures == ["host-a: Test timeout (300s) common.cu:523"]
    hung = parse_nccl_tests(text.rsplit("host-a", 1)[0])
    assert hung.verdict == "truncated: no footer" and not hung.complete and len(hung.rows) == 1


def test_a_sentence_that_starts_with_a_number_is_not_a_headerless_row() -> None:
    # NCCL's RAS report: eleven words, the first a number, like a row with a root column; its count is a word.
    from provisioner.parsers.nccl_tests_table import infer_columns

    sentence = "1 job process is considered dead (unreachable via the RAS network)"
    row = "1048576 262144 float sum -1 45.2 23.2 43.5 0 44.9 23.3 43.7 0"
    assert infer_columns(sentence.split()) is None
    assert infer_columns(row.split()) is not None
