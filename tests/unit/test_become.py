"""sudo with and without a password: the exec's command line and its standard input, run here with the
local /bin/sh exactly as the host's login shell runs what follows `sudo ... --`, in both cases sudo leaves
(it read the password line, or it did not need it); and what sudo's refusals read as."""

from __future__ import annotations

import copy
import pickle
import shlex
import subprocess
from pathlib import Path

import click
import pytest

from provisioner.commands import options
from provisioner.load.inventory import Host
from provisioner.run import become
from provisioner.run.become import Become, Secret

PASSWORD = "pa ss'$(touch PWNED)`touch PWNED`;touch PWNED"
SCRIPT = "{\necho ran as script\necho \"ssh=${FABNET_SSH-unset}\"\n}\n"


def after_sudo(command: str) -> str:
    """What sudo runs, as the login shell would see it: the part of the command line after `--`."""
    head, rest = command.split(" -- ", 1)
    assert shlex.split(head)[:3] == ["env", "LC_ALL=C", "sudo"]  # sudo's own words in the C locale
    return rest


def run_as_sudo_leaves_it(command: str, stdin: bytes, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["sh", "-c", after_sudo(command)], input=stdin, capture_output=True, timeout=10,
                          cwd=cwd, env={"PATH": "/usr/bin:/bin", "SSH_CONNECTION": "10.0.0.1 5 10.0.0.2 22"})


def test_without_a_password_sudo_never_prompts() -> None:
    assert Become("root").command() == "env LC_ALL=C sudo -n -H -u root -- sh -s"
    assert Become("svc acct").command() == "env LC_ALL=C sudo -n -H -u 'svc acct' -- sh -s"
    assert Become("root").stdin_prefix() == b""
    assert Become("root", forward_ssh=True).command() == \
        'env LC_ALL=C sudo -n -H -u root -- env "FABNET_SSH=$SSH_CONNECTION" sh -s'


def test_with_a_password_it_goes_on_stdin_before_a_marker_never_on_the_command_line() -> None:
    b = Become("root", Secret(PASSWORD), forward_ssh=True)
    command = b.command()
    assert command.startswith("env LC_ALL=C sudo -S -p '' -H -u root -- env \"FABNET_SSH=$SSH_CONNECTION\" sh -c ")
    assert PASSWORD not in command and "PWNED" not in command
    assert b.marker in command
    assert b.stdin_prefix() == (PASSWORD + "\n" + b.marker + "\n").encode()
    assert Become("root", Secret("x")).marker != Become("root", Secret("x")).marker  # one per exec


@pytest.mark.parametrize("sudo_read_the_password", [False, True], ids=["nopasswd", "prompted"])
def test_the_script_runs_and_the_password_line_never_does(sudo_read_the_password: bool, tmp_path: Path) -> None:
    b = Become("root", Secret(PASSWORD), forward_ssh=True)
    stdin = b.stdin_prefix() + SCRIPT.encode()
    if sudo_read_the_password:
        stdin = stdin.split(b"\n", 1)[1]
    proc = run_as_sudo_leaves_it(b.command(), stdin, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"ran as script\nssh=10.0.0.1 5 10.0.0.2 22\n"
    assert not (tmp_path / "PWNED").exists()
    assert PASSWORD.encode() not in proc.stdout + proc.stderr


def test_a_stream_without_the_marker_runs_nothing(tmp_path: Path) -> None:
    """As when a wrong password made sudo eat the marker and sudo still ran (a later line matched)."""
    b = Become("root", Secret("pw"))
    proc = run_as_sudo_leaves_it(b.command(), b"pw\n{\ntouch PWNED\n}\n", tmp_path)
    assert proc.returncode == become.NO_MARKER_EXIT and b"did not arrive" in proc.stderr
    assert not (tmp_path / "PWNED").exists()


def test_a_secret_never_shows_and_cannot_hold_what_would_end_its_line() -> None:
    secret = Secret("hunter2")
    for shown in (repr(secret), str(secret), f"{secret}", repr([secret]), repr(Become("root", secret))):
        assert "hunter2" not in shown
    assert secret.reveal() == "hunter2"
    for bad in ("two\nlines", "cr\rhere", "nul\0here", ""):
        with pytest.raises(ValueError):
            Secret(bad)
    with pytest.raises(TypeError):
        pickle.dumps(secret)
    assert copy.deepcopy(Become("root", secret)).password is secret


def test_become_follows_the_inventory() -> None:
    assert become.for_host(Host("gpu01", "10.0.0.1"), Secret("pw")) is None
    b = become.for_host(Host("gpu01", "10.0.0.1", become=True, become_user="admin"), Secret("pw"), forward_ssh=True)
    assert b is not None and (b.user, b.forward_ssh, b.password is not None) == ("admin", True, True)


# What sudo 1.9.13 (Debian bookworm) prints, recorded from a real run of each case.
WRONG = "Sorry, try again.\nSorry, try again.\nsudo: 3 incorrect password attempts\n"
MISSING = "sudo: a password is required\n"
NOT_ALLOWED = "ops is not in the sudoers file.\n"


def test_sudo_refusals_read_as_what_to_do() -> None:
    b = Become("root", Secret("pw"))
    wrong = become.failure(b, 1, "", WRONG)
    assert wrong is not None and wrong.startswith("sudo refused the password") and become.ENV_VAR in wrong
    missing = become.failure(Become("root"), 1, "", MISSING)
    assert missing is not None and become.ENV_VAR in missing and "-K" in missing
    assert "does not allow" in (become.failure(b, 1, "", NOT_ALLOWED) or "")
    # The script ran (output, or another exit code): whatever it printed is its own business.
    assert become.failure(b, 1, "@@fabnet:x:begin", WRONG) is None
    assert become.failure(b, 0, "", MISSING) is None
    assert become.failure(b, 2, "", WRONG) is None


def test_the_password_comes_from_the_environment_once_and_leaves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(become.ENV_VAR, "s3cret")
    secret = options.become_password(False)
    assert secret is not None and secret.reveal() == "s3cret"
    assert become.ENV_VAR not in __import__("os").environ  # no child process inherits it
    assert options.become_password(False) is None
    monkeypatch.setenv(become.ENV_VAR, "two\nlines")
    with pytest.raises(click.UsageError, match=f"{become.ENV_VAR}: .*newline"):
        options.become_password(False)


def test_ask_prompts_on_the_terminal_and_refuses_without_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(options, "_terminal", lambda: False)
    with pytest.raises(click.UsageError, match=f"-K needs a terminal.*{become.ENV_VAR}"):
        options.become_password(True)
    prompts: list[str] = []
    monkeypatch.setattr(options, "_terminal", lambda: True)
    monkeypatch.setattr(options.getpass, "getpass", lambda prompt: prompts.append(prompt) or "typed")
    monkeypatch.setenv(become.ENV_VAR, "from-env")
    secret = options.become_password(True)
    assert secret is not None and secret.reveal() == "typed" and prompts == ["BECOME password: "]


@pytest.mark.parametrize("command", ["audit", "apply", "plan", "rollback", "smoke", "explain"])
def test_every_command_that_runs_on_hosts_offers_it(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    from provisioner.cli import main

    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "-K, --ask-become-pass" in out and become.ENV_VAR in out
