"""`fabnet watch` checked by the tools its output is made for, on a 3-node lab: a real Prometheus server
scrapes `--prom-port` and answers a query for the drifted host; the `report --html` page of that run,
opened in a real headless chromium, shows the drifted host, the flapped link and a heatmap cell per
measured host pair, with nothing in the browser's console.

The faults are made by hand as in test_watch.py: a sysctl changed over the system ssh client, the
node's port on the lab switch set down and up.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from provisioner.lab import manager
from tests.e2e.conftest import Lab, healthy_profile, lab_name
from tests.e2e.test_watch import ROOT, SYSCTL, Watch, _free_port

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DRIFTED, FLAPPED = "gpu03", "gpu01"


@dataclass
class Run:
    lab: Lab
    watch: Watch
    tmp: Path
    flapped_port: str  # as the watch names it (the node's interface)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """One smoke run (its pairs go into the history), then a watch that sees a drift and a flap; the
    watch keeps running (and serving its metrics) until the module is done."""
    name = lab_name("wor")
    tmp = tmp_path_factory.mktemp("oracles")
    manager.down(name)
    try:
        lab = Lab(manager.up(name, 3, healthy_profile(tmp, 3)))
        history = tmp / "history.sqlite"
        smoke = subprocess.run(
            [sys.executable, "-m", "provisioner", "smoke", str(lab.state.inventory_path), "--sizes", "1M:2M",
             "--iters", "3", "--json"], capture_output=True, text=True, timeout=180, cwd=ROOT,
            env={**os.environ, "FABNET_HISTORY": str(history)})
        pairs = json.loads(smoke.stdout)["pair_figures"] if smoke.stdout.strip() else []
        assert len({frozenset(p["hosts"]) for p in pairs}) == 3, (smoke.returncode, smoke.stdout[-3000:],
                                                                  smoke.stderr[-2000:])
        watch = Watch(lab, tmp)
        assert watch.history == history  # the watch records into the same history as the smoke run
        drifted = lab.node(DRIFTED)
        try:
            for host in ("gpu01", "gpu02", "gpu03"):
                watch.wait_for(lambda c, n=host: c["host"] == n and c["kind"] == "watching")
            lab.ssh(drifted, f"sysctl -w {SYSCTL}=0")
            port = lab.state.names.data_port(lab.node(FLAPPED).index)
            subprocess.run(f"ip link set {port} down && sleep 0.2 && ip link set {port} up", shell=True, check=True)
            watch.wait_for(lambda c: c["host"] == DRIFTED and c["kind"] == "drift_new")
            _, flap = watch.wait_for(lambda c: c["host"] == FLAPPED and c["kind"] in ("link_flap", "link_down"))
            watch.wait_for(lambda c: c["host"] == FLAPPED and c["kind"] in ("link_flap", "link_up"))
            yield Run(lab, watch, tmp, str(flap["subject"]))
        finally:
            assert watch.stop() == 0
            lab.ssh(drifted, f"sysctl -w {SYSCTL}=1", check=False)
    finally:
        manager.down(name)


def _get_json(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read().decode())  # type: ignore[no-any-return]


def test_a_real_prometheus_scrapes_the_watch_and_finds_the_drifted_host(run: Run) -> None:
    prometheus = shutil.which("prometheus")
    assert prometheus, "prometheus is missing: run scripts/bootstrap.sh"
    config = run.tmp / "prometheus.yml"
    config.write_text("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                      "scrape_configs:\n  - job_name: fabnet-watch\n"
                      f"    static_configs: [{{targets: ['127.0.0.1:{run.watch.port}']}}]\n")
    web = _free_port()
    base = f"http://127.0.0.1:{web}"
    proc = subprocess.Popen([prometheus, f"--config.file={config}", f"--storage.tsdb.path={run.tmp / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{web}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    found: list[dict[str, object]] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as ready:
                    if ready.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, "prometheus exited"
            time.sleep(0.3)
        query = urllib.parse.quote("fabnet_watch_drift_items > 0")
        while time.monotonic() < deadline and not found:
            answer = _get_json(f"{base}/api/v1/query?query={query}")
            assert answer["status"] == "success", answer
            found = answer["data"]["result"]  # type: ignore[index]
            time.sleep(0.5)
        targets = _get_json(f"{base}/api/v1/targets")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert [t["health"] for t in targets["data"]["activeTargets"]] == ["up"]  # type: ignore[index]
    assert [(r["metric"]["host"], r["metric"]["kind"], r["value"][1]) for r in found] == [  # type: ignore[index]
        (DRIFTED, "sysctl", "1")]


def test_the_html_report_in_a_real_browser_shows_drift_flap_and_pair_heatmap(run: Run) -> None:
    chromedriver = shutil.which("chromedriver")
    if chromedriver is None:
        pytest.skip("chromedriver is missing (Debian's chromium-driver; scripts/bootstrap.sh installs it)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    page = run.tmp / "report.html"
    made = subprocess.run([sys.executable, "-m", "provisioner", "report", "--html", str(page),
                           "--history", str(run.watch.history)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert made.returncode == 0, made.stderr
    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", f"--user-data-dir={run.tmp / 'chromium'}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(chromedriver))
    try:
        driver.get(page.as_uri())
        text = driver.find_element(By.TAG_NAME, "body").text
        cells = [c.get_attribute("data-pair") for c in driver.find_elements(By.CSS_SELECTOR, "rect[data-pair]")]
        console = driver.get_log("browser")
    finally:
        driver.quit()
    rows = [line for line in text.splitlines() if line.startswith(time.strftime("%Y-%m-%d"))]
    assert any(f"{DRIFTED} drift_new" in line and SYSCTL in line for line in rows), text
    assert any(f"{FLAPPED} link_" in line and run.flapped_port in line for line in rows), text
    # One cell per ordered pair of the 3 hosts (the matrix is symmetric), so one per host pair each way.
    pairs = {frozenset(str(c).split("|")) for c in cells}
    assert pairs == {frozenset(p) for p in (("gpu01", "gpu02"), ("gpu02", "gpu03"), ("gpu01", "gpu03"))}, cells
    assert len(cells) == 2 * len(pairs)
    assert [entry for entry in console if entry["level"] == "SEVERE"] == []
