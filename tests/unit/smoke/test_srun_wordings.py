"""What the smoke test reads in srun's and slurmstepd's failure lines, in every release from 20.11 to 25.11.

Two kinds of case. Real output, from tests/samples/slurm (sources in tests/samples/INDEX.md) and
tests/samples/logs. And lines built from the format strings of Slurm's source, the same in every release
unless a row says otherwise: slurmstepd's `execve(): %s: %m` and its exit status errno (exec_task(),
src/slurmd/slurmstepd/task.c), srun's `%s: %s %s: Exited with exit code %d` with a hostlist, `task` or
`tasks` and a task range (_task_finish(), src/srun/launch.c; src/plugins/launch/slurm/launch_slurm.c
before 23.02), srun's `Can not execute %s` (src/srun/opt.c), `Job step aborted` (src/api/step_launch.c),
the PMIx plugin's `%s: %s: %s [%d]: %s:%d: pmi/pmix: can not load PMIx library` (src/plugins/mpi/pmix)
and the plugin loader's wordings (src/common/plugin.c, slurm_mpi.c, src/interfaces/mpi.c). Whatever the
wording, a run that failed is never a pass."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from provisioner.smoke import nccl_run, nccltests
from provisioner.smoke.settings import Settings
from tests.unit.smoke.test_launch_recheck import Node, _targets

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


# output, srun's exit status, missing_program, tasks_failed_to_start, pmix_unusable
CASES = [
    # real
    (sample("slurm/srun-1-execve-not-found-tasks-range-cut.txt"), 2,
     ("mkdir", ["bear-pg0104u25b"]), ["bear-pg0104u25b"], False),
    (sample("slurm/srun-2-execve-permission-denied-exit-13.txt"), 13, None, [], False),
    (sample("slurm/srun-3-mpi-list-then-pmix-v5-cannot-load.txt"), 1, None, [], True),
    (sample("slurm/srun-4-old-no-pmix-plugin.txt"), 1, None, [], True),
    (sample("slurm/srun-5-task-launch-prolog-failed-step-aborted.txt"), 1, None, [], False),
    (sample("logs/slurm-time-limit-1.txt"), 1, None, [], False),
    # from the format strings
    ("slurmstepd: error: execve(): /opt/nccl-tests/build/all_reduce_perf: No such file or directory\n"
     "srun: error: gpu[02-03]: tasks 8-15: Exited with exit code 2\n", 2,
     ("/opt/nccl-tests/build/all_reduce_perf", ["gpu02", "gpu03"]), ["gpu02", "gpu03"], False),
    ("srun: error: gpu02: tasks 8,10-11: Exited with exit code 2\nsrun: error: gpu01: tasks 0-7: Terminated\n"
     "srun: Force Terminated StepId=7.0\n", 143, None, ["gpu02"], False),  # --kill-on-bad-exit
    ("srun: fatal: Can not execute all_reduce_perf\n", 1, ("all_reduce_perf", []), [], False),
    ("slurmstepd: error: execve(): bad interpreter(/usr/bin/python3): No such file or directory\n"
     "srun: error: gpu02: task 1: Exited with exit code 2\n", 2, None, ["gpu02"], False),
    ("srun: error:  mpi/pmix_v3: init: (null) [0]: mpi_pmix.c:139: pmi/pmix: can not load PMIx library\n"
     "srun: error: Couldn't load specified plugin name for mpi/pmix: Plugin init() callback failed\n"
     "srun: error: cannot create mpi context for mpi/pmix\n"
     "srun: error: invalid MPI type 'pmix', --mpi=list for acceptable types\n", 1, None, [], True),  # 20.11
    ("srun: error: plugin_load_from_file: dlopen(/usr/lib64/slurm/mpi_pmix_v4.so): libpmix.so.2: cannot open "
     "shared object file: No such file or directory\n"
     "srun: error: Couldn't load specified plugin name for mpi/pmix_v4: Dlopen of plugin file failed\n"
     "srun: error: MPI: Cannot create context for mpi/pmix_v4\n", 1, None, [], True),
    ("slurmstepd: error:  mpi/pmix_v4: pmixp_p2p_send: gpu02 [1]: pmixp_utils.c:467: send failed, rc=2\n"
     "srun: error: gpu02: task 1: Killed\n", 137, None, [], False),  # PMIx failed after the tasks started
    ("srun: error: Node failure on gpu02\nsrun: error: gpu01: task 0: Killed\n", 1, None, [], False),
    ("srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n"
     "slurmstepd: error: *** STEP 7.0 ON gpu01 CANCELLED AT 2025-01-01T00:00:00 DUE TO TIME LIMIT ***\n",
     1, None, [], False),
    ("srun: error: Unable to create step for job 7: Requested node configuration is not available\n", 1,
     None, [], False),
    ("srun: error: gpu02: task 1: Out Of Memory\n", 1, None, [], False),
    ("srun: error: gpu02: task 1: Exited with exit code 2\n", 0, None, [], False),  # exit 0: nothing to read
]


@pytest.mark.parametrize(("output", "code", "missing", "unstarted", "pmix"), CASES)
def test_each_wording_is_read(output: str, code: int, missing: object, unstarted: list[str], pmix: bool) -> None:
    assert nccltests.missing_program(output, code) == missing
    assert nccltests.tasks_failed_to_start(output, code) == unstarted
    assert nccltests.pmix_unusable(output, code) is pmix


def _srun(tmp_path: Path, output: str, code: int) -> Node:
    folder = tmp_path / "launch"
    folder.mkdir()
    (folder / "said").write_text(output)
    for program, body in {"srun": f"cat {folder / 'said'}; exit {code}", "all_reduce_perf": "exit 0"}.items():
        (folder / program).write_text(f"#!/bin/sh\n{body}\n")
        (folder / program).chmod(0o755 | stat.S_IXUSR)
    return Node(f"{folder}:{os.environ['PATH']}")


def _run(tmp_path: Path, output: str, code: int) -> nccl_run.Result:
    targets = _targets(tmp_path)
    settings = Settings(runner="nccl-tests", launcher="srun", timeout=30)
    chosen = nccltests.choose(settings, "gpu01", False, {"srun": "/usr/bin/srun"}, ())
    node = _srun(tmp_path, output, code)
    return nccl_run.run(targets, settings, 1, chosen, targets[0], lambda target: node)  # type: ignore[arg-type,return-value]


@pytest.mark.parametrize(("output", "code"), [(output, code) for output, code, *_ in CASES if code])
def test_no_failure_is_a_pass(tmp_path: Path, output: str, code: int) -> None:
    assert _run(tmp_path, output, code).verdict == "failed"


def _copy(host: str, pid: int, gpus: int) -> str:
    """A complete run of one process driving `gpus` GPUs, as nccl-tests prints it with no peers."""
    lines = sample("all_reduce_perf-30-h200-one-gpu.txt").splitlines(keepends=True)
    ranks = "".join(f"#  Rank {r:2d} Group  0 Pid {pid:6d} on {host:>10} device {r:2d} [0000:00:06] NVIDIA H200\n"
                    for r in range(gpus))
    return "".join(ranks if line.startswith("#  Rank") else line for line in lines)


@pytest.mark.parametrize("gpus", [1, 8])
def test_copies_that_each_ran_alone_are_not_a_pass_even_when_srun_exits_0(tmp_path: Path, gpus: int) -> None:
    """A build with MPI started without PMI (srun without --mpi, as after a PMIx plugin that would not load)
    runs one job per process: each passes alone, on its own GPUs, and srun exits 0."""
    output = _copy("gpu01", 1327, gpus) + _copy("gpu02", 2211, gpus)
    result = _run(tmp_path, output, 0)
    assert result.verdict == "failed"
    assert "2 processes each ran a job of their own, not one job of 2 ranks" in result.reason
    # One process of the same output is a run of its own, read as before.
    assert nccltests.rows(_copy("gpu01", 1327, gpus), gpus)[2] is None


# A program that is there but may not be executed: output, exit status, not_executable. The real sample, then
# slurmstepd's `execve(): %s: %m` with EACCES (13) as the task's status, Open MPI's help texts
# (orterun:exe-not-accessible: "lacked permissions to execute" in 4.x, "could not access or execute" before)
# and the shells' own wordings with their status 126.
DENIED = [
    (sample("slurm/srun-2-execve-permission-denied-exit-13.txt"), 13, ("start-agent.sh", ["my-node01"])),
    ("slurmstepd: error: execve(): all_reduce_perf: Permission denied\n"
     "srun: error: gpu[02-03]: tasks 8-15: Exited with exit code 13\nsrun: error: gpu01: tasks 0-7: Killed\n", 13,
     ("all_reduce_perf", ["gpu02", "gpu03"])),
    ("mpirun was unable to launch the specified application as it lacked\npermissions to execute an executable:\n\n"
     "Executable: /opt/nccl-tests/build/all_reduce_perf\nNode: gpu02\n\nwhile attempting to start process rank 8.\n",
     1, ("/opt/nccl-tests/build/all_reduce_perf", ["gpu02"])),
    ("mpirun was unable to launch the specified application as it could not access\nor execute an executable:\n\n"
     "Executable: all_reduce_perf\nNode: gpu03\n\nwhile attempting to start process rank 0.\n", 1,
     ("all_reduce_perf", ["gpu03"])),
    ("bash: line 1: /opt/nccl-tests/build/all_reduce_perf: Permission denied\n", 126,
     ("/opt/nccl-tests/build/all_reduce_perf", [])),
    ("sh: 1: all_reduce_perf: Permission denied\n", 126, ("all_reduce_perf", [])),
    # Not a program refused: a redirection the shell could not open (status 1), ssh's refusal, success.
    ("bash: line 1: /var/log/out.txt: Permission denied\n", 1, None),
    ("user@gpu02: Permission denied (publickey).\n", 255, None),
    ("slurmstepd: error: execve(): all_reduce_perf: Permission denied\n", 0, None),
]


@pytest.mark.parametrize(("output", "code", "expected"), DENIED)
def test_a_program_that_may_not_be_executed_is_not_a_missing_one(output: str, code: int, expected: object) -> None:
    assert nccltests.not_executable(output, code) == expected
    if expected is not None:
        assert nccltests.missing_program(output, code) is None


def test_the_host_that_refused_the_program_is_named_with_the_fix(tmp_path: Path) -> None:
    output = ("slurmstepd: error: execve(): all_reduce_perf: Permission denied\n"
              "srun: error: gpu02: task 1: Exited with exit code 13\nsrun: error: gpu01: task 0: Killed\n")
    result = _run(tmp_path, output, 13)
    assert (result.verdict, result.reason) == ("failed", "gpu02: all_reduce_perf is not executable (Permission denied)")
    assert list(result.failed_hosts) == ["gpu02"]
    [finding] = result.findings
    assert finding.hosts == ("gpu02",) and "chmod +x" in finding.fix and "noexec" in finding.fix
