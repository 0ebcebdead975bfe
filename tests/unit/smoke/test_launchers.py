"""nccl-tests launchers: which one runs where, the srun line, programs missing on a host, and the lab's
all_reduce_perf stand-in read by the unchanged nccl-tests parser."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from provisioner.lab import emulation
from provisioner.load.inventory import Host
from provisioner.parsers.nccl_tests import parse_nccl_tests
from provisioner.smoke import nccl_run, nccltests, preflight, programs
from provisioner.smoke.settings import Settings
from tests.unit.smoke._helpers import facts, target

HERE = Path(__file__).parent
EMULATION_SAMPLE = HERE / "all_reduce_perf-lab-emulation.txt"


def test_the_stand_ins_output_is_read_by_the_nccl_tests_parser_as_it_is() -> None:
    text = EMULATION_SAMPLE.read_text()
    parsed = parse_nccl_tests(text)
    assert parsed.complete and parsed.verdict == "ok"
    assert [r.size for r in parsed.rows] == [1 << 20, 2 << 20, 4 << 20]
    assert [d.rank for d in parsed.devices] == [0, 1]
    assert parsed.avg_busbw == pytest.approx(0.430834)
    rows, avg, problem = nccltests.rows(text, 2)
    assert problem is None and avg == parsed.avg_busbw and [r.busbw for r in rows] == [0.15, 0.27, 0.35]
    assert nccltests.emulation_note(text) == ("fabnet lab emulation of nccl-tests all_reduce_perf: gloo all-reduce "
                                              "over TCP, not NCCL")
    assert nccltests.emulation_note((HERE.parents[1] / "samples" / "all_reduce_perf-4.txt").read_text()) is None


def test_the_stand_in_names_the_first_node_of_a_slurm_hostlist() -> None:
    namespace: dict[str, object] = {}
    exec(compile(emulation.ALL_REDUCE_PERF_SOURCE.read_text(), "all_reduce_perf.py", "exec"), namespace)
    first = namespace["first_node"]
    assert callable(first)
    assert first("gpu[01-03,07],cpu1") == "gpu01"
    assert first("gpu07,gpu01") == "gpu07"
    assert first("node[9-10]") == "node9"


def test_the_wrapper_prefers_the_shared_python_and_quotes_it() -> None:
    text = emulation.all_reduce_perf_wrapper("/opt/a b/python3")
    assert "py='/opt/a b/python3'" in text and emulation.ALL_REDUCE_PERF_LIB in text
    assert subprocess.run(["sh", "-n"], input=text, text=True).returncode == 0


@pytest.mark.parametrize(("launcher", "controller", "srun_found", "expected"), [
    ("auto", True, None, "srun"),
    ("auto", False, "/usr/bin/srun", "srun"),
    ("auto", False, None, "mpirun"),
    ("mpirun", True, "/usr/bin/srun", "mpirun"),
    ("srun", False, None, "srun"),
])
def test_which_launcher(launcher: str, controller: bool, srun_found: str | None, expected: str) -> None:
    settings = Settings(runner="nccl-tests", launcher=launcher)  # type: ignore[arg-type]
    chosen = nccltests.choose(settings, "gpu01", controller, {"srun": srun_found, "mpirun": "/usr/bin/mpirun"}, ())
    assert chosen.launcher == expected


def test_srun_line_quotes_every_value_and_asks_for_pmix_only_where_slurm_has_it() -> None:
    targets = [target("gpu01"), target("gpu0;reboot")]
    settings = Settings(runner="nccl-tests", launcher="srun", iters=3, timeout=60)
    for plugins, pmix in (((), False), (("none", "pmi2", "pmix"), True)):
        chosen = nccltests.choose(settings, "gpu01", True, {"srun": "/usr/bin/srun"}, plugins)
        exported, _, line = nccl_run.launch_line(targets, settings, 1, chosen).removesuffix(" 2>&1").partition("; ")
        words = shlex.split(line)
        assert words[:4] == ["timeout", "-k", "5", "54"]
        srun = words.index("srun")
        assert ("--mpi=pmix" in words) is pmix
        assert words[words.index("-w") + 1] == "gpu01,gpu0;reboot"  # one word: names, not addresses
        assert words[words.index("-N") + 1] == "2" and "--ntasks-per-node=1" in words[srun:]
        assert words[words.index("all_reduce_perf"):] == ["all_reduce_perf", "-b", str(min(settings.sizes)), "-e",
                                                          str(max(settings.sizes)), "-f", "2", "-g", "1", "-n", "3"]
        assert shlex.split(exported)[0] == "export" and "GLOO_SOCKET_IFNAME=eth1" in shlex.split(exported)


def test_srun_runs_on_the_controller_and_the_binary_is_looked_for_everywhere() -> None:
    targets = [target("gpu01"), target("gpu02"), target("gpu03")]
    settings = Settings(runner="nccl-tests")
    plan = nccl_run.make_plan(targets, settings, Host(name="gpu02", address="198.18.1.2"))
    assert plan.launch_host.name == "gpu02" and plan.inside and plan.controller
    assert plan.tools == {"gpu01": ("all_reduce_perf",), "gpu02": ("srun", "all_reduce_perf"),
                          "gpu03": ("all_reduce_perf",)}
    outside = nccl_run.make_plan(targets, settings, Host(name="head", address="198.18.1.9"))
    assert outside.launch_host.name == "head" and not outside.inside
    assert "head" not in outside.tools
    nothing = nccl_run.make_plan(targets, settings, None)
    assert nothing.launch_host.name == "gpu01" and nothing.tools["gpu01"] == ("srun", "mpirun", "all_reduce_perf")


def test_a_missing_program_is_a_finding_that_names_its_host() -> None:
    targets = [target("gpu01"), target("gpu02")]
    got = {name: facts(name) for name in ("gpu01", "gpu02")}
    got["gpu01"].tools = {"srun": "/usr/bin/srun", "all_reduce_perf": "/usr/local/bin/all_reduce_perf"}
    got["gpu02"].tools = {"all_reduce_perf": None}
    required = {"gpu01": ("srun", "all_reduce_perf"), "gpu02": ("all_reduce_perf",)}
    findings = preflight.evaluate(targets, got, runner="nccl-tests", backend="gloo", tools=required)
    assert [(f.check, f.hosts, f.message) for f in findings] == [
        ("tools", ("gpu02",), "gpu02: all_reduce_perf not found on PATH")]


def test_the_tools_probe_runs_and_reads_back(tmp_path: Path) -> None:
    tool = tmp_path / "srun"
    tool.write_text("#!/bin/sh\nprintf 'MPI plugin types are...\\n\\tnone\\n\\tpmi2\\n\\tpmix\\n"
                    "specific pmix plugin versions available: pmix_v4\\n'\n")
    tool.chmod(0o755)
    probe = programs.tools_probe(["srun", "no-such-program-here", "sh"])
    out = subprocess.run(["sh", "-c", probe.command], capture_output=True, text=True,
                         env={"PATH": f"{tmp_path}:/usr/bin:/bin"}).stdout
    found, plugins = programs.parse_tools(out)
    assert found["srun"] == str(tool) and found["no-such-program-here"] is None and found["sh"]
    assert plugins == ("none", "pmi2", "pmix")


@pytest.mark.parametrize(("output", "code", "expected"), [
    ("bash: line 1: srun: command not found\n", 127, ("srun", [])),
    ("sh: 1: mpirun: not found\n", 127, ("mpirun", [])),
    ("slurmstepd: error: execve(): all_reduce_perf: No such file or directory\n"
     "srun: error: gpu02: task 1: Exited with exit code 2\nsrun: error: gpu01: task 0: Killed\n", 2,
     ("all_reduce_perf", ["gpu02"])),
    ("mpirun was unable to find the specified executable file, and therefore\ndid not launch the job.\n\n"
     "   Executable: all_reduce_perf\n   Node: gpu03\n", 1, ("all_reduce_perf", ["gpu03"])),
    ("# Avg bus bandwidth    : 1.2\n", 0, None),
    ("Test NCCL failure common.cu:1 'unhandled system error'\n", 3, None),
])
def test_missing_program_in_launcher_output(output: str, code: int, expected: object) -> None:
    assert nccltests.missing_program(output, code) == expected


@pytest.mark.parametrize(("output", "code", "expected"), [
    # The step ended at once (--kill-on-bad-exit) and the task's execve line never came: worth a look.
    ("srun: error: gpu03: task 2: Exited with exit code 2\n", 2, ["gpu03"]),
    ("srun: error: gpu03: task 2: Exited with exit code 127\nsrun: error: gpu01: task 0: Killed\n", 1, ["gpu03"]),
    # The other ranks printed their header before the step was killed: the host is still worth a look.
    ("# nThread 1 nGpus 1 minBytes 1048576\n#  size  count\nsrun: error: gpu03: task 2: Exited with exit code 2\n",
     2, ["gpu03"]),
    ("srun: error: gpu03: task 2: Exited with exit code 1\n", 1, []),
    ("", 0, []),
])
def test_tasks_that_failed_to_start(output: str, code: int, expected: list[str]) -> None:
    assert nccltests.tasks_failed_to_start(output, code) == expected


def test_a_pmix_plugin_that_cannot_load_is_dropped_not_a_parse_error() -> None:
    output = ("srun: error:  mpi/pmix_v4: init: (null) [0]: mpi_pmix.c:195: pmi/pmix: can not load PMIx library\n"
              "srun: error: Couldn't load specified plugin name for mpi/pmix: Plugin init() callback failed\n")
    assert nccltests.pmix_unusable(output, 1)
    assert not nccltests.pmix_unusable("# Avg bus bandwidth    : 1\n", 0)
    chosen = nccltests.choose(Settings(launcher="srun"), "gpu01", True, {}, ("pmix",))
    assert "--mpi=pmix" in chosen.template and "--mpi" not in nccltests.without_pmix(chosen).template
