"""Names that reach commands on a host: what the kernel, systemd and dpkg allow, never shell syntax or
an option, refused at validate time with file:line: key and what is allowed."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from provisioner.load import names
from provisioner.load.hostplans import validate

HOSTILE = [
    "x; touch /tmp/pwned",
    "$(touch /tmp/pwned)",
    "`touch /tmp/pwned`",
    "x\ntouch /tmp/pwned",
    "-x",
    "--help",
    "x|sh",
    "x&&y",
    "x>y",
    "x'y",
    'x"y',
    "x\\y",
    "x y",
    "x\ty",
    "x\x00y",
    "x\x1b[2Jy",
]

CHECKS: dict[str, Callable[[str], str]] = {
    "netdev": names.netdev,
    "rdma_device": names.rdma_device,
    "unit": names.unit,
    "kernel_module": names.kernel_module,
    "sysctl_name": names.sysctl_name,
    "package": names.package,
    "user": names.user,
}


@pytest.mark.parametrize("check", list(CHECKS))
@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_names_are_refused_by_every_rule(check: str, value: str) -> None:
    with pytest.raises(ValueError, match=r"allowed:|characters long"):
        CHECKS[check](value)


@pytest.mark.parametrize("value", [v for v in HOSTILE if not v.startswith("-")])
def test_hostile_paths_are_refused(value: str) -> None:
    with pytest.raises(ValueError, match="allowed:"):
        names.file_path("/etc/" + value)
    with pytest.raises(ValueError, match="allowed:"):
        names.file_path(value)


def test_a_path_is_absolute_so_never_an_option() -> None:
    with pytest.raises(ValueError, match="must be absolute"):
        names.file_path("-rf")
    assert names.file_path("/etc/-rf") == "/etc/-rf"  # one word starting with '/': no tool reads an option


@pytest.mark.parametrize(
    ("check", "good"),
    [
        ("netdev", ["eth0", "ens1f0np0", "enp94s0f0np0", "bond0.100", "br-lan", "ib0.8001", "veth_a1", "a" * 15]),
        ("rdma_device", ["mlx5_0", "mlx5_bond_0", "rxe0", "irdma-eth1", "efa_0"]),
        ("unit", ["rdma_cm", "openibd.service", "nvidia-fabricmanager", "getty@tty1.service",
                  "systemd-networkd-wait-online@eth1.service", "dbus.socket"]),
        ("kernel_module", ["nvidia_peermem", "mlx5_core", "ib_uverbs", "nvidia-uvm", "8021q"]),
        ("sysctl_name", ["net.ipv4.conf.all.arp_ignore", "net/ipv4/conf/eth1.100/rp_filter",
                         "net.ipv4.conf.eth1/100.rp_filter", "net.ipv4.conf.br-lan.rp_filter", "vm.max_map_count"]),
        ("package", ["libnccl2", "libnccl-dev", "g++-12", "libstdc++6", "libnccl2:amd64", "python3.11",
                     "NetworkManager"]),
        ("user", ["root", "ops", "nccl-svc", "_apt", "0", "1000", "host$", "a.b"]),
        ("file_path", ["/etc/nccl.conf", "/etc/profile.d/nccl.sh", "/etc/modules-load.d/peermem.conf",
                       "/etc/sysctl.d/90-roce.conf", "/var/lib/x/a,b+c@d%e=f~g:h"]),
    ],
)
def test_real_names_are_accepted(check: str, good: list[str]) -> None:
    rule = {**CHECKS, "file_path": names.file_path}[check]
    assert [rule(value) for value in good] == good


@pytest.mark.parametrize(
    ("check", "value", "message"),
    [
        ("netdev", "a" * 16, "1..15 characters long (got 16)"),
        ("netdev", "", "1..15 characters long (got 0)"),
        ("netdev", "1234", "must not be all digits"),
        ("netdev", ".", "invalid interface name"),
        ("netdev", "eth0:1", "invalid interface name"),
        ("netdev", "eth0/1", "invalid interface name"),
        ("rdma_device", "m" * 64, "1..63 characters long"),
        ("unit", "-.mount", "must not start with '-'"),
        ("unit", "@foo.service", "invalid unit name"),
        ("unit", r"mnt-my\x2ddisk.mount", "shell character"),
        ("unit", "a@b@c.service", "at most one '@'"),
        ("unit", r"x\y.service", "shell character '\\\\'"),
        ("kernel_module", "m" * 56, "1..55 characters long"),
        ("kernel_module", "_x", "invalid module name"),
        ("sysctl_name", "net/../../etc/shadow", "'..' parts"),
        ("sysctl_name", "net..ipv4", "'..' parts"),
        ("sysctl_name", "net.ipv4.conf.*.rp_filter", "shell character '*'"),
        ("sysctl_name", "net.ipv4.conf.-x.rp_filter", "invalid sysctl name"),
        ("package", "x", "2..255 characters long"),
        ("package", "-x", "must not start with '-'"),
        ("user", "u" * 33, "1..32 characters long"),
        ("file_path", "etc/x", "must be absolute"),
        ("file_path", "/etc/../shadow", "'..' parts"),
        ("file_path", "/etc//x", "'//'"),
        ("file_path", "/etc/x/", "end with '/'"),
        ("file_path", "/etc/my file", "must not contain whitespace"),
        ("file_path", "/" + "a" * 256, "at most 255 characters"),
        ("file_path", "/a" * 2048, "1..4095 characters long"),
    ],
)
def test_refusals_say_what_is_wrong_and_allowed(check: str, value: str, message: str) -> None:
    rule = {**CHECKS, "file_path": names.file_path}[check]
    with pytest.raises(ValueError, ) as info:
        rule(value)
    assert message in str(info.value)


def test_sysctl_values_are_one_line() -> None:
    assert names.sysctl_value("4096\t87380 6291456") == "4096\t87380 6291456"
    assert names.sysctl_value("|/usr/lib/systemd/systemd-coredump %P %u") .startswith("|")
    for bad in ("1\nkernel.core_pattern=|/tmp/x", "1\r", "1\x00", "1\x1b[0m"):
        with pytest.raises(ValueError, match="one line"):
            names.sysctl_value(bad)
    with pytest.raises(ValueError, match=r"0\.\.4096 characters"):
        names.sysctl_value("1" * 4097)


# ------------------------------------------------------------------ every name field of a playbook

INVENTORY = """\
all:
  hosts:
    gpu01:
      evil: {evil}
"""

# kind -> (the spec with NAME where the hostile value goes, the key that is reported)
FIELDS = {
    "interface.name": {"interface": {"name": "NAME", "mtu": 9000}},
    "interface.rdma_device": {"interface": {"rdma_device": "NAME", "mtu": 9000}},
    "mtu_uniform.interface": {"mtu_uniform": {"interface": "NAME"}},
    "mtu_uniform.rdma_device": {"mtu_uniform": {"rdma_device": "NAME"}},
    "service.name": {"service": {"name": "NAME"}},
    "kernel_module.name": {"kernel_module": {"name": "NAME"}},
    "sysctl.name": {"sysctl": {"name": "NAME", "value": 1}},
    "nccl.package": {"nccl": {"version": ">=2.19", "package": "NAME"}},
    "roce_qos.interface": {"roce_qos": {"interface": "NAME", "trust": "dscp"}},
    "roce_qos.rdma_device": {"roce_qos": {"rdma_device": "NAME", "trust": "dscp"}},
    "file.path": {"file": {"path": "NAME", "content": "x"}},
    "file.owner": {"file": {"path": "/etc/x", "content": "x", "owner": "NAME"}},
    "file.group": {"file": {"path": "/etc/x", "content": "x", "group": "NAME"}},
}

ATTACKS = ["; touch /tmp/pwned", "$(touch /tmp/pwned)", "`touch /tmp/pwned`", "x\ntouch /tmp/pwned", "-rf"]


def _playbook(tmp_path: Path, spec: dict, value: str) -> Path:
    body = json.loads(json.dumps(spec).replace("NAME", value.replace("\n", "\\n").replace('"', '\\"')))
    path = tmp_path / "site.yml"
    # JSON is YAML: the hostile text arrives exactly as written, whatever characters it holds.
    path.write_text(json.dumps([{"hosts": "all", "resources": [body]}]))
    return path


@pytest.mark.parametrize("attack", ATTACKS)
@pytest.mark.parametrize("field", list(FIELDS))
def test_every_name_field_refuses_shell_syntax_written_in_the_playbook(
    tmp_path: Path, field: str, attack: str
) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(INVENTORY.format(evil="ok"))
    pb = _playbook(tmp_path, FIELDS[field], attack)
    errors = validate(inventory, pb)
    assert len(errors) == 1, [str(e) for e in errors]
    (error,) = errors
    assert (error.file, error.line) == (str(pb), 1)
    assert error.key == f"plays[0].resources[0].{field}"
    assert "allowed:" in error.message or "must not" in error.message


@pytest.mark.parametrize("attack", ATTACKS)
@pytest.mark.parametrize("field", list(FIELDS))
def test_every_name_field_refuses_shell_syntax_from_an_inventory_variable(
    tmp_path: Path, field: str, attack: str
) -> None:
    # The value is only known once rendered for a host, so the check happens per host, still offline.
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(INVENTORY.format(evil=json.dumps(attack)))
    pb = _playbook(tmp_path, FIELDS[field], "{{ evil }}")
    errors = validate(inventory, pb)
    assert len(errors) == 1, [str(e) for e in errors]
    (error,) = errors
    assert error.key == f"plays[0].resources[0].{field}"
    assert "(host gpu01)" in str(error)
    assert "allowed:" in error.message or "must not" in error.message


def test_error_text_is_located_and_says_what_is_allowed(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(INVENTORY.format(evil="ok"))
    pb = tmp_path / "site.yml"
    pb.write_text(textwrap.dedent("""\
        - hosts: all
          resources:
            - service:
                name: "-H:evil@host"
    """))
    (error,) = validate(inventory, pb)
    assert str(error) == (
        f"{pb}:4: plays[0].resources[0].service.name: a unit name must not start with '-' (a tool would read "
        "it as an option); allowed: a systemd unit name of 1..255 letters, digits, ':', '_', '.', '@', '-', "
        "not starting with '-', '.' or '@', with at most one '@' (template@instance) "
        "(got '-H:evil@host')"
    )
