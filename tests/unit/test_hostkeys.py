"""Host-key trust for `fabnet bootstrap`: fingerprints, the decision, the known_hosts lines written,
and which fleet hosts a new host is proven with (pure parts; the e2e test covers the lab)."""

from __future__ import annotations

import base64
import hashlib
import subprocess
from pathlib import Path

import paramiko
import pytest

from provisioner.apply.bootstrap import candidates, host_verdict
from provisioner.errors import ConfigError
from provisioner.load.hostplans import resolve
from provisioner.load.inventory import load_inventory
from provisioner.load.playbook import load_playbook
from provisioner.run import knownhosts
from provisioner.run.hostkeys import (
    KeyCheck,
    classify,
    decide,
    fingerprint,
    hashes_names,
    known_lines,
    pinnable,
    valid_fingerprint,
    with_pins,
)
from provisioner.smoke.run import SmokeOutcome
from provisioner.smoke.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def keypair(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """An ed25519 public key line from ssh-keygen, and its fingerprint as ssh-keygen -l prints it."""
    path = tmp_path_factory.mktemp("key") / "host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    listed = subprocess.run(["ssh-keygen", "-l", "-f", str(path) + ".pub"], capture_output=True, text=True,
                            check=True).stdout.split()[1]
    return path.with_suffix(".pub").read_text().strip(), listed


def _check(pub: str, state: str = "unknown", file: Path | None = None) -> KeyCheck:
    kind, data = pub.split()[:2]
    return KeyCheck("gpu07", "198.18.1.7", state, kind, data, fingerprint(base64.b64decode(data)),  # type: ignore[arg-type]
                    "198.18.1.7", file or Path("/x/known_hosts"))


def test_fingerprint_is_what_ssh_keygen_prints(keypair: tuple[str, str]) -> None:
    pub, listed = keypair
    blob = base64.b64decode(pub.split()[1])
    assert fingerprint(blob) == listed
    assert listed.startswith("SHA256:") and not listed.endswith("=") and valid_fingerprint(listed)


@pytest.mark.parametrize("text", ["", "SHA256:", "MD5:aa:bb", "SHA256:" + "A" * 42, "SHA256:" + "!" * 43,
                                  base64.b64encode(hashlib.sha256(b"x").digest()).decode().rstrip("=")])
def test_malformed_fingerprints_are_refused(text: str) -> None:
    assert not valid_fingerprint(text)


def test_decision_for_each_state_and_option(keypair: tuple[str, str]) -> None:
    pub, listed = keypair
    wrong = "SHA256:" + base64.b64encode(hashlib.sha256(b"other").digest()).decode().rstrip("=")
    cases = [  # (state, fingerprints, accept_new, ask, trust, refused)
        ("known", frozenset(), False, None, "known_hosts", False),
        ("changed", frozenset({listed}), True, None, None, True),
        ("revoked", frozenset(), True, None, None, True),
        ("unknown", frozenset({listed}), False, None, "fingerprint", False),
        ("unknown", frozenset({wrong}), False, None, None, True),
        ("unknown", frozenset(), True, None, "accept_new", False),
        ("unknown", frozenset(), False, lambda c: True, "confirmed", False),
        ("unknown", frozenset(), False, lambda c: False, None, True),
        ("unknown", frozenset(), False, None, None, True),
    ]
    for state, fingerprints, accept_new, ask, trust, refused in cases:
        check = _check(pub, state)
        decide(check, fingerprints, accept_new, ask)
        assert (check.trust if check.trusted else None) == trust, state
        assert (check.refused is not None) == refused, (state, fingerprints, accept_new)
    check = _check(pub)
    decide(check, frozenset(), False, None)
    assert listed in (check.refused or "") and "not changed" in (check.refused or "")


def test_lines_pin_name_and_address_and_are_read_back(keypair: tuple[str, str], tmp_path: Path) -> None:
    pub, _ = keypair
    check = _check(pub)
    assert known_lines(check, hashed=False) == [f"gpu07,198.18.1.7 {pub.split()[0]} {pub.split()[1]}"]
    path = tmp_path / "known_hosts"
    path.write_text("198.18.1.1 " + pub)  # no newline at the end: the pin still starts its own line
    path.write_text(with_pins(path.read_text(), [check]))
    assert path.read_text().count("\n") == 2
    known = knownhosts.load([path])
    assert not known.warnings
    key = paramiko.PKey.from_type_string(pub.split()[0], base64.b64decode(pub.split()[1]))
    assert classify(key, "198.18.1.7", known) == "known" and classify(key, "gpu07", known) == "known"
    assert classify(key, "198.18.1.9", known) == "unknown"


def _other_key(tmp_path: Path) -> tuple[str, str]:
    fresh = tmp_path / "attacker"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(fresh)], check=True)
    kind, data = fresh.with_suffix(".pub").read_text().split()[:2]
    return kind, data


@pytest.mark.parametrize("hashed", [False, True])
def test_an_inventory_name_that_is_a_pattern_pins_nothing_beyond_the_host(keypair: tuple[str, str], tmp_path: Path,
                                                                          hashed: bool) -> None:
    # Ansible inventories take any text as a host name (YAML escapes included); a pin under such a name
    # would be a pattern to OpenSSH and to fabnet: the key trusted for other hosts, or a line of its own.
    pub, _ = keypair
    kind, data = _other_key(tmp_path)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n"
                         '    "*": {ansible_host: 198.18.1.7}\n'
                         '    "gpu07,db01": {ansible_host: 198.18.1.7}\n'
                         '    "!db02": {ansible_host: 198.18.1.7}\n'
                         '    "gpu?7": {ansible_host: 198.18.1.7}\n'
                         '    "gpu 07": {ansible_host: 198.18.1.7}\n')
    names = list(load_inventory(inventory).hosts)
    assert len(names) == 5  # the loader takes these: they are printable
    # A name hiding a line break is refused by the loader already; the pin refuses it by itself too.
    escaped = tmp_path / "escaped.yml"
    escaped.write_text(f'all:\n  hosts:\n    "gpu07\\n* {kind} {data}": {{ansible_host: 198.18.1.7}}\n')
    with pytest.raises(ConfigError, match="unprintable character U\\+000A"):
        load_inventory(escaped)
    names.append(f"gpu07\n* {kind} {data}")
    first = f"{paramiko.HostKeys.hash_host('198.18.1.1')} {pub}\n" if hashed else f"198.18.1.1 {pub}\n"
    for name in names:
        check = _check(pub)
        check.name = name
        path = tmp_path / "known_hosts"
        path.write_text(with_pins(first, [check]))
        assert path.read_text().count("\n") == 2, name
        known = knownhosts.load([path])
        key = paramiko.PKey.from_type_string(pub.split()[0], base64.b64decode(pub.split()[1]))
        attacker = paramiko.PKey.from_type_string(kind, base64.b64decode(data))
        assert classify(key, "198.18.1.7", known) == "known", name
        for other in ("db01", "db02", "gpu17", "login.example.com"):
            assert classify(key, other, known) == "unknown", (name, other)
            assert classify(attacker, other, known) == "unknown", (name, other)
        # Pinned under the address alone: a name a login would look up by.
        lines = known_lines(check, hashed=hashed)
        assert len(lines) == 1 and (hashed or lines[0].split()[0] == "198.18.1.7"), name


def test_pinnable_names_are_host_names_and_addresses_with_or_without_a_port() -> None:
    for name in ("gpu07", "gpu07.example.com", "198.18.1.7", "fd00::7", "[198.18.1.7]:2222", "[gpu07]:22"):
        assert pinnable(name), name
    for name in ("*", "gpu*", "!gpu07", "a,b", "a b", "|1|abc=|def=", "@revoked", "[*]:22", "[a]:b", "", "-x"):
        assert not pinnable(name), name


def test_a_hashed_file_gets_hashed_lines(keypair: tuple[str, str], tmp_path: Path) -> None:
    pub, _ = keypair
    hashed = f"{paramiko.HostKeys.hash_host('198.18.1.1')} {pub}\n"
    assert hashes_names(hashed) and not hashes_names("") and not hashes_names("198.18.1.1 " + pub)
    text = with_pins(hashed, [_check(pub)])
    lines = text.splitlines()
    assert len(lines) == 3 and all(line.startswith("|1|") for line in lines)
    path = tmp_path / "known_hosts"
    path.write_text(text)
    key = paramiko.PKey.from_type_string(pub.split()[0], base64.b64decode(pub.split()[1]))
    assert classify(key, "198.18.1.7", knownhosts.load([path])) == "known"


def test_another_key_for_a_known_host_is_a_change(keypair: tuple[str, str], tmp_path: Path) -> None:
    pub, _ = keypair
    path = tmp_path / "known_hosts"
    path.write_text(f"198.18.1.7 {pub}\n")
    fresh = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(fresh)], check=True)
    kind, data = fresh.with_suffix(".pub").read_text().split()[:2]
    key = paramiko.PKey.from_type_string(kind, base64.b64decode(data))
    assert classify(key, "198.18.1.7", knownhosts.load([path])) == "changed"
    path.write_text(f"198.18.1.7 {pub}\n@revoked * {kind} {data}\n")
    assert classify(key, "198.18.1.7", knownhosts.load([path])) == "revoked"


def test_peers_come_from_the_new_hosts_plays_outside_the_limit(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  children:\n    gpu:\n      hosts: {g1: {}, g2: {}, g3: {}}\n"
                         "    new:\n      hosts: {g3: }\n    login:\n      hosts: {l1: {}}\n")
    playbook = tmp_path / "site.yml"
    playbook.write_text("- hosts: gpu\n  resources: []\n- hosts: login\n  resources: []\n")
    loaded = load_inventory(inventory)
    fleet = resolve(load_playbook(playbook), loaded)
    new = resolve(load_playbook(playbook), loaded, "new")
    assert [p.host.name for p in candidates(new, fleet)] == ["g1", "g2"]


def test_a_hosts_smoke_verdict_names_its_own_failure() -> None:
    run = SmokeOutcome(hosts=["a", "b"], settings=Settings(), verdict="failed", reason="hung",
                       failed_hosts={"a": "rank 0 never connected"})
    assert host_verdict(run, "a") == ("failed", "rank 0 never connected")
    assert host_verdict(run, "b") == ("failed", "hung")
    assert host_verdict(SmokeOutcome(hosts=["a"], settings=Settings(), reason="ok"), "a") == ("pass", "ok")


def test_exit_code_unreachable_wins_and_a_refused_key_fails(keypair: tuple[str, str]) -> None:
    from provisioner.apply.bootstrap import BootstrapOutcome, HostReport

    pub, _ = keypair
    refused = _check(pub)
    decide(refused, frozenset(), False, None)
    unreachable = KeyCheck("gpu08", "198.18.1.8", "unreachable", error="cannot connect: timed out")
    decide(unreachable, frozenset(), True, None)
    assert unreachable.refused == "cannot connect: timed out"
    assert BootstrapOutcome([HostReport("gpu07", refused)]).exit_code == 2
    assert BootstrapOutcome([HostReport("gpu07", refused), HostReport("gpu08", unreachable)]).exit_code == 4
    trusted = _check(pub)
    decide(trusted, frozenset(), True, None)
    # Trusted, but never converged, audited or proven: not a success.
    assert BootstrapOutcome([HostReport("gpu07", trusted)]).exit_code == 2
