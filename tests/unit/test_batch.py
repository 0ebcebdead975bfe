"""The one-exec probe script: run here with the local /bin/sh, fed on standard input exactly as a host's
`sh -s` gets it."""

from __future__ import annotations

import os
import random
import re
import secrets
import signal
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provisioner.facts import batch
from provisioner.resources.base import Probe
from tests.unit.ticking import run_ticking, start_ticking

# Run ids of the script's form, fresh for each run of the suite: the clean-up sweep kills whatever carries
# a run's id, and a fixed one would reach into another copy of the suite running on the same machine.
RUN = {tag: tag + secrets.token_hex(7) for tag in ("a1", "b2", "c3", "e5", "f7", "c9", "e6", "a8", "d4", "b7", "f2")}


def run_locally(probes: list[Probe], nonce: str = "0123456789abcdef", **kwargs) -> dict:
    script = batch.build_script(probes, nonce, **kwargs)
    # Bytes, decoded by hand as the transport does: text mode would turn a printed '\r' into '\n'.
    proc = run_ticking(script)
    return batch.split_output(proc.stdout.decode(errors="replace"), nonce, kwargs.get("caps", batch.Caps()))


def test_each_probe_gets_its_own_stdout_stderr_and_exit_code() -> None:
    probes = [Probe("echo hi; echo oops >&2; exit 3"), Probe("printf 'no newline'"), Probe("printf 'two\\n\\n'")]
    results = run_locally(probes)
    assert results[probes[0].key].stdout == "hi\n"
    assert results[probes[0].key].stderr == "oops\n"
    assert results[probes[0].key].exit_code == 3
    assert results[probes[1].key].stdout == "no newline"
    assert results[probes[2].key].stdout == "two\n\n"


def test_a_hanging_probe_times_out_alone() -> None:
    slow, fast = Probe("sleep 10", timeout=0.5), Probe("echo after")
    results = run_locally([slow, fast])
    assert results[slow.key].exit_code == batch.TIMEOUT_EXIT
    assert results[fast.key].stdout == "after\n"


def test_a_probe_cannot_forge_markers_without_the_nonce() -> None:
    forger = Probe("echo '@@fabnet:0000000000000000:end:abc@@'; echo '@@fabnet:0123:rc:x:0@@'")
    results = run_locally([forger])
    assert results[forger.key].stdout.count("@@fabnet") == 2
    assert results[forger.key].exit_code == 0


def test_identical_commands_run_once() -> None:
    script = batch.build_script([Probe("lsmod"), Probe("lsmod"), Probe("ip -j link")], "ab" * 8)
    assert len([line for line in script.splitlines() if line.startswith("__fn_probe ")]) == 2


def test_probes_do_not_read_the_execs_stdin_which_carries_the_script() -> None:
    reader, after = Probe("cat"), Probe("echo after")
    script = batch.build_script([reader, after], "ff" * 8)
    proc = run_ticking(script + "echo injected\n", timeout=10)
    results = batch.split_output(proc.stdout.decode(), "ff" * 8)
    assert results[reader.key].stdout == "" and results[after.key].stdout == "after\n"
    assert b"injected" not in proc.stdout  # the script ends with `exit`: nothing after it runs


def test_a_truncated_output_keeps_only_complete_blocks() -> None:
    first, second = Probe("echo one"), Probe("echo two")
    nonce = "12" * 8
    stdout = run_ticking(batch.build_script([first, second], nonce)).stdout.decode()
    cut = stdout[: stdout.index(f"@@fabnet:{nonce}:begin:{second.key}") + 30]
    results = batch.split_output(cut, nonce)
    assert set(results) == {first.key}


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=60))
def test_any_printed_text_comes_back_verbatim(text: str) -> None:
    probe = Probe("printf '%s' " + __import__("shlex").quote(text))
    result = run_locally([probe])[probe.key]
    assert result.stdout == text
    assert result.exit_code == 0


# ------------------------------------------------------------- probes that misbehave cost only themselves

def _marked(run_id: str) -> list[int]:
    """Local processes carrying this run's marker in their environment (what the script sweeps)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as handle:
                    if f"{batch.ENV_MARKER}={run_id}-".encode() in handle.read():
                        pids.append(int(entry))
            except OSError:
                pass
    return pids


def _leftovers_killed(run_id: str) -> list[int]:
    found = _marked(run_id)
    for pid in found:  # never leave them behind, even when the assertion below fails
        os.kill(pid, signal.SIGKILL)
    return found


@pytest.mark.parametrize("command", [
    "trap '' TERM; sleep 300 & sleep 300; wait",  # children that carry the marker
    # Shell code alone runs in the probe's subshell, which carries no marker: stopped by its pid.
    "trap '' TERM; while :; do :; done",
])
def test_a_probe_that_ignores_sigterm_is_killed_with_all_it_runs_at_its_timeout(command: str) -> None:
    stubborn = Probe(command, timeout=1)
    after = Probe("echo after")
    started = time.monotonic()
    results = run_locally([stubborn, after], run_id=RUN["a1"])
    assert results[stubborn.key].exit_code == batch.TIMEOUT_EXIT
    assert results[after.key].stdout == "after\n"
    assert time.monotonic() - started < 1 + batch.KILL_GRACE + 5
    assert _leftovers_killed(RUN["a1"]) == []


def test_a_daemonized_child_is_found_by_its_marker_and_killed() -> None:
    # It leaves the session (setsid) and keeps stdout open: neither may stall the script or survive it. The probe
    # waits until its child has started setsid (the marker is then in its environment): a copy of the probe's
    # shell forked but not yet started as a program carries none (a limit batch.py states), and a loaded
    # machine can keep it in that instant past the script's end.
    daemon = Probe("setsid sh -c 'sleep 300' >/dev/null 2>&1 & p=$!; "
                   "until grep -qs FABNET_PROBE= /proc/$p/environ; do :; done; echo started")
    after = Probe("echo after")
    started = time.monotonic()
    results = run_locally([daemon, after], run_id=RUN["b2"])
    assert results[daemon.key].stdout == "started\n" and results[after.key].stdout == "after\n"
    assert time.monotonic() - started < 10
    assert _leftovers_killed(RUN["b2"]) == []


def test_a_stderr_flood_is_capped_on_the_node_and_costs_only_its_probe() -> None:
    flood = Probe("yes 'noise noise noise' | head -c 200000000 >&2; echo done", timeout=60)
    after = Probe("echo after")
    caps = batch.Caps(stdout=1024 * 1024, stderr=4096)
    script = batch.build_script([flood, after], "cd" * 8, caps=caps, run_id=RUN["c3"])
    proc = run_ticking(script, timeout=120)
    assert len(proc.stdout) < 64 * 1024  # nothing like 200 MB crossed
    results = batch.split_output(proc.stdout.decode(), "cd" * 8, caps)
    assert results[after.key].stdout == "after\n"
    flooded = results[flood.key]
    assert flooded.stderr.startswith("fabnet: its stderr passed 4 KiB and was cut")
    assert len(flooded.stderr) < 4096 + 200
    assert _leftovers_killed(RUN["c3"]) == []


def test_stdout_past_its_cap_is_cut_and_the_probe_fails() -> None:
    big = Probe("head -c 100000 /dev/zero | tr '\\0' x")
    caps = batch.Caps(stdout=1000, stderr=1000)
    result = run_locally([big], caps=caps)[big.key]
    assert len(result.stdout) == 1000 and result.exit_code != 0
    assert result.stderr.startswith("fabnet: its output passed")


def test_the_nonce_is_in_no_command_line_or_environment_and_probes_write_to_files() -> None:
    nonce = "9e" * 8
    spy = Probe("ps -eo args; cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'")
    where = Probe("readlink /proc/self/fd/1 /proc/self/fd/2")
    script = batch.build_script([spy, where], nonce)
    results = batch.split_output(run_ticking(script, timeout=30).stdout.decode(), nonce)
    assert "sh -s" in results[spy.key].stdout and nonce not in results[spy.key].stdout
    # Their output goes to files, so nothing a probe (or a child it left behind) writes reaches the exec.
    assert all(line.startswith("/") and "pipe:" not in line for line in results[where.key].stdout.splitlines())


def test_a_truncated_script_runs_nothing() -> None:
    probe = Probe("touch /proc/nonexistent-marker; echo ran")
    script = batch.build_script([probe], "ab" * 8)
    proc = subprocess.run(["sh", "-s"], input=script[: len(script) - 3], capture_output=True, text=True, timeout=10)
    assert "ran" not in proc.stdout and proc.returncode != 0


def test_caps_and_flags_are_parsed() -> None:
    tag = "@@fabnet:" + "ab" * 8
    text = (f"{tag}:begin:aa@@\nxx\n{tag}:rc:aa:137:t@@\nboom\n{tag}:end:aa@@\n"
            f"{tag}:begin:bb@@\nyy\n{tag}:rc:bb:0:e@@\nnoise\n{tag}:end:bb@@\n")
    results = batch.split_output(text, "ab" * 8)
    assert results["aa"].exit_code == batch.TIMEOUT_EXIT
    assert results["bb"].exit_code == 0 and results["bb"].stderr.startswith("fabnet: its stderr passed")


def test_the_budget_cuts_a_probes_timeout_and_skips_what_is_left() -> None:
    slow, later = Probe("trap '' TERM; sleep 60", timeout=30), Probe("echo later")
    started = time.monotonic()
    results = run_locally([slow, later], budget=2, run_id=RUN["e5"])
    assert time.monotonic() - started < 2 + batch.KILL_GRACE + 8  # not the probe's 30 s (slack: a loaded CI)
    assert results[slow.key].exit_code == batch.TIMEOUT_EXIT
    assert results[later.key].exit_code == batch.NOT_RUN_EXIT
    assert "not run" in results[later.key].stderr
    assert _leftovers_killed(RUN["e5"]) == []


def _running(command: str, run_id: str) -> subprocess.Popen[bytes]:
    """`sh -s` running a script whose one probe, `command`, has started (120 s timeout)."""
    proc = start_ticking(batch.build_script([Probe(command, timeout=120)], "ab" * 8, run_id=run_id))
    deadline = time.monotonic() + 10
    while not _marked(run_id):
        assert time.monotonic() < deadline, "the probe never started"
        time.sleep(0.05)
    return proc


def test_when_the_connection_goes_the_running_probe_is_stopped_at_once() -> None:
    # What a closed SSH channel looks like to the host's shell: its standard input ends, and its stdout
    # and stderr lose their reader.
    proc = _running("trap '' TERM; sleep 300", RUN["f7"])
    assert proc.stdin and proc.stdout and proc.stderr
    started = time.monotonic()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        stream.close()
    try:
        proc.wait(timeout=10)  # not at the probe's 120 s timeout
    finally:
        proc.kill()
    assert time.monotonic() - started < 8  # not the probe's 120 s (slack: a loaded CI)
    assert _leftovers_killed(RUN["f7"]) == []


def test_without_ticks_the_watchdog_keeps_no_timeout_but_the_end_of_input_still_stops_the_probe() -> None:
    # The controller's ticks are the watchdog's only clock: a stalled controller delays timeouts, and a
    # controller that hung up stops everything.
    proc = subprocess.Popen(["sh", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin
    proc.stdin.write(batch.build_script([Probe("sleep 300", timeout=0.5)], "ab" * 8, run_id=RUN["c9"]).encode())
    proc.stdin.flush()
    try:
        time.sleep(2.5)
        assert proc.poll() is None and _marked(RUN["c9"])  # no tick came: its 0.5 s have not been enforced
        proc.stdin.close()
        proc.wait(timeout=5)
        assert _marked(RUN["c9"]) == []
    finally:
        proc.kill()
        _leftovers_killed(RUN["c9"])


def test_a_node_without_a_usable_tmp_falls_back_to_dev_shm() -> None:
    probe = Probe("echo ok")
    script = batch.build_script([probe], "ab" * 8)
    env = {**os.environ, "TMPDIR": "/nonexistent/fabnet-test"}
    proc = run_ticking(script, timeout=30, env=env)
    assert batch.split_output(proc.stdout.decode(), "ab" * 8)[probe.key].stdout == "ok\n"


def test_the_cap_counts_bytes_as_sent_not_characters() -> None:
    # The node sends one byte past the cap; the control side decides from what it received.
    exact, over = Probe("printf 'ééééé'"), Probe("printf 'éééééé'")
    results = run_locally([exact, over], caps=batch.Caps(stdout=10, stderr=64))
    assert results[exact.key].stdout == "ééééé" and results[exact.key].exit_code == 0  # 10 bytes: not over
    assert results[over.key].stdout == "ééééé" and results[over.key].exit_code == 1  # 12 bytes: cut to 10
    assert results[over.key].stderr.startswith("fabnet: its output passed")


def test_when_the_ticks_stop_without_an_end_of_input_the_node_still_stops_after_its_budget() -> None:
    # A network that goes silent (no close, no reset) leaves the exec's input open and tickless: a run
    # that saw a tick has its own timer, which stops the script some seconds after the controller hung up.
    proc = subprocess.Popen(["sh", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin
    script = batch.build_script([Probe("trap '' TERM; sleep 300", timeout=60)], "ab" * 8, run_id=RUN["e6"],
                                budget=1)
    proc.stdin.write(script.encode())
    proc.stdin.flush()
    started = time.monotonic()
    try:
        time.sleep(0.3)
        proc.stdin.write(b"\n")  # one tick, then silence with the input left open
        proc.stdin.flush()
        proc.wait(timeout=1 + batch.REPORT_MARGIN + 5 + 10)
        assert time.monotonic() - started > batch.REPORT_MARGIN  # not before the controller hung up
        assert _marked(RUN["e6"]) == []
    finally:
        proc.kill()
        _leftovers_killed(RUN["e6"])


def test_a_script_killed_outright_leaves_no_watchdog_holding_the_channel() -> None:
    # SIGKILL runs no trap. The SSH channel ends only when every holder of its stdout and stderr has
    # closed them: the watchdog holds neither, and when sshd then closes the exec's standard input, it
    # stops the probe and cleans up by itself.
    proc = _running("sleep 300", RUN["a8"])
    assert proc.stdin and proc.stderr
    proc.kill()
    proc.wait()
    started = time.monotonic()
    try:
        while os.read(proc.stderr.fileno(), 65536):  # b"" once nothing holds stderr open
            assert time.monotonic() - started < 10, "something the script started still holds its stderr"
        assert time.monotonic() - started < 5  # at once, not when the 300 s sleep ends (slack: a loaded CI)
        proc.stdin.close()
        while _marked(RUN["a8"]) and time.monotonic() - started < 5:
            time.sleep(0.05)
        assert _marked(RUN["a8"]) == []
    finally:
        _leftovers_killed(RUN["a8"])


def _grep_spy(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """grep is what sweeps /proc/*/environ: a logging stand-in before it on PATH shows when it runs. The log
    it writes, and the environment that puts it first."""
    log = tmp_path / "grep.log"
    spy = tmp_path / "bin" / "grep"
    spy.parent.mkdir()
    spy.write_text(f"#!/bin/sh\necho \"$*\" >>{log}\nexec /bin/grep \"$@\"\n")
    spy.chmod(0o755)
    return log, {**os.environ, "PATH": f"{spy.parent}:{os.environ['PATH']}"}


def test_the_environment_sweep_runs_only_when_some_process_outlived_its_probe(tmp_path) -> None:
    log, env = _grep_spy(tmp_path)
    quiet = Probe("echo quiet")
    # Its own PID namespace: the sweep's trigger is a change in the list of processes, which other tests
    # running at the same time would make on the machine's.
    results = batch.split_output(run_ticking(batch.build_script([quiet], "ab" * 8), env=env,
                                             isolate=True).stdout.decode(), "ab" * 8)
    assert results[quiet.key].stdout == "quiet\n" and not log.exists()
    daemon = Probe("setsid sh -c 'sleep 300' >/dev/null 2>&1 & echo started")
    run_ticking(batch.build_script([daemon], "ab" * 8, run_id=RUN["d4"]), env=env, isolate=True)
    assert batch.ENV_MARKER in log.read_text()
    assert _leftovers_killed(RUN["d4"]) == []


def test_a_run_that_outlasts_a_tick_stops_its_own_timer_without_a_sweep(tmp_path) -> None:
    # Past its first tick a run has a timer (a shell and its sleep, carrying the marker); the end of the
    # script kills them by the pids they left, so a run whose only survivor is its timer greps nothing.
    log, env = _grep_spy(tmp_path)
    slow = Probe(f"sleep {batch.TICK * 2.5}; echo slow")
    ran = run_ticking(batch.build_script([slow], "ab" * 8, run_id=RUN["b7"]), env=env, isolate=True)
    assert batch.split_output(ran.stdout.decode(), "ab" * 8)[slow.key].stdout == "slow\n"
    assert not log.exists()
    assert _leftovers_killed(RUN["b7"]) == []
    # The same run without a PID namespace of its own has other processes come and go: still none left.
    ran = run_ticking(batch.build_script([slow], "ab" * 8, run_id=RUN["b7"]))
    assert batch.split_output(ran.stdout.decode(), "ab" * 8)[slow.key].stdout == "slow\n"
    assert _leftovers_killed(RUN["b7"]) == []


def test_plain_commands_run_without_a_shell_and_report_the_same() -> None:
    # One program and its arguments is exec'd straight; anything a shell would expand goes through sh -c.
    assert batch._plain("ip -j -d link show") and batch._plain("cat -- /proc/sys/net/ipv4/ip_forward")
    for shelly in ("echo $HOME", "ls *", "FOO=1 env", "cd /", "a  b", "echo ~", "true; false", "exit 3"):
        assert not batch._plain(shelly), shelly
    plain, missing, failing = Probe("printf %s,%s a b"), Probe("no-such-tool-here -x"), Probe("false")
    script = batch.build_script([plain, missing, failing], "ab" * 8)
    assert script.count(" x\n") == 3
    results = run_locally([plain, missing, failing], nonce="ab" * 8)
    assert results[plain.key].stdout == "a,b" and results[plain.key].exit_code == 0
    assert results[missing.key].exit_code == 127 and "not found" in results[missing.key].stderr
    assert results[failing.key].exit_code == 1


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_a_script_killed_outright_leaves_no_probe_shell_looping(tmp_path) -> None:
    # The watchdog outlives a SIGKILLed script; when the input ends it stops the orphaned probe shell too.
    pidfile = tmp_path / "pid"
    proc = start_ticking(batch.build_script(
        [Probe(f"sh -c 'echo $PPID' >{pidfile}; trap '' TERM; while :; do :; done", timeout=120)], "ab" * 8))
    deadline = time.monotonic() + 10
    while not (pidfile.exists() and pidfile.read_text().strip()):
        assert time.monotonic() < deadline, "the probe never started"
        time.sleep(0.05)
    shell = int(pidfile.read_text())
    assert proc.stdin
    try:
        proc.kill()
        proc.wait()
        assert _alive(shell)
        proc.stdin.close()
        while _alive(shell) and time.monotonic() < deadline + 5:
            time.sleep(0.05)
        assert not _alive(shell)
    finally:
        if _alive(shell):
            os.kill(shell, signal.SIGKILL)


def _split_by_regex(stdout: str, nonce: str) -> dict[str, tuple[str, str, str, str]]:
    """The block grammar as one regular expression (the reference the string search must agree with)."""
    tag = re.escape(f"@@fabnet:{nonce}")
    pattern = re.compile(
        rf"{tag}:begin:(?P<key>[0-9a-f]+)@@\n(?P<out>.*?)\n{tag}:rc:(?P=key):(?P<rc>\d+):(?P<flags>[a-z]*)@@\n"
        rf"(?P<err>.*?)\n{tag}:end:(?P=key)@@", re.DOTALL)
    return {m["key"]: (m["out"], m["rc"], m["flags"], m["err"]) for m in pattern.finditer(stdout)}


def test_split_output_agrees_with_the_block_grammar_on_mangled_output() -> None:
    # Real blocks, forged ones (another nonce), cut ones and stray marker text, shuffled and truncated.
    rng = random.Random(7)
    nonce, other = "ab" * 8, "cd" * 8
    pieces = []
    for number in range(12):
        tag = f"@@fabnet:{nonce if number % 3 else other}"
        key = f"{number:x}f"
        out = rng.choice(["", "x", "line\n", f"{tag}:rc:{key}:", f"x\n{tag}:rc:{key}:zz@@\n", "a\nb\n\n", "@@\n"])
        err = rng.choice(["", "warn", "e\n", f"\n{tag}:end:"])
        pieces.append(f"{tag}:begin:{key}@@\n{out}\n{tag}:rc:{key}:{rng.randint(0, 130)}:"
                      f"{rng.choice(['', 't', 's'])}@@\n{err}\n{tag}:end:{key}@@\n")
    for trial in range(300):
        rng.shuffle(pieces)
        text = "".join(pieces)
        text = text[: rng.randint(len(text) // 2, len(text))]
        expected = _split_by_regex(text, nonce)
        got = batch.split_output(text, nonce)
        assert set(got) == set(expected), trial
        for key, (out, _rc, flags, err) in expected.items():
            assert got[key].stdout == out
            if "s" not in flags:
                assert got[key].stderr == err


def test_what_finished_goes_out_once_a_second_has_passed_not_only_at_the_end() -> None:
    # A slow host sends the blocks of the probes that ended, so a connection lost later does not lose them:
    # here "first" and the 1.5 s probe are sent as the third starts, while the third still sleeps.
    nonce = "fe" * 8
    script = batch.build_script([Probe("echo first"), Probe("sleep 1.5; echo second"), Probe("sleep 4; echo third")],
                                nonce, run_id=RUN["f2"])
    proc = start_ticking(script)
    assert proc.stdout
    seen = b""
    started = time.monotonic()
    try:
        os.set_blocking(proc.stdout.fileno(), False)
        while time.monotonic() - started < 3.5 and b"second" not in seen:
            time.sleep(0.05)
            seen += proc.stdout.read() or b""
        early = seen
        assert proc.poll() is None  # the third probe still runs
    finally:
        proc.kill()
        proc.wait()
        _leftovers_killed(RUN["f2"])
    results = batch.split_output(early.decode(), nonce)
    assert [r.stdout for r in results.values()] == ["first\n", "second\n"]
