"""nccl: the package version from dpkg-query, or the library file name when there is no package."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from provisioner.load.specs import NcclSpec
from provisioner.resources import nccl
from provisioner.resources.base import HostContext

from ._recorded import failed, run

PROBE = "dpkg-query"

CASES = [
    pytest.param({"version": "2.21.5"}, "dpkg 2.21.5-1+cuda12.4\n",
                 [("version", "ok", "2.21.5", "2.21.5-1+cuda12.4")], id="in-sync"),
    pytest.param({"version": ">=2.21,<2.24"}, "dpkg 2.18.3-1+cuda12.2\n",
                 [("version", "drift", ">=2.21,<2.24", "2.18.3-1+cuda12.2")], id="too-old"),
    pytest.param({"version": ">=2.19"},
                 "files\n/usr/lib/x86_64-linux-gnu/libnccl.so.2\n/usr/lib/x86_64-linux-gnu/libnccl.so.2.19.3\n",
                 [("version", "ok", ">=2.19", "2.19.3")], id="from-library-file"),
    pytest.param({"version": ">=2.19"}, "files\n", [("version", "drift", ">=2.19", "not installed")],
                 id="nowhere"),
    pytest.param({"version": ">=2.19"}, "\n", [("version", "error", ">=2.19", None)], id="no-output"),
    pytest.param({"version": ">=2.19"}, failed("sh: 1: Syntax error", 2), [("version", "error", ">=2.19", None)],
                 id="fails"),
]


@pytest.mark.parametrize(("spec", "output", "expected"), CASES)
def test_nccl(spec: dict, output: object, expected: list) -> None:
    assert run("nccl", spec, {PROBE: output}).summary() == expected


# What the remedy promises beside the version: held (dpkg's want `hold`) and pinned to that version.
V = "2.21.5-1+cuda12.4"
HELD_AND_PINNED = f"dpkg hold ok installed {V}\npin version {V}\n"
PROMISE_CASES = [
    pytest.param(HELD_AND_PINNED, [("version", "ok", "2.21.5", V), ("held", "ok", "held", "held"),
                                   ("pin", "ok", f"version {V}", f"version {V}")], id="held-and-pinned"),
    pytest.param(f"dpkg install ok installed {V}\npin version {V}\n",
                 [("version", "ok", "2.21.5", V), ("held", "drift", "held", "not held"),
                  ("pin", "ok", f"version {V}", f"version {V}")], id="not-held"),
    pytest.param(f"dpkg install ok installed {V}\npin\n",
                 [("version", "ok", "2.21.5", V), ("held", "drift", "held", "not held"),
                  ("pin", "drift", f"version {V}", None)], id="interrupted-before-hold-and-pin"),
    pytest.param(f"dpkg hold ok installed {V}\npin version 2.18.3-1+cuda12.2\n",
                 [("version", "ok", "2.21.5", V), ("held", "ok", "held", "held"),
                  ("pin", "drift", f"version {V}", "version 2.18.3-1+cuda12.2")], id="pinned-elsewhere"),
    pytest.param(f"dpkg install ok half-configured {V}\npin\n",
                 [("version", "drift", "2.21.5", f"{V} (half-configured)")], id="half-configured"),
    pytest.param("dpkg install ok installed 2.18.3-1+cuda12.2\npin\n",
                 [("version", "drift", "2.21.5", "2.18.3-1+cuda12.2")], id="wrong-version-only-version"),
    pytest.param("files\n/usr/lib64/libnccl.so.2.21.5\npin\n", [("version", "ok", "2.21.5", "2.21.5")],
                 id="no-package-no-hold"),
]


@pytest.mark.parametrize(("output", "expected"), PROMISE_CASES)
def test_the_hold_and_the_pin_are_audited(output: str, expected: list) -> None:
    assert run("nccl", {"version": "2.21.5"}, {PROBE: output}).summary() == expected


def test_a_missing_pin_names_the_file_and_never_shows_none() -> None:
    checks = run("nccl", {"version": "2.21.5"}, {PROBE: f"dpkg install ok installed {V}\npin\n"}).checks
    pin = next(c for c in checks if c.attribute == "pin")
    assert pin.message == "/etc/apt/preferences.d/fabnet-libnccl2 is missing"


def test_only_the_hold_and_pin_drifting_pins_and_holds_the_installed_version() -> None:
    from ._recorded import fix

    (step,) = fix("nccl", {"version": "2.21.5"}, {PROBE: f"dpkg install ok installed {V}\npin\n"})
    assert step.action == "hold" and "apt-get install" not in step.command
    # The pin is written as every file is (atomic, backed up; run for real in test_file_write_faults).
    assert step.command.startswith("f=/etc/apt/preferences.d/fabnet-libnccl2; ")
    assert step.command.endswith("; apt-mark hold libnccl2") and "mv -fT" in step.command
    assert step.undo and "apt-mark unhold libnccl2" in step.undo
    assert fix("nccl", {"version": "2.21.5"}, {PROBE: HELD_AND_PINNED}) == []


def test_an_install_cut_short_in_dpkg_lets_dpkg_finish_first() -> None:
    from ._recorded import fix

    (step,) = fix("nccl", {"version": "2.21.5"}, {PROBE: f"dpkg install ok half-configured {V}\npin\n"})
    assert step.command.startswith("DEBIAN_FRONTEND=noninteractive dpkg --configure -a; ")
    assert step.undo and step.undo.endswith(f"libnccl2={V}")  # the version, without the state


def test_library_source_is_named() -> None:
    result = run("nccl", {"version": ">=2.19"}, {PROBE: "files\n/usr/lib64/libnccl.so.2.19.3\n"})
    assert result.checks[0].message == "package libnccl2 not installed; from /usr/lib64/libnccl.so.2.19.3"


def test_package_is_quoted_after_double_dash() -> None:
    (probe,) = nccl.probes(NcclSpec(version="2.21", package="libnccl2+cuda12.4"), HostContext("h"))
    query = probe.command.split("$(", 1)[1].split(" 2>/dev/null", 1)[0]
    assert shlex.split(query) == ["dpkg-query", "-W", "-f=${Status} ${Version}\\n", "--", "libnccl2+cuda12.4"]


def _sh(command: str, path: str) -> str:
    done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, check=False,
                          env={"PATH": path})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_probe_in_a_real_shell_prefers_the_package(tmp_path: Path) -> None:
    fake = tmp_path / "dpkg-query"
    fake.write_text("#!/bin/sh\nprintf 'install ok installed 2.21.5-1+cuda12.4\\n'\n")
    fake.chmod(0o755)
    (probe,) = nccl.probes(NcclSpec(version="2.21"), HostContext("h"))
    assert _sh(probe.command, str(tmp_path)) == "dpkg install ok installed 2.21.5-1+cuda12.4\npin\n"


def test_probe_in_a_real_shell_without_dpkg_lists_files(tmp_path: Path) -> None:
    (probe,) = nccl.probes(NcclSpec(version="2.21"), HostContext("h"))
    assert _sh(probe.command, str(tmp_path)).splitlines()[0] == "files"


def test_probe_in_a_real_shell_package_removed_falls_back(tmp_path: Path) -> None:
    fake = tmp_path / "dpkg-query"
    fake.write_text("#!/bin/sh\nprintf 'deinstall ok config-files 2.21.5-1+cuda12.4\\n'\n")
    fake.chmod(0o755)
    (probe,) = nccl.probes(NcclSpec(version="2.21"), HostContext("h"))
    assert _sh(probe.command, str(tmp_path)).splitlines()[0] == "files"


@pytest.mark.parametrize("pin_text", [
    "Package: libnccl2\nPin: version 2.21.5-1+cuda12.4\nPin-Priority: 1001\n",
    "Package: libnccl2\nPin:    version 2.21.*\n  Pin: indented, not a Pin line\nPin:",  # no newline at the end
    "Explanation: a \\ backslash\nPin: release a=stable\t \n",
    "Package: libnccl2\n",
], ids=["written-by-fabnet", "spaces-and-no-final-newline", "backslash-and-tab", "no-pin-line"])
def test_the_pin_is_read_as_sed_reads_it(tmp_path: Path, pin_text: str) -> None:
    # The probe reads the pin file's `Pin:` value with the shell's own `read`, not a sed process: same value.
    pin = tmp_path / "fabnet-libnccl2"
    pin.write_text(pin_text)
    command = nccl._probe(NcclSpec(version="2.21.5")).command.replace(shlex.quote(nccl.pin_file(
        NcclSpec(version="2.21.5"))), shlex.quote(str(pin)))
    assert str(pin) in command
    printed = subprocess.run(["sh", "-c", command], capture_output=True, text=True).stdout
    by_sed = subprocess.run(["sed", "-n", "s/^Pin: *//p", str(pin)], capture_output=True, text=True).stdout
    assert printed.endswith(f"pin {by_sed.rstrip(chr(10))}\n")
