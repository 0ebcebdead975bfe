"""known_hosts read as OpenSSH reads it: bad lines skipped with file:line, @revoked refused, patterns."""

from __future__ import annotations

from pathlib import Path

import paramiko
import pytest

from provisioner.run import knownhosts

KEY_A = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPV0Ub2RoR8DfzKZ3NfGJ6+FxynfURNgLjfmn/sWCipv"
KEY_B = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMlu2V6eEmLOkFw7WQYd7j+HpcoDkKEWFvJRxE4dFplN"


def key(line: str) -> paramiko.PKey:
    kind, blob = line.split()
    return paramiko.PKey.from_type_string(kind, __import__("base64").b64decode(blob))


def load(tmp_path: Path, text: str) -> knownhosts.KnownHosts:
    path = tmp_path / "known_hosts"
    path.write_text(text)
    return knownhosts.load([path])


def test_a_garbage_line_is_skipped_with_file_and_line_and_the_others_still_count(tmp_path) -> None:
    known = load(tmp_path, f"# comment\n\n10.0.0.1 {KEY_A}\n10.0.0.2 ssh-ed25519 AAAA%%%garbage\nnot a line\n"
                           f"10.0.0.3 {KEY_B}\n10.0.0.4 ssh-rsa {KEY_A.split()[1]}\n")
    assert known.keys.lookup("10.0.0.1")["ssh-ed25519"] == key(KEY_A)
    assert known.keys.lookup("10.0.0.3")["ssh-ed25519"] == key(KEY_B)
    path = tmp_path / "known_hosts"
    assert [w.split(": ", 1)[0] for w in known.warnings] == [f"{path}:4", f"{path}:5", f"{path}:7"]
    assert "base64" in known.warnings[0] and "says ssh-rsa but the key is ssh-ed25519" in known.warnings[2]


def test_revoked_keys_are_refused_even_where_listed(tmp_path) -> None:
    known = load(tmp_path, f"@revoked * {KEY_A}\n10.0.0.1 {KEY_A}\n10.0.0.2 {KEY_B}\n")
    assert known.is_revoked(key(KEY_A)) and not known.is_revoked(key(KEY_B))
    assert known.keys.lookup("10.0.0.1") is None
    assert known.keys.lookup("10.0.0.2") is not None


def test_cert_authority_is_skipped_with_a_warning(tmp_path) -> None:
    known = load(tmp_path, f"@cert-authority *.example.org {KEY_A}\n@bogus host {KEY_A}\n")
    assert known.keys.lookup("a.example.org") is None
    assert "@cert-authority is not supported" in known.warnings[0] and ":1:" in known.warnings[0]
    assert "unknown marker @bogus" in known.warnings[1]


@pytest.mark.parametrize(("names", "host", "matches"), [
    ("gpu*.example.org", "gpu01.example.org", True),
    ("gpu??", "gpu01", True),
    ("gpu??", "gpu001", False),
    ("GPU01", "gpu01", True),
    ("*.example.org,!bad.example.org", "bad.example.org", False),
    ("*.example.org,!bad.example.org", "ok.example.org", True),
    ("[10.0.0.1]:2222", "[10.0.0.1]:2222", True),
    ("[10.0.0.1]:2222", "10.0.0.1", False),
    ("10.0.0.1", "10.0.0.10", False),
])
def test_openssh_patterns(tmp_path, names: str, host: str, matches: bool) -> None:
    known = load(tmp_path, f"{names} {KEY_A}\n")
    assert (known.keys.lookup(host) is not None) == matches


def test_hashed_names(tmp_path) -> None:
    hashed = paramiko.HostKeys.hash_host("10.1.2.3")
    known = load(tmp_path, f"{hashed} {KEY_B}\n")
    assert known.keys.lookup("10.1.2.3") is not None and known.keys.lookup("10.1.2.4") is None


def test_warnings_are_handed_out_once(tmp_path) -> None:
    path = tmp_path / "known_hosts"
    path.write_text("garbage\n")
    knownhosts.take_warnings()
    knownhosts.load_cached([path])
    knownhosts.load_cached([path])
    assert knownhosts.take_warnings() == [f"{path}:1: expected: host patterns, key type, base64 key; line skipped"]
    assert knownhosts.take_warnings() == []


def test_the_name_index_finds_what_a_scan_of_every_line_finds_in_the_files_order(tmp_path) -> None:
    hashed = paramiko.HostKeys.hash_host("gpu02")
    known = load(tmp_path, f"GPU01,gpu03 {KEY_A}\n*.example.com {KEY_A}\n{hashed} {KEY_B}\ngpu0? {KEY_B}\n"
                           f"gpu01 {KEY_B}\n!gpu05,gpu0* {KEY_A}\n[gpu01]:2222 {KEY_B}\n")
    for host in ("gpu01", "gpu02", "Gpu03", "gpu04", "gpu05", "node.example.com", "[gpu01]:2222", "gpü01", "x"):
        fast = known.keys.lookup(host)
        scanned = paramiko.HostKeys.lookup(known.keys, host)  # paramiko's own loop over every line
        assert (fast is None) == (scanned is None), host
        if fast is not None and scanned is not None:
            assert [(k, fast[k]) for k in fast] == [(k, scanned[k]) for k in scanned], host
    assert known.keys.lookup("gpu01")["ssh-ed25519"] == key(KEY_A)  # the first line that names it wins


def test_the_name_index_follows_lines_added_later(tmp_path) -> None:
    known = load(tmp_path, f"gpu01 {KEY_A}\n")
    assert known.keys.lookup("gpu09") is None
    known.keys.add("gpu09", "ssh-ed25519", key(KEY_B))
    assert known.keys.lookup("gpu09")["ssh-ed25519"] == key(KEY_B)
    found = known.keys.lookup("gpu01")
    found["ssh-rsa-x"] = key(KEY_B)  # set through a lookup's result: lands in the set itself
    assert len(known.keys._entries) == 3
