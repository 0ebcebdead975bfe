"""The version lists fabnet's NCCL remedy reads from the package tools, run with `sh` on real outputs
(tests/samples/packages/, sources in tests/samples/INDEX.md) through stand-in `apt-cache` and `dnf`."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from provisioner.load.specs import NcclSpec
from provisioner.resources import nccl, nccl_dnf
from provisioner.resources.base import ProbeFailed

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "packages"
APT_COMPARE = "dpkg --compare-versions {a} {op} {b}"


def stand_in(tmp_path: Path, tool: str, output: str) -> dict[str, str]:
    (tmp_path / "out.txt").write_text(output)
    fake = tmp_path / tool
    fake.write_text(f"#!/bin/sh\ncat {tmp_path}/out.txt\n")
    fake.chmod(0o755)
    return {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}


def run(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-ec", command], capture_output=True, text=True, env=env, timeout=30)


def madison_from_policy(name: str, package: str) -> str:
    """The madison rows for the versions of an `apt-cache policy` version table (one per source line)."""
    rows, version = [], ""
    for line in (SAMPLES / name).read_text().splitlines():
        if m := re.fullmatch(r" {5}(?:\*\*\* )?(\S+) -?\d+", line):
            version = m[1]
        elif version and (m := re.fullmatch(r" {8}-?\d+ (\S+) +(\S+)", line)):
            rows.append(f"{package} | {version} | {m[1]}  {m[2]}\n")
    return "".join(rows)


def apt_pick(tmp_path: Path, madison: str, constraint: str) -> subprocess.CompletedProcess[str]:
    env = stand_in(tmp_path, "apt-cache", madison)
    pick = nccl._pick_version(NcclSpec(version=constraint, package="libnccl-dev"),
                              nccl.madison_versions("libnccl-dev"), APT_COMPARE)
    return run(pick + '; echo "$found"', env)


@pytest.mark.parametrize(("constraint", "picked"), [
    (">=2.28", "2.28.9-1+cuda13.0"), ("==2.28.9-1+cuda12.9", "2.28.9-1+cuda12.9"),
    ("<2.28.9", "2.28.7-1+cuda13.0"), ("==2.28.3", "2.28.3-1+cuda13.0"), (">2.28.9", None),
])
def test_builds_for_several_cuda_releases(tmp_path: Path, constraint: str, picked: str | None) -> None:
    proc = apt_pick(tmp_path, madison_from_policy("apt-policy-1-libnccl-dev-two-cuda-builds-cut.txt",
                                                  "libnccl-dev"), constraint)
    assert (proc.stdout.strip() or None) == picked, proc.stderr


def test_a_version_in_two_repositories_is_one_candidate(tmp_path: Path) -> None:
    madison = madison_from_policy("apt-cache-policy-2-fabricmanager-two-repos-minus-one-cut.txt", "libnccl-dev")
    assert madison.count("550.54.14-1") == 2
    assert apt_pick(tmp_path, madison, "<550").stdout.strip() == "545.23.08-1"


def test_madison_source_rows_and_epochs(tmp_path: Path) -> None:
    # madison also lists the source package's records; an epoch orders before everything else.
    madison = ("libnccl-dev | 1:2.18.3-1 | http://mirror/ubuntu jammy/multiverse amd64 Packages\n"
               "libnccl-dev |  2.23.4-1 | http://mirror/ubuntu jammy/multiverse amd64 Packages\n"
               "      nccl |  2.99.0-1 | http://mirror/ubuntu jammy/multiverse Sources\n")
    assert apt_pick(tmp_path, madison, ">=2.18").stdout.strip() == "1:2.18.3-1"  # dpkg's newest
    assert apt_pick(tmp_path, madison, "==2.23.4").stdout.strip() == "2.23.4-1"
    assert apt_pick(tmp_path, madison, ">2.23.4").returncode != 0  # never the source row's version


def dnf_listing(tmp_path: Path, output: str, package: str) -> list[str]:
    proc = run(nccl_dnf.dnf_versions(package), stand_in(tmp_path, "dnf", output))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_yum_listing_with_plugin_and_mirror_lines(tmp_path: Path) -> None:
    output = (SAMPLES / "yum-list-showduplicates-1-wazuh-header-cut.txt").read_text()
    assert dnf_listing(tmp_path, output, "wazuh-manager") == ["4.0.0-1", "4.0.1-1", "4.0.2-1", "4.0.3-1", "4.0.4-1"]
    assert dnf_listing(tmp_path, output, "wazuh") == []  # another package's rows


def test_dnf_listings_from_nvidia_cuda_repository(tmp_path: Path) -> None:
    # Rows from NVIDIA's CUDA repository, the one that serves libnccl: the -devel package's rows share the
    # name's prefix and are not the package's versions.
    dnf = (SAMPLES / "dnf-list-1-fabric-manager-cuda-repo-devel-row.txt").read_text()
    assert dnf_listing(tmp_path, dnf, "nvidia-fabric-manager") == ["495.29.05-1"]
    assert dnf_listing(tmp_path, dnf, "nvidia-fabric-manager-devel") == ["495.29.05-1"]
    yum = (SAMPLES / "yum-list-showduplicates-2-fabric-manager-rhel8-cut.txt").read_text()
    assert dnf_listing(tmp_path, yum, "nvidia-fabric-manager") == ["495.29.05-1"]
    assert dnf_listing(tmp_path, yum, "nvidia-fabric-manager-devel") == ["460.91.03-1", "460.106.00-1"]


def test_dnf_listing_wrapped_names_epochs_and_other_packages(tmp_path: Path) -> None:
    # The row layout of dnf's tables: a name too long for its column on its own line, the rest below.
    output = ("Last metadata expiration check: 0:12:01 ago on Thu 26 Nov 2026 10:00:00 AM UTC.\n"
              "Available Packages\n"
              "libnccl.x86_64                    2.21.5-1+cuda12.4                 cuda-rhel9-x86_64\n"
              "libnccl.x86_64\n"
              "                                  1:2.18.3-1+cuda12.2               @cuda-rhel9-x86_64\n"
              "libnccl-devel.x86_64              2.23.4-1+cuda12.6                 cuda-rhel9-x86_64\n"
              "libnccl.noarch                    2.23.4-1+cuda12.6                 local\n")
    assert dnf_listing(tmp_path, output, "libnccl") == ["2.21.5-1+cuda12.4", "1:2.18.3-1+cuda12.2", "2.23.4-1+cuda12.6"]


def test_dpkg_query_status_lines() -> None:
    lines = (SAMPLES / "dpkg-query-status-1-hold-and-tilde.txt").read_text().splitlines()
    found = [nccl.read_installed(f"dpkg {line}\npin\n") for line in lines]
    assert [(f.version, f.state, f.held) for f in found] == [
        ("18.06.0~ce~3-0~", "installed", False), ("1.12.1-00", "installed", True)]


def test_dpkg_state_without_version_is_no_version() -> None:
    with pytest.raises(ProbeFailed, match="no version"):
        nccl.read_installed("dpkg install reinstreq half-installed \npin\n")


def test_library_named_by_its_major_only() -> None:
    with pytest.raises(ProbeFailed, match="major version 2"):
        nccl.read_installed("files\n/usr/local/lib/libnccl.so.2\n")
    found = nccl.read_installed("files\n/usr/local/lib/libnccl.so.2\n/usr/local/lib/libnccl.so.2.24.3\n")
    assert found.version == "2.24.3"
