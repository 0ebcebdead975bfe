"""The engine's pure parts: probe planning, fleet-wide checks, host status; and host isolation."""

from __future__ import annotations

from pathlib import Path

import yaml

from provisioner.evaluate import engine
from provisioner.evaluate.engine import HostOutcome, ResourceOutcome
from provisioner.load.hostplans import resolve
from provisioner.load.inventory import load_inventory
from provisioner.load.playbook import load_playbook
from provisioner.resources.base import Check

PLAYBOOK = """\
- hosts: gpu
  resources:
    - interface: {name: "{{ data_iface }}", mtu: 9000}
    - mtu_uniform: {interface: "{{ data_iface }}"}
    - roce_qos: {interface: "{{ data_iface }}", active_mtu: 4096}
"""


def plans_for(tmp_path: Path, hosts: dict[str, dict]) -> list:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"vars": {"data_iface": "eth1"},
                                                 "children": {"gpu": {"hosts": hosts}}}}))
    playbook = tmp_path / "site.yml"
    playbook.write_text(PLAYBOOK)
    return resolve(load_playbook(playbook), load_inventory(inventory))


def test_identical_read_commands_are_planned_once_per_host(tmp_path) -> None:
    plan = plans_for(tmp_path, {"a": {"ansible_host": "127.0.0.1"}})[0]
    commands = [probe.command for probe in engine.plan_probes(plan)]
    assert len(commands) == len(set(commands))
    assert sum("ip -j -d link show" in command for command in commands) == 1


def _outcomes(plans: list, mtus: dict[str, int]) -> dict[str, HostOutcome]:
    outcomes = {}
    for plan in plans:
        resources = []
        for resource in plan.resources:
            outcome = ResourceOutcome(resource.kind, resource.target, str(resource.origin), "play")
            mtu = mtus[plan.host.name]
            outcome.checks = [Check("mtu", "", str(mtu), "ok")] if resource.kind == "mtu_uniform" else [
                Check("x", "1", "1", "ok")]
            resources.append(outcome)
        outcomes[plan.host.name] = HostOutcome(plan.host.name, plan.host.address, "in_sync", resources=resources)
    return outcomes


def test_fleet_mtu_check_groups_by_declaration_even_when_interface_names_differ(tmp_path) -> None:
    plans = plans_for(tmp_path, {"a": {}, "b": {}, "c": {"data_iface": "ens2f0np0"}})
    outcomes = _outcomes(plans, {"a": 9000, "b": 9000, "c": 1500})
    engine.apply_fleet_checks(plans, outcomes)
    for outcome in outcomes.values():
        engine.finish_status(outcome)
    assert {name: o.status for name, o in outcomes.items()} == {"a": "in_sync", "b": "in_sync", "c": "drifted"}
    fleet = next(r for r in outcomes["c"].resources if r.kind == "mtu_uniform")
    assert fleet.target == "mtu_uniform[ens2f0np0]"
    assert "c has 1500 where 2 other hosts have 9000" in fleet.checks[0].message


def test_one_hosts_fleet_view_judges_it_against_the_others_last_readings_and_changes_none(tmp_path) -> None:
    # watch: each host's cycle is judged against the other hosts' last readings, kept as read.
    plans = plans_for(tmp_path, {"a": {}, "b": {}, "c": {}})
    latest = _outcomes(plans, {"a": 9000, "b": 9000, "c": 1500})
    kept = {name: [list(r.checks) for r in o.resources] for name, o in latest.items()}
    odd = engine.with_fleet_checks(plans, latest, "c")
    engine.finish_status(odd)
    fleet = next(r for r in odd.resources if r.kind == "mtu_uniform")
    assert odd.status == "drifted" and "c has 1500 where 2 other hosts have 9000" in fleet.checks[0].message
    assert engine.with_fleet_checks(plans, latest, "a").resources[1].checks[0].status == "ok"
    assert {name: [list(r.checks) for r in o.resources] for name, o in latest.items()} == kept
    # Before the others have been read (a watch's first round), the host is compared with none.
    alone = engine.with_fleet_checks(plans, {"c": latest["c"]}, "c")
    assert "no other host" in next(r for r in alone.resources if r.kind == "mtu_uniform").checks[0].message


def test_unreadable_resource_makes_the_host_failed_but_keeps_its_drift(tmp_path) -> None:
    plan = plans_for(tmp_path, {"a": {}})[0]
    outcome = _outcomes([plan], {"a": 9000})["a"]
    outcome.resources[0].checks = [Check("mtu", "9000", "1500", "drift")]
    outcome.resources[2].checks = [Check("active_mtu", "4096", None, "error", "ibv_devinfo: not found")]
    engine.finish_status(outcome)
    assert outcome.error == "could not read: roce_qos[eth1]"
    assert outcome.resources[0].status == "drift"


def test_an_unreachable_host_does_not_stop_the_others(tmp_path) -> None:
    # Port 9 on loopback: nothing listens, so the connection is refused at once.
    plans = plans_for(tmp_path, {"down1": {"ansible_host": "127.0.0.1", "ansible_port": 9},
                                 "down2": {"ansible_host": "127.0.0.1", "ansible_port": 9}})
    result = engine.audit(plans, engine.Options(forks=2, connect_timeout=2))
    assert [h.status for h in result.hosts] == ["unreachable", "unreachable"]
    assert "cannot connect to 127.0.0.1:9" in result.hosts[0].error
    assert result.count("unreachable") == 2


def _gather_with(monkeypatch, tmp_path, stdout_for, ended: str) -> engine.HostOutcome:
    """audit_host with the exec replaced by a canned result: what the engine makes of how it ended."""
    from provisioner.facts import batch
    from provisioner.run import transport

    plan = plans_for(tmp_path, {"a": {"ansible_host": "127.0.0.1"}})[0]
    nonces: list[str] = []
    real_nonce = batch.new_nonce
    monkeypatch.setattr(batch, "new_nonce", lambda: nonces.append(real_nonce()) or nonces[-1])
    from provisioner.run.session import HostSession

    def run(session, script, **kwargs):
        return transport.ExecResult(stdout_for(script, nonces[0]), "", -1, 0.1, ended)  # type: ignore[arg-type]

    monkeypatch.setattr(HostSession, "exec", run)
    return engine.audit_host(plan, engine.Options(command_timeout=7))


def _first_probe_done(script: str, nonce: str) -> str:
    """The output of a host that finished its first probe (`ip` finding no interfaces), then went away."""
    key = next(line for line in script.splitlines() if line.startswith("__fn_probe ")).split()[1]
    tag = f"@@fabnet:{nonce}"
    return f"{tag}:begin:{key}@@\n[]\n{tag}:rc:{key}:0:@@\n\n{tag}:end:{key}@@\n"


def test_a_lost_connection_keeps_finished_probes_and_says_so_for_the_rest(monkeypatch, tmp_path) -> None:
    outcome = _gather_with(monkeypatch, tmp_path, _first_probe_done, "lost")
    messages = {c.message for r in outcome.resources for c in r.checks if c.status == "error"}
    assert "no interface eth1" in messages  # the finished probe's own result
    lost = {m for m in messages if m != "no interface eth1"}
    assert lost == {"ibv_devinfo -v: connection lost before its result arrived"}


def test_nothing_run_at_all_is_one_short_host_error(monkeypatch, tmp_path) -> None:
    outcome = _gather_with(monkeypatch, tmp_path, lambda script, nonce: "", "timeout")
    assert outcome.status == "failed"
    assert outcome.error == "the host's --timeout of 7 s ran out before any result came"
    outcome = _gather_with(monkeypatch, tmp_path, lambda script, nonce: "", "lost")
    assert outcome.error == "connection lost before any result arrived"
