"""Hostile files against the real command line: `fabnet validate` stops within seconds and a few
hundred MB on alias bombs, deep nesting, control bytes, a FIFO, and never prints a traceback."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from provisioner import cli

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = REPO / "playbooks" / "site.yml"


def run_validate(
    inventory: Path, tmp_path: Path, timeout: float = 30, playbook: Path = PLAYBOOK
) -> tuple[int, str, float, int]:
    """Run `python -m provisioner validate` as a child: (exit code, stderr, CPU seconds, peak RSS in bytes).

    The child's address space is capped at 2 GiB so a regression fails here instead of exhausting the
    machine; its CPU time (user + system) and peak RSS come from wait4, for this child alone. CPU time
    is what the input costs; wall-clock time also depends on how busy the machine is.
    """

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    err_path = tmp_path / "stderr.txt"
    started = time.monotonic()
    with err_path.open("wb") as err:
        child = subprocess.Popen(
            [sys.executable, "-m", "provisioner", "validate", str(inventory), "-p", str(playbook)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            preexec_fn=cap,
            cwd=REPO,
            env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
        )
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - started > timeout:
            child.kill()
            os.wait4(child.pid, 0)
            pytest.fail(f"fabnet validate {inventory.name} still running after {timeout} s")
        time.sleep(0.02)
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: keep Popen from waiting again
    return child.returncode, err_path.read_text(), usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def alias_bomb(tmp_path: Path) -> Path:
    lines = ["all:", "  vars:", '    l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"    l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 10)]
    lines += ["  hosts:", "    gpu01:"]
    path = tmp_path / "hosts.yml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_validate_refuses_an_alias_bomb_within_5_s_and_500_mb(tmp_path: Path) -> None:
    code, stderr, elapsed, rss = run_validate(alias_bomb(tmp_path), tmp_path)
    assert code == cli.EXIT_INVALID
    assert "hosts.yml:" in stderr and "expands to more than" in stderr
    assert "Traceback" not in stderr
    assert elapsed < 5, f"took {elapsed:.1f} s of CPU"
    assert rss < 500 * 1024 * 1024, f"peak RSS {rss / 2**20:.0f} MiB"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"[" * 20000 + b"]" * 20000, "nested more than 100 levels deep"),
        (b"all:\n  hosts:\n    a\x00b:\n", "hosts.yml:3: a NUL byte at column 6"),
        (b"all:\n  hosts:\n    a\x1bb:\n", "hosts.yml:3: the control character U+001B"),
        (b"all:\n  hosts:\n    \xff:\n", "hosts.yml:3: not UTF-8 text"),
    ],
    ids=["deep", "nul", "escape", "latin1"],
)
def test_validate_gives_one_clear_line_for_bytes_that_used_to_crash(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    path = tmp_path / "hosts.yml"
    path.write_bytes(content)
    code, stderr, _, _ = run_validate(path, tmp_path)
    assert code == cli.EXIT_INVALID
    assert expected in stderr
    assert "Traceback" not in stderr


def test_validate_refuses_a_fifo_inventory_instead_of_blocking(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yml"
    os.mkfifo(path)
    started = time.monotonic()
    code, stderr, _, _ = run_validate(path, tmp_path, timeout=60)
    assert code == cli.EXIT_INVALID
    assert "hosts.yml: is a named pipe (FIFO), expected a regular" in stderr
    assert time.monotonic() - started < 60  # blocked, it would never end: the timeout would fail it


def test_validate_gives_clear_errors_for_templates_that_used_to_exhaust_or_leak(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    gpu01:\n      key: \"{% include '/etc/passwd' %}\"\n")
    playbook = tmp_path / "site.yml"
    playbook.write_text(
        "- hosts: all\n"
        "  vars:\n"
        "    big: \"{{ 'a' * 3000000000 }}\"\n"
        "    lorem: \"{{ lipsum(2000000) }}\"\n"
        "    deep: \"{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}\"\n"
        "  resources:\n"
        "    - file: {path: /etc/a, template: /etc/passwd}\n"
        "    - file: {path: /etc/b, content: '{{ key }}'}\n"
    )
    code, stderr, elapsed, rss = run_validate(inventory, tmp_path, playbook=playbook)
    assert code == cli.EXIT_INVALID
    assert "Traceback" not in stderr and "root:" not in stderr
    for expected in (
        "site.yml:3: plays[0].vars.big: cannot render",
        "would be 3,000,000,000 characters long, over the limit of 1,048,576 characters",
        "site.yml:4: plays[0].vars.lorem: cannot render",
        "lipsum() makes at most 100 paragraphs",
        "site.yml:5: plays[0].vars.deep: cannot render",
        "recursion too deep",
        "site.yml:7: plays[0].resources[0].file.template: a template is named relative to",
        "hosts.yml:4: all.hosts.gpu01.key: template syntax error",
    ):
        assert expected in stderr, expected
    assert elapsed < 15, f"took {elapsed:.1f} s of CPU"
    assert rss < 500 * 1024 * 1024


# ------------------------------------------------------------------------------ the last line of defence


def test_an_unexpected_exception_is_one_line_and_a_hint(monkeypatch, capsys) -> None:
    def broken(*_args: object, **_kwargs: object) -> list[object]:
        raise RuntimeError("surprise\nsecond line")

    monkeypatch.setattr("provisioner.load.hostplans.validate", broken)
    with pytest.raises(SystemExit) as info:
        cli.main(["validate", str(REPO / "inventories/example/hosts.yml")])
    out, err = capsys.readouterr()
    assert info.value.code == cli.EXIT_ERROR
    assert "Traceback" not in err + out
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: internal error (RuntimeError: surprise); this is a bug in fabnet: please report")
    assert "FABNET_DEBUG=1" in lines[0]


def test_internal_error_text_is_short_and_has_no_terminal_escapes() -> None:
    text = cli.internal_error(RuntimeError("\x1b[2J" + "x" * 500))
    assert "\x1b" not in text and "\\x1b[2J" in text
    assert len(text) < 400
    assert cli.internal_error(MemoryError()).startswith("internal error (MemoryError); ")


def test_fabnet_debug_shows_the_traceback(monkeypatch) -> None:
    monkeypatch.setenv("FABNET_DEBUG", "1")
    monkeypatch.setattr("provisioner.load.hostplans.validate", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        cli.main(["validate", str(REPO / "inventories/example/hosts.yml")])
