"""keycheck: private key files that cannot log in are one configuration error each, naming the file and
its hosts, found before any connection. The keys are real ones made with ssh-keygen."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from provisioner.errors import ConfigError, ConfigErrors
from provisioner.load import keycheck
from provisioner.load.inventory import Host
from provisioner.load.yamlsrc import Origin

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs ssh-keygen")


def keygen(path: Path, kind: str = "ed25519", passphrase: str = "", pem: bool = False) -> Path:
    args = ["ssh-keygen", "-q", "-t", kind, "-N", passphrase, "-f", str(path), "-C", "test"]
    if kind == "rsa":
        args[4:4] = ["-b", "2048"]
    if pem:
        args += ["-m", "PEM"]
    subprocess.run(args, check=True, capture_output=True)
    return path


def host(name: str, key: Path | None, origin: Origin | None = None) -> Host:
    origins = {"ansible_ssh_private_key_file": origin} if origin else {}
    return Host(name, "10.0.0.1", key_file=key, var_origins=origins,
                explicit=frozenset({"address", "key_file"} if key else {"address"}))


def no_agent() -> set[bytes]:
    return set()


def check(hosts: list[Host], tmp_path: Path, config: str = "", agent: set[bytes] | None = None) -> None:
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text(config)
    keycheck.check_keys(hosts, ssh_config, agent_keys=lambda: agent or set())


@pytest.mark.parametrize(("kind", "pem"), [("ed25519", False), ("rsa", False), ("rsa", True), ("ecdsa", False)])
def test_usable_keys_pass(tmp_path: Path, kind: str, pem: bool) -> None:
    key = keygen(tmp_path / "id", kind, pem=pem)
    check([host("gpu01", key)], tmp_path)
    assert keycheck.key_problem(key) is None


def test_no_key_at_all_passes(tmp_path: Path) -> None:
    check([host("gpu01", None)], tmp_path)


def test_a_missing_key_names_the_path_the_setting_and_every_host(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    origin = Origin("inv/group_vars/all.yml", 3, "ansible_ssh_private_key_file")
    with pytest.raises(ConfigError) as caught:
        check([host(f"gpu0{i}", missing, origin) for i in range(1, 6)], tmp_path)
    text = str(caught.value)
    assert text.count(str(missing)) == 1
    assert text.startswith("inv/group_vars/all.yml:3: ansible_ssh_private_key_file: ")
    assert "does not exist" in text and "hosts gpu01, gpu02, gpu03 and 2 more" in text


@pytest.mark.parametrize(("make", "words"), [
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: p.write_text("hello, not a key\n"), "is not a private key"),
    (lambda p: p.write_bytes(b"\x00\x01" * 300), "is not a private key"),
    (lambda p: p.write_text(""), "is not a private key"),
])
def test_what_is_not_a_key_file_is_refused(tmp_path: Path, make, words: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "k"
    make(path)
    with pytest.raises(ConfigError, match=words):
        check([host("gpu01", path)], tmp_path)


def test_a_public_key_is_refused_with_the_private_key_named(tmp_path: Path) -> None:
    key = keygen(tmp_path / "id_ed25519")
    with pytest.raises(ConfigError) as caught:
        check([host("gpu01", key.with_name("id_ed25519.pub"))], tmp_path)
    assert "is a public key" in str(caught.value) and f"usually {key})" in str(caught.value)


def test_an_unreadable_key_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = keygen(tmp_path / "id")

    def denied(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", denied)  # as root, a chmod 000 file is still readable
    with pytest.raises(ConfigError, match="cannot be read: Permission denied"):
        check([host("gpu01", key)], tmp_path)


@pytest.mark.parametrize(("kind", "pem"), [("ed25519", False), ("rsa", True), ("ecdsa", False)])
def test_a_passphrase_key_without_an_agent_is_refused(tmp_path: Path, kind: str, pem: bool) -> None:
    key = keygen(tmp_path / "id", kind, passphrase="secret phrase", pem=pem)
    with pytest.raises(ConfigError, match="protected by a passphrase and no SSH agent holds it"):
        check([host("gpu01", key)], tmp_path)


def test_a_passphrase_key_an_agent_holds_passes_and_another_agent_key_does_not(tmp_path: Path) -> None:
    key = keygen(tmp_path / "id", passphrase="secret phrase")
    other = keygen(tmp_path / "other")
    blob = keycheck.public_blob(key)
    assert blob is not None and blob != keycheck.public_blob(other)
    check([host("gpu01", key)], tmp_path, agent={blob})
    with pytest.raises(ConfigError, match="passphrase"):
        check([host("gpu01", key)], tmp_path, agent={keycheck.public_blob(other) or b""})


def test_the_public_key_of_an_encrypted_pem_key_comes_from_its_pub_file(tmp_path: Path) -> None:
    key = keygen(tmp_path / "id", "rsa", passphrase="secret phrase", pem=True)
    import base64
    assert keycheck.public_blob(key) == base64.b64decode(key.with_name("id.pub").read_text().split()[1])


def test_ssh_config_identity_files_are_checked_for_the_hosts_they_apply_to(tmp_path: Path) -> None:
    good = keygen(tmp_path / "good")
    config = f"Host 10.0.0.1\n  IdentityFile {tmp_path}/gone\nHost 10.0.0.2\n  IdentityFile {good}\n"
    other = Host("gpu02", "10.0.0.2")
    check([other], tmp_path, config)
    with pytest.raises(ConfigError) as caught:
        check([host("gpu01", None), other], tmp_path, config)
    assert f"private key {tmp_path}/gone does not exist (host gpu01)" in str(caught.value)
    assert "IdentityFile" in str(caught.value)


def test_several_bad_files_are_reported_together(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    with pytest.raises(ConfigErrors) as caught:
        check([host("gpu01", tmp_path / "gone"), host("gpu02", tmp_path / "dir"), host("gpu03", tmp_path / "gone")],
              tmp_path)
    assert [e.message for e in caught.value.errors] == [
        f"private key {tmp_path}/gone does not exist (hosts gpu01, gpu03)",
        f"private key {tmp_path}/dir is a directory, not a key file (host gpu02)"]


def test_loading_refuses_an_inventory_with_a_missing_key(tmp_path: Path) -> None:
    from provisioner.load.loading import load_hosts

    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    gpu01:\n      ansible_host: 10.0.0.1\n"
                         "      ansible_ssh_private_key_file: keys/missing\n")
    config = tmp_path / "ssh_config"
    config.write_text("")
    with pytest.raises(ConfigError) as caught:
        load_hosts(inventory, None, ssh_config=config)
    assert str(caught.value).startswith(f"{inventory}:5: ")
    assert f"private key {tmp_path}/keys/missing does not exist (host gpu01)" in str(caught.value)


@pytest.mark.parametrize("command", [["plan", "-o", "PLAN"], ["rollback", "--limit", "gpu01", "--yes"],
                                     ["audit"], ["apply", "--check"]])
def test_every_command_checks_the_keys_of_the_ssh_config_it_is_given(
        tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # --ssh-config names an IdentityFile that is missing: refused before any host is contacted (exit 3).
    from provisioner.cli import main

    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    gpu01:\n      ansible_host: 192.0.2.1\n")
    playbook = tmp_path / "site.yml"
    playbook.write_text("- hosts: all\n  resources:\n    - sysctl: {name: net.ipv4.ip_forward, value: '0'}\n")
    config = tmp_path / "ssh_config"
    config.write_text(f"Host *\n  IdentityFile {tmp_path}/keys/missing\n")
    words = [w.replace("PLAN", str(tmp_path / "plan.json")) for w in command]
    with pytest.raises(SystemExit) as exited:
        main([words[0], str(inventory), "-p", str(playbook), "--ssh-config", str(config), *words[1:]])
    assert exited.value.code == 3
    assert f"private key {tmp_path}/keys/missing does not exist" in capsys.readouterr().err
