"""port_counters with `source: ethtool`: a NIC driver's statistics (`ethtool -S IFACE`) against limits and rates,
evaluated from recorded outputs, and the spec's refusals."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from provisioner.errors import did_you_mean
from provisioner.load.specs import PortCountersSpec
from provisioner.resources import port_counters
from provisioner.resources.base import HostContext, ProbeResult, Results

from ._recorded import NOT_FOUND, failed, run, sample

ETHTOOL = "ethtool -S"
MLX5 = sample("ethtool-S-1-mlx5-discards-phy-cut.txt")
BNXT = sample("ethtool-S-2-bnxt_en-rings-tabs.txt")
ICE = sample("ethtool-S-3-ice-dot-nic.txt")
# The mlx5 reading again after a driver reload zeroed its statistics.
RESET = MLX5 + "@@interval 2\n" + MLX5.replace("rx_discards_phy: 58591428329", "rx_discards_phy: 3")


def _later(text: str, **bumps: int) -> str:
    """`text` as a second reading `interval` seconds later, with some counters increased."""
    for name, by in bumps.items():
        line = next(line for line in text.splitlines() if line.strip().startswith(f"{name}:"))
        value = int(line.rsplit(":", 1)[1])
        text = text.replace(line, line.replace(str(value), str(value + by)))
    return text


CASES = [
    pytest.param({"max": {"rx_discards_phy": 0, "tx_errors_phy": 0, "rx_out_of_buffer": 10**12}}, {ETHTOOL: MLX5}, [
        ("eth1 rx_discards_phy", "drift", "<= 0", "58591428329"), ("eth1 tx_errors_phy", "ok", "<= 0", "0"),
        ("eth1 rx_out_of_buffer", "ok", "<= 1000000000000", "990473555"),
    ], id="mlx5-discards-for-lack-of-buffer-drift"),
    pytest.param({"max": {"tx_pause_storm_error_events": 0}}, {ETHTOOL: MLX5}, [
        ("eth1 tx_pause_storm_error_events", "error", "<= 0", None),
    ], id="counter-the-driver-does-not-print-is-an-error"),
    pytest.param({"max": {"[0]: rx_discards": 0, "rx_stat_discard": 0, "link_down_events": 0}}, {ETHTOOL: BNXT}, [
        ("eth1 [0]: rx_discards", "ok", "<= 0", "0"), ("eth1 rx_stat_discard", "drift", "<= 0", "14"),
        ("eth1 link_down_events", "drift", "<= 0", "2"),
    ], id="bnxt_en-per-ring-and-port-names"),
    pytest.param({"max": {"rx_crc_errors.nic": 0, "rx_priority_3_xoff.nic": 0}}, {ETHTOOL: ICE}, [
        ("eth1 rx_crc_errors.nic", "ok", "<= 0", "0"), ("eth1 rx_priority_3_xoff.nic", "ok", "<= 0", "0"),
    ], id="ice-dot-nic-names"),
    pytest.param({"max_rate": {"rx_discards_phy": 0, "tx_pause_ctrl_phy": 100}, "interval": 2},
                 {ETHTOOL: MLX5 + "@@interval 2\n" + _later(MLX5, rx_discards_phy=1000, tx_pause_ctrl_phy=50)}, [
        ("eth1 rx_discards_phy rate", "drift", "<= 0/s", "500/s"), ("eth1 tx_pause_ctrl_phy rate", "ok", "<= 100/s",
                                                                    "25/s"),
    ], id="rate-over-interval"),
    pytest.param({"max_rate": {"rx_discards_phy": 0}}, {ETHTOOL: MLX5 + "@@interval 2\n"}, [
        ("eth1 rx_discards_phy rate", "error", "<= 0/s", None),
    ], id="second-reading-missing"),
    pytest.param({"max_rate": {"rx_discards_phy": 0}}, {ETHTOOL: RESET}, [
        ("eth1 rx_discards_phy rate", "error", "<= 0/s", None),
    ], id="counters-reset-between-readings"),
    pytest.param({"max": {"rx_discards_phy": 0}}, {ETHTOOL: NOT_FOUND}, [
        ("eth1 rx_discards_phy", "error", "<= 0", None),
    ], id="no-ethtool-on-the-host"),
    pytest.param({"max": {"rx_discards_phy": 0}}, {ETHTOOL: "no stats available\n"}, [
        ("eth1 rx_discards_phy", "error", "<= 0", None),
    ], id="driver-without-statistics"),
]


@pytest.mark.parametrize(("spec", "outputs", "expected"), CASES)
def test_ethtool_source(spec: dict, outputs: dict, expected: list) -> None:
    spec = {"source": "ethtool", "interface": "eth1", **spec}
    assert run("port_counters", spec, outputs).summary() == expected


def test_a_missing_counter_names_the_closest_the_driver_prints() -> None:
    [check] = run("port_counters", {"source": "ethtool", "interface": "eth1", "max": {"rx_discard_phy": 0}},
                  {ETHTOOL: MLX5}).checks
    assert check.message.startswith("eth1 has no counter rx_discard_phy (did you mean 'rx_discards_phy', ")
    [check] = run("port_counters", {"source": "ethtool", "interface": "eth1", "max": {"rx_discards_phy": 0}},
                  {ETHTOOL: BNXT}).checks
    assert "eth1 has no counter rx_discards_phy" in check.message and "'[0]: rx_discards'" in check.message


def test_messages_say_what_went_wrong() -> None:
    spec = {"source": "ethtool", "interface": "eth1", "max": {"rx_discards_phy": 0}}
    [check] = run("port_counters", spec, {ETHTOOL: "Cannot get stats strings information: Operation not supported\n"}
                  ).checks
    assert "ethtool printed no statistics: Cannot get stats strings information" in check.message
    [check] = run("port_counters", spec, {ETHTOOL: failed("netlink error: No such device", 1)}).checks
    assert "No such device" in check.message
    rate = {**spec, "max": {}, "max_rate": {"rx_discards_phy": 0}}
    [check] = run("port_counters", rate, {ETHTOOL: RESET}).checks
    assert "went down from 58591428329 to 3" in check.message and "reset" in check.message
    [check] = run("port_counters", rate, {ETHTOOL: MLX5 + "@@interval 2\n" + _later(MLX5, rx_discards_phy=7)}).checks
    assert check.message == "7 in 2 s"


def test_probe_is_one_quoted_ethtool_exec_reading_twice_for_rates() -> None:
    ctx = HostContext("gpu01")
    spec = PortCountersSpec.model_validate({"source": "ethtool", "interface": "eth1", "max": {"rx_discards_phy": 0}})
    [probe] = port_counters.probes(spec, ctx)
    assert probe.command == "ethtool -S eth1"
    spec = PortCountersSpec.model_validate({"source": "ethtool", "interface": "eth1.100", "interval": 0.5,
                                            "max_rate": {"rx_discards_phy": 0}})
    [probe] = port_counters.probes(spec, ctx)
    assert probe.command == "ethtool -S eth1.100 && echo '@@interval 0.5' && sleep 0.5 && ethtool -S eth1.100"
    assert probe.timeout == 30.5
    assert spec.target() == "port_counters[eth1.100]"


@pytest.mark.parametrize(("spec", "words"), [
    ({"source": "ethtool", "max": {"rx_discards_phy": 0}}, "source ethtool needs interface"),
    ({"source": "ethtool", "interface": "eth1", "device": "mlx5_0", "max": {"rx_discards_phy": 0}},
     "device does not apply to source ethtool"),
    ({"source": "ethtool", "interface": "eth1", "device": "mlx5_0", "port": 1, "max": {"x": 0}},
     "device and port do not apply to source ethtool"),
    ({"interface": "eth1", "max": {"symbol_error": 0}}, "interface applies to source ethtool only"),
    ({"source": "perfquery", "device": "mlx5_0", "port": 1, "interface": "eth1", "max": {"symbol_error": 0}},
     "interface applies to source ethtool only"),
    ({"max": {"[0]: rx_discards": 0}}, "max: '[0]: rx_discards' is not a sysfs counter name"),
    ({"device": "mlx5_0", "port": 1, "source": "perfquery", "max_rate": {"rx.nic": 1}},
     "max_rate: 'rx.nic' is not a perfquery counter name"),
    ({"source": "ethtool", "interface": "eth1; reboot", "max": {"x": 0}}, "must not contain"),
    ({"source": "ethtool", "interface": "-eth1", "max": {"x": 0}}, "must not start with '-'"),
    ({"source": "ethtool", "interface": "eth1", "max": {" rx": 0}}, "a counter name is 1..255 printable"),
    ({"source": "ethtool", "interface": "eth1", "max": {"rx\nx": 0}}, "a counter name is 1..255 printable"),
    ({"source": "ethtool", "interface": "eth1"}, "set max or max_rate"),
])
def test_invalid_ethtool_specs_say_which_key(spec: dict, words: str) -> None:
    with pytest.raises(ValidationError) as info:
        PortCountersSpec.model_validate(spec)
    assert words in str(info.value)


def test_ethtool_names_are_accepted_as_printed() -> None:
    spec = PortCountersSpec.model_validate({"source": "ethtool", "interface": "ens1f0np0", "max": {
        "[0]: rx_discards": 0, "rx_crc_errors.nic": 0, "Tx LPI entry count": 0, "tx-0.packets": 0}})
    assert list(spec.max) == ["[0]: rx_discards", "rx_crc_errors.nic", "Tx LPI entry count", "tx-0.packets"]


def test_did_you_mean_lists_up_to_n_names() -> None:
    names = ["rx_prio0_pause", "rx_prio3_pause", "tx_prio3_pause", "rx_bytes"]
    assert did_you_mean("rx_prio3_paus", names) == " (did you mean 'rx_prio3_pause'?)"
    assert did_you_mean("rx_prio3_paus", names, n=3) == (
        " (did you mean 'rx_prio3_pause', 'tx_prio3_pause' or 'rx_prio0_pause'?)")
    assert did_you_mean("zzz", names, n=3) == ""


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_probe_runs_with_a_stand_in_ethtool(tmp_path: Path) -> None:
    # A stand-in that prints the recorded mlx5 output, one more discard on each call, and the arguments it got.
    (tmp_path / "sample.txt").write_text(MLX5)
    (tmp_path / "calls").write_text("")
    stand_in = tmp_path / "ethtool"
    stand_in.write_text(
        "#!/bin/sh\n"
        f'printf "%s|" "$@" >> "{tmp_path}/calls"; echo >> "{tmp_path}/calls"\n'
        f'n=$(wc -l < "{tmp_path}/calls")\n'
        f'sed "s/rx_discards_phy: 58591428329/rx_discards_phy: $((58591428329 + n))/" "{tmp_path}/sample.txt"\n'
    )
    stand_in.chmod(0o755)
    ctx = HostContext("gpu01")
    spec = PortCountersSpec.model_validate({"source": "ethtool", "interface": "eth1.100", "interval": 0.1,
                                            "max": {"tx_errors_phy": 0}, "max_rate": {"rx_discards_phy": 0}})
    [probe] = port_counters.probes(spec, ctx)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ.get('PATH', '')}"}
    done = subprocess.run(["sh", "-c", probe.command], capture_output=True, text=True, timeout=10, env=env)
    assert (tmp_path / "calls").read_text() == "-S|eth1.100|\n-S|eth1.100|\n"
    checks = port_counters.evaluate(spec, Results({probe.key: ProbeResult(done.stdout, done.stderr,
                                                                          done.returncode)}), ctx)
    assert [(c.attribute, c.status, c.actual, c.message) for c in checks] == [
        ("eth1.100 tx_errors_phy", "ok", "0", ""),
        ("eth1.100 rx_discards_phy rate", "drift", "10/s", "1 in 0.1 s"),
    ]
