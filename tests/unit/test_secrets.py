"""Secrets stay out of what fabnet shows and of what other users of a host can see: a file's content is
on no command line while it is written, a file rendered from a password variable is sensitive whatever
its name, and plain inventory passwords are hidden where `fabnet inventory` prints variables."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.load.ansible_tags import HIDDEN, VaultedValue, hide_passwords, secret_variable
from provisioner.load.hostplans import resolve
from provisioner.load.inventory import load_inventory
from provisioner.load.playbook import load_playbook
from provisioner.load.specs import FileSpec
from provisioner.resources import file as file_resource
from provisioner.resources.steps import Step, file_step
from tests.unit.test_changes import run_script

SECRET = "Zebra-Quartz-7731-secret"


def _base64_forms(data: bytes) -> list[str]:
    """The secret as it looks inside any base64 text, whatever its offset there."""
    forms = []
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + data).decode()
        forms.append(encoded[4 * ((shift + 2) // 3):-4])  # drop the characters the padding touches
    return forms


def test_a_file_write_puts_its_content_on_no_command_line(host_dirs: Path) -> None:
    """While the write runs, every process's argv (what ps shows every user) is read: the content, in
    any base64 alignment, is in none of them."""
    target = host_dirs / "app.conf"
    snapshot = host_dirs / "argv"
    write = file_step("file[x]", "write", str(target), f"password = {SECRET}\n".encode())
    # The write and the snapshot in one step's command: the snapshot sees the step's own processes.
    spy = (f"{write.command}; for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < \"$f\"; echo; done "
           f"> {snapshot} 2>/dev/null || true")
    proc, result = run_script([Step("file[x]", "write", spy, write.shown)])
    assert proc.returncode == 0 and [r.status for r in result.steps] == ["ok"], proc.stderr
    assert target.read_text() == f"password = {SECRET}\n"
    argv = snapshot.read_text()
    assert "sh -s" in argv  # the snapshot saw the script's own shell
    for form in [SECRET, *_base64_forms(SECRET.encode())]:
        assert form not in argv, form


def test_base64_forms_find_the_secret_at_every_offset() -> None:
    for prefix in (b"", b"a", b"ab", b"abc"):
        encoded = base64.b64encode(prefix + SECRET.encode() + b"\n").decode()
        assert any(form in encoded for form in _base64_forms(SECRET.encode()))


@pytest.mark.parametrize("name", ["db_password", "ansible_become_pass", "api_token", "vault_db_pass", "tls_private_key",
                                  "ldap_bind_secret", "ansible_ssh_private_key_passphrase"])
def test_password_variables_are_secret(name: str) -> None:
    assert secret_variable(name)


@pytest.mark.parametrize("name", ["mtu", "data_iface", "ssh_key_type", "nccl_ib_gid_index", "passive_mode"])
def test_other_variables_are_not(name: str) -> None:
    assert not secret_variable(name)


def _write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_file_rendered_from_a_password_variable_is_sensitive_through_other_variables(tmp_path: Path) -> None:
    inv = _write(tmp_path, "hosts.yml", "all:\n  hosts:\n    g1:\n    g2:\n")
    _write(tmp_path, "group_vars/all.yml", f"db_password: {SECRET}\ndsn: 'db://app@h/{{{{ db_password }}}}'\n"
                                             "label: plain\n")
    _write(tmp_path, "templates/app.conf.j2", "dsn = {{ dsn }}\n")
    _write(tmp_path, "templates/plain.conf.j2", "label = {{ label }}\n")
    pb = _write(tmp_path, "site.yml", "- hosts: all\n  resources:\n"
                "    - file: {path: /etc/app/app.conf, template: app.conf.j2}\n"
                "    - file: {path: /etc/app/inline.conf, content: 'x={{ dsn }}'}\n"
                "    - file: {path: /etc/app/plain.conf, template: plain.conf.j2}\n")
    plans = resolve(load_playbook(pb), load_inventory(inv))
    for plan in plans:  # the second host reuses the first one's rendered variables: still tracked
        app, inline, plain = (r.spec for r in plan.resources)
        assert isinstance(app, FileSpec) and isinstance(inline, FileSpec) and isinstance(plain, FileSpec)
        assert app.content is not None
        assert app.content == f"dsn = db://app@h/{SECRET}\n" and app.sensitive and inline.sensitive
        assert not plain.sensitive
        # What a report shows of a change to it: line counts, no content; and it is wanted at 0600.
        assert file_resource.wanted_mode(app) == "0600"
        diff = file_resource._diff(app, b"dsn = old\n", app.content.encode())
        assert SECRET not in diff and "sensitive, not shown" in diff


@pytest.mark.parametrize("fields", ["path: /etc/app.conf, mode: '{{ db_password }}'",
                                    "path: /etc/app.conf, owner: '{{ db_password }}'",
                                    "path: 'etc/{{ db_password }}'"])
def test_a_value_rendered_from_a_password_is_not_quoted_in_a_validation_error(
        tmp_path: Path, fields: str, capsys: pytest.CaptureFixture[str]) -> None:
    inv = _write(tmp_path, "hosts.yml", "all:\n  hosts:\n    g1:\n")
    _write(tmp_path, "group_vars/all.yml", f"db_password: '{SECRET} x;y'\n")
    pb = _write(tmp_path, "site.yml", "- hosts: all\n  resources:\n"
                f"    - file: {{{fields}, content: 'x'}}\n")
    with pytest.raises(SystemExit) as done:
        main(["validate", str(inv), "-p", str(pb)])
    out, err = capsys.readouterr()
    assert done.value.code == 3 and "site.yml:3" in err, err  # the error is still reported, with its line
    assert SECRET not in out + err


def test_inventory_list_and_host_hide_plain_passwords_and_keep_vaulted_ones_encrypted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    vault = "$ANSIBLE_VAULT;1.1;AES256\n6162636465\n"
    inv = _write(tmp_path, "inv/hosts.yml", "all:\n  hosts:\n    g1:\n      ansible_password: " + SECRET + "\n"
                 "      ansible_ssh_pass: " + SECRET + "\n      ansible_become_password: " + SECRET + "\n")
    _write(tmp_path, "inv/group_vars/all.yml", "ansible_become_pass: !vault |\n  "
           + vault.replace("\n", "\n  ") + "\nmtu: 9000\n")
    for args in (["--list"], ["--host", "g1"]):
        with pytest.raises(SystemExit) as done:
            main(["inventory", str(inv.parent), *args])
        assert done.value.code == 0
        out, err = capsys.readouterr()
        assert SECRET not in out + err
        shown = json.loads(out)
        variables = shown["_meta"]["hostvars"]["g1"] if args == ["--list"] else shown
        assert variables["mtu"] == 9000
        for name in ("ansible_password", "ansible_ssh_pass", "ansible_become_password"):
            assert variables[name] == HIDDEN
        assert variables["ansible_become_pass"] == {"__ansible_vault": vault}


def test_hide_passwords_keeps_vaulted_values_and_absent_ones() -> None:
    vaulted = VaultedValue("$ANSIBLE_VAULT;1.1;AES256\n00\n")
    printed = {"__ansible_vault": "$ANSIBLE_VAULT;1.1;AES256\n00\n"}
    got = hide_passwords({"ansible_password": vaulted, "ansible_become_pass": printed, "ansible_ssh_pass": None,
                          "ansible_become_password": "x", "other": "y"})
    assert got == {"ansible_password": vaulted, "ansible_become_pass": printed, "ansible_ssh_pass": None,
                   "ansible_become_password": HIDDEN, "other": "y"}
