"""The undos of roce_qos steps, run in sh against stand-in tools and a temporary sysfs: each puts its
setting back only while it still reads as the run set it (or as it was), and otherwise says what it is now."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from provisioner.resources.base import HostContext

from ._recorded import fix, sample

QOS_BEFORE = sample("mlnx_qos-1.txt")  # trust dscp, PFC on 3, DSCP 26 on priority 3
QOS_SET = (QOS_BEFORE.replace("enabled     0   0   0   1   0", "enabled     0   0   0   1   1")
           .replace("dscp:31,30,29,28,27,26,25,24,", "dscp:31,30,29,28,27,25,24,")
           .replace("dscp:47,46,", "dscp:26,47,46,"))
SPEC = {"interface": "eth1", "pfc": [3, 4], "dscp2prio": {26: 5}, "ecn": [3], "cnp_dscp": 26, "traffic_class": 106,
        "roce_tos": 106}


def _tool(bin_dir: Path, name: str, state: Path) -> None:
    """`name` reading (`-i X` / `-d X`: prints `state`) or setting (logs its arguments beside `state`)."""
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\nif [ $# -eq 2 ]; then cat '{state}'; else echo \"$*\" >> '{state}.log'; fi\n")
    path.chmod(0o755)


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A sysfs with eth1 (RDMA device mlx5_0) as the steps leave it, and mlnx_qos/cma_roce_tos stand-ins."""
    (tmp_path / "bin").mkdir()
    net = tmp_path / "sys/class/net/eth1"
    (net / "device/infiniband/mlx5_0").mkdir(parents=True)
    for point in ("roce_np", "roce_rp"):
        (net / f"ecn/{point}/enable").mkdir(parents=True)
        for prio in range(8):
            (net / f"ecn/{point}/enable/{prio}").write_text("1\n" if prio == 3 else "0\n")
    (net / "ecn/roce_np/cnp_dscp").write_text("26\n")
    tc = tmp_path / "sys/class/infiniband/mlx5_0/tc/1"
    tc.mkdir(parents=True)
    (tc / "traffic_class").write_text("Global tclass=106\n")
    (tmp_path / "qos").write_text(QOS_SET)
    (tmp_path / "tos").write_text("106\n")
    _tool(tmp_path / "bin", "mlnx_qos", tmp_path / "qos")
    _tool(tmp_path / "bin", "cma_roce_tos", tmp_path / "tos")
    return tmp_path


def _undos(host: Path) -> dict[str, str]:
    ecn_before = "".join(f"{host}/sys/class/net/eth1/ecn/{p}/enable/{i}:{int(p == 'roce_np' and i == 4)}\n"
                         for p in ("roce_np", "roce_rp") for i in range(8))  # off, but roce_np of 4 on
    steps = fix("roce_qos", SPEC, {"mlnx_qos -i": QOS_BEFORE, "/enable": ecn_before, "cnp_dscp": "48\n",
                                   "traffic_class": "Global tclass=96\n", "cma_roce_tos": "0\n"},
                HostContext("gpu01", sysfs_root=f"{host}/sys"))
    return {s.action: s.undo for s in steps if s.undo is not None and s.action not in ("persist", "unit", "enable")}


def _run(host: Path, undo: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{host}/bin:{os.environ['PATH']}"}
    return subprocess.run(["sh", "-ec", undo], capture_output=True, text=True, env=env, timeout=30, check=False)


def test_every_runtime_setting_is_put_back_while_it_reads_as_the_run_set_it(host: Path) -> None:
    undos = _undos(host)
    assert sorted(undos) == ["cnp_dscp", "ecn", "mlnx_qos", "roce_tos", "traffic_class"]
    for action, undo in undos.items():
        assert _run(host, undo).returncode == 0, action
    assert (host / "qos.log").read_text() == "-i eth1 --pfc 0,0,0,1,0,0,0,0 --dscp2prio set,26,3\n"
    assert (host / "tos.log").read_text() == "-d mlx5_0 -t 0\n"
    assert (host / "sys/class/net/eth1/ecn/roce_np/cnp_dscp").read_text() == "48\n"
    assert (host / "sys/class/infiniband/mlx5_0/tc/1/traffic_class").read_text() == "96\n"
    enable = host / "sys/class/net/eth1/ecn"
    assert [(enable / f"roce_np/enable/{p}").read_text() for p in (3, 4)] == ["0\n", "1\n"]  # half-on kept
    assert (enable / "roce_rp/enable/4").read_text() == "0\n"


def test_a_qos_value_still_as_it_was_is_put_back_too(host: Path) -> None:
    (host / "qos").write_text(QOS_BEFORE)  # the step never took effect
    assert _run(host, _undos(host)["mlnx_qos"]).returncode == 0
    assert (host / "qos.log").exists()


@pytest.mark.parametrize(("action", "edit", "message"), [
    ("mlnx_qos", lambda h: (h / "qos").write_text(QOS_SET.replace("0   1   1   0   0   0", "0   1   1   0   0   1")),
     "roce_qos[eth1] QoS changed since this run set it: not restored (set pfc=0,0,0,1,1,0,0,0 dscp2prio[26]=5, "
     "now pfc=0,0,0,1,1,0,0,1 dscp2prio[26]=5)"),
    ("ecn", lambda h: (h / "sys/class/net/eth1/ecn/roce_rp/enable/5").write_text("1\n"),
     "roce_qos[eth1] ECN changed since this run set it: not restored (set 0 0 0 1 0 0 0 0 0 0 0 1 0 0 0 0, "
     "now 0 0 0 1 0 0 0 0 0 0 0 1 0 1 0 0)"),
    ("cnp_dscp", lambda h: (h / "sys/class/net/eth1/ecn/roce_np/cnp_dscp").write_text("24\n"),
     "roce_qos[eth1] cnp_dscp changed since this run set it: not restored (set 26, now 24)"),
    ("traffic_class", lambda h: (h / "sys/class/infiniband/mlx5_0/tc/1/traffic_class").write_text("Global tclass=98\n"),
     "roce_qos[eth1] traffic_class changed since this run set it: not restored (set 106, now 98)"),
    ("roce_tos", lambda h: (h / "tos").write_text("104\n"),
     "roce_qos[eth1] roce_tos changed since this run set it: not restored (set 106, now 104)"),
])
def test_a_setting_changed_since_the_run_is_left_and_the_undo_says_so(host: Path, action: str, edit: object,
                                                                       message: str) -> None:
    undo = _undos(host)[action]
    edit(host)  # type: ignore[operator]
    before = {p: p.read_text() for p in (host / "sys").rglob("*") if p.is_file()}
    proc = _run(host, undo)
    assert proc.returncode != 0
    assert proc.stderr.strip() == message
    assert not (host / "qos.log").exists() and not (host / "tos.log").exists()
    assert {p: p.read_text() for p in (host / "sys").rglob("*") if p.is_file()} == before


def test_the_qos_read_takes_dscp_rows_split_over_lines(host: Path) -> None:
    (host / "qos").write_text(sample("mlnx_qos-8-dscp-split-row.txt"))  # 30 and 48 both on priority 6
    spec = {"interface": "eth1", "dscp2prio": {48: 5}}
    undo = fix("roce_qos", spec, {"mlnx_qos -i": sample("mlnx_qos-8-dscp-split-row.txt")})[0].undo or ""
    assert _run(host, undo).returncode == 0  # still as it was: 48 on 6
    assert (host / "qos.log").read_text() == "-i eth1 --dscp2prio set,48,6\n"
