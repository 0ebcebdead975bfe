"""port_counters and a whole counters folder the host could not read: its counters are checks that could not be
made, naming the folder and what was printed, never counters the port lacks; the probe's own shell code keeps
grep's complaint about the folder."""

from __future__ import annotations

import os
from pathlib import Path

from ._recorded import run, sample
from .test_port_counters_read_errors import _run

GREP = "grep -r -H"
MLX5 = [line for line in sample("port-counters-sysfs-3-procfs-mlx5-hfi1-mlx4.txt").splitlines()
        if line.startswith("mlx5_0/")]
FOLDER = "grep: mlx5_0/ports/1/counters: Permission denied"
NO_COUNTERS = "\n".join([FOLDER, *(line for line in MLX5 if "/counters/" not in line)]) + "\n"
SPEC = {"device": "mlx5_0", "max": {"symbol_error": 0, "local_ack_timeout_err": 1000, "rx_discards_phy": 0}}


def test_a_counter_in_an_unreadable_folder_is_unreadable_not_missing() -> None:
    checks = run("port_counters", SPEC, {GREP: NO_COUNTERS}).checks
    by_name = {c.attribute: c for c in checks}
    symbol = by_name["mlx5_0/1 symbol_error"]
    assert (symbol.status, symbol.actual) == ("error", None)
    assert symbol.message == ("cannot read mlx5_0/1 symbol_error: the host could not read mlx5_0/ports/1/counters "
                              "and printed 'Permission denied'")
    # The other folder was read: its counter is judged, and one the driver does not keep is still absent.
    assert (by_name["mlx5_0/1 local_ack_timeout_err"].status, by_name["mlx5_0/1 local_ack_timeout_err"].actual) == (
        "ok", "131")
    assert by_name["mlx5_0/1 rx_discards_phy"].message == "mlx5_0/1 has no counter rx_discards_phy"


def test_a_rate_in_an_unreadable_folder_cannot_be_measured() -> None:
    whole = "\n".join(MLX5) + "\n"
    [check] = run("port_counters", {"device": "mlx5_0", "max_rate": {"link_downed": 0}, "interval": 2},
                  {GREP: whole + "@@interval 2\n" + NO_COUNTERS}).checks
    assert (check.attribute, check.status) == ("mlx5_0/1 link_downed rate", "error")
    assert "could not read mlx5_0/ports/1/counters and printed 'Permission denied'" in check.message


def test_a_devices_unreadable_folder_is_not_judged_on_nothing() -> None:
    text = "grep: efa_0/hw_counters: Input/output error\nefa_0/ports/1/hw_counters/rx_drops:0\n"
    checks = run("port_counters", {"device": "efa_0", "max": {"cmds_err": 0, "rx_drops": 0}}, {GREP: text}).checks
    assert [(c.attribute, c.status) for c in checks] == [("efa_0 cmds_err", "error"), ("efa_0/1 rx_drops", "ok")]
    assert checks[0].message == ("cannot read efa_0 cmds_err: the host could not read efa_0/hw_counters and printed "
                                 "'Input/output error'")


def test_the_probe_keeps_a_refused_folder(tmp_path: Path, refused_file: str) -> None:
    # counters/ is a link the kernel refuses to read, as a folder the reader may not open; hw_counters/ is a link
    # to itself (a read of it fails with ELOOP, which root gets too). Both folders fail; the port is still there.
    port = tmp_path / "class/infiniband/mlx5_0/ports/1"
    port.mkdir(parents=True)
    os.symlink(refused_file, port / "counters")
    os.symlink("hw_counters", port / "hw_counters")
    result, checks = _run({"max": {"symbol_error": 0, "out_of_buffer": 0}}, tmp_path)
    assert result.exit_code == 0 and result.stderr == ""
    assert FOLDER in result.stdout.splitlines()
    assert [(c.attribute, c.status) for c in checks] == [("mlx5_0/1 symbol_error", "error"),
                                                         ("mlx5_0/1 out_of_buffer", "error")]
    assert "could not read mlx5_0/ports/1/counters and printed 'Permission denied'" in checks[0].message
    assert "could not read mlx5_0/ports/1/hw_counters and printed 'Too many levels of symbolic links'" in (
        checks[1].message)
