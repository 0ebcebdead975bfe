"""A launch whose task srun says could not start (exit code 2, its `execve()` line lost): each host is looked at
again in a real `sh` for the program. The one without it is named; a host that cannot be looked at gets a
second try, and one that still cannot is named as such, never as a parse error of the launcher's output."""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from pathlib import Path

from provisioner.load.hostplans import resolve
from provisioner.load.inventory import load_inventory
from provisioner.load.playbook import load_playbook
from provisioner.run.transport import CommandFailed, ExecResult, framed
from provisioner.smoke import nccl_run, nccltests
from provisioner.smoke.settings import Settings
from provisioner.smoke.targets import Target, targets_from_plans

SRUN_SAYS = "srun: error: gpu02: task 1: Exited with exit code 2\n"


def _targets(tmp_path: Path) -> list[Target]:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  children:\n    gpu:\n      hosts:\n"
                         "        gpu01: {ansible_host: 198.18.1.1}\n        gpu02: {ansible_host: 198.18.1.2}\n")
    playbook = tmp_path / "site.yml"
    playbook.write_text("- hosts: gpu\n  resources: []\n")
    return targets_from_plans(resolve(load_playbook(playbook), load_inventory(inventory)))


def _bin(tmp_path: Path, name: str, programs: dict[str, str]) -> str:
    folder = tmp_path / name
    folder.mkdir()
    for program, body in programs.items():
        (folder / program).write_text(f"#!/bin/sh\n{body}\n")
        (folder / program).chmod(0o755 | stat.S_IXUSR)
    return f"{folder}:{os.environ['PATH']}"


class Node:
    """A host's shell: the script run by `sh` with this host's PATH; `fails` execs fail first, as a busy or
    lost session does."""

    def __init__(self, path: str, fails: int = 0) -> None:
        self.path, self.fails, self.calls = path, fails, 0

    def exec(self, script: str, *, timeout: float | None = None, ticks: float | None = None) -> ExecResult:
        # Without ticks the transport ends a probe script's input at once, and its watchdog reads that as the
        # connection gone and stops the probe: on a busy node before it has answered.
        assert ticks or "__fn_budget=" not in script, "a probe script is run without ticks"
        self.calls += 1
        if self.calls <= self.fails:
            raise CommandFailed("gpu02: the exec did not finish within 30 s")
        # A probe script's standard input stays open while it runs, as the transport keeps it (ticks; its
        # end tells the script the connection is gone); any other script's ends with it.
        with tempfile.TemporaryFile("w+") as errors:
            proc = subprocess.Popen(["sh", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
                                    text=True, env={**os.environ, "PATH": self.path})
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(framed(script))
            proc.stdin.flush()
            if "__fn_budget=" not in script:
                proc.stdin.close()
            out = proc.stdout.read()
            code = proc.wait(timeout=30)
            if not proc.stdin.closed:
                proc.stdin.close()
            errors.seek(0)
            return ExecResult(out, errors.read(), code, 0.1)


def _launch(tmp_path: Path, gpu02: Node, srun: str = f"printf '{SRUN_SAYS}' >&2; exit 2") -> nccl_run.Result:
    targets = _targets(tmp_path)
    settings = Settings(runner="nccl-tests", launcher="srun", timeout=30)
    chosen = nccltests.choose(settings, "gpu01", False, {"srun": "/usr/bin/srun"}, ())
    # The launch host runs a stand-in srun that prints what srun prints when a task's program is gone.
    gpu01 = Node(_bin(tmp_path, "gpu01", {"srun": srun, "all_reduce_perf": "exit 0"}))
    nodes = {"gpu01": gpu01, "gpu02": gpu02}
    return nccl_run.run(targets, settings, 1, chosen, targets[0],
                        lambda target: nodes[target.name])  # type: ignore[arg-type,return-value]


def test_the_host_without_the_program_is_named(tmp_path: Path) -> None:
    result = _launch(tmp_path, Node(_bin(tmp_path, "gpu02", {})))
    assert (result.verdict, result.reason) == ("failed", "gpu02: all_reduce_perf not found on PATH")


def test_a_host_that_cannot_be_looked_at_once_gets_a_second_try(tmp_path: Path) -> None:
    gpu02 = Node(_bin(tmp_path, "gpu02", {}), fails=1)
    result = _launch(tmp_path, gpu02)
    assert (result.verdict, result.reason) == ("failed", "gpu02: all_reduce_perf not found on PATH")
    assert gpu02.calls == 2


def test_a_host_srun_named_that_cannot_be_looked_at_is_said_so(tmp_path: Path) -> None:
    result = _launch(tmp_path, Node(_bin(tmp_path, "gpu02", {}), fails=2))
    assert result.verdict == "failed" and list(result.failed_hosts) == ["gpu02"]
    assert result.reason.startswith("gpu02: the task ended as a program that could not start (srun), and the "
                                    "host could not be checked again for all_reduce_perf: ")
    assert "parse" not in result.reason


# Slurm 22.05's srun on a host with no slurm.conf and no DNS SRV record for a controller (configless), verbatim.
NO_CONTROLLER = ("srun: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host\n"
                 "srun: error: fetch_config: DNS SRV lookup failed\n"
                 "srun: error: _establish_config_source: failed to fetch config\n"
                 "srun: fatal: Could not establish a configuration source\n")


def test_a_launcher_that_fails_before_any_rank_is_quoted_not_parsed(tmp_path: Path) -> None:
    result = _launch(tmp_path, Node(_bin(tmp_path, "gpu02", {"all_reduce_perf": "exit 0"})),
                     srun=f"printf '{NO_CONTROLLER}' >&2; exit 1")
    assert result.verdict == "failed" and "parse" not in result.reason
    assert result.reason.startswith("srun exited 1 before all_reduce_perf printed a result: "), result.reason
    assert result.reason.endswith("srun: fatal: Could not establish a configuration source"), result.reason
