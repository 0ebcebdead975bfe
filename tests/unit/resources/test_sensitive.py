"""Secrets never leave the host in a report: a sensitive file shows only hashes and line counts, in the
check itself and in every output made from it (table, JSON, JUnit)."""

from __future__ import annotations

import base64
import io
import json

import pytest
from rich.console import Console

from provisioner.evaluate.engine import AuditOutcome, HostOutcome, ResourceOutcome
from provisioner.output import report
from provisioner.resources.sensitive import line_count, sensitive_content, sensitive_path

from ._recorded import run

PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACBkZXNpcmVkLWtleS1tYXRlcmlhbC1ub3QtYS1yZWFsLWtleQAAAJgAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)
HOST_KEY = PRIVATE_KEY.replace("BkZXNpcmVkLWtleS1", "Bob3N0LXNpZGUta2V5")
# Distinctive fragments of each side: none may appear in any output.
FRAGMENTS = ("b3BlbnNzaC1rZXktdjEAAAAABG5vbmU", "BkZXNpcmVkLWtleS1", "Bob3N0LXNpZGUta2V5", "BEGIN OPENSSH")


def found(content: str) -> str:
    encoded = base64.b64encode(content.encode()).decode()
    return "stat 600 0 root 0 root regular file\ncontent\n" + "".join(
        encoded[i:i + 76] + "\n" for i in range(0, len(encoded), 76))


@pytest.mark.parametrize("path", [
    "/root/.ssh/id_ed25519", "/home/u/.ssh/id_rsa", "/etc/ssl/private/site.pem", "/etc/ssl/certs/site.key",
    "/etc/shadow", "/etc/gshadow", "/etc/NetworkManager/system-connections/roce.nmconnection",
    "/etc/NetworkManager/system-connections/eth1", "/etc/wireguard/wg0.conf", "/root/.pgpass", "/root/.netrc",
    "/root/.aws/credentials", "/etc/ssh/ssh_host_ed25519_key", "/root/.docker/config.json",
    "/etc/ipsec.secrets", "/etc/krb5.keytab", "/etc/app/api_token", "/srv/backup.p12",
    "/etc/letsencrypt/archive/x/cert1.pem", "/etc/munge/munge.key", "/opt/app/.env",
])
def test_secret_bearing_paths(path: str) -> None:
    assert sensitive_path(path)


@pytest.mark.parametrize("path", ["/etc/nccl.conf", "/etc/profile.d/nccl.sh", "/etc/ssh/ssh_host_ed25519_key.pub",
                                  "/root/.ssh/known_hosts", "/etc/sysctl.d/90-roce.conf", "/etc/hosts"])
def test_ordinary_paths(path: str) -> None:
    assert not sensitive_path(path)


@pytest.mark.parametrize("content", [
    PRIVATE_KEY, "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n", "-----BEGIN PGP PRIVATE KEY BLOCK-----\n",
    "[wifi-security]\nkey-mgmt=wpa-psk\npsk=correct-horse\n", "[Interface]\nPrivateKey = abc=\n",
    "db.example:5432:*:app:s3cret\nPASSWORD=x\n", "password = hunter2\n", "export NCCL_API_TOKEN=abc\n",
    "aws_access_key_id=AKIAABCDEFGHIJKLMNOP\n", "url: https://user:pw@example.org/x\n",
    "root:$6$salt$hash:19000:0:99999:7:::\n", "Authorization: Bearer abc.def\n", "client_secret: x\n",
    "machine h login u password p\n",
])
def test_secret_bearing_content(content: str) -> None:
    assert sensitive_content(content.encode())


@pytest.mark.parametrize("content", [
    "NCCL_IB_HCA=mlx5_0\nNCCL_IB_GID_INDEX=3\nNCCL_SOCKET_IFNAME=eth1\n", "export NCCL_DEBUG=WARN\n",
    "net.ipv4.tcp_mtu_probing = 1\n", "passthrough=1\nbypass=yes\n", "# a comment about keys\n",
])
def test_ordinary_content(content: str) -> None:
    assert not sensitive_content(content.encode())


def test_line_count() -> None:
    assert [line_count(b""), line_count(b"a"), line_count(b"a\n"), line_count(b"a\nb")] == [0, 1, 1, 2]


def _key_outcome(path: str = "/root/.ssh/id_ed25519", content: str = PRIVATE_KEY, host: str = HOST_KEY,
                 **extra: object) -> AuditOutcome:
    result = run("file", {"path": path, "content": content, "mode": "0600", **extra}, {"stat -L": found(host)})
    resource = ResourceOutcome("file", f"file[{path}]", "site.yml:3", "keys", result.checks)
    return AuditOutcome([HostOutcome("gpu01", "198.18.1.1", "drifted", resources=[resource])], 1.0)


def _all_outputs(outcome: AuditOutcome, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    buffer = io.StringIO()
    monkeypatch.setattr(report, "console", Console(file=buffer, width=200, color_system=None))
    report.audit_tables(outcome, verbose=True)
    document = report.audit_json(outcome, inventory="i", playbook="p", limit=None, exit_code=2)
    return {"table": buffer.getvalue(), "json": json.dumps(document), "junit": report.audit_junit(outcome)}


def test_a_private_key_that_differs_reports_differs_with_hashes_in_every_output(monkeypatch) -> None:
    outcome = _key_outcome()
    check = outcome.hosts[0].resources[0].checks[0]
    assert (check.attribute, check.status) == ("content", "drift")
    assert check.desired.startswith("sha256:") and check.actual and check.actual.startswith("sha256:")
    assert check.desired != check.actual
    assert "content differs (sensitive, not shown): 4 lines on the host, 4 lines desired" in check.message
    for name, text in _all_outputs(outcome, monkeypatch).items():
        assert "differs" in text and check.desired.split()[0] in text and check.actual.split()[0] in text, name
        for fragment in FRAGMENTS:
            assert fragment not in text, (name, fragment)


def test_secret_content_at_an_ordinary_path_is_hidden(monkeypatch) -> None:
    desired, host = "user=app\npassword=new-hunter2\n", "user=app\npassword=old-hunter2\n"
    outcome = _key_outcome("/etc/app/app.conf", desired, host)
    for name, text in _all_outputs(outcome, monkeypatch).items():
        assert "hunter2" not in text, name
        assert "2 lines on the host, 2 lines desired" in text, name


def test_a_secret_only_on_the_host_side_is_hidden_too(monkeypatch) -> None:
    outcome = _key_outcome("/etc/app/app.conf", "mode=fast\n", "mode=fast\npsk=planted-secret\n")
    for name, text in _all_outputs(outcome, monkeypatch).items():
        assert "planted-secret" not in text, name


def test_sensitive_true_hides_anything(monkeypatch) -> None:
    outcome = _key_outcome("/etc/app/motd", "hello new world\n", "hello old world\n", sensitive=True)
    for name, text in _all_outputs(outcome, monkeypatch).items():
        assert "world" not in text and "differs" in text, name
    plain = _key_outcome("/etc/app/motd", "hello new world\n", "hello old world\n")
    assert "+hello new world" in plain.hosts[0].resources[0].checks[0].message


def test_a_playbook_can_mark_a_file_sensitive(tmp_path) -> None:
    import yaml

    from provisioner.load.hostplans import resolve
    from provisioner.load.inventory import load_inventory
    from provisioner.load.playbook import load_playbook

    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"gpu01": {"ansible_host": "127.0.0.1"}}}}))
    playbook = tmp_path / "site.yml"
    playbook.write_text("- hosts: all\n  resources:\n"
                        "    - file: {path: /etc/app/motd, content: \"hi\\n\", sensitive: true}\n"
                        "    - file: {path: /etc/app/banner, content: \"hi\\n\"}\n")
    (plan,) = resolve(load_playbook(playbook), load_inventory(inventory))
    assert [resource.spec.sensitive for resource in plan.resources] == [True, False]
