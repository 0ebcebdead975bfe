"""port_counters: limits and rates on RDMA port counters, from sysfs files or perfquery -x.

The sysfs probe is also run for real with /bin/sh against a directory tree laid out like
/sys/class/infiniband, so the globbing, quoting and the two-reading interval are exercised, not assumed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from provisioner.load.specs import PortCountersSpec
from provisioner.resources import port_counters
from provisioner.resources.base import HostContext, ProbeResult, Results

from ._recorded import failed, run, sample

GREP = "grep -r -H"
PROCFS = "port-counters-sysfs-3-procfs-mlx5-hfi1-mlx4.txt"
PERFQUERY = "perfquery -x"

SYSFS = (
    "mlx5_0/ports/1/counters/symbol_error:0\n"
    "mlx5_0/ports/1/counters/link_downed:0\n"
    "mlx5_0/ports/1/hw_counters/out_of_buffer:12\n"
    "mlx5_1/ports/1/counters/symbol_error:37\n"
    "mlx5_1/ports/1/counters/link_downed:2\n"
)

CASES = [
    pytest.param({"max": {"symbol_error": 0, "link_downed": 0}}, {GREP: SYSFS}, [
        ("mlx5_0/1 symbol_error", "ok", "<= 0", "0"), ("mlx5_0/1 link_downed", "ok", "<= 0", "0"),
        ("mlx5_1/1 symbol_error", "drift", "<= 0", "37"), ("mlx5_1/1 link_downed", "drift", "<= 0", "2"),
    ], id="every-device-one-drifts"),
    pytest.param({"device": "mlx5_0", "port": 1, "max": {"symbol_error": 0, "out_of_buffer": 100}}, {GREP: SYSFS}, [
        ("mlx5_0/1 symbol_error", "ok", "<= 0", "0"), ("mlx5_0/1 out_of_buffer", "ok", "<= 100", "12"),
    ], id="one-port-hw-counter"),
    pytest.param({"device": "mlx5_0", "max": {"np_cnp_sent": 0}}, {GREP: SYSFS}, [
        ("mlx5_0/1 np_cnp_sent", "error", "<= 0", None),
    ], id="counter-absent-is-error"),
    pytest.param({"device": "mlx5_9", "max": {"symbol_error": 0}}, {GREP: SYSFS}, [
        ("symbol_error", "error", "<= 0", None),
    ], id="device-absent-is-error"),
    pytest.param({"max": {"symbol_error": 0}}, {GREP: failed("sh: 1: cd: can't cd to /sys/class/infiniband", 2)}, [
        ("symbol_error", "error", "<= 0", None),
    ], id="no-infiniband-class"),
    pytest.param({"max": {"rp_cnp_handled": 50000}}, {GREP: sample("port-counters-sysfs-1.txt")}, [
        ("mlx5_0/1 rp_cnp_handled", "ok", "<= 50000", "43305"),
    ], id="real-sysfs-sample"),
    pytest.param({"device": "mlx5_0", "port": 2, "source": "perfquery", "max": {"symbol_error": 0,
                  "port_xmit_wait": 1000}}, {PERFQUERY: sample("perfquery-x-1.txt")}, [
        ("mlx5_0/2 symbol_error", "ok", "<= 0", "0"), ("mlx5_0/2 port_xmit_wait", "drift", "<= 1000", "36510964"),
    ], id="perfquery"),
    pytest.param({"max_rate": {"symbol_error": 1}, "interval": 2},
                 {GREP: SYSFS + "@@interval 2\n" + SYSFS.replace("symbol_error:37", "symbol_error:45")}, [
        ("mlx5_0/1 symbol_error rate", "ok", "<= 1/s", "0/s"),
        ("mlx5_1/1 symbol_error rate", "drift", "<= 1/s", "4/s"),
    ], id="rate-over-interval"),
    pytest.param({"max_rate": {"symbol_error": 1}}, {GREP: SYSFS + "@@interval 2\n"}, [
        ("symbol_error rate", "error", "<= 1/s", None),
    ], id="second-reading-missing-is-incomplete"),
    # symbol_error is 16 bits wide: at 65535 it has stopped counting, so its rate would read 0/s.
    pytest.param({"max_rate": {"symbol_error": 1}, "interval": 2},
                 {GREP: SYSFS.replace("symbol_error:37", "symbol_error:65535") + "@@interval 2\n"
                  + SYSFS.replace("symbol_error:37", "symbol_error:65535")}, [
        ("mlx5_0/1 symbol_error rate", "ok", "<= 1/s", "0/s"),
        ("mlx5_1/1 symbol_error rate", "error", "<= 1/s", None),
    ], id="saturated-counter-rate-cannot-be-measured"),
    pytest.param({"device": "mlx5_0", "max": {"local_ack_timeout_err": 0, "out_of_buffer": 0}},
                 {GREP: sample(PROCFS)}, [
        ("mlx5_0/1 local_ack_timeout_err", "drift", "<= 0", "131"), ("mlx5_0/1 out_of_buffer", "ok", "<= 0", "0"),
    ], id="real-roce-hw-counters"),
    # A driver reload between the readings zeroes the hw_counters: 131 -> 0 is no rate at all (and a negative
    # one would pass any limit); a counter that held still is still judged.
    pytest.param({"device": "mlx5_0", "max_rate": {"local_ack_timeout_err": 0, "symbol_error": 0}, "interval": 2},
                 {GREP: sample(PROCFS) + "@@interval 2\n" + re.sub(r"(?m)(hw_counters/[^:]+):[0-9]+$", r"\1:0",
                                                                   sample(PROCFS))}, [
        ("mlx5_0/1 local_ack_timeout_err rate", "error", "<= 0/s", None),
        ("mlx5_0/1 symbol_error rate", "ok", "<= 0/s", "0/s"),
    ], id="counters-reset-between-readings"),
]


@pytest.mark.parametrize(("spec", "outputs", "expected"), CASES)
def test_port_counters(spec: dict, outputs: dict, expected: list) -> None:
    assert run("port_counters", spec, outputs).summary() == expected


def test_a_saturated_counter_says_so_and_how_to_reset_it() -> None:
    text = SYSFS.replace("symbol_error:37", "symbol_error:65535")
    result = run("port_counters", {"max_rate": {"symbol_error": 1}, "interval": 2},
                 {GREP: text + "@@interval 2\n" + text})
    assert "stuck at its maximum (65535)" in result.checks[1].message and "perfquery -R" in result.checks[1].message


def test_a_reset_between_the_readings_says_so() -> None:
    first = sample(PROCFS)
    result = run("port_counters", {"device": "mlx5_0", "max_rate": {"roce_adp_retrans": 0}, "interval": 2},
                 {GREP: first + "@@interval 2\n" + first.replace("roce_adp_retrans:99", "roce_adp_retrans:4")})
    [check] = result.checks
    assert "went down from 99 to 4" in check.message and "reset" in check.message


def test_messages_name_what_is_missing() -> None:
    result = run("port_counters", {"max_rate": {"symbol_error": 1}}, {GREP: SYSFS + "@@interval 2\n"})
    assert "missing the second reading, 2 s after the first" in result.checks[0].message
    result = run("port_counters", {"max": {"symbol_error": 0}}, {GREP: failed("cd: can't cd", 2)})
    assert result.checks[0].message.startswith("no /sys/class/infiniband on the host")


@pytest.mark.parametrize("spec", [
    {}, {"max": {"symbol/error": 0}}, {"source": "perfquery", "max": {"symbol_error": 0}},
    {"max": {"symbol_error": 0}, "interval": 0}, {"max": {"symbol_error": 0}, "device": "mlx5_0; reboot"},
])
def test_invalid_specs(spec: dict) -> None:
    with pytest.raises(ValidationError):
        PortCountersSpec.model_validate(spec)


def _tree(root: Path, values: dict[str, int]) -> None:
    for path, value in values.items():
        target = root / "class/infiniband" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"{value}\n")


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_probe_runs_against_a_sysfs_tree(tmp_path: Path) -> None:
    root = tmp_path / "odd root's dir"  # quoting: a space and a quote in fabnet_sysfs_root
    _tree(root, {"mlx5_0/ports/1/counters/symbol_error": 0, "mlx5_0/ports/1/counters/link_downed": 0,
                 "mlx5_0/ports/1/hw_counters/out_of_buffer": 5, "mlx5_1/ports/1/counters/symbol_error": 9,
                 "mlx5_1/ports/1/counters/link_downed": 0})
    ctx = HostContext("gpu01", sysfs_root=str(root))
    spec = PortCountersSpec.model_validate({"max": {"symbol_error": 0, "link_downed": 0}})
    [probe] = port_counters.probes(spec, ctx)
    done = subprocess.run(["sh", "-c", probe.command], capture_output=True, text=True, timeout=10)
    results = Results({probe.key: ProbeResult(done.stdout, done.stderr, done.returncode)})
    checks = port_counters.evaluate(spec, results, ctx)
    assert [(c.attribute, c.status, c.actual) for c in checks] == [
        ("mlx5_0/1 symbol_error", "ok", "0"), ("mlx5_0/1 link_downed", "ok", "0"),
        ("mlx5_1/1 symbol_error", "drift", "9"), ("mlx5_1/1 link_downed", "ok", "0"),
    ]


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_rate_probe_reads_twice_in_one_exec(tmp_path: Path) -> None:
    _tree(tmp_path, {"mlx5_0/ports/1/counters/symbol_error": 3})
    ctx = HostContext("gpu01", sysfs_root=str(tmp_path))
    spec = PortCountersSpec.model_validate({"device": "mlx5_0", "max_rate": {"symbol_error": 0}, "interval": 0.2})
    [probe] = port_counters.probes(spec, ctx)
    # The counter rises while the probe sleeps between its two readings: a stand-in `sleep` bumps it first,
    # so the bump falls between the readings however slow the machine is.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sleep").write_text(
        f"#!/bin/sh\necho 7 > '{tmp_path}/class/infiniband/mlx5_0/ports/1/counters/symbol_error'\n"
        f"exec {shutil.which('sleep')} \"$@\"\n")
    (bin_dir / "sleep").chmod(0o755)
    done = subprocess.run(["sh", "-c", probe.command], capture_output=True, text=True, timeout=10,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    [check] = port_counters.evaluate(spec, Results({probe.key: ProbeResult(done.stdout, "", done.returncode)}), ctx)
    assert (check.attribute, check.status, check.actual, check.message) == (
        "mlx5_0/1 symbol_error rate", "drift", "20/s", "4 in 0.2 s")


def test_missing_sysfs_root_is_an_error_not_ok(tmp_path: Path) -> None:
    ctx = HostContext("gpu01", sysfs_root=str(tmp_path / "absent"))
    spec = PortCountersSpec.model_validate({"max": {"symbol_error": 0}})
    [probe] = port_counters.probes(spec, ctx)
    done = subprocess.run(["sh", "-c", probe.command], capture_output=True, text=True, timeout=10)
    assert done.returncode != 0
    [check] = port_counters.evaluate(spec, Results({probe.key: ProbeResult(done.stdout, done.stderr,
                                                                             done.returncode)}), ctx)
    assert check.status == "error"
