"""--drain-cmd: values never become shell syntax."""

from __future__ import annotations

import pytest

from provisioner.smoke import drain

SLURM = 'scontrol update nodename={host} state=drain reason="fabnet smoke: {reason}"'


def test_slurm_template() -> None:
    argv = drain.render(SLURM, {"host": "gpu03", "reason": "slow all-reduce"})
    assert argv == ["scontrol", "update", "nodename=gpu03", "state=drain", "reason=fabnet smoke: slow all-reduce"]


def test_hostile_values_stay_one_argument() -> None:
    argv = drain.render("echo {host} {reason}", {"host": "a; rm -rf /", "reason": "$(reboot) `x` \"q\""})
    assert argv == ["echo", "a; rm -rf /", "$(reboot) `x` \"q\""]


def test_unknown_field_and_empty_template() -> None:
    with pytest.raises(ValueError, match="unknown field"):
        drain.check_template("scontrol {hostname}")
    with pytest.raises(ValueError):
        drain.check_template("   ")


def test_run_executes_without_a_shell() -> None:
    result = drain.run("printf %s|{host}|{reason}", "gpu03;x", "eth1 down", None)
    assert result.exit_code == 0 and result.output == "|gpu03;x|eth1 down"
    missing = drain.run("/nonexistent/scontrol {host}", "gpu03", "r", None)
    assert missing.exit_code is None and "not found" in missing.output
