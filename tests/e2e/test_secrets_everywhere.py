"""Secrets in no output: on a two-node lab whose login user needs a sudo password, distinctive secrets are
planted everywhere fabnet can see one (the sudo password in FABNET_BECOME_PASSWORD, a plain
`ansible_become_password` in the inventory, an ansible-vault value in group_vars, a variable rendered
into a file by a template, a sensitive file's inline content, the old content of a file it replaces, a
wrong sudo password), every command runs with every output option, and each artifact is searched:
stdout and stderr, --json, --junit, --prom, the saved plan, the local and host journals, the history
(SQLite dump) and its HTML report, every process's command line and environment on the nodes during
the apply, and the nodes' systemd journals. The commands are checked to have done their
work, so an empty output cannot pass."""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from provisioner.lab import manager
from provisioner.run.become import ENV_VAR
from tests.e2e.conftest import Lab, lab_name

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
LAB = lab_name("sec")
USER = "deploy"
SUDO = "Sudo-Marmot-4471"  # the login user's real sudo password
WRONG = "Wrong-Heron-9052"  # a wrong one, tried once
INVENTORY_PW = "Inv-Pelican-2290"  # written in the inventory; fabnet must ignore it and never show it
FILE_SECRET = "File-Walrus-8813"  # a variable rendered into files
OLD_SECRET = "Old-Lynx-5126"  # what a replaced file held
VAULT_PLAIN = "Vault-Okapi-3367"  # the plaintext of a vaulted value
SECRETS = [SUDO, WRONG, INVENTORY_PW, FILE_SECRET, OLD_SECRET, VAULT_PLAIN]
APP = "/etc/fabnet-secret-test/app.conf"
TOKEN = "/etc/fabnet-secret-test/inline.conf"


def base64_forms(secret: str) -> list[str]:
    """The secret as it looks inside any base64 text, whatever its offset there."""
    forms = []
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + secret.encode()).decode()
        forms.append(encoded[4 * ((shift + 2) // 3):-4])
    return forms


@dataclass
class World:
    lab: Lab
    inventory: Path
    playbook: Path
    work: Path
    artifacts: dict[str, str] = field(default_factory=dict)
    results: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)

    def env(self, password: str | None = SUDO) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
        env.update({"FABNET_HISTORY": str(self.work / "history.sqlite"), "XDG_STATE_HOME": str(self.work / "state")})
        # Wide enough that no table folds a value across lines: a folded secret would slip past the search.
        env["COLUMNS"] = "1000"
        if password is not None:
            env[ENV_VAR] = password
        return env

    def fabnet(self, key: str, *args: str, password: str | None = SUDO) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([sys.executable, "-m", "provisioner", *args], capture_output=True, text=True,
                              timeout=300, cwd=ROOT, env=self.env(password), start_new_session=True)
        self.results[key] = proc
        self.artifacts[f"{key}: stdout"] = proc.stdout
        self.artifacts[f"{key}: stderr"] = proc.stderr
        return proc

    def read(self, key: str, path: Path) -> str:
        text = path.read_text()
        self.artifacts[key] = text
        return text


def vault_text(work: Path) -> str:
    """A real ansible-vault ciphertext of VAULT_PLAIN (fabnet never has the vault password)."""
    secret = work / "vault-pass"
    secret.write_text("vault-password\n")
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-vault"), "encrypt_string",
                           "--vault-password-file", str(secret), VAULT_PLAIN, "--name", "vault_db_password"],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:  # ansible-core is a test extra: a ciphertext of the same shape
        return ("vault_db_password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  "
                + base64.b16encode(b"not the plaintext").decode().lower() + "\n")
    return proc.stdout


def make_inputs(lab: Lab, work: Path) -> tuple[Path, Path]:
    inv_dir = work / "inventory"
    (inv_dir / "group_vars" / "all").mkdir(parents=True)
    data = yaml.safe_load(lab.state.inventory_path.read_text())
    data["all"]["vars"].update({"ansible_user": USER, "ansible_become": True, "ansible_become_password": INVENTORY_PW})
    (inv_dir / "hosts.yml").write_text(yaml.safe_dump(data))
    # The decrypted value an operator keeps out of version control, and the vaulted one fabnet cannot open.
    (inv_dir / "group_vars" / "all" / "app.yml").write_text(f"db_password: {FILE_SECRET}\n"
                                                            "db_url: 'db://app@{{ inventory_hostname }}/x'\n")
    (inv_dir / "group_vars" / "all" / "vault.yml").write_text(vault_text(work))
    play_dir = work / "play"
    (play_dir / "templates").mkdir(parents=True)
    # Nothing in the path or the rendered text says "secret": only that db_password renders into it.
    (play_dir / "templates" / "app.conf.j2").write_text("url = {{ db_url }}\ndb = {{ db_password }}\n")
    playbook = play_dir / "site.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "all", "resources": [
        {"file": {"path": APP, "template": "app.conf.j2"}},
        {"file": {"path": TOKEN, "content": "{{ db_password }}-inline\n", "sensitive": True, "mode": "0640"}},
    ]}]))
    return inv_dir, playbook


SLOW_SYNC = "/usr/local/bin/sync"
# Each line once, as it first appears: a sampler that printed every sample would fill its pipe (read only
# at the end) within seconds and stop sampling before a slow apply even began.
SPY = ("for i in $(seq 600); do cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; "
       "sleep 0.05; done | awk '!seen[$0]++ {print; fflush()}'")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    manager.down(LAB)
    try:
        lab = Lab(manager.up(LAB, 2))
        lab.add_sudo_user(USER, SUDO)
        # gpu02 already holds the file, with an old secret: its diff and backup must not show it.
        lab.ssh(lab.node("gpu02"), f"mkdir -p /etc/fabnet-secret-test && printf 'db = %s\\n' {OLD_SECRET} > {APP}"
                                   f" && chmod 0600 {APP}")
        work = tmp_path_factory.mktemp("secrets")
        inventory, playbook = make_inputs(lab, work)
        world = World(lab, inventory, playbook, work)
        run_everything(world)
        yield world
    finally:
        manager.down(LAB)


def run_everything(w: World) -> None:
    inv, pb, work = str(w.inventory), str(w.playbook), w.work
    w.fabnet("validate", "validate", inv, "-p", pb)
    for key, args in {"inventory --list": ["--list"], "inventory --host": ["--host", "gpu01"],
                      "inventory --graph": ["--graph"]}.items():
        w.fabnet(key, "inventory", inv, *args)
    w.fabnet("audit", "audit", inv, "-p", pb, "-v")
    w.fabnet("audit --json", "audit", inv, "-p", pb, "--json", "--junit", str(work / "audit.xml"),
             "--prom", str(work / "audit.prom"))
    w.fabnet("plan --diff -o", "plan", inv, "-p", pb, "--diff", "-o", str(work / "plan.json"))
    w.fabnet("apply --check --diff", "apply", inv, "-p", pb, "--check", "--diff")
    w.fabnet("wrong sudo password", "audit", inv, "-p", pb, "--json", password=WRONG)
    # As root: command lines are readable by every user, so root sees what they see, and more. Sampling can
    # miss a short apply, so each write's `sync` is held for a second (a wrapper ahead of it on sudo's PATH)
    # and apply starts only once every spy has taken its first sample.
    for node in w.lab.nodes:
        w.lab.ssh(node, f"printf '#!/bin/sh\\nsleep 1\\nexec /bin/sync \"$@\"\\n' > {SLOW_SYNC} && "
                        f"chmod 0755 {SLOW_SYNC}")
    spies = [subprocess.Popen([*w.lab.ssh_args(node), SPY],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for node in w.lab.nodes]
    first = [spy.stdout.readline() if spy.stdout else "" for spy in spies]
    try:
        w.fabnet("apply", "apply", inv, "-p", pb, "--diff", "--yes", "--json", "--junit", str(work / "apply.xml"),
                 "--prom", str(work / "apply.prom"), "--journal", str(work / "journal.jsonl"))
    finally:
        for node, spy, line in zip(w.lab.nodes, spies, first, strict=True):
            spy.terminate()
            w.artifacts[f"{node.name}: command lines and environments"] = line + spy.communicate(timeout=30)[0]
            w.lab.ssh(node, f"rm -f {SLOW_SYNC}")
    w.fabnet("apply (console)", "apply", inv, "-p", pb, "--diff", "--yes", "-v")  # in sync: nothing to do
    w.fabnet("audit after", "audit", inv, "-p", pb, "--json")
    w.fabnet("history", "history")
    w.fabnet("history --json", "history", "--json")
    w.fabnet("runs", "runs")
    w.fabnet("runs --json", "runs", "--json")
    w.fabnet("report --html", "report", "--html", str(work / "report.html"))
    run_id = json.loads(w.results["apply"].stdout)["run_id"]
    w.fabnet("rollback", "rollback", inv, "-p", pb, "--limit", "gpu02", "--run", run_id, "--yes", "--json")
    for name in ("audit.xml", "audit.prom", "apply.xml", "apply.prom", "journal.jsonl", "report.html"):
        w.read(name, work / name)
    with sqlite3.connect(work / "history.sqlite") as db:
        w.artifacts["history (SQLite dump)"] = "\n".join(db.iterdump())
    for node in w.lab.nodes:
        w.artifacts[f"{node.name}: host journal"] = w.lab.ssh(node, "cat /var/log/fabnet/journal.jsonl").stdout
        w.artifacts[f"{node.name}: systemd journal"] = w.lab.ssh(node, "journalctl --no-pager -o json").stdout
        w.artifacts[f"{node.name}: auth logs"] = w.lab.ssh(node, "cat /var/log/auth.log /var/log/secure 2>/dev/null; "
                                                                 "true").stdout
        w.artifacts[f"{node.name}: undo records"] = w.lab.ssh(
            node, "cat /var/backups/fabnet/*/undo/* 2>/dev/null; true").stdout


def test_the_commands_did_their_work(world: World) -> None:
    r = world.results
    assert r["validate"].returncode == 0, r["validate"].stderr
    assert "gpu01" in r["inventory --list"].stdout and "gpu01" in r["inventory --graph"].stdout
    assert r["audit"].returncode == 2 and APP in r["audit"].stdout
    assert json.loads(r["audit --json"].stdout)["hosts"]
    assert "sensitive, not shown" in r["plan --diff -o"].stdout
    assert r["apply --check --diff"].returncode == 2
    assert r["apply"].returncode == 0, r["apply"].stdout[-3000:] + r["apply"].stderr[-3000:]
    assert {h["name"]: h["status"] for h in json.loads(r["apply"].stdout)["hosts"]} == \
        {"gpu01": "changed", "gpu02": "changed"}
    assert r["audit after"].returncode == 0, r["audit after"].stdout[-2000:]
    assert r["rollback"].returncode == 0, r["rollback"].stdout[-2000:] + r["rollback"].stderr[-2000:]
    assert world.artifacts["journal.jsonl"] and world.artifacts["history (SQLite dump)"]
    assert "<html" in world.artifacts["report.html"].lower()
    for node in world.lab.nodes:
        assert "sh -s" in world.artifacts[f"{node.name}: command lines and environments"]
        assert "sudo" in world.artifacts[f"{node.name}: systemd journal"]


def test_the_files_hold_the_secrets_and_rollback_restored_the_old_one(world: World) -> None:
    lab = world.lab
    gpu01 = lab.host(lab.node("gpu01"))
    assert gpu01.file(APP).content_string == f"url = db://app@gpu01/x\ndb = {FILE_SECRET}\n"
    assert gpu01.file(APP).mode == 0o600  # rendered from a password variable, no mode given: 0600
    assert gpu01.file(TOKEN).content_string == f"{FILE_SECRET}-inline\n" and gpu01.file(TOKEN).mode == 0o640
    assert lab.host(lab.node("gpu02")).file(APP).content_string == f"db = {OLD_SECRET}\n"  # rolled back


def test_a_wrong_sudo_password_fails_each_host_saying_so(world: World) -> None:
    proc = world.results["wrong sudo password"]
    assert proc.returncode != 0
    for host in json.loads(proc.stdout)["hosts"]:
        assert (host["error"] or "").startswith("sudo refused the password"), host


def test_inventory_hides_plain_passwords_and_keeps_vaulted_ones_encrypted(world: World) -> None:
    shown = json.loads(world.results["inventory --host"].stdout)
    assert shown["ansible_become_password"].startswith("<hidden")
    vaulted = shown["vault_db_password"]
    assert set(vaulted) == {"__ansible_vault"} and vaulted["__ansible_vault"].startswith("$ANSIBLE_VAULT;")
    assert "ansible_become_password" in world.results["audit"].stderr  # said to be ignored, by name only


@pytest.mark.parametrize("secret", SECRETS)
def test_no_secret_in_any_output(world: World, secret: str) -> None:
    forms = [secret, *base64_forms(secret)]
    leaks = [f"{where}: {form!r}" for where, text in world.artifacts.items() for form in forms if form in text]
    assert not leaks, leaks


def test_the_saved_plan_is_private_and_holds_no_secret_in_clear(world: World) -> None:
    """The plan holds what apply will write (base64) by design, as a terraform plan does: owner-only."""
    plan = world.work / "plan.json"
    assert plan.stat().st_mode & 0o777 == 0o600
    text = plan.read_text()
    assert json.loads(text)["hosts"]
    for secret in SECRETS:
        assert secret not in text
    for secret in (SUDO, WRONG, INVENTORY_PW, OLD_SECRET, VAULT_PLAIN):
        assert not any(form in text for form in base64_forms(secret)), secret
