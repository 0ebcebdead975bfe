"""service: `systemctl show` -> active and enabled checks."""

from __future__ import annotations

import shlex

import pytest
from pydantic import ValidationError

from provisioner.load.specs import ServiceSpec
from provisioner.resources import service
from provisioner.resources.base import HostContext

from ._recorded import failed, run

SHOW = "systemctl show"


def show(load: str, active: str, sub: str, unit_file: str) -> str:
    # The order systemctl prints them in, whatever order --property lists them.
    return f"LoadState={load}\nActiveState={active}\nSubState={sub}\nUnitFileState={unit_file}\n"


RUNNING = show("loaded", "active", "running", "enabled")
OFF = {"state": "stopped", "enabled": False}

CASES = [
    pytest.param({"name": "openibd"}, RUNNING,
                 [("active", "ok", "active", "active (running)"), ("enabled", "ok", "enabled", "enabled")],
                 id="in-sync"),
    pytest.param({"name": "nvidia-fabricmanager"}, show("loaded", "inactive", "dead", "enabled"),
                 [("active", "drift", "active", "inactive (dead)"), ("enabled", "ok", "enabled", "enabled")],
                 id="stopped"),
    pytest.param({"name": "openibd"}, show("loaded", "failed", "failed", "enabled"),
                 [("active", "drift", "active", "failed (failed)"), ("enabled", "ok", "enabled", "enabled")],
                 id="failed"),
    pytest.param({"name": "mst"}, show("loaded", "active", "exited", "enabled"),
                 [("active", "ok", "active", "active (exited)"), ("enabled", "ok", "enabled", "enabled")],
                 id="oneshot-remain-after-exit"),
    pytest.param({"name": "openibd"}, show("loaded", "active", "running", "disabled"),
                 [("active", "ok", "active", "active (running)"), ("enabled", "drift", "enabled", "disabled")],
                 id="not-enabled"),
    pytest.param({"name": "systemd-udevd"}, show("loaded", "active", "running", "static"),
                 [("active", "ok", "active", "active (running)"), ("enabled", "ok", "enabled", "static")],
                 id="static-counts-as-enabled"),
    pytest.param({"name": "openibd"}, show("loaded", "active", "exited", "generated"),
                 [("active", "ok", "active", "active (exited)"), ("enabled", "ok", "enabled", "generated")],
                 id="sysv-generated-counts-as-enabled"),
    pytest.param({"name": "irqbalance", **OFF}, show("masked", "inactive", "dead", "masked"),
                 [("active", "ok", "inactive", "inactive (dead)"), ("enabled", "ok", "disabled", "masked")],
                 id="masked-is-off"),
    pytest.param({"name": "irqbalance", **OFF}, show("loaded", "active", "running", "enabled"),
                 [("active", "drift", "inactive", "active (running)"), ("enabled", "drift", "disabled", "enabled")],
                 id="wanted-off"),
    pytest.param({"name": "openibd", "enabled": None}, RUNNING,
                 [("active", "ok", "active", "active (running)")], id="enabled-not-checked"),
    pytest.param({"name": "nv-peer-mem"}, show("not-found", "inactive", "dead", ""),
                 [("active", "drift", "active", "not installed"), ("enabled", "drift", "enabled", "not installed")],
                 id="not-installed"),
    pytest.param({"name": "nv-peer-mem", **OFF}, show("not-found", "inactive", "dead", ""),
                 [("active", "ok", "inactive", "not installed"), ("enabled", "ok", "disabled", "not installed")],
                 id="not-installed-and-not-wanted"),
    pytest.param({"name": "openibd"}, failed("System has not been booted with systemd as init system (PID 1). "
                                             "Can't operate.\nFailed to connect to bus: Host is down"),
                 [("active", "error", "active", None), ("enabled", "error", "enabled", None)], id="no-systemd"),
    pytest.param({"name": "openibd"}, "garbage\n",
                 [("active", "error", "active", None), ("enabled", "error", "enabled", None)], id="unreadable-output"),
]


@pytest.mark.parametrize(("spec", "output", "expected"), CASES)
def test_service(spec: dict, output: object, expected: list) -> None:
    assert run("service", spec, {SHOW: output}).summary() == expected


def test_not_installed_message() -> None:
    result = run("service", {"name": "nv-peer-mem"}, {SHOW: show("not-found", "inactive", "dead", "")})
    assert {c.message for c in result.checks} == {"unit not installed"}


def test_static_unit_cannot_be_disabled() -> None:
    result = run("service", {"name": "systemd-udevd", "enabled": False},
                 {SHOW: show("loaded", "active", "running", "static")})
    check = result.by_attribute()["enabled"]
    assert (check.status, check.actual) == ("drift", "static")
    assert "mask" in check.message


def test_failure_message_is_first_stderr_line() -> None:
    result = run("service", {"name": "openibd"}, {SHOW: failed("System has not been booted with systemd.\nmore")})
    assert result.checks[0].message == (
        "systemctl show openibd.service: exit code 1: System has not been booted with systemd."
    )


@pytest.mark.parametrize(
    ("name", "unit"),
    [("openibd", "openibd.service"), ("rdma.socket", "rdma.socket"), ("nvidia-persistenced.service",
     "nvidia-persistenced.service"), ("serial-getty@ttyS0", "serial-getty@ttyS0.service"),
     ("fabric.manager", "fabric.manager.service")],
)
def test_unit_suffix(name: str, unit: str) -> None:
    (probe,) = service.probes(ServiceSpec(name=name), HostContext("h"))
    assert shlex.split(probe.command) == [
        "systemctl", "show", "--property=LoadState,ActiveState,SubState,UnitFileState,MainPID", "--", unit,
    ]


def test_unit_name_is_an_operand_even_when_it_looks_like_an_option() -> None:
    with pytest.raises(ValidationError, match="must not start with '-'"):
        ServiceSpec(name="-H:evil@host")  # refused at validate time; the `--` is the second defence
    (probe,) = service.probes(ServiceSpec.model_construct(name="-H:evil@host"), HostContext("h"))
    words = shlex.split(probe.command)
    assert words[-2:] == ["--", "-H:evil@host.service"]


# What `systemctl show` prints per unit on systemd 252 (a lab node), MainPID first.
RUNNING = "MainPID=32\nLoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=enabled\n"
EXITED = "MainPID=0\nLoadState=loaded\nActiveState=active\nSubState=exited\nUnitFileState=enabled\n"
ABSENT = "MainPID=0\nLoadState=not-found\nActiveState=inactive\nSubState=dead\nUnitFileState=\n"


@pytest.mark.parametrize(("text", "still"), [
    (RUNNING, ("/proc/32",)),
    (f"{RUNNING}\n{EXITED}\n{ABSENT}", ("/proc/32",)),  # the joined call's output: one block per unit
    (EXITED, ()),
    (ABSENT, ()),
    (RUNNING.replace("MainPID=32", "MainPID=0"), None),  # running with no main process: nothing says when it ends
    (RUNNING.replace("MainPID=32\n", ""), None),
    (RUNNING.replace("ActiveState=active\nSubState=running", "ActiveState=failed\nSubState=failed"), None),
    (RUNNING.replace("ActiveState=active\nSubState=running", "ActiveState=activating\nSubState=auto-restart"), None),
    (RUNNING.replace("ActiveState=active\nSubState=running", "ActiveState=deactivating\nSubState=stop-sigterm"), None),
    (RUNNING.replace("SubState=running", "SubState=listening"), None),  # a socket: triggered with no trace
    (f"{EXITED}\n{RUNNING.replace('active', 'failed')}", None),  # one unit that cannot be kept: none is
])
def test_a_reading_is_kept_only_in_states_left_with_a_trace(text: str, still: tuple[str, ...] | None) -> None:
    (probe,) = service.probes(ServiceSpec(name="rdma_cm"), HostContext("h"))
    assert probe.still is not None and probe.still(text) == still


def test_the_probe_reads_systemds_traces_the_search_path_and_the_units_own_files() -> None:
    (probe,) = service.probes(ServiceSpec(name="serial-getty@ttyS0"), HostContext("h"))
    reads = set(probe.reads)
    assert {"/run/systemd/units", "/run/systemd/systemd-units-load", "/etc/systemd/system",
            "/etc/systemd/system/*.wants", "/usr/lib/systemd/system"} <= reads
    # The instance's own file and its template's, with their drop-in folders, quoted as shell words.
    for name in ("serial-getty@ttyS0.service", "serial-getty@.service"):
        assert {f"/etc/systemd/system/{name}", f"/etc/systemd/system/{name}.d",
                f"/usr/lib/systemd/system/{name}"} <= {shlex.split(word)[0] for word in reads}
