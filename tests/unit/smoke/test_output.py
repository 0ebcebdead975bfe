"""--json (fabnet/smoke/v1) and --junit carry the per-size figures and the verdict."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from provisioner.smoke import output, preflight
from provisioner.smoke.busbw import size_result
from provisioner.smoke.run import SmokeOutcome
from provisioner.smoke.settings import Settings


def passed() -> SmokeOutcome:
    outcome = SmokeOutcome(hosts=["gpu01", "gpu02"], settings=Settings(min_busbw=0.1), verdict="pass",
                           reason="average busbw 0.2 GB/s", backend="gloo")
    outcome.rows = [size_result(1 << 20, 0.01, 2), size_result(2 << 20, 0.01, 2)]
    outcome.avg_busbw = sum(r.busbw for r in outcome.rows) / 2
    outcome.mtus = {"gpu01": 9000, "gpu02": 9000}
    return outcome


def test_json_schema_and_figures() -> None:
    data = output.to_json(passed(), inventory="inv.yml", playbook=None, limit=None)
    json.dumps(data)  # serialisable as is
    assert data["schema"] == "fabnet/smoke/v1" and data["verdict"] == "pass" and data["exit_code"] == 0
    assert [r["size"] for r in data["results"]] == [1 << 20, 2 << 20]
    assert set(data["results"][0]) == {"size", "time_us", "algbw", "busbw", "wrong"}
    assert data["avg_busbw"] > 0 and data["ranks"] == 2 and data["preflight"]["passed"]


def test_preflight_failure_in_json_and_junit() -> None:
    outcome = SmokeOutcome(hosts=["gpu01", "gpu02"], settings=Settings(), verdict="preflight_failed",
                           reason="MTU differs")
    outcome.findings = [preflight.Finding("mtu", ("gpu02",), "gpu02 at 1500, the other host at 9000", "set MTU 9000")]
    outcome.failed_hosts = {"gpu02": "gpu02 at 1500"}
    data = output.to_json(outcome, inventory="inv.yml", playbook="site.yml", limit="gpu")
    assert data["exit_code"] == 2 and data["results"] == [] and data["preflight"]["findings"][0]["hosts"] == ["gpu02"]
    assert {k: data["hosts"][1][k] for k in ("name", "verdict", "mtu", "failed", "reason")} == {
        "name": "gpu02", "verdict": "failed", "mtu": None, "failed": True, "reason": "gpu02 at 1500"}
    assert data["hosts"][0]["verdict"] == "pass" and data["checks"] == []
    suite = ET.fromstring(output.to_junit(outcome)).find("testsuite")
    failures = {c.get("name"): c.find("failure") for c in suite.iter("testcase")}
    assert failures["mtu"] is not None and "set MTU 9000" in failures["mtu"].get("message")
    assert failures["gpu01"] is None and failures["gpu02"] is not None
    assert failures["verdict"] is not None
    assert suite.get("failures") == "3"


def test_junit_has_one_case_per_size() -> None:
    suite = ET.fromstring(output.to_junit(passed())).find("testsuite")
    names = [c.get("name") for c in suite.iter("testcase")]
    assert f"all_reduce {1 << 20} bytes" in names and "verdict" in names
    assert suite.get("failures") == "0"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["verdict"] == "pass" and float(props["avg_busbw"]) > 0
