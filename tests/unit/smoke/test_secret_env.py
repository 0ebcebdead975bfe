"""Secrets of the NCCL environment a playbook renders: never shown in smoke's reports, never on a command line
of the node (every user there can read those), yet in the environment of the ranks and the launcher."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.load.hostplans import resolve
from provisioner.load.inventory import load_inventory
from provisioner.load.playbook import load_playbook
from provisioner.run.transport import ExecResult
from provisioner.smoke import nccl_run, nccltests, plan
from provisioner.smoke.output import to_json
from provisioner.smoke.run import SmokeOutcome
from provisioner.smoke.settings import Settings
from provisioner.smoke.targets import Target, targets_from_plans
from tests.unit.smoke._helpers import HERE

TOKEN = "nccl-plugin-s3cr3t-0123456789"
PASSWORD = "hunter2-in-a-profile"
VAULTED = "rendered-from-a-vault-var"
SECRETS = (TOKEN, PASSWORD, VAULTED)


def _targets(tmp_path: Path) -> list[Target]:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  children:\n    gpu:\n      hosts:\n"
                         "        gpu01: {ansible_host: 198.18.1.1}\n        gpu02: {ansible_host: 198.18.1.2}\n")
    playbook = tmp_path / "site.yml"
    playbook.write_text(
        "- hosts: gpu\n"
        "  vars:\n"
        f"    vault_plugin_key: {VAULTED}\n"
        "  resources:\n"
        "    - file:\n"
        "        path: /etc/nccl.conf\n"
        f"        content: \"NCCL_SOCKET_IFNAME=eth1\\nNCCL_NET_PLUGIN_TOKEN={TOKEN}\\n\"\n"
        "    - file:\n"
        "        path: /etc/profile.d/nccl-auth.sh\n"
        "        sensitive: true\n"
        f"        content: \"export NCCL_IB_HCA=mlx5_0\\nexport NCCL_PLUGIN_LOGIN={PASSWORD}\\n\"\n"
        "    - file:\n"
        "        path: /etc/profile.d/nccl-plugin.sh\n"
        "        content: \"export NCCL_PLUGIN_KEYFILE={{ vault_plugin_key }}\\nexport NCCL_DEBUG=WARN\\n\"\n")
    return targets_from_plans(resolve(load_playbook(playbook), load_inventory(inventory)))


def test_secret_values_of_the_rendered_environment_are_known(tmp_path: Path) -> None:
    first = _targets(tmp_path)[0]
    assert first.env["NCCL_NET_PLUGIN_TOKEN"] == TOKEN and first.env["NCCL_PLUGIN_KEYFILE"] == VAULTED
    assert {"NCCL_NET_PLUGIN_TOKEN", "NCCL_PLUGIN_LOGIN", "NCCL_PLUGIN_KEYFILE"} <= first.secret_env
    assert "NCCL_SOCKET_IFNAME" not in first.secret_env  # beside a token, but no secret itself
    # A file rendered from a password variable is sensitive as a whole, as its diff is.
    assert {"NCCL_IB_HCA", "NCCL_DEBUG"} <= first.secret_env


def _spy_path(tmp_path: Path, programs: tuple[str, ...]) -> tuple[dict[str, str], Path, Path]:
    """A PATH whose `programs` log their command lines to one file (then run the real program), and an
    `mpirun` that logs the environment it was given to another."""
    spies = tmp_path / "bin"
    spies.mkdir()
    argv_log, env_log = tmp_path / "argv.log", tmp_path / "env.log"
    for name in programs:
        real = shutil.which(name)
        assert real is not None, name
        (spies / name).write_text(f'#!/bin/sh\nprintf "%s\\n" "$0 $*" >> {argv_log}\nexec {real} "$@"\n')
    (spies / "mpirun").write_text(f'#!/bin/sh\nprintf "%s\\n" "$0 $*" >> {argv_log}\nenv >> {env_log}\n'
                                  f"cat {HERE / 'all_reduce_perf-lab-emulation.txt'}\n")
    for spy in spies.iterdir():
        spy.chmod(spy.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{spies}:{os.environ['PATH']}"}, argv_log, env_log


def test_nccl_tests_launch_keeps_secrets_off_command_lines_and_out_of_reports(tmp_path: Path) -> None:
    targets = _targets(tmp_path)
    settings = Settings(runner="nccl-tests", launcher="mpirun", timeout=30)
    chosen = nccltests.choose(settings, "gpu01", False, {"mpirun": "/usr/bin/mpirun"}, ())
    ran: list[str] = []
    environment, argv_log, env_log = _spy_path(tmp_path, ("env", "timeout"))

    class Session:
        def exec(self, script: str, *, timeout: float | None = None) -> ExecResult:
            ran.append(script)  # run as the node's shell would run it, with the spies on PATH
            done = subprocess.run(["sh", "-s"], input=script, capture_output=True, text=True, env=environment,
                                  timeout=30)
            return ExecResult(done.stdout, done.stderr, done.returncode, 0.1)

    result = nccl_run.run(targets, settings, 1, chosen, targets[0], lambda target: Session())  # type: ignore[arg-type,return-value]
    assert result.verdict == "pass", result.reason
    assert ran and all(secret in env_log.read_text() for secret in (TOKEN, PASSWORD, VAULTED))
    assert not any(secret in argv_log.read_text() for secret in SECRETS), argv_log.read_text()
    shown = json.dumps(to_json(SmokeOutcome(hosts=[t.name for t in targets], settings=settings, launch=result.launch),
                               inventory="hosts.yml", playbook="site.yml", limit=None))
    assert "NCCL_NET_PLUGIN_TOKEN=<hidden" in shown and "NCCL_SOCKET_IFNAME=eth1" in shown
    assert not any(secret in shown for secret in SECRETS), shown


NODE = """
import argparse, json, os
p = argparse.ArgumentParser()
for a in ("--rank", "--world", "--local-rank", "--master", "--port", "--backend", "--sizes", "--iters",
          "--warmup", "--timeout", "--deadline", "--events", "--pairs", "--pair-bytes"):
    p.add_argument(a)
a = p.parse_args()
with open(a.events, "a") as f:
    f.write(json.dumps({"rank": int(a.rank), "event": "done", "env": dict(os.environ)}) + "\\n")
"""


@pytest.mark.skipif(shutil.which("setsid") is None, reason="needs util-linux setsid")
def test_torch_ranks_get_secrets_in_their_environment_not_on_a_command_line(tmp_path: Path) -> None:
    targets = [Target(t.name, t.host, python=sys.executable, data_ifaces=("eth1",), env=t.env,
                      secret_env=t.secret_env) for t in _targets(tmp_path)]
    environment, argv_log, _ = _spy_path(tmp_path, ("env", "setsid"))
    job = plan.Job(run_id="secrets-test", hosts=tuple(targets), master="198.18.1.1", port=29500, backend="gloo",
                   ranks_per_host=1, sizes=(4,), iters=1, warmup=0, timeout=10.0, deadline=12.0)
    script = plan.launch_script(job, targets[0], node_script=NODE)
    done = subprocess.run(["sh", "-s"], input=script, capture_output=True, text=True, env=environment, timeout=30)
    events = plan.parse_host_output(done.stdout).events[0]
    given = next(e["env"] for e in events if e.get("event") == "done")
    assert given["NCCL_NET_PLUGIN_TOKEN"] == TOKEN and given["NCCL_PLUGIN_LOGIN"] == PASSWORD
    assert "setsid" in argv_log.read_text()  # the spy saw the rank start
    assert not any(secret in argv_log.read_text() for secret in SECRETS), argv_log.read_text()


def test_preflight_findings_hide_values_of_a_sensitive_env_file(tmp_path: Path) -> None:
    from provisioner.load.ansible_tags import HIDDEN
    from provisioner.smoke import preflight
    from tests.unit.smoke._helpers import facts

    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    gpu01: {ansible_host: 198.18.1.1}\n")
    playbook = tmp_path / "site.yml"
    playbook.write_text(
        "- hosts: all\n  resources:\n"
        "    - file:\n        path: /etc/profile.d/nccl-site.sh\n        sensitive: true\n"
        "        content: \"export NCCL_SOCKET_IFNAME==tenant-b-vlan\\nexport NCCL_IB_HCA==mlx5_tenant_b:1\\n"
        "export GLOO_SOCKET_IFNAME=tenant-b-gloo\\n\"\n"
        "    - file:\n        path: /etc/nccl.conf\n        content: \"NCCL_DEBUG=WARN\\n\"\n")
    (found,) = targets_from_plans(resolve(load_playbook(playbook), load_inventory(inventory)))
    assert {"NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "GLOO_SOCKET_IFNAME"} <= found.secret_env
    findings = preflight.check_env([found], {"gpu01": facts("gpu01")})
    assert {f.message.split()[0] for f in findings} == {"NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "GLOO_SOCKET_IFNAME"}
    shown = json.dumps([f.to_json() for f in findings])
    assert "tenant" not in shown, shown
    assert all(HIDDEN in f.message and "gpu01" in f.message for f in findings)
    # Outside a sensitive file the value is what an operator needs to fix it, and it is shown.
    plain = Target(name="gpu01", host=found.host, env={"NCCL_SOCKET_IFNAME": "=eth9"})
    (finding,) = preflight.check_env([plain], {"gpu01": facts("gpu01")})
    assert "'eth9'" in finding.message
