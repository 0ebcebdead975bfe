"""Saved plans: steps survive the round trip through JSON exactly; the file is owner-only."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from provisioner.plan import saved as saved_plan
from provisioner.resources.steps import PHASE_NETWORK, Step, file_step


def test_steps_round_trip_exactly(tmp_path: Path) -> None:
    steps = [Step("interface[eth1]", "mtu", "ip link set dev eth1 mtu 9000", "ip link set dev eth1 mtu 9000",
                  undo="ip link set dev eth1 mtu 1500", phase=PHASE_NETWORK, needs=("ofed",), netdev="eth1"),
             file_step("file[/etc/x]", "write", "/etc/x", b"secret\n", notify=("rdma_cm",))]
    host = SimpleNamespace(name="gpu01", digest="sha256:abc", steps=steps, audit=SimpleNamespace(status="drifted"))
    path = tmp_path / "plan.json"
    saved_plan.write(path, saved_plan.to_dict([host], inventory="i.yml", playbook="p.yml", limit=None))
    assert path.stat().st_mode & 0o777 == 0o600
    data = saved_plan.read(path)
    assert saved_plan.steps_of(data["hosts"][0]) == steps
    assert json.loads(path.read_text())["schema"] == "fabnet/plan/v1"


def test_a_host_whose_facts_changed_gets_no_steps() -> None:
    step = Step("sysctl[x]", "set", "sysctl -w x=1", "sysctl -w x=1")
    data = {"hosts": [{"name": "a", "facts_digest": "sha256:1", "steps": [step.__dict__ | {"needs": []}]},
                      {"name": "b", "facts_digest": "sha256:2", "steps": [step.__dict__]}]}
    a = SimpleNamespace(name="a", digest="sha256:1", steps=[], resources=[])
    b = SimpleNamespace(name="b", digest="sha256:changed", steps=[step], resources=[])
    c = SimpleNamespace(name="c", digest="sha256:3", steps=[step], resources=[])
    assert saved_plan.adopt([a, b, c], data) == ["b", "c"]
    assert a.steps == [step] and b.steps == [] and c.steps == []
    # Each refusal says why: a changed host is told to re-plan, a host the plan never saw is named so.
    assert "facts digest differs" in saved_plan.refusal("b", data)
    assert saved_plan.refusal("c", data).startswith("not in the plan")
