"""Remedies of service, kernel_module, sysctl, file, nccl, ofed and roce_qos, from recorded facts.

Where a remedy's shell does real work (atomic writes, picking a package version), it is also run here
with /bin/sh against a temporary directory, so the quoting and the logic are tested, not only the text.
"""

from __future__ import annotations

import base64
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from provisioner.load.specs import NcclSpec, RoceQosSpec
from provisioner.resources import nccl, roce_fix
from provisioner.resources.base import HostContext
from provisioner.resources.steps import restore_file, write_file

from ._recorded import LSMOD, listing
from ._recorded import fix as fix_steps
from .test_file import found
from .test_roce_qos import DEVINFO_ROCE, ECN_ON_3, ecn_files

SHOW = "systemctl show"
STOPPED = "LoadState=loaded\nActiveState=inactive\nSubState=dead\nUnitFileState=disabled\n"


def sh_run(command: str, env: dict[str, str] | None = None,
           cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-ec", command], capture_output=True, text=True, env={**os.environ, **(env or {})},
                          cwd=cwd, timeout=30)


# --------------------------------------------------------------------------------------------- service


def test_stopped_disabled_service_is_enabled_then_started() -> None:
    steps = fix_steps("service", {"name": "rdma_cm"}, {SHOW: STOPPED})
    assert [s.command for s in steps] == ["systemctl enable -- rdma_cm.service", "systemctl start -- rdma_cm.service"]
    # Each undo is guarded by the unit's state (test_setting_undos runs them).
    assert [(s.undo or "").rpartition("else ")[2] for s in steps] == [
        "systemctl disable -- rdma_cm.service; fi", "systemctl stop -- rdma_cm.service; fi"]


def test_service_not_installed_cannot_be_started() -> None:
    steps = fix_steps("service", {"name": "openibd"}, {SHOW: "LoadState=not-found\nActiveState=inactive\n"})
    assert len(steps) == 1 and "not installed" in steps[0].shown and sh_run(steps[0].command).returncode != 0


def test_running_service_to_stop() -> None:
    running = "LoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=enabled\n"
    steps = fix_steps("service", {"name": "irqbalance", "state": "stopped", "enabled": None}, {SHOW: running})
    assert [s.command for s in steps] == ["systemctl stop -- irqbalance.service"]


# --------------------------------------------------------------------------------------- kernel_module

BOOT_MODULES = "/etc/modules-load.d/"


def test_module_loaded_and_listed_with_notify() -> None:
    steps = fix_steps("kernel_module", {"name": "nvidia_peermem", "notify": ["rdma_cm"]},
                      {"lsmod": LSMOD, BOOT_MODULES: ""})
    assert [s.action for s in steps] == ["load", "persist"]
    assert steps[0].command == "modprobe -- nvidia_peermem" and steps[0].notify == ("rdma_cm",)
    assert steps[1].writes == ("/etc/modules-load.d/nvidia_peermem.conf",)


def test_module_to_remove_is_unlisted_from_its_file() -> None:
    steps = fix_steps("kernel_module", {"name": "nvidia_peermem", "state": "absent"},
                      {"lsmod": LSMOD + "nvidia_peermem         16384  0\n",
                       BOOT_MODULES: listing({"/etc/modules": "# keep\nloop\nnvidia-peermem\n"})})
    assert steps[0].command == "modprobe -r -- nvidia_peermem"
    assert steps[1].writes == ("/etc/modules",)
    data = re.search(r"printf %s (\S+) \| base64 -d", steps[1].command)
    assert data and base64.b64decode(shlex.split(data[1])[0]) == b"# keep\nloop\n"


# ---------------------------------------------------------------------------------------------- sysctl

LIVE, BOOT = "/proc/sys/", "/etc/sysctl.d/"


def _written(step) -> str:
    data = re.search(r"printf %s (\S+) \| base64 -d", step.command)
    assert data, step.command
    return base64.b64decode(shlex.split(data[1])[0]).decode()


def test_sysctl_set_now_and_edited_in_its_etc_file() -> None:
    steps = fix_steps("sysctl", {"name": "net.ipv4.conf.all.arp_ignore", "value": 1},
                      {LIVE: "0\n", BOOT: listing({"/etc/sysctl.d/90-lab.conf":
                                                    "# x\nnet.ipv4.conf.all.arp_ignore = 0\nnet.core.rmem_max = 5\n"})})
    assert steps[0].command == "sysctl -w net.ipv4.conf.all.arp_ignore=1"
    assert (steps[0].undo or "").endswith("else sysctl -w net.ipv4.conf.all.arp_ignore=0; fi")
    assert "</proc/sys/net/ipv4/conf/all/arp_ignore" in (steps[0].undo or "")  # guarded by the live value
    assert steps[1].writes == ("/etc/sysctl.d/90-lab.conf",)
    assert _written(steps[1]) == "# x\nnet.ipv4.conf.all.arp_ignore = 1\nnet.core.rmem_max = 5\n"


def test_sysctl_from_packaged_file_gets_an_etc_override() -> None:
    steps = fix_steps("sysctl", {"name": "net.core.rmem_max", "value": 16777216},
                      {LIVE: "16777216\n",
                       BOOT: listing({"/usr/lib/sysctl.d/50-default.conf": "net.core.rmem_max = 1\n"})})
    assert [s.action for s in steps] == ["persist"]
    assert steps[0].writes == ("/etc/sysctl.d/99-fabnet-net.core.rmem_max.conf",)
    assert _written(steps[0]) == "net.core.rmem_max = 16777216\n"


# ------------------------------------------------------------------------------------------------ file

STAT = "stat -L"


def test_missing_file_is_written_with_mode_and_owner_and_notifies() -> None:
    steps = fix_steps("file", {"path": "/etc/nccl.conf", "content": "NCCL_DEBUG=WARN\n", "notify": ["rdma_cm"]},
                      {STAT: "missing\n"})
    assert len(steps) == 1 and steps[0].writes == ("/etc/nccl.conf",) and steps[0].notify == ("rdma_cm",)
    assert "NCCL_DEBUG" not in steps[0].shown and "chmod 0644" in steps[0].command
    assert _written(steps[0]) == "NCCL_DEBUG=WARN\n"
    assert steps[0].diff and "+NCCL_DEBUG=WARN" in steps[0].diff


def test_secret_file_has_no_diff() -> None:
    steps = fix_steps("file", {"path": "/etc/app/token", "content": "hunter2\n"}, {STAT: found("old\n")})
    assert "hunter2" not in steps[0].shown and "hunter2" not in (steps[0].diff or "")
    assert steps[0].diff is not None and "sensitive, not shown" in steps[0].diff


def test_mode_only_drift_is_a_chmod() -> None:
    steps = fix_steps("file", {"path": "/etc/nccl.conf", "content": "A=1\n", "mode": "0600"},
                      {STAT: found("A=1\n")})
    assert [s.command for s in steps] == ["chmod -- 0600 /etc/nccl.conf"]
    assert steps[0].undo == "chmod -- 0644 /etc/nccl.conf"


# ---------------------------------------------------------------------------- atomic writes, executed


def test_write_file_replaces_atomically_backs_up_once_and_restores(tmp_path: Path) -> None:
    target = tmp_path / "etc" / "it's; touch pwned $(touch pwned2) `touch pwned3`"
    target.parent.mkdir()
    target.write_text("old\n")
    env = {"FABNET_BACKUP_DIR": str(tmp_path / "backup")}
    for content in (b"new\n", b"newer\n"):
        proc = sh_run(write_file(str(target), content, mode="0600"), env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    assert target.read_bytes() == b"newer\n" and (target.stat().st_mode & 0o777) == 0o600
    backup = Path(str(tmp_path / "backup") + str(target))
    assert backup.read_text() == "old\n"  # the original, not the intermediate write
    assert not list(tmp_path.rglob("pwned*")) and not list(target.parent.glob(".fabnet.*"))
    assert sh_run(restore_file(str(target)), env).returncode == 0
    assert target.read_text() == "old\n"


def test_restore_removes_a_file_that_did_not_exist(tmp_path: Path) -> None:
    target = tmp_path / "new.conf"
    env = {"FABNET_BACKUP_DIR": str(tmp_path / "b")}
    assert sh_run(write_file(str(target), b"x\n"), env).returncode == 0
    assert target.read_text() == "x\n" and (target.stat().st_mode & 0o777) == 0o644
    assert sh_run(restore_file(str(target)), env).returncode == 0
    assert not target.exists()


# ------------------------------------------------------------------------------------------------ nccl

DPKG = "dpkg-query"
MADISON = """\
  libnccl2 | 2.23.4-1+cuda12.6 | file:/opt/fabnet-lab/repo ./ Packages
  libnccl2 | 2.21.5-1+cuda12.4 | file:/opt/fabnet-lab/repo ./ Packages
  libnccl2 | 2.18.3-1+cuda12.2 | file:/opt/fabnet-lab/repo ./ Packages
"""


def test_nccl_apt_step_pins_installs_and_holds() -> None:
    steps = fix_steps("nccl", {"version": "==2.21.5"}, {DPKG: "dpkg 2.18.3-1+cuda12.2\n"})
    assert len(steps) == 1
    command = steps[0].command
    assert "Pin-Priority: 1001" in command and "apt-mark hold libnccl2" in command
    assert "libnccl2=\"$found\"" in command and steps[0].writes == ("/etc/apt/preferences.d/fabnet-libnccl2",)
    assert "libnccl2=2.18.3-1+cuda12.2" in (steps[0].undo or "")


def test_nccl_dnf_generation() -> None:
    steps = fix_steps("nccl", {"version": ">=2.19,<2.24", "package": "libnccl"}, {"rpm -q": "files\n"},
                      HostContext("gpu01", package_manager="dnf"))
    command = steps[0].command
    assert "dnf -q list --showduplicates --available libnccl" in command
    assert 'dnf -y -q install --allowerasing libnccl-"$found"' in command
    assert 'dnf -y -q versionlock add libnccl-"$found"' in command


@pytest.mark.parametrize(("constraint", "picked"), [
    ("==2.21.5", "2.21.5-1+cuda12.4"), (">=2.19", "2.23.4-1+cuda12.6"), (">=2.19,<2.23", "2.21.5-1+cuda12.4"),
    ("<2.21", "2.18.3-1+cuda12.2"), ("!=2.23.4", "2.21.5-1+cuda12.4"), ("==2.21", "2.21.5-1+cuda12.4"),
    ("==2.2", None), (">2.23.4", None),
])
def test_apt_version_choice_runs_with_dpkg_semantics(tmp_path: Path, constraint: str, picked: str | None) -> None:
    spec = NcclSpec(version=constraint)
    fake = tmp_path / "apt-cache"
    fake.write_text(f"#!/bin/sh\ncat <<'X'\n{MADISON}X\n")
    fake.chmod(0o755)
    pick = nccl._pick_version(spec, nccl.madison_versions("libnccl2"), "dpkg --compare-versions {a} {op} {b}")
    proc = sh_run(pick + '; echo "$found"', {"PATH": f"{tmp_path}:{os.environ['PATH']}"})
    if picked is None:
        assert proc.returncode != 0 and "no version of libnccl2" in proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == picked


# ------------------------------------------------------------------------------------------------ ofed

OFED = "ofed_info -s"


def test_ofed_without_install_command_says_what_to_set() -> None:
    steps = fix_steps("ofed", {"version": ">=23.10"}, {OFED: "MLNX_OFED_LINUX-5.8-2.0.3.0:\n"})
    assert "fabnet_ofed_install_command" in steps[0].shown and sh_run(steps[0].command).returncode == 3


def test_ofed_runs_the_site_command_with_the_wanted_version(tmp_path: Path) -> None:
    ctx = HostContext("gpu04", ofed_install_command=f"echo \"$FABNET_OFED_VERSION\" > {tmp_path}/wanted")
    steps = fix_steps("ofed", {"version": ">=23.10"}, {OFED: "MLNX_OFED_LINUX-5.8-2.0.3.0:\n"}, ctx)
    assert sh_run(steps[0].command).returncode == 0
    assert (tmp_path / "wanted").read_text() == ">=23.10\n"


def test_ofed_site_command_is_on_no_command_line_of_the_node(tmp_path: Path) -> None:
    # The site's installer may carry a repository token; the change script reaches the node on the exec's
    # standard input, and the installer must not leave it for a command line that every user can read.
    command = (f"repo_token=S3CRET-repo-token; tr '\\0' ' ' < /proc/$$/cmdline > {tmp_path}/cmdline; "
               f"echo \"$FABNET_OFED_VERSION\" > {tmp_path}/wanted; false; true")
    ctx = HostContext("gpu04", ofed_install_command=command)
    steps = fix_steps("ofed", {"version": ">=23.10"}, {OFED: "MLNX_OFED_LINUX-5.8-2.0.3.0:\n"}, ctx)
    done = subprocess.run(["sh", "-s"], input=f"(set -e; eval {shlex.quote(steps[0].command)})", text=True,
                          capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr  # the installer's own status, not set -e's
    assert (tmp_path / "wanted").read_text() == ">=23.10\n"
    assert "S3CRET" not in (tmp_path / "cmdline").read_text()
    assert "S3CRET" not in steps[0].shown


def test_ofed_in_sync_needs_nothing() -> None:
    assert fix_steps("ofed", {"version": ">=23.10"}, {OFED: "MLNX_OFED_LINUX-23.10-1.1.9.0:\n"}) == []


# -------------------------------------------------------------------------------------------- roce_qos

QOS_PCP_NO_PFC = """\
DCBX mode: OS controlled
Priority trust state: pcp
PFC configuration:
\tpriority    0   1   2   3   4   5   6   7
\tenabled     0   0   0   0   0   0   0   0
tc: 0 ratelimit: unlimited, tsa: vendor
\t priority:  1
tc: 1 ratelimit: unlimited, tsa: vendor
\t priority:  0
tc: 2 ratelimit: unlimited, tsa: vendor
\t priority:  2
tc: 3 ratelimit: unlimited, tsa: vendor
\t priority:  3
tc: 4 ratelimit: unlimited, tsa: vendor
\t priority:  4
tc: 5 ratelimit: unlimited, tsa: vendor
\t priority:  5
tc: 6 ratelimit: unlimited, tsa: vendor
\t priority:  6
tc: 7 ratelimit: unlimited, tsa: vendor
\t priority:  7
"""


def test_roce_qos_firmware_reset_gets_mlnx_qos_and_boot_replay() -> None:
    spec = {"interface": "eth1", "trust": "dscp", "pfc": [3], "dscp2prio": {26: 3, 48: 6}, "ecn": [3],
            "cnp_dscp": 48, "traffic_class": 106, "roce_tos": 106, "active_mtu": 4096}
    steps = fix_steps("roce_qos", spec, {"mlnx_qos -i": QOS_PCP_NO_PFC, "/enable": ecn_files([0] * 8, [0] * 8),
                                         "cnp_dscp": "48\n", "traffic_class": "Global tclass=106\n",
                                         "cma_roce_tos": "0\n", "ibv_devinfo": DEVINFO_ROCE})
    by_action = {s.action: s for s in steps}
    assert list(by_action) == ["mlnx_qos", "ecn", "roce_tos", "persist", "unit", "enable"]
    assert by_action["mlnx_qos"].command == (
        "mlnx_qos -i eth1 --trust dscp --pfc 0,0,0,1,0,0,0,0 --dscp2prio set,26,3 --dscp2prio set,48,6 >/dev/null")
    # Put back only while it reads as set (test_roce_qos_undo runs it).
    assert (by_action["mlnx_qos"].undo or "").endswith("else mlnx_qos -i eth1 --trust pcp --pfc 0,0,0,0,0,0,0,0 "
                                                       ">/dev/null; fi")
    assert "printf '%s\\n' 1 > /sys/class/net/eth1/ecn/roce_np/enable/3" in by_action["ecn"].command
    assert by_action["roce_tos"].command == "cma_roce_tos -d mlx5_0 -t 106" or \
        by_action["roce_tos"].command.endswith("cma_roce_tos -d \"$dev\" -t 106")
    assert by_action["persist"].writes == ("/etc/fabnet/roce-qos/eth1.sh",)


def test_roce_replay_script_sets_everything_and_runs_in_sh(tmp_path: Path) -> None:
    ctx = HostContext("gpu01", sysfs_root=str(tmp_path))
    spec = RoceQosSpec(interface="eth1", ecn=[3], cnp_dscp=48)
    for point in ("roce_np", "roce_rp"):
        (tmp_path / "class/net/eth1/ecn" / point / "enable").mkdir(parents=True)
    script = roce_fix.replay_script(spec, ctx)
    assert sh_run(script).returncode == 0
    ecn = tmp_path / "class/net/eth1/ecn"
    grep = sh_run(f"grep -r -H . {ecn}/roce_np/enable {ecn}/roce_rp/enable")
    assert sorted(grep.stdout.splitlines()) == sorted(ecn_files([0, 0, 0, 1, 0, 0, 0, 0], [0, 0, 0, 1, 0, 0, 0, 0],
                                                                root=str(tmp_path)).splitlines())
    assert (tmp_path / "class/net/eth1/ecn/roce_np/cnp_dscp").read_text() == "48\n"


def test_roce_qos_in_sync_needs_nothing() -> None:
    steps = fix_steps("roce_qos", {"interface": "eth1", "ecn": [3]}, {"/enable": ECN_ON_3})
    assert steps == []
