"""port_counters: limits on counters a driver keeps for the whole device (DEVICE/hw_counters), not a port.

AWS EFA keeps its admin-command and verb failures there (`cmds_err`, `create_qp_err`), hfi1 its receive errors
(`RcvOverflow,32`), mlx5 in switchdev mode its RoCE counters. A limit on one is judged on the device's set when
the port has no such counter, once per device, and the check says it is the device's own.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from provisioner.load.specs import PortCountersSpec
from provisioner.resources import port_counters
from provisioner.resources.base import HostContext, ProbeResult, Results

from ._recorded import CTX, run, sample

GREP = "grep -r -H"
EFA = sample("port-counters-sysfs-4-efa-device-hw-counters.txt")
# EFA's port counters as a newer driver serves them beside the device's (values made up for the case).
EFA_PORT = "efa_0/ports/1/hw_counters/rx_drops:3\nefa_0/ports/1/hw_counters/tx_pkts:1\n"


def _bumped(text: str, counter: str, value: int) -> str:
    return "".join(f"{line.split(':')[0]}:{value}\n" if line.split(":")[0].endswith(f"/{counter}") else f"{line}\n"
                   for line in text.splitlines())


CASES = [
    # The recorded EFA listing has device-level counters only: each limit is judged on efa_0's own set.
    pytest.param({"device": "efa_0", "max": {"cmds_err": 0, "create_qp_err": 0, "submitted_cmds": 100}},
                 {GREP: EFA}, [
        ("efa_0 cmds_err", "ok", "<= 0", "0"), ("efa_0 create_qp_err", "ok", "<= 0", "0"),
        ("efa_0 submitted_cmds", "drift", "<= 100", "108"),
    ], id="efa-device-counters"),
    # The port's own counter wins over the device's copy of the same name (the older EFA driver served one list
    # at both levels); a counter only the device keeps is judged there, once.
    pytest.param({"max": {"rx_drops": 0, "cmds_err": 0}}, {GREP: EFA_PORT + EFA}, [
        ("efa_0/1 rx_drops", "drift", "<= 0", "3"), ("efa_0 cmds_err", "ok", "<= 0", "0"),
    ], id="port-counter-first-then-device"),
    # mlx5 in switchdev mode: many ports, one device-level out_of_buffer: one check, not one per port.
    pytest.param({"device": "mlx5_0", "max": {"symbol_error": 0, "out_of_buffer": 10}},
                 {GREP: "mlx5_0/ports/1/counters/symbol_error:0\nmlx5_0/ports/2/counters/symbol_error:4\n"
                        "mlx5_0/hw_counters/out_of_buffer:17\n"}, [
        ("mlx5_0/1 symbol_error", "ok", "<= 0", "0"), ("mlx5_0 out_of_buffer", "drift", "<= 10", "17"),
        ("mlx5_0/2 symbol_error", "drift", "<= 0", "4"),
    ], id="switchdev-device-counter-once"),
    pytest.param({"device": "hfi1_0", "max": {"RcvOverflow,32": 0}},
                 {GREP: "hfi1_0/ports/1/counters/symbol_error:0\nhfi1_0/hw_counters/RcvOverflow,32:6\n"}, [
        ("hfi1_0 RcvOverflow,32", "drift", "<= 0", "6"),
    ], id="hfi1-32-bit-name"),
    # Neither the port nor the device has it: still an error, naming what was looked for.
    pytest.param({"device": "efa_0", "max": {"symbol_error": 0, "cmds_err": 0}}, {GREP: EFA}, [
        ("efa_0 symbol_error", "error", "<= 0", None), ("efa_0 cmds_err", "ok", "<= 0", "0"),
    ], id="absent-everywhere-is-error"),
    pytest.param({"device": "efa_0", "max_rate": {"cmds_err": 0.5, "create_qp_err": 0}, "interval": 2},
                 {GREP: EFA + "@@interval 2\n" + _bumped(EFA, "cmds_err", 4)}, [
        ("efa_0 cmds_err rate", "drift", "<= 0.5/s", "2/s"), ("efa_0 create_qp_err rate", "ok", "<= 0/s", "0/s"),
    ], id="device-counter-rate"),
    pytest.param({"device": "efa_0", "max_rate": {"completed_cmds": 100}, "interval": 2},
                 {GREP: EFA + "@@interval 2\n" + _bumped(EFA, "completed_cmds", 3)}, [
        ("efa_0 completed_cmds rate", "error", "<= 100/s", None),
    ], id="device-counter-reset-between-readings"),
    pytest.param({"device": "efa_0", "max_rate": {"cmds_err": 0}, "interval": 2},
                 {GREP: EFA + "@@interval 2\n" + EFA.replace("efa_0/hw_counters/cmds_err:0\n", "")}, [
        ("efa_0 cmds_err rate", "error", "<= 0/s", None),
    ], id="device-counter-missing-in-second-reading"),
]


@pytest.mark.parametrize(("spec", "outputs", "expected"), CASES)
def test_device_level_counters(spec: dict, outputs: dict, expected: list) -> None:
    assert run("port_counters", spec, outputs).summary() == expected


def test_the_check_says_the_counter_is_the_devices() -> None:
    [check] = run("port_counters", {"device": "efa_0", "max": {"cmds_err": 0}}, {GREP: EFA}).checks
    assert "device's own counter (efa_0/hw_counters/cmds_err)" in check.message
    rate = run("port_counters", {"device": "efa_0", "max_rate": {"cmds_err": 0}, "interval": 2},
               {GREP: EFA + "@@interval 2\n" + _bumped(EFA, "cmds_err", 4)}).checks[0]
    assert rate.message.startswith("4 in 2 s") and "device's own counter" in rate.message
    [port] = run("port_counters", {"max": {"rx_drops": 0}}, {GREP: EFA_PORT + EFA}).checks
    assert "device" not in port.message


def test_messages_for_a_device_counter_that_cannot_be_judged() -> None:
    [absent, _] = run("port_counters", {"device": "efa_0", "max": {"symbol_error": 0, "cmds_err": 0}},
                      {GREP: EFA}).checks
    assert absent.message == "no port counters for efa_0, and it has no counter symbol_error of its own"
    reset = run("port_counters", {"device": "efa_0", "max_rate": {"completed_cmds": 100}, "interval": 2},
                {GREP: EFA + "@@interval 2\n" + _bumped(EFA, "completed_cmds", 3)}).checks[0]
    assert "went down from 105 to 3" in reset.message
    stuck = _bumped(EFA, "cmds_err", (1 << 64) - 1)
    [saturated] = run("port_counters", {"device": "efa_0", "max_rate": {"cmds_err": 0}, "interval": 2},
                      {GREP: stuck + "@@interval 2\n" + stuck}).checks
    assert saturated.status == "error" and "stuck at its maximum" in saturated.message
    assert "reloading its driver" in saturated.message and "perfquery" not in saturated.message


def _command(spec: dict) -> str:
    [probe] = port_counters.probes(PortCountersSpec.model_validate(spec), CTX)
    return probe.command


def test_port_counter_specs_keep_their_probe_command() -> None:
    # IB PortCounters are per port only: a spec naming just those reads exactly what it always read.
    assert _command({"device": "mlx5_0", "port": 1, "max": {"symbol_error": 0, "link_downed": 0},
                     "max_rate": {"port_rcv_errors": 1}}) == (
        "cd -- /sys/class/infiniband && { grep -r -H . mlx5_0/ports/1/counters mlx5_0/ports/1/hw_counters "
        "2>&1; echo '@@interval 2'; sleep 2; grep -r -H . mlx5_0/ports/1/counters "
        "mlx5_0/ports/1/hw_counters 2>&1; true; }")


def test_probe_reads_each_named_device_counter_in_the_same_grep() -> None:
    command = _command({"max": {"symbol_error": 0, "cmds_err": 0, "RcvOverflow,32": 0},
                        "max_rate": {"cmds_err": 1}})
    read = "grep -r -H . */ports/*/counters */ports/*/hw_counters */hw_counters/cmds_err */hw_counters/RcvOverflow,32"
    assert command.count(read + " 2>&1") == 2
    assert "symbol_error" not in command


def test_spec_takes_counter_names_as_the_kernel_spells_them() -> None:
    # hfi1 (drivers/infiniband/hw/hfi1/chip.c) names 32-bit counters `NAME,32` and some with blanks inside.
    for name in ("RcvOverflow,32", "Pio Reserved 30", "SDmaDescFetchedCnt", "rx_crc_errors.nic"):
        assert PortCountersSpec.model_validate({"max": {name: 0}}).max == {name: 0}
    # A slash reaches another folder and `.`/`..` name one (grep -r would read it whole); a colon splits grep's
    # PATH:VALUE; a control character or a blank at an end is never a name the parser reads back.
    for name in ("efa_0/cmds_err", "../counters", ".", "..", "[0]: rx_discards", "Pio\tReserved", "rx\x85drops",
                 " Pio Reserved 30", "Pio Reserved 30 "):
        with pytest.raises(ValidationError):
            PortCountersSpec.model_validate({"max": {name: 0}})
    # perfquery prints CamelCase names only, read as their sysfs names: a blank there is a mistake.
    with pytest.raises(ValidationError, match="not a perfquery counter name"):
        PortCountersSpec.model_validate({"source": "perfquery", "device": "hfi1_0", "port": 1,
                                         "max": {"Pio Reserved 30": 0}})


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_probe_runs_against_a_sysfs_tree_with_device_counters(tmp_path: Path) -> None:
    files = {"efa_0/ports/1/hw_counters/rx_drops": 0, "efa_0/hw_counters/cmds_err": 2,
             "efa_0/hw_counters/submitted_cmds": 108, "hfi1_0/ports/1/counters/symbol_error": 0,
             "hfi1_0/hw_counters/RcvOverflow,32": 0, "hfi1_0/hw_counters/RxLenErr,32": 5}
    for path, value in files.items():
        target = tmp_path / "class/infiniband" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"{value}\n")
    ctx = HostContext("gpu01", sysfs_root=str(tmp_path))
    spec = PortCountersSpec.model_validate({"max": {"rx_drops": 0, "cmds_err": 0, "RcvOverflow,32": 0}})
    [probe] = port_counters.probes(spec, ctx)
    done = subprocess.run(["sh", "-c", probe.command], capture_output=True, text=True, timeout=10)
    # Only the named device counters come back, not the device's whole list.
    assert "submitted_cmds" not in done.stdout and "RxLenErr" not in done.stdout
    checks = port_counters.evaluate(spec, Results({probe.key: ProbeResult(done.stdout, done.stderr,
                                                                             done.returncode)}), ctx)
    assert sorted((c.attribute, c.status, c.actual) for c in checks) == [
        ("efa_0 cmds_err", "drift", "2"), ("efa_0/1 RcvOverflow,32", "error", None),
        ("efa_0/1 rx_drops", "ok", "0"), ("hfi1_0 RcvOverflow,32", "ok", "0"),
        ("hfi1_0/1 cmds_err", "error", None), ("hfi1_0/1 rx_drops", "error", None),
    ]


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_probe_reads_a_device_counter_whose_name_has_blanks(tmp_path: Path) -> None:
    # hfi1 serves `hfi1_0/hw_counters/Pio Reserved 30`: the name travels quoted, the device glob does not, and
    # a quote inside a name stays literal.
    files = {"hfi1_0/ports/1/counters/symbol_error": 0, "hfi1_0/hw_counters/Pio Reserved 30": 7,
             "hfi1_0/hw_counters/Pio Reserved 31": 9, "hfi1_0/hw_counters/Rcv 'Odd' Err,32": 0,
             "hfi1_1/hw_counters/Pio Reserved 30": 0}
    for path, value in files.items():
        target = tmp_path / "class/infiniband" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"{value}\n")
    ctx = HostContext("gpu01", sysfs_root=str(tmp_path))
    spec = PortCountersSpec.model_validate({"max": {"Pio Reserved 30": 0, "Rcv 'Odd' Err,32": 0}})
    [probe] = port_counters.probes(spec, ctx)
    assert "*/hw_counters/'Pio Reserved 30'" in probe.command
    done = subprocess.run(["sh", "-c", probe.command], capture_output=True, text=True, timeout=10)
    assert "Pio Reserved 31" not in done.stdout
    checks = port_counters.evaluate(spec, Results({probe.key: ProbeResult(done.stdout, done.stderr,
                                                                             done.returncode)}), ctx)
    assert sorted((c.attribute, c.status, c.actual) for c in checks) == [
        ("hfi1_0 Pio Reserved 30", "drift", "7"), ("hfi1_0 Rcv 'Odd' Err,32", "ok", "0"),
        ("hfi1_1 Pio Reserved 30", "ok", "0"), ("hfi1_1 Rcv 'Odd' Err,32", "error", None),
    ]
