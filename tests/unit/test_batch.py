"""The one-exec probe script: run here with the local /bin/sh, exactly as a host's sh would run it."""

from __future__ import annotations

import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st

from provisioner import batch
from provisioner.resources.base import Probe


def run_locally(probes: list[Probe], nonce: str = "0123456789abcdef") -> dict:
    script = batch.build_script(probes, nonce)
    # Bytes, decoded by hand: text mode would turn a printed '\r' into '\n' before we see it.
    proc = subprocess.run(["sh", "-c", script], capture_output=True, timeout=30)
    return batch.split_output(proc.stdout.decode(), nonce)


def test_each_probe_gets_its_own_stdout_stderr_and_exit_code() -> None:
    probes = [Probe("echo hi; echo oops >&2; exit 3"), Probe("printf 'no newline'"), Probe("printf 'two\\n\\n'")]
    results = run_locally(probes)
    assert results[probes[0].key].stdout == "hi\n"
    assert results[probes[0].key].stderr == "oops"
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
    assert script.count("begin:") == 2


def test_probes_do_not_read_the_execs_stdin() -> None:
    reader = Probe("cat")
    proc = subprocess.run(["sh", "-c", batch.build_script([reader], "ff" * 8)], input="secret\n",
                          capture_output=True, text=True, timeout=10)
    assert batch.split_output(proc.stdout, "ff" * 8)[reader.key].stdout == ""


def test_a_truncated_output_keeps_only_complete_blocks() -> None:
    first, second = Probe("echo one"), Probe("echo two")
    nonce = "12" * 8
    proc = subprocess.run(["sh", "-c", batch.build_script([first, second], nonce)], capture_output=True, text=True)
    cut = proc.stdout[: proc.stdout.index(f"@@fabnet:{nonce}:begin:{second.key}") + 30]
    results = batch.split_output(cut, nonce)
    assert set(results) == {first.key}


def test_become_wraps_the_script_for_sudo_without_prompting() -> None:
    wrapped = batch.wrap_become("echo 'a b'", "root")
    assert wrapped.startswith("sudo -n -H -u root -- sh -c ")
    assert subprocess.run(["sh", "-c", wrapped.split(" -- ", 1)[1]], capture_output=True, text=True).stdout == "a b\n"


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=60))
def test_any_printed_text_comes_back_verbatim(text: str) -> None:
    probe = Probe("printf '%s' " + __import__("shlex").quote(text))
    result = run_locally([probe])[probe.key]
    assert result.stdout == text
    assert result.exit_code == 0
