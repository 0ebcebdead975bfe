"""port_counters run for real: the probe's own shell code, run by sh on a sysfs-like tree, then judged.

A counter file the kernel refuses to serve is a check that could not be made, naming what grep printed; a path
with no file (a group or counter the device does not have) still reads as a counter that is not there.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from provisioner.load.specs import PortCountersSpec
from provisioner.parsers.port_counters import parse_port_counters
from provisioner.resources import port_counters
from provisioner.resources.base import HostContext, ProbeResult, Results


def _tree(root: Path, refused: str) -> None:
    efa = root / "class/infiniband/efa_0"
    (efa / "ports/1/hw_counters").mkdir(parents=True)
    (efa / "hw_counters").mkdir()
    (efa / "ports/1/hw_counters/rdma_read_wr_err").write_text("0\n")
    (efa / "hw_counters/cmds_err").write_text("3\n")
    # Named on grep's command line, so the link is followed and the read itself fails.
    os.symlink(refused, efa / "hw_counters/mmap_err")


def _run(spec: dict, root: Path) -> tuple[ProbeResult, list]:
    model = PortCountersSpec.model_validate(spec)
    ctx = HostContext("gpu01", sysfs_root=str(root))
    [probe] = port_counters.probes(model, ctx)
    proc = subprocess.run(["sh", "-c", probe.command], capture_output=True, text=True, timeout=30)
    result = ProbeResult(proc.stdout, proc.stderr, proc.returncode)
    return result, port_counters.evaluate(model, Results({probe.key: result}), ctx)


def test_a_refused_counter_file_is_unreadable_and_a_missing_one_absent(tmp_path: Path, refused_file: str) -> None:
    _tree(tmp_path, refused_file)
    result, checks = _run({"device": "efa_0", "max": {"cmds_err": 5, "mmap_err": 0, "create_qp_err": 0}}, tmp_path)
    assert result.exit_code == 0 and result.stderr == ""
    assert "grep: efa_0/hw_counters/mmap_err: Permission denied" in result.stdout.splitlines()
    parsed = parse_port_counters(result.stdout)
    assert parsed.devices[0].unreadable == {"mmap_err": "Permission denied"}
    # The port has no counters/ group and the device no create_qp_err: both unmatched, neither unreadable.
    assert sorted(parsed.absent) == ["efa_0/hw_counters/create_qp_err", "efa_0/ports/*/counters"]
    by_name = {c.attribute: c for c in checks}
    assert (by_name["efa_0 cmds_err"].status, by_name["efa_0 cmds_err"].actual) == ("ok", "3")
    assert by_name["efa_0 mmap_err"].status == "error"
    assert by_name["efa_0 mmap_err"].message == "cannot read efa_0 mmap_err: the host printed 'Permission denied'"
    [lacking] = [c for c in checks if "create_qp_err" in c.attribute]
    assert lacking.status == "error" and "has no counter create_qp_err" in lacking.message


def test_a_rate_on_a_refused_counter_cannot_be_measured(tmp_path: Path, refused_file: str) -> None:
    _tree(tmp_path, refused_file)
    result, [check] = _run({"device": "efa_0", "max_rate": {"mmap_err": 0}, "interval": 0.1}, tmp_path)
    assert result.exit_code == 0
    assert (check.attribute, check.status) == ("efa_0 mmap_err rate", "error")
    assert check.message == "cannot read efa_0 mmap_err: the host printed 'Permission denied'"


def test_a_host_without_rdma_devices_still_says_so(tmp_path: Path) -> None:
    # Every path unmatched: grep's complaints are all absences, and the check says nothing was found.
    (tmp_path / "class/infiniband").mkdir(parents=True)
    result, checks = _run({"max": {"symbol_error": 0}}, tmp_path)
    assert result.exit_code == 0
    assert [(c.status, c.message) for c in checks] == [("error", "no counters found for any device")]
