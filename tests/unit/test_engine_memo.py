"""engine.evaluate_memo: facts equal to the last ones are not evaluated again; any change is."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.evaluate import engine
from provisioner.load.hostplans import HostPlan, resolve
from provisioner.load.inventory import load_inventory
from provisioner.load.playbook import load_playbook
from provisioner.resources.base import Probe, ProbeResult, Results

LOADED = "Module  Size  Used by\nnvidia_peermem 16384 0\n"
NOT_LOADED = "Module  Size  Used by\nmlx5_ib 16384 0\n"


@pytest.fixture
def plan(tmp_path: Path) -> HostPlan:
    (tmp_path / "hosts").write_text("[gpu]\ngpu01 ansible_host=10.0.0.1\n")
    (tmp_path / "site.yml").write_text("- hosts: gpu\n  resources:\n"
                                       "    - kernel_module: {name: nvidia_peermem, persistent: false}\n")
    [host] = resolve(load_playbook(tmp_path / "site.yml"), load_inventory(tmp_path / "hosts"))
    return host


def _results(plan: HostPlan, lsmod: str, extra: str = "") -> Results:
    return Results({**{p.key: ProbeResult(lsmod, "", 0) for p in engine.plan_probes(plan)},
                    "extra-probe": ProbeResult(extra, "", 0)})


def test_same_facts_are_not_evaluated_again(plan: HostPlan, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = engine.evaluate
    monkeypatch.setattr(engine, "evaluate", lambda p, r: calls.append(1) or real(p, r))
    memo = engine.Memo()
    first = engine.evaluate_memo(plan, _results(plan, LOADED), memo)
    # A probe outside the plan (watch's link readings) changing is not a change of the facts evaluated.
    again = engine.evaluate_memo(plan, _results(plan, LOADED, extra="counters moved"), memo)
    assert len(calls) == 1
    assert [r.status for r in again] == [r.status for r in first] == ["ok"]


def test_changed_facts_are_evaluated(plan: HostPlan) -> None:
    memo = engine.Memo()
    assert [r.status for r in engine.evaluate_memo(plan, _results(plan, LOADED), memo)] == ["ok"]
    assert [r.status for r in engine.evaluate_memo(plan, _results(plan, NOT_LOADED), memo)] == ["drift"]
    assert [r.status for r in engine.evaluate_memo(plan, _results(plan, LOADED), memo)] == ["ok"]


def test_without_a_memo_it_is_evaluate(plan: HostPlan) -> None:
    results = _results(plan, NOT_LOADED)
    assert [r.status for r in engine.evaluate_memo(plan, results, None)] == \
        [r.status for r in engine.evaluate(plan, results)] == ["drift"]


def test_a_memo_plans_the_hosts_probes_once_for_the_same_extra_probes(plan: HostPlan,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    planned = []
    real = engine._prepare
    monkeypatch.setattr(engine, "_prepare", lambda p, extra: planned.append(len(extra)) or real(p, extra))

    class Session:  # answers every probe with lsmod's output; gather only needs exec and options
        options = engine.Options()

        def exec(self, script: str, **_: object) -> object:
            from provisioner.facts import batch
            nonce = script.split("@@fabnet:", 1)[1].split(":", 1)[0]
            keys = [line.split()[1] for line in script.splitlines() if line.startswith("__fn_probe ")]
            blocks = "".join(f"@@fabnet:{nonce}:begin:{k}@@\n{LOADED}\n@@fabnet:{nonce}:rc:{k}:0:@@\n\n"
                             f"@@fabnet:{nonce}:end:{k}@@\n" for k in keys)
            assert batch.split_output(blocks, nonce)
            return type("R", (), {"stdout": blocks, "stderr": "", "exit_code": 0, "ended": "exited"})()

    memo = engine.Memo()
    extra = [Probe("echo links")]
    for _ in range(3):
        results, _ = engine.gather(plan, Session(), extra, memo)  # type: ignore[arg-type]
        assert {p.key for p in engine.plan_probes(plan)} | {extra[0].key} <= set(results.by_key)
    assert planned == [1]
    engine.gather(plan, Session(), [], memo)  # type: ignore[arg-type]
    assert planned == [1, 0]
