"""Output hygiene: what hosts print is escaped in every output, names are never markup, and report
files are written atomically, 0600, and never over a link, FIFO or device."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from rich.console import Console

from provisioner.evaluate.engine import AuditOutcome, HostOutcome, ResourceOutcome
from provisioner.output import report
from provisioner.output.files import OutputError, write_atomic
from provisioner.resources.base import Check

HOSTILE = "ok\x1b]0;owned\x07\x1b[2J\x1b[31mred\rback\x00nul\x08\u202egnp.exe\x9bX\ufffe"


def outcome(name: str = "gpu01", text: str = HOSTILE) -> AuditOutcome:
    checks = [Check("version", "23.10", text, "drift", text), Check("trust", "dscp", None, "error", text)]
    hosts = [
        HostOutcome(name, "198.18.1.1", "drifted",
                    resources=[ResourceOutcome("ofed", "ofed", "site.yml:3", "p", checks)]),
        HostOutcome(f"{name}-b", "198.18.1.2", "unreachable", error=text),
    ]
    return AuditOutcome(hosts, 1.0, warnings=[f"known_hosts:3: {text}"])


def table_text(result: AuditOutcome, monkeypatch) -> str:
    buffer = io.StringIO()
    monkeypatch.setattr(report, "console", Console(file=buffer, width=300, force_terminal=True))
    report.audit_tables(result, verbose=True)
    return buffer.getvalue()


def test_clean_escapes_every_control_but_newline_and_tab() -> None:
    assert report.clean("a\tb\nc") == "a\tb\nc"
    assert report.clean("\x1b[2J\r\x00\x7f\x9b\u202e\ufffe") == "\\x1b[2J\\r\\x00\\x7f\\x9b\\u202e\\ufffe"
    assert report.clean(None) == ""


def test_the_table_carries_no_escape_from_a_host(monkeypatch) -> None:
    text = table_text(outcome(), monkeypatch)
    # The only ESC bytes left are rich's own colour codes (ESC [ digits m).
    import re
    assert re.sub(r"\x1b\[[0-9;]*m", "", text).count("\x1b") == 0
    for raw in ("\x07", "\r", "\x00", "\x08", "\u202e", "\x9b"):
        assert raw not in text
    assert "\\x1b]0;owned" in text


def test_host_names_with_markup_characters_are_shown_as_written(monkeypatch) -> None:
    text = table_text(outcome(name="gpu[/]01[bold]", text="plain"), monkeypatch)
    assert "gpu[/]01[bold]" in text


def test_json_has_no_raw_control_and_keeps_the_escape_visible(capsys) -> None:
    report.print_json(report.audit_json(outcome(), inventory="i", playbook="p", limit=None, exit_code=4))
    out = capsys.readouterr().out
    assert out.isascii() and all(ch in "\n" or ch >= " " for ch in out)
    document = json.loads(out)
    error = document["hosts"][1]["error"]
    assert "\x1b" not in error and "\\x1b]0;owned" in error
    assert document["warnings"][0].startswith("known_hosts:3: ok\\x1b")


def test_junit_stays_well_formed_xml() -> None:
    xml = report.audit_junit(outcome())
    root = ET.fromstring(xml.encode())
    failure = root.find(".//failure")
    assert failure is not None and "\\x1b[2J" in failure.text
    assert "\x1b" not in xml


def test_no_value_never_reads_as_python_none(monkeypatch) -> None:
    from provisioner.apply.converge import ApplyOutcome, HostApplied, ResourceApplied
    from provisioner.output import apply_report
    from provisioner.resources.base import shown_actual

    absent = Check("hold", "held", None, "drift", "")
    assert shown_actual(absent) == "(absent)" and shown_actual(Check("x", "1", None, "error")) == "(not read)"
    drifted = AuditOutcome([HostOutcome("gpu01", "198.18.1.1", "drifted", resources=[
        ResourceOutcome("nccl", "nccl", "site.yml:3", "p", [absent])])], 1.0)
    assert 'message="desired held, actual (absent)"' in report.audit_junit(drifted)
    buffer = io.StringIO()
    monkeypatch.setattr(apply_report, "console", Console(file=buffer, width=300))
    resource = ResourceApplied(drifted.hosts[0].resources[0], drifted.hosts[0].resources[0])
    apply_report.results(ApplyOutcome("run", [HostApplied("gpu01", "198.18.1.1", "failed", resources=[resource])],
                                      1.0))
    assert "still drift: hold wants held, has (absent)" in buffer.getvalue()
    assert "None" not in buffer.getvalue()


def test_write_atomic_mode_and_content(tmp_path: Path) -> None:
    target = tmp_path / "audit.xml"
    target.write_text("old")
    target.chmod(0o644)
    write_atomic(target, "new", mode=0o600)
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["audit.xml"]  # no temporary file left


@pytest.mark.parametrize("kind", ["symlink", "fifo", "directory", "device"])
def test_write_atomic_never_replaces_what_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "audit.xml"
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    if kind == "symlink":
        target.symlink_to(victim)
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "directory":
        target.mkdir()
    else:
        target = Path("/dev/null")
    with pytest.raises(OutputError, match=r"refusing to write .*: it is a"):
        write_atomic(target, "x")
    assert victim.read_text() == "keep me"
    assert kind == "device" or (target.is_symlink() if kind == "symlink" else target.exists())
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({"victim", target.name} - {"null"})


def test_write_atomic_into_a_missing_or_unwritable_place_is_one_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OutputError, match=r"^cannot write .*/file/audit.xml: "):
        write_atomic(blocker / "audit.xml", "x")


def _fabnet(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "provisioner", *args], capture_output=True, text=True,
                          timeout=60, **kwargs)


def test_an_unwritable_junit_path_is_refused_before_any_host_is_contacted(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    # 192.0.2.1 (TEST-NET) would only be contacted if the check came too late; it never is.
    inventory.write_text("all:\n  hosts:\n    gpu01:\n      ansible_host: 192.0.2.1\n")
    playbook = tmp_path / "site.yml"
    playbook.write_text("- hosts: all\n  resources:\n    - sysctl: {name: net.ipv4.ip_forward, value: 0}\n")
    os.mkfifo(tmp_path / "fifo.xml")
    for junit, reason in ((tmp_path / "fifo.xml", "it is a FIFO"), (tmp_path / "no" / "a.xml", "does not exist")):
        proc = _fabnet("audit", str(inventory), "-p", str(playbook), "--junit", str(junit))
        assert proc.returncode == 64, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and reason in proc.stderr
        assert "Traceback" not in proc.stderr


def test_closed_stdout_is_one_clear_line(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    gpu01:\n      ansible_host: 127.0.0.1\n")
    playbook = tmp_path / "site.yml"
    playbook.write_text("- hosts: all\n  resources:\n    - sysctl: {name: net.ipv4.ip_forward, value: 0}\n")
    closed = subprocess.run(f"{sys.executable} -m provisioner validate {inventory} -p {playbook} >&-",
                            shell=True, capture_output=True, text=True, timeout=60)
    assert closed.returncode == 1 and "Traceback" not in closed.stderr
    assert closed.stderr.strip().splitlines() == [
        "error: standard output is closed: nothing can be printed (redirect it to a file instead)"]


SAMPLE_LOG = Path(__file__).resolve().parents[1] / "samples" / "nccl-debug-2.txt"


@pytest.mark.parametrize("command", ["validate {inventory} -p {playbook}", "explain {log}", "explain --json {log}"])
def test_a_reader_that_left_ends_fabnet_quietly(tmp_path: Path, command: str) -> None:
    """`fabnet ... | head -1`: nothing on stderr, and exit 0 for a command that only reads (its work is
    done; `head` took what it wanted). `| true` exits long before fabnet prints, so every write meets a
    closed pipe; plain lines, rich's console and JSON each take their own path to standard output."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    gpu01:\n      ansible_host: 127.0.0.1\n")
    playbook = tmp_path / "site.yml"
    playbook.write_text("- hosts: all\n  resources:\n    - sysctl: {name: net.ipv4.ip_forward, value: 0}\n")
    args = command.format(inventory=inventory, playbook=playbook, log=SAMPLE_LOG)
    piped = subprocess.run(["bash", "-c", f"{sys.executable} -m provisioner {args} | true; "
                            "exit ${PIPESTATUS[0]}"], capture_output=True, text=True, timeout=60)
    assert piped.stderr == ""
    assert piped.returncode == 0


def test_a_reader_that_left_an_apply_says_it_stopped_short() -> None:
    from provisioner import cli

    assert cli._reader_gone(["apply", "inv.yml", "--yes"]) == 141  # cut short before its changes
    assert cli._reader_gone(["--verbose", "rollback", "inv.yml"]) == 141
    assert cli._reader_gone(["audit", "inv.yml"]) == 0
    assert cli._reader_gone(["lab", "up", "--name", "t1"]) == 141
    assert cli._reader_gone(["lab", "status", "--name", "t1"]) == 0  # only reads: `lab status | head -1`


def test_progress_names_the_hosts_still_running_after_a_few_seconds(monkeypatch) -> None:
    import time as clock

    from provisioner.output import report as output_report

    waiting = output_report._Waiting(["gpu01", "gpu02", "gpu03", "gpu04", "[bold]x"])
    assert waiting.__rich__() == ""  # quiet at first
    monkeypatch.setattr(clock, "monotonic", lambda: waiting.started + 25)
    waiting.pending.pop("gpu01")
    text = waiting.__rich__()
    assert "waiting for gpu02, gpu03, gpu04 +1 more (25 s)" in text
    waiting.pending = dict.fromkeys(["[bold]x"])
    assert "\\[bold]x" in waiting.__rich__()  # a host name is text, never markup
