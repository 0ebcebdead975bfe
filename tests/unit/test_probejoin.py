"""Joining probes of one tool into one call, and giving each probe its own part of the output back."""

from __future__ import annotations

from provisioner.facts import probejoin
from provisioner.load.specs import ServiceSpec
from provisioner.resources import service
from provisioner.resources.base import HostContext, Probe, ProbeResult

CTX = HostContext("h")

# `systemctl show --property=LoadState,ActiveState,SubState,UnitFileState -- rdma_cm.service nope.service
# openibd.service`, as a lab node (systemd 252) printed it.
THREE_UNITS = (
    "LoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=enabled\n\n"
    "LoadState=not-found\nActiveState=inactive\nSubState=dead\nUnitFileState=\n\n"
    "LoadState=loaded\nActiveState=active\nSubState=exited\nUnitFileState=enabled\n"
)


def _service_probes(*names: str) -> list[Probe]:
    return [p for name in names for p in service.probes(ServiceSpec(name=name, state="started"), CTX)]


def test_services_of_a_host_run_as_one_systemctl_call_in_the_first_ones_place() -> None:
    lsmod, tail = Probe("lsmod"), Probe("ip -j link")
    units = _service_probes("rdma_cm", "nope", "openibd")
    run, joined = probejoin.join([lsmod, units[0], tail, units[1], units[2]])
    assert [p.command for p in run] == [
        "lsmod",
        "systemctl show --property=LoadState,ActiveState,SubState,UnitFileState -- "
        "rdma_cm.service nope.service openibd.service",
        "ip -j link",
    ]
    by_key = joined.split({run[0].key: ProbeResult("mods\n", "", 0), run[1].key: ProbeResult(THREE_UNITS, "", 0)})
    assert set(by_key) == {lsmod.key, *(u.key for u in units)}
    assert by_key[units[1].key] == ProbeResult(
        "LoadState=not-found\nActiveState=inactive\nSubState=dead\nUnitFileState=\n", "", 0)
    # Each part is what the probe alone prints, so the resource reads it as before.
    assert service.parse_show(by_key[units[2].key].stdout)["SubState"] == "exited"


def test_one_member_runs_as_it_is() -> None:
    (unit,) = _service_probes("rdma_cm")
    run, joined = probejoin.join([unit])
    assert run == [unit] and not joined.members


def test_a_failed_or_unsplittable_call_fails_each_member_with_its_reason() -> None:
    units = _service_probes("rdma_cm", "openibd")
    run, joined = probejoin.join(units)
    failed = joined.split({run[0].key: ProbeResult("", "Failed to connect to bus: No such file", 1)})
    assert {r.exit_code for r in failed.values()} == {1}
    assert all("Failed to connect to bus" in r.stderr for r in failed.values())
    odd = joined.split({run[0].key: ProbeResult("LoadState=loaded\n", "", 0)})  # one block for two units
    assert all(r.exit_code == 1 and "could not tell the 2 parts" in r.stderr for r in odd.values())


def test_a_joined_probe_that_never_completed_leaves_its_members_to_the_caller() -> None:
    units = _service_probes("rdma_cm", "openibd")
    _, joined = probejoin.join(units)
    assert joined.split({}) == {}


def test_split_units_needs_one_block_per_unit() -> None:
    assert service.split_units(THREE_UNITS, 3) is not None
    assert service.split_units(THREE_UNITS, 2) is None
    assert service.split_units("LoadState=loaded\n\n\nLoadState=loaded\n", 2) is None  # an empty block
