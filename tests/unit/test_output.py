"""The output layer: text from hosts, logs and tools is escaped once for the console, JSON and JUnit of
every command (apply and smoke as well as audit), and every report file is written one way (atomic, 0600)."""

from __future__ import annotations

import io
import json
import re
import stat
from pathlib import Path
from types import SimpleNamespace
from xml.etree import ElementTree as ET

import pytest
from rich.console import Console

from provisioner.apply.changes import StepResult
from provisioner.apply.converge import ApplyOutcome, HostApplied, ResourceApplied, StepRun
from provisioner.commands.smoke import show
from provisioner.evaluate.engine import ResourceOutcome
from provisioner.output import apply_report, prom, report
from provisioner.output import core as output
from provisioner.plan import saved as saved_plan
from provisioner.resources.base import Check
from provisioner.resources.steps import Step
from provisioner.smoke import output as smoke_output
from provisioner.smoke.diagnose import JobResult, RankProgress
from provisioner.smoke.run import SmokeOutcome
from provisioner.smoke.settings import Settings

# A host file or a tool's output that tries it all: OSC window title, clear screen, colour, carriage
# return, NUL, backspace, a bidi override, a C1 CSI, a non-character, and rich markup.
HOSTILE = "ok\x1b]0;owned\x07\x1b[2J\x1b[31mred\rback\x00nul\x08\u202egnp.exe\x9bX\ufffe [/x] [bold]b"
RAW = ("\x07", "\r", "\x00", "\x08", "\u202e", "\x9b", "\ufffe")
GLOO = "[/opt/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [198.19.3.2]:1234"


def no_raw_escape(text: str) -> bool:
    """True when `text` holds no control byte from a host: rich's own colour codes (ESC [ digits m) aside."""
    stripped = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return "\x1b" not in stripped and not any(raw in stripped for raw in RAW)


def capture(monkeypatch: pytest.MonkeyPatch, *modules: object) -> io.StringIO:
    buffer = io.StringIO()
    console = Console(file=buffer, width=400, force_terminal=True)
    for module in modules:
        monkeypatch.setattr(module, "console", console)
        monkeypatch.setattr(module, "err_console", console)
    return buffer


# ---------------------------------------------------------------------------------- the one escaping


def test_clean_is_idempotent_and_markup_is_shown_as_written() -> None:
    once = output.clean(HOSTILE)
    assert output.clean(once) == once
    assert "\\x1b]0;owned\\x07" in once and "\\u202e" in once
    buffer = io.StringIO()
    Console(file=buffer, width=400).print(output.markup(GLOO))
    assert buffer.getvalue().strip() == GLOO


def test_clean_data_cleans_every_string_keys_included() -> None:
    data = {"a\x1b": [HOSTILE, {"n": 1, "b": None, "t": True}], "s": ("x\u202e",)}
    cleaned = output.clean_data(data)
    assert cleaned == {"a\\x1b": [output.clean(HOSTILE), {"n": 1, "b": None, "t": True}], "s": ["x\\u202e"]}


# --------------------------------------------------------------------------------------------- smoke


def failed_smoke() -> SmokeOutcome:
    outcome = SmokeOutcome(hosts=["gpu01", "gpu02"], settings=Settings(), verdict="failed",
                           reason=f"rank 1 failed: {GLOO}", backend="gloo")
    outcome.job = JobResult(hosts=("gpu01", "gpu02"), ok=False, outputs={1: f"{GLOO}\n{HOSTILE}"},
                            progress=[RankProgress(0, "gpu01", "joined", 0, f"{HOSTILE}"),
                                      RankProgress(1, "gpu02", "joined", 0, GLOO)])
    outcome.failed_hosts = {"gpu01": HOSTILE, "gpu02": GLOO}
    return outcome


def test_smoke_report_shows_gloo_errors_as_written_not_as_markup(monkeypatch: pytest.MonkeyPatch) -> None:
    """`closing tag '[/…/pair.cc:553]' doesn't match any open tag` ended `fabnet smoke` as an internal error."""
    buffer = capture(monkeypatch, report)
    show(failed_smoke())
    text = buffer.getvalue()
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    assert "pair.cc:553]" in plain and "[/opt/pytorch" in plain.replace("\n", "")
    assert no_raw_escape(text) and "\\x1b]0;owned" in plain


def test_smoke_junit_and_json_carry_escapes_visibly(capsys: pytest.CaptureFixture[str]) -> None:
    xml = smoke_output.to_junit(failed_smoke())
    root = ET.fromstring(xml.encode())
    assert "\x1b" not in xml and root.find(".//testcase[@name='gpu02']/failure") is not None
    report.print_json(smoke_output.to_json(failed_smoke(), inventory="i", playbook=None, limit=None))
    document = json.loads(capsys.readouterr().out)
    assert document["rank_output"]["1"].endswith(output.clean(HOSTILE))
    assert document["progress"][0]["error"] == output.clean(HOSTILE)


# --------------------------------------------------------------------------------------------- apply


def applied(text: str = HOSTILE) -> ApplyOutcome:
    step = Step("file[/etc/motd]", "write", "cat > /etc/motd", f"write /etc/motd {text}",
                diff=f"--- /etc/motd\n+++ /etc/motd\n-{text}\n+hello")
    before = ResourceOutcome("file", "file[/etc/motd]", "site.yml:3", "p",
                             [Check("content", "hello", text, "drift", text)])
    resource = ResourceApplied(before, before, [StepRun(step, StepResult("failed", 1, f"cat: {text}\n{text}"))])
    host = HostApplied(f"gpu01{text[:3]}", "198.18.1.1", "failed", error=f"step failed: {text}",
                       resources=[resource], execs=3, seconds=0.5)
    gone = HostApplied("gpu02", "198.18.1.2", "unreachable", error=text)
    return ApplyOutcome("run1", [host, gone], 1.0)


def planned(text: str = HOSTILE) -> list[SimpleNamespace]:
    outcome = applied(text)
    step = outcome.hosts[0].resources[0].steps[0].step
    audit = SimpleNamespace(status="drifted", error=None)
    host = SimpleNamespace(name="gpu01", audit=audit, steps=[step], resources=[], digest="sha256:x")
    gone = SimpleNamespace(name="gpu02", audit=SimpleNamespace(status="unreachable", error=text), steps=[],
                           resources=[], digest="")
    return [host, gone]


def test_apply_diff_and_failed_output_print_no_raw_escape(monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = capture(monkeypatch, apply_report)
    apply_report.plan_text(planned(), diff=True)
    for host in applied().hosts:
        apply_report.host_line(host)
    apply_report.results(applied(), verbose=True)
    apply_report.recap(applied())
    text = buffer.getvalue()
    assert no_raw_escape(text)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    # The diff line, the failed step's output and the host's error each show the escapes visibly, and
    # the markup in them is shown as written.
    assert plain.count("\\x1b]0;owned\\x07\\x1b[2J") >= 4 and "[/x] [bold]b" in plain


def test_apply_json_carries_the_escaped_form_as_audit_does(capsys: pytest.CaptureFixture[str]) -> None:
    data = apply_report.to_json(applied(), inventory="i", playbook="p", limit=None, exit_code=2)
    data["plan"] = apply_report.plan_json(planned())
    report.print_json(data)
    out = capsys.readouterr().out
    assert out.isascii() and "\\u001b" not in out and "\\u202e" not in out.replace("\\\\u202e", "")
    document = json.loads(out)
    host = document["hosts"][0]
    assert host["error"] == output.clean(f"step failed: {HOSTILE}")
    assert host["resources"][0]["steps"][0]["output"] == output.clean(f"cat: {HOSTILE}\n{HOSTILE}")
    assert host["resources"][0]["before"][0]["actual"] == output.clean(HOSTILE)
    assert document["plan"][1]["error"] == output.clean(HOSTILE)
    # The same text in audit's JSON reads the same.
    assert report.audit_json(SimpleNamespace(hosts=[], seconds=0, warnings=[HOSTILE], count=lambda s: 0),
                             inventory="i", playbook="p", limit=None, exit_code=0)["warnings"] == [
        output.clean(HOSTILE)]


@pytest.mark.parametrize("writer", ["apply", "audit", "smoke"])
def test_every_junit_writer_makes_xml_a_parser_accepts(writer: str) -> None:
    """apply's JUnit held a host's raw ESC byte, which XML 1.0 cannot hold at all."""
    if writer == "apply":
        xml = apply_report.junit(applied())
    elif writer == "smoke":
        xml = smoke_output.to_junit(failed_smoke())
    else:
        checks = [Check("content", "hello", HOSTILE, "drift", HOSTILE)]
        host = SimpleNamespace(name=f"gpu01{HOSTILE}", status="drifted", seconds=0.1, error=None,
                               resources=[ResourceOutcome("file", HOSTILE, "site.yml:3", "p", checks)])
        xml = report.audit_junit(SimpleNamespace(hosts=[host]))
    root = ET.fromstring(xml.encode())  # raises on any character XML 1.0 cannot hold
    assert xml.startswith("<?xml") and not any(raw in xml for raw in ("\x1b", *RAW))
    texts = [value for element in root.iter() for value in (element.text or "", *element.attrib.values())]
    assert any("\\x1b]0;owned" in value for value in texts)
    if writer == "apply":
        failure = root.find(".//testcase[@name='file[/etc/motd]']/failure")
        assert failure is not None and "cat: ok\\x1b]0;owned" in (failure.text or "")


# ----------------------------------------------------------------------------------------- the files


def test_every_report_file_is_written_atomically_0600(tmp_path: Path) -> None:
    from provisioner.output.files import write_report

    targets = {
        "junit.xml": lambda p: write_report(p, apply_report.junit(applied())),
        "fabnet.prom": lambda p: prom.write(p, prom.apply_text(applied(), now=1.0)),
        "plan.json": lambda p: saved_plan.write(p, {"schema": saved_plan.SCHEMA, "hosts": []}),
    }
    for name, write in targets.items():
        target = tmp_path / name
        target.write_text("old")
        target.chmod(0o644)
        write(target)
        assert stat.S_IMODE(target.stat().st_mode) == 0o600, name
        assert target.read_text() != "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(targets)  # no temporary file left


def test_write_reports_tries_every_file_and_returns_the_first_failure(tmp_path: Path) -> None:
    good, blocker = tmp_path / "good.xml", tmp_path / "file"
    blocker.write_text("")
    failure = output.write_reports([(blocker / "a.xml", lambda: "x"), (None, lambda: "never"),
                                    (good, lambda: "<a/>")])
    assert failure is not None and str(failure).startswith(f"cannot write {blocker / 'a.xml'}")
    assert good.read_text() == "<a/>" and stat.S_IMODE(good.stat().st_mode) == 0o600


def test_no_report_writer_outside_the_output_layer() -> None:
    """One way to write a report file: provisioner.output.files (write_report). The lab's own files (node
    roots, its state) are written by the lab, the journal appends, and the playbook reference generator
    rewrites the repository's docs/playbook.md, and bootstrap pins host keys into a known_hosts file (through
    files.write_atomic, keeping that file's mode); nothing else opens a file to write."""
    root = Path(__file__).resolve().parents[2] / "provisioner"
    allowed = {root / "output" / "files.py", root / "apply" / "journal.py", root / "smoke" / "node_script.py",
               root / "load" / "docs.py", root / "run" / "hostkeys.py"}
    pattern = re.compile(r"\bwrite_text\(|\bwrite_bytes\(|\bwrite_atomic\(|(?<![.\w])open\([^)]*['\"][wax]")
    offenders = [f"{path.relative_to(root)}:{number}"
                 for path in root.rglob("*.py") if "lab" not in path.relative_to(root).parts and path not in allowed
                 for number, line in enumerate(path.read_text().splitlines(), start=1) if pattern.search(line)]
    assert offenders == []


def test_counts_say_one_host_and_two_hosts() -> None:
    from provisioner.output.core import count

    assert [count(n, "host") for n in (0, 1, 2)] == ["0 hosts", "1 host", "2 hosts"]
