"""How the launcher turns the hosts' execs into a job result (the SSH part is covered end to end)."""

from __future__ import annotations

import json

from provisioner.smoke import launcher, plan
from tests.unit.smoke._helpers import HERE
from tests.unit.smoke.test_plan import job


def host_output(events: dict[int, list[dict]], outputs: dict[int, str] | None = None, alive: str = "") -> str:
    lines = []
    for rank, records in events.items():
        lines.append(f"{plan.MARK}:events /tmp/fabnet-smoke-x/rank-{rank}.events")
        lines += [json.dumps({"rank": rank, **r}) for r in records]
    for rank, text in (outputs or {}).items():
        lines += [f"{plan.MARK}:output /tmp/fabnet-smoke-x/rank-{rank}.out", text]
    eth1 = [e for e in json.loads((HERE / "ip-j-addr-healthy.json").read_text()) if e["ifname"] == "eth1"]
    lines += [f"{plan.MARK}:iface", json.dumps(eth1), f"{plan.MARK}:alive", alive]
    return "\n".join(lines) + "\n"


def done(rank: int) -> list[dict]:
    return [{"event": "started"}, {"event": "connected"}, {"event": "joined"},
            {"event": "size", "bytes": 1 << 20, "seconds": 0.01, "wrong": 0},
            {"event": "size", "bytes": 2 << 20, "seconds": 0.02, "wrong": 0}, {"event": "done"}]


def test_all_done_is_ok_with_figures() -> None:
    j = job()
    outputs = {"gpu01": launcher.Exec(host_output({0: done(0), 1: done(1)})),
               "gpu02": launcher.Exec(host_output({2: done(2), 3: done(3)}))}
    result = launcher._result(j, outputs, {}, False, 1.0, 30)
    assert result.ok and [r.size for r in result.rows] == [1 << 20, 2 << 20] and result.cause is None


def test_a_crashed_rank_brings_its_output_and_the_kill_report() -> None:
    j = job()
    outputs = {"gpu01": launcher.Exec(host_output({0: done(0)[:2], 1: done(1)[:2]})),
               "gpu02": launcher.Exec(host_output({2: [{"event": "started"}], 3: [{"event": "started"}]},
                                                  {2: "Traceback ...\nImportError: libgomp.so.1"}))}
    killed = {"gpu01": launcher.Exec(host_output({})), "gpu02": launcher.Exec(host_output({}, alive=" 4242"))}
    result = launcher._result(j, outputs, killed, False, 3.0, 30)
    assert not result.ok and result.outputs[2].startswith("Traceback")
    assert result.left_running == {"gpu02": [4242]}
    assert result.failed_hosts == ["gpu02"]


def test_unreachable_during_the_run_is_kept() -> None:
    j = job()
    outputs = {"gpu01": launcher.Exec(host_output({0: done(0)[:2], 1: done(1)[:2]})),
               "gpu02": launcher.Exec(unreachable="cannot connect to 198.18.1.2:22: timed out")}
    result = launcher._result(j, outputs, {"gpu01": launcher.Exec(host_output({}))}, False, 3.0, 30)
    assert result.unreachable == {"gpu02": "cannot connect to 198.18.1.2:22: timed out"}
    assert result.failed_hosts == ["gpu02"] and "could not be reached over SSH" in (result.cause or "")
