"""Runner nccl-tests: the launch command, and every recorded all_reduce_perf output read right."""

from __future__ import annotations

import shlex

import pytest

from provisioner.errors import ParseError
from provisioner.parsers.nccl_tests import parse_nccl_tests
from provisioner.parsers.nccl_tests_verdict import deciding
from provisioner.smoke import nccltests
from provisioner.smoke.settings import DEFAULT_LAUNCH
from tests.unit.parsers._samples import SAMPLE_KINDS, SAMPLES

NCCL_SAMPLES = sorted(name for name, kind in SAMPLE_KINDS.items() if kind == "nccl_tests")


@pytest.mark.parametrize("name", NCCL_SAMPLES)
def test_every_sample_gives_the_printed_figures(name: str) -> None:
    text = (SAMPLES / name).read_text()
    parsed = parse_nccl_tests(text)
    rows, avg, _problem = nccltests.rows(text, max(2, len(parsed.devices)))
    assert avg == parsed.avg_busbw
    # The rows of the run that average is from: in a log of several runs, the run the verdict comes from.
    run = deciding(parsed.run_results)
    table = parsed.rows[run.first_row:run.first_row + run.rows] if run else parsed.rows
    assert [r.size for r in rows] == [r.size for r in table if r.oop_time_us is not None or r.ip_time_us is not None]
    for row, source in zip(rows, [r for r in table if r.oop_algbw is not None or r.ip_algbw is not None],
                           strict=True):
        assert row.busbw == (source.oop_busbw if source.oop_busbw is not None else source.ip_busbw)


def test_two_runs_give_the_figures_of_one_run_with_its_own_average() -> None:
    # Two real runs of all_gather_perf: the average is the last run's, so the rows are that run's too, not both.
    text = (SAMPLES / "all_gather_perf-9-two-runs.txt").read_text()
    parsed = parse_nccl_tests(text)
    rows, avg, _problem = nccltests.rows(text, 8)
    first, last = parsed.run_results
    assert avg == last.avg_busbw and len(rows) == last.rows < len(parsed.rows)
    assert [r.size for r in rows] == [r.size for r in parsed.rows[last.first_row:]]
    assert first.first_row == 0 and last.first_row == first.rows


def test_header_only_output_has_no_rows() -> None:
    rows, _avg, _problem = nccltests.rows((SAMPLES / "all_reduce_perf-8-header.txt").read_text(), 8)
    assert rows == []


def test_garbage_is_never_a_result() -> None:
    """A row that does not fit the header: the parser refuses it, or reports the run incomplete."""
    garbage = "#  size count type redop time algbw busbw error time algbw busbw error\n 8 2 x\n"
    try:
        rows, _avg, problem = nccltests.rows(garbage, 2)
    except ParseError:
        return
    assert rows == [] and problem


def test_default_mpirun_command() -> None:
    line = nccltests.command(DEFAULT_LAUNCH, hosts=["10.0.0.1", "10.0.0.2"], ranks_per_host=8,
                             binary="/opt/nccl-tests/build/all_reduce_perf", sizes=[1 << 20, 1 << 30], iters=20,
                             env={"NCCL_SOCKET_IFNAME": "eth1", "NCCL_IB_GID_INDEX": "3"})
    words = shlex.split(line)
    # A builtin: the values are on no command line.
    assert words[:4] == ["export", "NCCL_IB_GID_INDEX=3", "NCCL_SOCKET_IFNAME=eth1;", "mpirun"]
    assert "-np" in words and words[words.index("-np") + 1] == "16"
    assert words[words.index("-H") + 1] == "10.0.0.1:8,10.0.0.2:8"
    binary = words.index("/opt/nccl-tests/build/all_reduce_perf")
    # Open MPI passes its remote ranks only what -x names: every exported variable, and nothing unset.
    assert words[words.index("-H") + 2:binary] == ["-x", "NCCL_IB_GID_INDEX", "-x", "NCCL_SOCKET_IFNAME"]
    assert words[binary:] == [
        "/opt/nccl-tests/build/all_reduce_perf", "-b", "1048576", "-e", "1073741824", "-f", "2", "-g", "1", "-n", "20"]


def test_mpirun_with_nothing_to_export_names_no_variable() -> None:
    line = nccltests.command(DEFAULT_LAUNCH, hosts=["10.0.0.1", "10.0.0.2"], ranks_per_host=1,
                             binary="all_reduce_perf", sizes=[1 << 20], iters=5, env={})
    assert "-x" not in shlex.split(line) and line.startswith("mpirun ")


def test_a_template_of_ones_own_forwards_only_where_it_says_forward() -> None:
    line = nccltests.command("mpirun -np {np} {binary}", hosts=["a", "b"], ranks_per_host=1,
                             binary="all_reduce_perf", sizes=[4], iters=1, env={"NCCL_DEBUG": "WARN"})
    assert shlex.split(line) == ["export", "NCCL_DEBUG=WARN;", "mpirun", "-np", "2", "all_reduce_perf"]
    line = nccltests.command("mpirun --bind-to none {forward} -x LD_LIBRARY_PATH {binary}", hosts=["a"],
                             ranks_per_host=1, binary="all_reduce_perf", sizes=[4], iters=1,
                             env={"NCCL_DEBUG": "WARN", "NCCL_IB_HCA": "=mlx5_0"})
    assert shlex.split(line)[3:] == ["mpirun", "--bind-to", "none", "-x", "NCCL_DEBUG", "-x", "NCCL_IB_HCA",
                                     "-x", "LD_LIBRARY_PATH", "all_reduce_perf"]
    line = nccltests.command("mpirun {forward} {binary}", hosts=["a"], ranks_per_host=1, binary="x", sizes=[4],
                             iters=1, env={})
    assert shlex.split(line) == ["mpirun", "x"]  # nothing to forward: no word at all, not an empty one


@pytest.mark.parametrize("template", ["mpirun -x{forward} {binary}", "mpirun '{forward} {binary}'",
                                      "mpirun {forward}{binary}"])
def test_forward_inside_a_word_is_refused(template: str) -> None:
    with pytest.raises(ValueError, match="must be a word of its own"):
        nccltests.command(template, hosts=["a"], ranks_per_host=1, binary="x", sizes=[4], iters=1,
                          env={"NCCL_DEBUG": "WARN"})


def test_srun_template_and_hostile_host_names() -> None:
    line = nccltests.command("srun -N {nodes} -w {hostlist} {binary} -n {iters}", hosts=["10.0.0.1", "b"],
                             names=["a;reboot", "b"],
                             ranks_per_host=1, binary="all_reduce_perf", sizes=[4], iters=5, env={})
    assert shlex.split(line) == ["srun", "-N", "2", "-w", "a;reboot,b", "all_reduce_perf", "-n", "5"]
    with pytest.raises(ValueError, match="unknown field"):
        nccltests.command("srun {gpus}", hosts=["a"], ranks_per_host=1, binary="x", sizes=[4], iters=1, env={})


def test_a_complete_run_that_did_not_pass_is_a_problem() -> None:
    """Wrong results in-place only, or an average under NCCL_TESTS_MIN_BW: the output is whole, but the run
    failed; the smoke test never passes it on figures alone, whatever exit status the launcher passed on."""
    head = ("#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n")
    wrong = head + "  8  2  float  sum  -1  10.5  0.00  0.00  0  10.4  0.00  0.00  3\n" \
        "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0 \n"
    rows, _avg, problem = nccltests.rows(wrong, 2)
    assert problem and problem.startswith("wrong results") and rows[0].wrong == 3
    slow = head + "  8  2  float  sum  -1  10.5  0.00  0.00  0  10.4  0.00  0.00  0\n" \
        "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0 FAILED\n"
    _rows, _avg, problem = nccltests.rows(slow, 2)
    assert problem and problem.startswith("below minimum bandwidth")


def test_a_run_that_lists_fewer_ranks_than_processes_started_is_a_problem() -> None:
    """A real 8-rank run read as the launch of 16 processes: 8 never joined, so its figures are those of a
    smaller job. As many ranks as processes, or more (several GPUs per process), is no problem."""
    text = (SAMPLES / "all_reduce_perf-4.txt").read_text()
    assert len({d.rank for d in parse_nccl_tests(text).devices}) == 8
    _rows, _avg, problem = nccltests.rows(text, 16)
    assert problem == "nccl-tests lists 8 ranks, fewer than the 16 processes started"
    headerless = (SAMPLES / "all_reduce_perf-10-old-error-column.txt").read_text()
    assert nccltests.rows(headerless, 8)[2] == "incomplete; missing: column header (#  size  count  type ...)"
    for started in (8, 2):
        assert nccltests.rows(text, started)[2] is None
