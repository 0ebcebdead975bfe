"""file: content (never shown in desired/actual), mode, owner and group, from one stat + base64 probe."""

from __future__ import annotations

import base64
import os
import pwd
import shlex
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from provisioner.load.specs import FileSpec
from provisioner.resources import file as file_kind
from provisioner.resources.base import HostContext, ProbeResult, Results
from provisioner.resources.file import fingerprint

from ._recorded import failed, run

STAT = "stat -L"
NCCL_CONF = "NCCL_IB_HCA=mlx5_0\nNCCL_IB_GID_INDEX=3\nNCCL_SOCKET_IFNAME=eth1\n"


def found(content: str | bytes, stat: str = "644 0 root 0 root regular file") -> str:
    data = content.encode() if isinstance(content, str) else content
    encoded = base64.b64encode(data).decode()
    # plain `base64` wraps at 76 columns
    lines = [encoded[i:i + 76] for i in range(0, len(encoded), 76)]
    return f"stat {stat}\ncontent\n" + "".join(line + "\n" for line in lines)


SPEC = {"path": "/etc/nccl.conf", "content": NCCL_CONF}
WANT = fingerprint(NCCL_CONF.encode())

CASES = [
    pytest.param(SPEC, found(NCCL_CONF),
                 [("content", "ok", WANT, WANT), ("mode", "ok", "0644", "0644"), ("owner", "ok", "root", "root"),
                  ("group", "ok", "root", "root")], id="in-sync"),
    pytest.param(SPEC, found(NCCL_CONF.replace("3", "0")),
                 [("content", "drift", WANT, fingerprint(NCCL_CONF.replace("3", "0").encode())),
                  ("mode", "ok", "0644", "0644"), ("owner", "ok", "root", "root"), ("group", "ok", "root", "root")],
                 id="content-differs"),
    pytest.param({**SPEC, "mode": "0600", "owner": "nccl", "group": "1000"},
                 found(NCCL_CONF, "664 1000 nccl 1000 nccl regular file"),
                 [("content", "ok", WANT, WANT), ("mode", "drift", "0600", "0664"), ("owner", "ok", "nccl", "nccl"),
                  ("group", "ok", "1000", "nccl")], id="mode-drift-numeric-group"),
    pytest.param({**SPEC, "owner": "0"}, found(NCCL_CONF, "644 1001 svc 1001 svc regular file"),
                 [("content", "ok", WANT, WANT), ("mode", "ok", "0644", "0644"), ("owner", "drift", "0", "svc"),
                  ("group", "drift", "root", "svc")], id="owner-drift"),
    pytest.param({**SPEC, "mode": "4755"}, found(NCCL_CONF, "4755 0 root 0 root regular file"),
                 [("content", "ok", WANT, WANT), ("mode", "ok", "4755", "4755"), ("owner", "ok", "root", "root"),
                  ("group", "ok", "root", "root")], id="setuid-mode"),
    pytest.param(SPEC, found("", "644 0 root 0 root regular empty file"),
                 [("content", "drift", WANT, "sha256:e3b0c44298fc (0 bytes)"), ("mode", "ok", "0644", "0644"),
                  ("owner", "ok", "root", "root"), ("group", "ok", "root", "root")], id="empty-file"),
    pytest.param(SPEC, "missing\n", [("present", "drift", "present", "missing")], id="missing"),
    pytest.param(SPEC, "stat 755 0 root 0 root directory\ncontent\n",
                 [("present", "drift", "regular file", "directory")], id="a-directory"),
    pytest.param(SPEC, failed("sh: 1: cannot open /etc/nccl.conf: Permission denied", 2),
                 [("content", "error", WANT, None), ("mode", "error", "0644", None), ("owner", "error", "root", None),
                  ("group", "error", "root", None)], id="unreadable"),
    pytest.param(SPEC, "stat 644 0 root 0 root regular file\ncontent\n!!!not base64\n",
                 [("content", "error", WANT, None), ("mode", "error", "0644", None), ("owner", "error", "root", None),
                  ("group", "error", "root", None)], id="garbled"),
]


@pytest.mark.parametrize(("spec", "output", "expected"), CASES)
def test_file(spec: dict, output: object, expected: list) -> None:
    assert run("file", spec, {STAT: output}).summary() == expected


def test_diff_is_in_the_message_of_an_ordinary_file() -> None:
    check = run("file", SPEC, {STAT: found(NCCL_CONF.replace("GID_INDEX=3", "GID_INDEX=0"))}).checks[0]
    assert check.message.splitlines() == [
        "--- /etc/nccl.conf (on host)", "+++ /etc/nccl.conf (desired)", "@@ -1,3 +1,3 @@",
        " NCCL_IB_HCA=mlx5_0", "-NCCL_IB_GID_INDEX=0", "+NCCL_IB_GID_INDEX=3", " NCCL_SOCKET_IFNAME=eth1",
    ]


def test_long_diff_is_cut() -> None:
    want = "".join(f"line {i}\n" for i in range(100))
    check = run("file", {"path": "/etc/big.conf", "content": want}, {STAT: found("other\n")}).checks[0]
    lines = check.message.splitlines()
    assert len(lines) == 21
    assert lines[-1] == "... 84 more diff lines"  # 3 header lines, 1 removed, 100 added


@pytest.mark.parametrize("path", ["/etc/fabnet/api_key", "/root/.ssh/id_ed25519.key", "/etc/Secrets.env",
                                  "/etc/app/token", "/etc/db/password.txt", "/etc/aws/credentials"])
def test_secret_content_never_shown(path: str) -> None:
    secret = "hunter2-very-secret\n"
    result = run("file", {"path": path, "content": secret}, {STAT: found("old-secret-value\n")})
    check = result.checks[0]
    assert check.status == "drift"
    assert check.message.startswith("content differs (sensitive, not shown): 1 line on the host, 1 line desired")
    for text in (check.desired, check.actual or "", check.message):
        assert "hunter2" not in text and "old-secret" not in text


def test_content_never_in_desired_or_actual() -> None:
    for check in run("file", SPEC, {STAT: found("NCCL_DEBUG=INFO\n")}).checks:
        assert "NCCL" not in check.desired and "NCCL" not in (check.actual or "")


def test_binary_content_diff_is_not_shown() -> None:
    check = run("file", {"path": "/etc/blob", "content": "text\n"}, {STAT: found(b"\xff\xfe\x00")}).checks[0]
    assert check.message == "content differs (binary)"


def test_template_not_rendered_is_an_error() -> None:
    spec = FileSpec(path="/etc/nccl.conf", template="nccl.conf.j2")
    (probe,) = file_kind.probes(spec, HostContext("h"))
    checks = file_kind.evaluate(spec, Results({probe.key: ProbeResult(found(NCCL_CONF), "", 0)}), HostContext("h"))
    assert checks[0].status == "error"
    assert [c.status for c in checks[1:]] == ["ok", "ok", "ok"]


def test_path_is_quoted() -> None:
    path = "/etc/it's a file; rm -rf ~"
    with pytest.raises(ValidationError, match="must not contain"):
        FileSpec(path=path, content="x")  # refused at validate time; quoting is the second defence
    (probe,) = file_kind.probes(FileSpec.model_construct(path=path, content="x"), HostContext("h"))
    words = list(shlex.shlex(probe.command, posix=True, punctuation_chars=True))
    assert words.count(path) == 4  # test -e, stat, test -f, base64's input
    assert "rm" not in words


def test_probe_in_a_real_shell(tmp_path: Path) -> None:
    path = tmp_path / "it's a file; $(touch pwned)"
    path.write_text(NCCL_CONF)
    path.chmod(0o640)
    spec = FileSpec.model_construct(path=str(path), content=NCCL_CONF, mode="0640",
                                    owner=pwd.getpwuid(os.getuid()).pw_name, group=str(os.getgid()))
    (probe,) = file_kind.probes(spec, HostContext("h"))
    done = subprocess.run(["sh", "-c", probe.command], capture_output=True, text=True, check=False, cwd=tmp_path)
    checks = file_kind.evaluate(spec, Results({probe.key: ProbeResult(done.stdout, done.stderr, done.returncode)}),
                                HostContext("h"))
    assert [c.status for c in checks] == ["ok", "ok", "ok", "ok"]
    assert not (tmp_path / "pwned").exists()


def test_missing_file_in_a_real_shell(tmp_path: Path) -> None:
    spec = FileSpec(path=str(tmp_path / "nope"), content="x")
    (probe,) = file_kind.probes(spec, HostContext("h"))
    done = subprocess.run(["sh", "-c", probe.command], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout) == (0, "missing\n")


# ------------------------------------------------------------------------- the mode of secret-bearing files


@pytest.mark.parametrize(("spec", "mode"), [
    ({"path": "/etc/munge/munge.key", "content": "k\n"}, "0600"),  # by path
    ({"path": "/etc/app.conf", "content": "password=hunter2\n"}, "0600"),  # by desired content
    ({"path": "/etc/app.conf", "content": "x=1\n", "sensitive": True}, "0600"),  # by the flag
    ({"path": "/etc/munge/munge.key", "content": "k\n", "mode": "0644"}, "0644"),  # the playbook's mode wins
    ({"path": "/etc/munge/munge.key", "content": "k\n", "mode": "0400"}, "0400"),
    (SPEC, "0644"),  # an ordinary file keeps the default
    ({"path": "/root/.ssh/id_ed25519.pub", "content": "ssh-ed25519 AAAA x\n"}, "0644"),  # public
])
def test_a_secret_bearing_file_without_a_mode_is_wanted_at_0600(spec: dict, mode: str) -> None:
    content = spec["content"]
    result = run("file", spec, {STAT: found(content, "644 0 root 0 root regular file")})
    check = next(c for c in result.checks if c.attribute == "mode")
    assert (check.desired, check.status) == (mode, "ok" if mode == "0644" else "drift")


def test_a_missing_secret_file_is_written_0600_and_a_0644_one_chmodded() -> None:
    from ._recorded import fix

    spec = {"path": "/etc/munge/munge.key", "content": "k\n"}
    (write,) = fix("file", spec, {STAT: "missing\n"})
    assert write.action == "write" and "0600" in write.shown and "chmod 0600" in write.command
    (chmod,) = fix("file", spec, {STAT: found("k\n", "644 0 root 0 root regular file")})
    assert chmod.action == "chmod" and shlex.split(chmod.command)[:3] == ["chmod", "--", "0600"]
    assert fix("file", spec, {STAT: found("k\n", "600 0 root 0 root regular file")}) == []


def test_a_host_file_holding_a_secret_does_not_change_the_wanted_mode() -> None:
    # Judged by the desired content only: once written, the mode would flip back otherwise.
    result = run("file", SPEC, {STAT: found("password=old\n")})
    assert next(c for c in result.checks if c.attribute == "mode").desired == "0644"
