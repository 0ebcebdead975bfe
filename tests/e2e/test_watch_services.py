"""`fabnet watch` keeps a service's reading while nothing that could change it did (facts/fingerprint.py,
resources/service.py), on a 2-node lab with systemd 252: quiet cycles start no `systemctl`, and each
change made by hand, with systemd's own tools, is still reported within one interval: a main process
killed, a unit stopped, a unit disabled; a daemon-reload alone makes the next cycle ask systemd again.

rdma_cm restarts on its own 10 s after its main process dies (a drop-in): in between it is "activating
(auto-restart)", and the watch must see both that and the restart systemd makes without anyone asking.
(systemd 252 passes through "failed" on the way, which removes the unit's entry in /run/systemd/units;
the main process's /proc entry, which the watch compares too, is gone either way: the unit tests show that
check on its own.)

`systemctl` calls are counted by a wrapper put before it on PATH on gpu02; the test's own calls name
/usr/bin/systemctl, so only fabnet's are counted. gpu01 is the control: nothing is reported for it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.lab import manager
from tests.e2e.conftest import Lab, lab_name
from tests.e2e.test_watch import PLAYBOOK, Watch

pytestmark = pytest.mark.slow

SERVICES = """\
    - service: {name: rdma_cm, state: started, enabled: true}
    - service: {name: openibd, state: started, enabled: true}
"""
COUNTER, WRAPPER, SYSTEMCTL = "/root/systemctl-calls", "/usr/local/bin/systemctl", "/usr/bin/systemctl"
DROP_IN = "/etc/systemd/system/rdma_cm.service.d"
RESTART_SECONDS = 10
INTERVAL = 2  # Watch's --every


@pytest.fixture(scope="module")
def services_lab() -> Iterator[Lab]:
    name = lab_name("wsv")
    manager.down(name)
    try:
        yield Lab(manager.up(name, 2))
    finally:
        manager.down(name)


def test_quiet_cycles_ask_systemd_nothing_and_each_change_is_reported_within_an_interval(
        services_lab: Lab, tmp_path: Path) -> None:
    lab = services_lab
    gpu02 = lab.node("gpu02")
    lab.ssh(gpu02, f"printf '#!/bin/sh\\necho x >> {COUNTER}\\nexec {SYSTEMCTL} \"$@\"\\n' > {WRAPPER} "
                   f"&& chmod 755 {WRAPPER} && : > {COUNTER} && mkdir -p {DROP_IN} "
                   f"&& printf '[Service]\\nRestart=always\\nRestartSec={RESTART_SECONDS}\\n' > {DROP_IN}/restart.conf "
                   f"&& {SYSTEMCTL} daemon-reload")

    def calls() -> int:
        return int(lab.ssh(gpu02, f"wc -l < {COUNTER}").stdout)

    def by_hand(command: str) -> float:
        before = time.monotonic()
        lab.ssh(gpu02, command)
        return before

    def reported(kind: str, subject: str, done: float) -> dict[str, object]:
        arrived, change = watch.wait_for(lambda c: c["host"] == "gpu02" and c["kind"] == kind
                                         and c["subject"] == f"service service[{subject}" and c["at"] > wall(done))
        assert arrived - done < INTERVAL + 4, change  # within one interval (and that cycle's own time)
        return change

    def wall(monotonic: float) -> float:
        return time.time() - (time.monotonic() - monotonic)

    watch = Watch(lab, tmp_path, playbook_text=PLAYBOOK + SERVICES)
    try:
        watch.wait_for(lambda c: c["host"] == "gpu02" and c["kind"] == "watching")
        assert calls() >= 1  # the first cycle asked systemd
        time.sleep(7)  # the readings' files and processes leave the 2 s racy window; kept from then on
        quiet = calls()
        time.sleep(2 * INTERVAL + 1)
        assert calls() == quiet  # quiet cycles start no systemctl

        lab.ssh(gpu02, f"{SYSTEMCTL} daemon-reload")  # changes nothing fabnet judges, but could have
        deadline = time.monotonic() + INTERVAL + 4
        while calls() == quiet and time.monotonic() < deadline:
            time.sleep(0.2)
        assert calls() > quiet

        kill = by_hand(f"kill -9 $({SYSTEMCTL} show -P MainPID rdma_cm.service)")
        killed = reported("drift_new", "rdma_cm]: active", kill)
        # systemd starts it again by itself, which leaves a trace: reported within an interval of that.
        arrived, _ = watch.wait_for(lambda c: c["kind"] == "drift_gone" and "rdma_cm]: active" in str(c["subject"]))
        assert RESTART_SECONDS < arrived - kill < RESTART_SECONDS + INTERVAL + 4
        stopped = reported("drift_new", "openibd]: active", by_hand(f"{SYSTEMCTL} stop openibd.service"))
        reported("drift_gone", "openibd]: active", by_hand(f"{SYSTEMCTL} start openibd.service"))
        disabled = reported("drift_new", "rdma_cm]: enabled", by_hand(f"{SYSTEMCTL} disable rdma_cm.service"))
        reported("drift_gone", "rdma_cm]: enabled", by_hand(f"{SYSTEMCTL} enable rdma_cm.service"))
        time.sleep(INTERVAL + 1)
    finally:
        code = watch.stop()
        lab.ssh(gpu02, f"rm -rf {WRAPPER} {COUNTER} {DROP_IN}; {SYSTEMCTL} daemon-reload; "
                       f"{SYSTEMCTL} enable rdma_cm.service; {SYSTEMCTL} start rdma_cm.service openibd.service",
                check=False)
    assert code == 0
    assert str(killed["detail"]).startswith("activating (auto-restart)"), killed
    assert str(stopped["detail"]).startswith("inactive (dead)"), stopped
    assert str(disabled["detail"]).startswith("disabled"), disabled
    # Each change once, for gpu02 alone, in the order made; nothing else.
    assert watch.kinds() == [("gpu02", kind, f"service service[{subject}") for kind, subject in (
        ("drift_new", "rdma_cm]: active"), ("drift_gone", "rdma_cm]: active"), ("drift_new", "openibd]: active"),
        ("drift_gone", "openibd]: active"), ("drift_new", "rdma_cm]: enabled"), ("drift_gone", "rdma_cm]: enabled"))]
