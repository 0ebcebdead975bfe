"""sudo with a password, on a two-node lab whose login user needs one (a real `ALL=(ALL) ALL` sudoers rule,
a real password set with chpasswd): with FABNET_BECOME_PASSWORD apply converges (testinfra, as root over
the system ssh client, is the oracle); without it, or with a wrong one, each host fails at once with a
reason to act on and nothing changes; -K asks on the terminal and refuses without one; the password is in
no output, no journal (fabnet's, the host's, systemd's, where sudo logs its command line) and no command
line; with NOPASSWD sudo the password line is never run; smoke and rollback go through the same sudo."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from provisioner.lab import manager
from provisioner.run.become import ENV_VAR
from tests.e2e.conftest import Lab, lab_name

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "playbooks" / "site.yml"
BECOME_LAB = lab_name("sudo")
USER = "deploy"
# Spaces, quotes and shell syntax: the password must arrive as it is, and never be run.
PASSWORD = "c0rrect h0rse'\"; touch /root/pw-ran; $(touch /root/pw-ran) `touch /root/pw-ran`"
# For a NOPASSWD login the line reaches the shell under sudo; had it been run, the file would exist.
NOPASSWD_LINE = "touch /root/pw-ran"


def fabnet(*args: str, password: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    if password is not None:
        env[ENV_VAR] = password
    return subprocess.run([sys.executable, "-m", "provisioner", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env, start_new_session=True)  # no terminal for -K


@pytest.fixture(scope="module")
def slab() -> Iterator[Lab]:
    """gpu01 in sync, gpu02 with its data MTU drifted; on both, a login user whose sudo needs a password."""
    manager.down(BECOME_LAB)
    try:
        lab = Lab(manager.up(BECOME_LAB, 2))
        lab.add_sudo_user(USER, PASSWORD)
        yield lab
    finally:
        manager.down(BECOME_LAB)


def inventory_for(lab: Lab, directory: Path, user: str) -> Path:
    data = yaml.safe_load(lab.state.inventory_path.read_text())
    data["all"]["vars"].update({"ansible_user": user, "ansible_become": True})
    path = directory / f"{user}.yml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def inventory(slab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return inventory_for(slab, tmp_path_factory.mktemp("inventory"), USER)


def mtu(lab: Lab, name: str) -> int:
    return json.loads(lab.host(lab.node(name)).check_output("ip -j link show eth1"))[0]["mtu"]


def host_errors(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    return {h["name"]: h["error"] or "" for h in json.loads(proc.stdout)["hosts"]}


def test_without_the_password_each_host_fails_at_once_saying_how_to_give_it(slab: Lab, inventory: Path) -> None:
    started = time.monotonic()
    proc = fabnet("apply", str(inventory), "-p", str(SITE), "--yes", "--json")
    assert time.monotonic() - started < 60  # sudo -n: never a prompt that hangs
    assert proc.returncode == 2, proc.stderr
    for name, error in host_errors(proc).items():
        assert "sudo needs a password" in error and ENV_VAR in error and "-K" in error, (name, error)
    assert mtu(slab, "gpu02") == 1500  # nothing changed


def test_a_wrong_password_fails_each_host_without_running_anything(slab: Lab, inventory: Path) -> None:
    started = time.monotonic()
    proc = fabnet("apply", str(inventory), "-p", str(SITE), "--yes", "--json", password="not " + PASSWORD)
    assert time.monotonic() - started < 60
    assert proc.returncode == 2, proc.stderr
    for name, error in host_errors(proc).items():
        assert error.startswith("sudo refused the password"), (name, error)
    assert mtu(slab, "gpu02") == 1500
    for node in slab.nodes:
        assert slab.ssh(node, "test -e /var/log/fabnet/journal.jsonl", check=False).returncode == 1
        assert slab.ssh(node, "test -e /root/pw-ran", check=False).returncode == 1


def test_ask_become_pass_without_a_terminal_is_a_usage_error(inventory: Path) -> None:
    proc = fabnet("audit", str(inventory), "-p", str(SITE), "-K")
    assert proc.returncode == 64 and "-K needs a terminal" in proc.stderr and ENV_VAR in proc.stderr


def test_watch_reads_through_sudo_in_its_kept_shell_and_a_wrong_password_is_one_reason(
        slab: Lab, inventory: Path, tmp_path: Path) -> None:
    # watch keeps one shell open per host for its cycles: sudo reads the password once, when it starts.
    args = ("watch", str(inventory), "-p", str(SITE), "--every", "1s", "--for", "4s", "--json")
    good = fabnet(*args, "--history", str(tmp_path / "good.sqlite"), password=PASSWORD)
    assert good.returncode == 0, good.stderr[-2000:]
    changes = [json.loads(line) for line in good.stdout.splitlines() if line.startswith("{")]
    kinds = {(c["host"], c["kind"]) for c in changes}
    assert {("gpu01", "watching"), ("gpu02", "watching")} <= kinds, changes
    assert not [c for c in changes if c["kind"] == "host_down"], changes
    shown = fabnet("history", "--history", str(tmp_path / "good.sqlite"), "--json")
    cycles = json.loads(shown.stdout)
    assert shown.returncode == 0 and cycles, shown.stderr
    bad = fabnet(*args, "--history", str(tmp_path / "bad.sqlite"), password="not " + PASSWORD)
    down = [json.loads(line) for line in bad.stdout.splitlines() if '"host_down"' in line]
    assert {c["host"] for c in down} == {"gpu01", "gpu02"}, bad.stdout[-3000:] + bad.stderr[-2000:]
    assert all("sudo refused the password" in json.dumps(c) for c in down), down
    for node in slab.nodes:
        assert slab.ssh(node, "test -e /root/pw-ran", check=False).returncode == 1


@pytest.fixture(scope="module")
def converged(slab: Lab, inventory: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    journal = tmp_path_factory.mktemp("journal") / "journal.jsonl"
    proc = fabnet("apply", str(inventory), "-p", str(SITE), "--yes", "--json", "--journal", str(journal),
                  password=PASSWORD)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {"proc": proc, "journal": journal}


def test_with_the_password_apply_converges(slab: Lab, converged: dict) -> None:
    report = json.loads(converged["proc"].stdout)
    assert {h["name"]: h["status"] for h in report["hosts"]} == {"gpu01": "ok", "gpu02": "changed"}
    gpu02 = slab.host(slab.node("gpu02"))
    assert mtu(slab, "gpu02") == 9000
    assert "MTUBytes=9000" in gpu02.file("/etc/systemd/network/10-data.network").content_string
    # It was the unprivileged user that logged in, and sudo that made it root.
    log = slab.ssh(slab.node("gpu02"), f"journalctl --no-pager -o cat | grep -c 'Accepted publickey for {USER}'")
    assert int(log.stdout) >= 3  # gather, change, re-check
    sudo_log = slab.ssh(slab.node("gpu02"), "journalctl --no-pager -o cat _COMM=sudo").stdout
    assert f"{USER} : " in sudo_log and "USER=root" in sudo_log


def test_the_password_is_nowhere(slab: Lab, converged: dict) -> None:
    proc = converged["proc"]
    secret_parts = [PASSWORD, "c0rrect h0rse"]
    places = {"stdout (--json)": proc.stdout, "stderr": proc.stderr,
              "local journal": converged["journal"].read_text()}
    for node in slab.nodes:
        places[f"{node.name} fabnet journal"] = slab.ssh(node, "cat /var/log/fabnet/journal.jsonl", check=False).stdout
        # Every field of every entry: messages, and the _CMDLINE journald records of each process that logs
        # (sudo's own command line among them).
        entries = slab.ssh(node, "journalctl --no-pager -o json").stdout
        assert any(json.loads(line).get("_COMM") == "sudo" for line in entries.splitlines())
        places[f"{node.name} systemd journal"] = entries
        assert slab.ssh(node, "test -e /root/pw-ran", check=False).returncode == 1
    for where, text in places.items():
        for part in secret_parts:
            assert part not in text, where


def test_a_password_typed_at_the_prompt_is_asked_once(slab: Lab, inventory: Path, converged: dict) -> None:
    """-K on a real terminal (a pty): one prompt for the whole run, then an audit as the sudo user."""
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    pid, fd = pty.fork()
    if pid == 0:  # the child: fabnet with the pty as its terminal
        try:
            os.chdir(ROOT)
            os.execve(sys.executable, [sys.executable, "-m", "provisioner", "audit", str(inventory), "-p",
                                       str(SITE), "-K"], env)
        finally:
            os._exit(127)
    seen = b""
    deadline = time.monotonic() + 120
    sent = False
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the child closed the terminal: it ended
            break
        if not chunk:
            break
        seen += chunk
        if not sent and b"BECOME password:" in seen:
            os.write(fd, PASSWORD.encode() + b"\n")
            sent = True
    _, status = os.waitpid(pid, 0)
    text = seen.decode(errors="replace")
    assert sent and text.count("BECOME password:") == 1, text[-2000:]
    assert os.waitstatus_to_exitcode(status) == 0, text[-2000:]  # converged above: every host in sync
    assert PASSWORD not in text and "c0rrect h0rse" not in text  # no echo


def test_nopasswd_sudo_with_the_variable_set_never_runs_the_password_line(slab: Lab, converged: dict,
                                                                          tmp_path: Path) -> None:
    proc = fabnet("audit", str(inventory_for(slab, tmp_path, "ops")), "-p", str(SITE), "--json",
                  password=NOPASSWD_LINE)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for node in slab.nodes:
        assert slab.ssh(node, "test -e /root/pw-ran", check=False).returncode == 1


def test_smoke_runs_its_probes_and_ranks_through_the_same_sudo(inventory: Path, converged: dict) -> None:
    proc = fabnet("smoke", str(inventory), "-p", str(SITE), "--sizes", "1M", "--iters", "2", "--timeout", "60",
                  "--json", password=PASSWORD)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert json.loads(proc.stdout)["verdict"] == "pass"
    assert PASSWORD not in proc.stdout + proc.stderr


def test_rollback_goes_through_the_same_sudo(slab: Lab, inventory: Path, converged: dict) -> None:
    run_id = json.loads(converged["proc"].stdout)["run_id"]
    proc = fabnet("rollback", str(inventory), "-p", str(SITE), "--limit", "gpu02", "--run", run_id, "--yes",
                  "--json", password=PASSWORD)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "MTUBytes=9000" not in slab.host(slab.node("gpu02")).file(
        "/etc/systemd/network/10-data.network").content_string
    assert PASSWORD not in proc.stdout + proc.stderr


def test_scripts_and_sudo_run_in_the_c_locale_whatever_the_login_sets(slab: Lab, inventory: Path) -> None:
    """A node whose login environment asks for German (pam_env reads /etc/environment): every script fabnet
    runs, and sudo itself, get LC_ALL=C, so tools print the words the parsers read (`stat %F`) and sudo's
    refusals are recognised."""
    from provisioner.load.loading import load_hosts
    from provisioner.run.become import Secret
    from provisioner.run.session import Options, open_session

    node = slab.node("gpu01")
    slab.ssh(node, "cp /etc/environment /etc/environment.fabnet-test; "
                   "printf 'LANG=de_DE.UTF-8\\nLC_ALL=de_DE.UTF-8\\n' >> /etc/environment")
    try:
        # The login really sets it (the system ssh client goes through the same pam_env).
        assert slab.ssh(node, 'printf %s "$LC_ALL"').stdout == "de_DE.UTF-8"
        [plan], _ = load_hosts(inventory, "gpu01")
        with open_session(plan.host, Options(become_password=Secret(PASSWORD))) as session:
            as_root = session.exec('printf "%s|%s" "$LC_ALL" "$(id -u)"')
            as_login = session.exec('printf "%s|%s" "$LC_ALL" "$(id -un)"', sudo=False)
        assert as_root.stdout == "C|0"
        assert as_login.stdout == f"C|{USER}"
        wrong = fabnet("audit", str(inventory), "--limit", "gpu01", "-p", str(SITE), "--json", password="wrong")
        assert "sudo refused the password" in host_errors(wrong).get("gpu01", ""), wrong.stdout[-2000:]
    finally:
        slab.ssh(node, "mv /etc/environment.fabnet-test /etc/environment")


def test_a_management_path_change_through_sudo_is_acknowledged_and_confirmed(slab: Lab, inventory: Path,
                                                                             converged: dict, tmp_path: Path) -> None:
    """An armed change waits for fabnet to acknowledge its marker on the script's standard input, which here
    only sudo relays: acknowledged, the change runs and a fresh connection confirms it."""
    playbook = tmp_path / "mgmt-mtu.yml"
    playbook.write_text("- name: management MTU\n  hosts: gpu\n  resources:\n"
                        "    - interface: {name: eth0, state: up, mtu: 1500, persistent: false}\n")
    node = slab.node("gpu01")
    slab.ssh(node, "ip link set dev eth0 mtu 1400")
    proc = fabnet("apply", str(inventory), "-p", str(playbook), "--limit", "gpu01", "--yes", "--json",
                  "--revert-after", "10", "--journal", str(tmp_path / "j.jsonl"), password=PASSWORD)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["hosts"][0]["status"] == "changed", report["hosts"][0]
    confirm = [json.loads(line) for line in (tmp_path / "j.jsonl").read_text().splitlines()]
    assert any(j.get("action") == "confirm" and j["outcome"] == "confirmed" for j in confirm)
    assert json.loads(slab.host(node).check_output("ip -j link show eth0"))[0]["mtu"] == 1500
