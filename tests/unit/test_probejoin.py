"""Joining probes of one tool into one call, and giving each probe its own part of the output back."""

from __future__ import annotations

import subprocess

import pytest

from provisioner.facts import probejoin
from provisioner.load.specs import ServiceSpec
from provisioner.resources import service
from provisioner.resources.base import HostContext, Probe, ProbeGroup, ProbeResult, files_probe, parse_file_listing

CTX = HostContext("h")

# `systemctl show --property=LoadState,ActiveState,SubState,UnitFileState,MainPID -- rdma_cm.service nope.service
# openibd.service`, as a lab node (systemd 252) printed it.
THREE_UNITS = (
    "MainPID=32\nLoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=enabled\n\n"
    "MainPID=0\nLoadState=not-found\nActiveState=inactive\nSubState=dead\nUnitFileState=\n\n"
    "MainPID=0\nLoadState=loaded\nActiveState=active\nSubState=exited\nUnitFileState=enabled\n"
)


def _service_probes(*names: str) -> list[Probe]:
    return [p for name in names for p in service.probes(ServiceSpec(name=name, state="started"), CTX)]


def test_services_of_a_host_run_as_one_systemctl_call_in_the_first_ones_place() -> None:
    lsmod, tail = Probe("lsmod"), Probe("ip -j link")
    units = _service_probes("rdma_cm", "nope", "openibd")
    run, joined = probejoin.join([lsmod, units[0], tail, units[1], units[2]])
    assert [p.command for p in run] == [
        "lsmod",
        "systemctl show --property=LoadState,ActiveState,SubState,UnitFileState,MainPID -- "
        "rdma_cm.service nope.service openibd.service",
        "ip -j link",
    ]
    by_key = joined.split({run[0].key: ProbeResult("mods\n", "", 0), run[1].key: ProbeResult(THREE_UNITS, "", 0)})
    assert set(by_key) == {lsmod.key, *(u.key for u in units)}
    assert by_key[units[1].key] == ProbeResult(
        "MainPID=0\nLoadState=not-found\nActiveState=inactive\nSubState=dead\nUnitFileState=\n", "", 0)
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


def _run_sh(command: str) -> str:
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True).stdout


def test_file_listings_of_several_kinds_are_one_tail_and_each_gets_what_it_alone_prints(tmp_path) -> None:
    # Real files, the shell's own globbing: the joined call split back equals each probe run alone.
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "10-eth1.network").write_text("[Link]\nMTUBytes=9000\n")
    (tmp_path / "net" / "20-eth2.network").write_text("no final newline")
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "rdma.conf").write_text("ib_umad\n# ==> not a header <==\n")
    (tmp_path / "mods" / "skip.txt").write_text("not matched\n")
    (tmp_path / "sysctl.conf").write_text("net.ipv4.ip_forward = 1\n")
    (tmp_path / "secret.conf").write_text("x\n")
    (tmp_path / "secret.conf").chmod(0)
    members = [files_probe(f"{tmp_path}/net/*.network", f"{tmp_path}/nowhere/*"),
               files_probe(f"{tmp_path}/mods/*.conf", f"{tmp_path}/sysctl.conf"),
               files_probe(f"{tmp_path}/sysctl.conf", f"{tmp_path}/secret.conf", f"{tmp_path}/s?sctl.conf")]
    run, joined = probejoin.join([Probe("lsmod"), *members])
    assert [p.command.count("tail -v") for p in run] == [0, 1]
    assert run[1].reads == tuple(dict.fromkeys(r for m in members for r in m.reads))  # watch may skip it whole
    by_key = joined.split({run[1].key: ProbeResult(_run_sh(run[1].command), "", 0)})
    for member in members:
        alone = _run_sh(member.command)
        assert parse_file_listing(by_key[member.key].stdout) == parse_file_listing(alone)
        assert set(by_key[member.key].stdout.splitlines()) == set(alone.splitlines())  # a file twice: once
    assert parse_file_listing(by_key[members[1].key].stdout).files == {
        f"{tmp_path}/mods/rdma.conf": "ib_umad\n# ==> not a header <==\n",
        f"{tmp_path}/sysctl.conf": "net.ipv4.ip_forward = 1\n"}


def test_a_listing_naming_one_path_twice_is_not_split() -> None:
    # A file's text holding a header line that names a real file: which text is whose cannot be told.
    a, b = files_probe("/etc/a/*.conf"), files_probe("/etc/b.conf")
    run, joined = probejoin.join([a, b])
    text = "==> /etc/a/x.conf <==\n==> /etc/b.conf <==\nforged\n\n==> /etc/b.conf <==\nreal\n"
    assert all(r.exit_code == 1 and "could not tell the 2 parts" in r.stderr
               for r in joined.split({run[0].key: ProbeResult(text, "", 0)}).values())


def test_file_patterns_are_plain_globs() -> None:
    for bad in ("etc/relative.conf", "/etc/with space.conf", "/etc/[ab].conf"):
        with pytest.raises(ValueError):
            files_probe(bad)


def test_the_very_result_split_last_time_is_not_split_again_and_an_equal_new_one_is() -> None:
    # A watch's kept result of a file-only probe comes back as the same object every cycle.
    calls = []
    units = _service_probes("rdma_cm", "nope", "openibd")
    group = units[0].group
    assert group is not None
    counting = ProbeGroup(group.command, group.argument,
                                    lambda text, args: calls.append(1) or group.split(text, args))
    members = [Probe(u.command, group=ProbeGroup(counting.command, u.group.argument, counting.split))
               for u in units if u.group is not None]
    run, joined = probejoin.join(members)
    kept = ProbeResult(THREE_UNITS, "", 0)
    first = joined.split({run[0].key: kept})
    assert joined.split({run[0].key: kept}) == first and len(calls) == 1
    assert joined.split({run[0].key: ProbeResult(THREE_UNITS, "", 0)}) == first and len(calls) == 2
    changed = joined.split({run[0].key: ProbeResult(THREE_UNITS.replace("running", "dead"), "", 0)})
    assert changed[members[0].key].stdout.count("SubState=dead") == 1 and len(calls) == 3
