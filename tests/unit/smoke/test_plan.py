"""Launch planning: ranks, environment, quoting; and the launch/kill scripts run for real in a local shell."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from provisioner.smoke import plan
from tests.unit.smoke._helpers import target

# A stand-in for the torch program with the same command line and event format: it lets the shell
# plumbing (upload, setsid, pids, events, kill) be exercised here without torch or a network.
FAKE_NODE = """
import argparse, json, os, sys, time
p = argparse.ArgumentParser()
for a in ("--rank", "--world", "--local-rank", "--master", "--port", "--backend", "--sizes", "--iters",
          "--warmup", "--timeout", "--deadline", "--events", "--pairs", "--pair-bytes"):
    p.add_argument(a)
a = p.parse_args()
def emit(**r):
    with open(a.events, "a") as f:
        f.write(json.dumps({"rank": int(a.rank), **r}) + "\\n")
emit(event="started", pid=os.getpid(), pgid=os.getpgid(0))
if os.environ.get("FAKE_HANG") == "1":
    time.sleep(600)
if os.environ.get("FAKE_CRASH") == a.rank:
    sys.stderr.write("about to die\\n"); sys.stderr.flush()
    os.kill(os.getpid(), 9)
for s in a.sizes.split(","):
    emit(event="size", bytes=int(s), seconds=0.001, wrong=0)
print("noise on stdout")
emit(event="done")
"""


def job(**kwargs: object) -> plan.Job:
    values: dict = {"run_id": secrets.token_hex(6), "hosts": (target("gpu01", python=sys.executable),
                                                           target("gpu02", python=sys.executable)),
                    "master": "198.19.1.1", "port": 29500, "backend": "gloo", "ranks_per_host": 2,
                    "sizes": (1 << 20, 2 << 20), "iters": 3, "warmup": 1, "timeout": 10.0, "deadline": 12.0}
    values.update(kwargs)
    return plan.Job(**values)


def test_ranks_are_contiguous_per_host() -> None:
    j = job()
    assert j.world == 4
    assert [(r.rank, r.host, r.local_rank) for r in j.ranks()] == [
        (0, "gpu01", 0), (1, "gpu01", 1), (2, "gpu02", 0), (3, "gpu02", 1)]


def test_env_keeps_gloo_on_the_data_interface() -> None:
    j = job()
    env = plan.rank_env(j, target("gpu01", env={"NCCL_SOCKET_IFNAME": "eth1", "PATH": "/evil", "NCCL_DEBUG": "WARN"}))
    assert env["GLOO_SOCKET_IFNAME"] == "eth1" and env["NCCL_DEBUG"] == "WARN"
    assert "PATH" not in env
    assert plan.rank_env(j, target("gpu01", env={"GLOO_SOCKET_IFNAME": "bond0"}))["GLOO_SOCKET_IFNAME"] == "bond0"


def test_every_value_is_quoted() -> None:
    hostile = target("gpu01", python="python3 $(reboot)", env={"NCCL_DEBUG": "WARN; reboot"})
    script = plan.launch_script(job(hosts=(hostile,)), hostile, node_script="print(1)")
    assert "'python3 $(reboot)'" in script
    assert "'NCCL_DEBUG=WARN; reboot'" in script


def test_bad_run_id_is_refused() -> None:
    try:
        job(run_id="x; rm -rf /")
    except ValueError:
        return
    raise AssertionError("a run id with shell syntax was accepted")


def test_launch_script_runs_ranks_and_reports_events() -> None:
    j = job()
    out = subprocess.run(["sh", "-c", plan.launch_script(j, j.hosts[0], node_script=FAKE_NODE)],
                         capture_output=True, text=True, timeout=30)
    report = plan.parse_host_output(out.stdout)
    assert sorted(report.events) == [0, 1]
    for rank in (0, 1):
        kinds = [e["event"] for e in report.events[rank]]
        assert kinds == ["started", "size", "size", "done", "exit"]
        assert report.events[rank][-1]["status"] == 0
    assert "noise on stdout" in report.outputs[0]
    assert not os.path.exists(j.directory)  # the job removed its own files


def test_a_rank_killed_by_a_signal_leaves_its_exit_status_and_output() -> None:
    """The wrapper reports what the rank cannot: SIGKILL is 128+9 as the shell sees it."""
    j = job()
    script = plan.launch_script(j, j.hosts[0], node_script=FAKE_NODE)
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30,
                         env={**os.environ, "FAKE_CRASH": "1"})
    report = plan.parse_host_output(out.stdout)
    assert [e["event"] for e in report.events[1]] == ["started", "exit"]
    assert report.events[1][-1]["status"] == 137
    assert "about to die" in report.outputs[1]
    assert report.events[0][-1] == {"event": "exit", "status": 0}


def test_pairs_reach_the_rank_command_line() -> None:
    j = job(pairs=(((0, 2),), ((2, 0),)), pair_bytes=4096)
    command = plan.rank_command(j, j.hosts[0], j.ranks()[0])
    assert command[-4:] == ["--pairs", "0-2;2-0", "--pair-bytes", "4096"]
    assert "--pairs" not in plan.rank_command(job(), j.hosts[0], j.ranks()[0])


def test_kill_script_leaves_no_process_behind() -> None:
    j = job()
    env = {**os.environ, "FAKE_HANG": "1"}
    script = plan.launch_script(j, j.hosts[0], node_script=FAKE_NODE).replace("export ", "export FAKE_HANG=1 ", 1)
    launcher = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    pids: list[int] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(pids) < 2:
        time.sleep(0.1)
        try:
            with open(f"{j.directory}/pids") as handle:
                pids = [int(p) for p in handle.read().split()]
        except OSError:
            pass
    assert len(pids) == 2
    time.sleep(0.5)  # let both write their first event
    killed = subprocess.run(["sh", "-c", plan.kill_script(j, j.hosts[0])], capture_output=True, text=True, timeout=30)
    launched, _ = launcher.communicate(timeout=10)  # the launch exec ends once its ranks are dead
    assert plan.parse_host_output(killed.stdout).alive == []
    # The events come back through whichever exec read them last (the launch exec, or the kill).
    report = plan.merge([plan.parse_host_output(launched), plan.parse_host_output(killed.stdout)])
    assert {r: [e["event"] for e in ev] for r, ev in report.events.items()} == {0: ["started"], 1: ["started"]}
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        assert state == "Z", f"rank process {pid} still running"
    assert not os.path.exists(j.directory)


def test_kill_script_reports_a_stopped_rank_before_it_kills_it() -> None:
    """A rank that hangs (here stopped with SIGSTOP, as a debugger or ^Z would; a driver call that never returns
    shows `D`) is read from /proc before the kill: its state and where in the kernel it waits."""
    j = job()
    script = plan.launch_script(j, j.hosts[0], node_script=FAKE_NODE).replace("export ", "export FAKE_HANG=1 ", 1)
    launcher = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "FAKE_HANG": "1"})
    started: dict[int, int] = {}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(started) < 2:
        time.sleep(0.1)
        for rank in (0, 1):
            try:
                first = Path(f"{j.directory}/rank-{rank}.events").read_text().split("\n", 1)[0]
                started[rank] = json.loads(first)["pid"]
            except (OSError, ValueError, KeyError):
                pass
    assert len(started) == 2
    os.kill(started[1], signal.SIGSTOP)
    killed = subprocess.run(["sh", "-c", plan.kill_script(j, j.hosts[0])], capture_output=True, text=True, timeout=30)
    launcher.communicate(timeout=10)
    report = plan.parse_host_output(killed.stdout)
    assert report.states[1] == ("T", "do_signal_stop"), killed.stdout
    assert report.states[0][0] == "S" and report.alive == []


def test_parse_host_output_survives_a_cut_line() -> None:
    text = (f"{plan.MARK}:events /tmp/x/rank-3.events\n"
            '{"event": "started", "rank": 3}\n{"event": "joi\n'
            f"{plan.MARK}:iface\n[]\n{plan.MARK}:alive\n 123\n")
    report = plan.parse_host_output(text)
    assert report.events == {3: [{"event": "started", "rank": 3}]}
    assert report.iface == "[]" and report.alive == [123]
