"""sysctl: the live value from /proc/sys and the boot value from sysctl.d, in apply order."""

from __future__ import annotations

import shlex
import subprocess

import pytest
from pydantic import ValidationError

from provisioner.load.specs import SysctlSpec
from provisioner.resources import sysctl
from provisioner.resources.base import HostContext
from provisioner.resources.sysctl import boot_value, canonical, proc_path

from ._recorded import failed, listing, run

LIVE = "/proc/sys/"
BOOT = "/etc/sysctl.d/"  # a fragment of the boot-file probe's command

CASES = [
    pytest.param({"name": "net.ipv4.conf.all.arp_ignore", "value": 1},
                 {LIVE: "1\n", BOOT: listing({"/etc/sysctl.d/90-roce.conf": "net.ipv4.conf.all.arp_ignore = 1\n"})},
                 [("value", "ok", "1", "1"), ("persistent", "ok", "1", "1 in /etc/sysctl.d/90-roce.conf")],
                 id="in-sync"),
    pytest.param({"name": "net.ipv4.ip_local_port_range", "value": "32768 60999", "persistent": False},
                 {LIVE: "32768\t60999\n"}, [("value", "ok", "32768 60999", "32768 60999")],
                 id="tabs-compare-as-spaces"),
    pytest.param({"name": "net.ipv4.conf.all.arp_ignore", "value": 1},
                 {LIVE: "0\n", BOOT: ""},
                 [("value", "drift", "1", "0"), ("persistent", "drift", "1", "not set at boot")],
                 id="drift-and-not-persistent"),
    pytest.param({"name": "net.core.rmem_max", "value": 16777216},
                 {LIVE: "16777216\n",
                  BOOT: listing({"/etc/sysctl.d/10-net.conf": "net.core.rmem_max=16777216\n",
                                 "/usr/lib/sysctl.d/50-default.conf": "net.core.rmem_max = 212992\n"})},
                 [("value", "ok", "16777216", "16777216"),
                  ("persistent", "drift", "16777216", "212992 in /usr/lib/sysctl.d/50-default.conf")],
                 id="later-file-by-name-wins-across-directories"),
    pytest.param({"name": "net.core.rmem_max", "value": 16777216},
                 {LIVE: "16777216\n",
                  BOOT: listing({"/etc/sysctl.d/50-default.conf": "# overrides the packaged file\n",
                                 "/usr/lib/sysctl.d/50-default.conf": "net.core.rmem_max = 212992\n",
                                 "/etc/sysctl.conf": "net.core.rmem_max = 16777216\n"})},
                 [("value", "ok", "16777216", "16777216"),
                  ("persistent", "ok", "16777216", "16777216 in /etc/sysctl.conf")],
                 id="etc-hides-same-name-and-sysctl-conf-is-last"),
    pytest.param({"name": "net.ipv4.conf.eth1.rp_filter", "value": 2, "persistent": True},
                 {LIVE: "2\n", BOOT: listing({"/etc/sysctl.d/60-rp.conf": "-net/ipv4/conf/*/rp_filter = 2\n"})},
                 [("value", "ok", "2", "2"), ("persistent", "ok", "2", "2 in /etc/sysctl.d/60-rp.conf")],
                 id="glob-slash-and-ignore-errors-prefix"),
    pytest.param({"name": "net.bridge.bridge-nf-call-iptables", "value": 0, "persistent": False},
                 {LIVE: failed("cat: /proc/sys/net/bridge/bridge-nf-call-iptables: No such file or directory")},
                 [("value", "error", "0", None)], id="no-such-sysctl"),
]


@pytest.mark.parametrize(("spec", "outputs", "expected"), CASES)
def test_sysctl(spec: dict, outputs: dict, expected: list) -> None:
    assert run("sysctl", spec, outputs).summary() == expected


def test_missing_sysctl_message() -> None:
    result = run("sysctl", {"name": "net.bridge.bridge-nf-call-iptables", "value": 0, "persistent": False},
                 {LIVE: failed("cat: /proc/sys/net/bridge/bridge-nf-call-iptables: No such file or directory")})
    assert result.checks[0].message == (
        "no sysctl net.bridge.bridge-nf-call-iptables on this host (is its module loaded?)"
    )


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("net.ipv4.conf.all.arp_ignore", "/proc/sys/net/ipv4/conf/all/arp_ignore"),
        ("net/ipv4/conf/enp3s0.200/forwarding", "/proc/sys/net/ipv4/conf/enp3s0.200/forwarding"),
        ("net.ipv4.conf.enp3s0/200.forwarding", "/proc/sys/net/ipv4/conf/enp3s0.200/forwarding"),
        ("net/../../etc/shadow", None),
        ("kernel..x", None),
    ],
)
def test_proc_path(name: str, path: str | None) -> None:
    assert proc_path(name) == path


def test_value_probe_reads_the_quoted_proc_path_and_falls_back_to_cat() -> None:
    spec = SysctlSpec(name="net/ipv4/conf/enp3s0.200/forwarding", value="1", persistent=False)
    (probe,) = sysctl.probes(spec, HostContext("h"))
    assert probe.command.count("/proc/sys/net/ipv4/conf/enp3s0.200/forwarding") == 2
    assert shlex.split(probe.command)[-3:] == ["cat", "--", "/proc/sys/net/ipv4/conf/enp3s0.200/forwarding"]


def test_value_probe_prints_what_cat_prints_and_fails_as_cat_fails() -> None:
    # Run against this machine's own /proc/sys: a value that exists and one that cannot.
    there = sysctl.probes(SysctlSpec(name="kernel.ostype", value="Linux", persistent=False), HostContext("h"))[0]
    missing = sysctl.probes(SysctlSpec(name="net.fabnet.none", value="1", persistent=False), HostContext("h"))[0]
    for probe in (there, missing):
        path = shlex.split(probe.command)[-1]
        ours = subprocess.run(["sh", "-c", probe.command], capture_output=True, text=True, check=False)
        theirs = subprocess.run(["cat", "--", path], capture_output=True, text=True, check=False)
        assert (ours.returncode, ours.stdout, ours.stderr) == (theirs.returncode, theirs.stdout, theirs.stderr)


def test_name_leaving_proc_sys_is_never_read() -> None:
    with pytest.raises(ValidationError, match="must not have empty"):
        SysctlSpec(name="net/../../etc/shadow", value="1")  # refused at validate time
    spec = SysctlSpec.model_construct(name="net/../../etc/shadow", value="1", persistent=True)
    probes = sysctl.probes(spec, HostContext("h"))
    assert all("shadow" not in p.command for p in probes)
    result = run("sysctl", spec, {BOOT: ""})
    assert [c.status for c in result.checks] == ["error", "error"]


def test_canonical_swaps_separators_when_the_first_is_a_slash() -> None:
    assert canonical("net/ipv4/conf/eth1.100/rp_filter") == "net.ipv4.conf.eth1/100.rp_filter"


def test_boot_value_takes_the_last_assignment_in_a_file() -> None:
    text = "vm.swappiness = 10\n; vm.swappiness = 99\nvm.swappiness=1\n"
    assert boot_value({"/etc/sysctl.d/99-x.conf": text}, "vm.swappiness") == ("1", "/etc/sysctl.d/99-x.conf")


def test_sysctls_share_the_boot_file_probe() -> None:
    one = sysctl.probes(SysctlSpec(name="vm.swappiness", value="1"), HostContext("h"))
    two = sysctl.probes(SysctlSpec(name="net.core.rmem_max", value="1"), HostContext("h"))
    assert one[1].key == two[1].key == sysctl.BOOT_FILES.key
    assert one[0].key != two[0].key


def test_explicit_assignment_beats_a_later_glob() -> None:
    files = {"/etc/sysctl.d/10-x.conf": "net.ipv4.conf.eth1.rp_filter = 0\n",
             "/usr/lib/sysctl.d/50-default.conf": "net.ipv4.conf.*.rp_filter = 2\n"}
    assert boot_value(files, "net.ipv4.conf.eth1.rp_filter") == ("0", "/etc/sysctl.d/10-x.conf")
    assert boot_value(files, "net.ipv4.conf.eth0.rp_filter") == ("2", "/usr/lib/sysctl.d/50-default.conf")


def test_dash_key_without_value_excludes_it_from_globs() -> None:
    files = {"/usr/lib/sysctl.d/50-default.conf": "net.ipv4.conf.*.rp_filter = 2\n-net.ipv4.conf.all.rp_filter\n"}
    assert boot_value(files, "net.ipv4.conf.all.rp_filter") == (None, None)
