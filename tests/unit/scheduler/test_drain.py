"""--drain-failed and --resume-fixed: which hosts are drained, which resumed, which left alone."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest

from provisioner.apply.converge import ApplyOutcome, HostApplied, ResourceApplied
from provisioner.errors import ConfigError
from provisioner.evaluate.engine import AuditOutcome, HostOutcome, ResourceOutcome
from provisioner.load.inventory import load_inventory
from provisioner.resources.base import Check
from provisioner.scheduler import NodeState
from provisioner.scheduler.drain import (
    apply_causes,
    audit_causes,
    drain_failed,
    reason,
    reason_source,
    resume_fixed,
    smoke_causes,
)
from provisioner.scheduler.hostlist import expand
from provisioner.scheduler.select import SchedulerArgs, controller_name, selected_names


class Recorded:
    """A scheduler that keeps node states in memory, as Slurm would."""

    def __init__(self, states: dict[str, NodeState]) -> None:
        self.states = states
        self.resumed: list[str] = []

    def drain(self, reasons: Mapping[str, str]) -> dict[str, str | None]:
        for host, why in reasons.items():
            self.states[host] = NodeState("drained", why, "root")
        return dict.fromkeys(reasons)

    def resume(self, hosts: Sequence[str]) -> dict[str, str | None]:
        self.resumed += hosts
        for host in hosts:
            self.states[host] = NodeState("idle")
        return dict.fromkeys(hosts)

    def state(self, hosts: Sequence[str]) -> dict[str, NodeState]:
        return {h: self.states[h] for h in hosts if h in self.states}

    def nodes_of_job(self, jobid: str) -> list[str]:
        return ["gpu02", "gpu03"]

    def expand(self, hostlist: str) -> list[str]:
        return expand(hostlist)


def test_reasons_say_fabnet_and_which_check() -> None:
    text = reason("audit", "drifted:  mtu\neth1")
    assert text == "fabnet: audit: drifted: mtu eth1"
    assert reason_source(text) == "audit"
    assert reason_source("fabnet: smoke: slow") == "smoke"
    assert reason_source("maintenance (fabnet: later)") is None
    assert len(reason("smoke", "x" * 500)) <= 160


def test_drain_failed_drains_exactly_the_failing_hosts() -> None:
    slurm = Recorded({h: NodeState("idle") for h in ("gpu01", "gpu02")})
    actions = drain_failed(slurm, "audit", {"gpu02": "drifted: mtu eth1"})
    assert [(a.host, a.action) for a in actions] == [("gpu02", "drained")]
    assert slurm.states["gpu02"].reason == "fabnet: audit: drifted: mtu eth1"
    assert slurm.states["gpu01"].state == "idle"


def test_resume_fixed_resumes_only_fabnets_own_drains_that_pass_now() -> None:
    slurm = Recorded({
        "gpu01": NodeState("drained", "fabnet: audit: drifted: mtu eth1", "root"),   # fixed: resumed
        "gpu02": NodeState("drained", "disk replacement", "alice"),                # someone else's: left
        "gpu03": NodeState("drained", "fabnet: smoke: slow", "root"),              # smoke's drain: left
        "gpu04": NodeState("drained", "fabnet: apply: not converged", "root"),     # not passing now: left
        "gpu05": NodeState("idle"),                                                # not drained: nothing
    })
    actions = resume_fixed(slurm, "audit", ["gpu01", "gpu02", "gpu03", "gpu04", "gpu05"],
                           passing={"gpu01", "gpu02", "gpu03", "gpu05"})
    assert slurm.resumed == ["gpu01"]
    by_host = {a.host: a for a in actions}
    assert by_host["gpu01"].action == "resumed"
    assert by_host["gpu02"].action == "left" and "alice" in by_host["gpu02"].detail
    assert by_host["gpu03"].action == "left" and "smoke --resume-fixed" in by_host["gpu03"].detail
    assert by_host["gpu04"].action == "left" and "does not pass audit now" in by_host["gpu04"].detail
    assert "gpu05" not in by_host


def test_a_watch_drain_is_left_without_pointing_at_an_option_watch_lacks() -> None:
    slurm = Recorded({"gpu03": NodeState("drained", "fabnet: watch: counter rose mlx5_0/1 symbol_error", "root")})
    [action] = resume_fixed(slurm, "audit", ["gpu03"], passing={"gpu03"})
    assert slurm.resumed == [] and action.action == "left"
    assert "--resume-fixed" not in action.detail  # `fabnet watch` has no such option
    assert "scontrol update nodename=gpu03 state=resume" in action.detail
    # A reason that starts like fabnet's but names no fabnet command is someone else's.
    slurm = Recorded({"gpu04": NodeState("drained", "fabnet: drifted: mtu", "root")})
    [action] = resume_fixed(slurm, "audit", ["gpu04"], passing={"gpu04"})
    assert slurm.resumed == [] and action.detail.startswith("drained by root for another reason")


def test_smoke_resumes_what_smoke_drained() -> None:
    slurm = Recorded({"gpu03": NodeState("drained", "fabnet: smoke: slow", "root"),
                      "gpu01": NodeState("drained", "fabnet: audit: drifted", "root")})
    resume_fixed(slurm, "smoke", ["gpu01", "gpu03"], passing={"gpu01", "gpu03"})
    assert slurm.resumed == ["gpu03"]


def _inventory(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hosts.yml"
    path.write_text(text)
    return path


HOSTS = "      hosts:\n        gpu01: {}\n        gpu02: {}\n        gpu03: {}\n"


def test_the_controller_comes_from_the_variable_or_the_group(tmp_path: Path) -> None:
    by_var = load_inventory(_inventory(tmp_path, f"all:\n  vars:\n    fabnet_slurm_controller: gpu02\n"
                                                 f"  children:\n    gpu:\n{HOSTS}"))
    assert controller_name(by_var) == "gpu02"
    by_group = load_inventory(_inventory(tmp_path, f"all:\n  children:\n    gpu:\n{HOSTS}"
                                                   "    slurm_controller:\n      hosts:\n        gpu03: {}\n"))
    assert controller_name(by_group) == "gpu03"
    with pytest.raises(ConfigError, match="no Slurm controller"):
        controller_name(load_inventory(_inventory(tmp_path, f"all:\n  children:\n    gpu:\n{HOSTS}")))
    with pytest.raises(ConfigError, match="not a host of the inventory"):
        controller_name(load_inventory(_inventory(tmp_path, "all:\n  vars:\n    fabnet_slurm_controller: ctl\n"
                                                            f"  children:\n    gpu:\n{HOSTS}")))


def test_nodelist_names_the_inventory_lacks_are_an_error(tmp_path: Path) -> None:
    inventory = load_inventory(_inventory(tmp_path, f"all:\n  children:\n    gpu:\n{HOSTS}"))
    assert selected_names(SchedulerArgs(nodelist="gpu[01-02]"), inventory, None) == {"gpu01", "gpu02"}  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="lacks: gpu04, gpu05"):
        selected_names(SchedulerArgs(nodelist="gpu[01-05]"), inventory, None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="invalid range"):
        selected_names(SchedulerArgs(nodelist="gpu[3-1]"), inventory, None)  # type: ignore[arg-type]
    assert selected_names(SchedulerArgs(), inventory, None) is None  # type: ignore[arg-type]


def _resource(target: str, status: str) -> ResourceOutcome:
    return ResourceOutcome("sysctl", target, "pb.yml:3", "play", [Check("value", "1", "0" if status == "drift" else "1",
                                                                        status)])  # type: ignore[arg-type]


def test_causes_name_what_failed_in_each_command() -> None:
    audit = AuditOutcome([
        HostOutcome("gpu01", "a", "in_sync", resources=[_resource("sysctl[x]", "ok")]),
        HostOutcome("gpu02", "a", "drifted", resources=[_resource("sysctl[x]", "drift"), _resource("sysctl[y]", "ok")]),
        HostOutcome("gpu03", "a", "unreachable", error="connection refused"),
    ], 0.1)
    assert audit_causes(audit) == {"gpu02": "drifted: sysctl[x]", "gpu03": "unreachable: connection refused"}
    applied = ApplyOutcome("run", [
        HostApplied("gpu01", "a", "changed"),
        HostApplied("gpu02", "a", "failed", resources=[ResourceApplied(_resource("sysctl[x]", "drift"),
                                                                       _resource("sysctl[x]", "drift"))]),
        HostApplied("gpu03", "a", "unreachable", error="timed out"),
    ], 0.1)
    assert apply_causes(applied) == {"gpu02": "not converged: failed: sysctl[x]",
                                     "gpu03": "not converged: unreachable: timed out"}
    smoke = SimpleNamespace(verdict="below_threshold", failed_hosts={"gpu02": "slow: 3.1 GB/s"})
    assert smoke_causes(smoke) == {"gpu02": "slow: 3.1 GB/s"}
    assert smoke_causes(SimpleNamespace(verdict="pass", failed_hosts={})) == {}


def test_a_reason_of_several_lines_is_shown_whole_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A reason an admin or a health check set may span lines and hold markup or control bytes: each action
    is still one line on stderr, the reason whole and escaped, none of its lines a line of the report."""
    from provisioner.output import scheduler_report, watch_report

    why = "disk a|b=c\nslurm: resumed gpu02: passes audit now\n[bold]x[/bold] \x1b[31m é\t "
    cluster = Recorded({"gpu01": NodeState("drained", why, "alice"), "gpu02": NodeState("drained", "  " + why)})
    actions = resume_fixed(cluster, "audit", ["gpu01", "gpu02"], {"gpu01", "gpu02"})
    assert cluster.resumed == [] and [a.action for a in actions] == ["left", "left"]
    assert actions[0].detail.endswith(why) and actions[1].detail.endswith("  " + why)  # the data keeps it whole
    scheduler_report.settled(actions, "unreachable\nslurm: resumed gpu03", "slurm")
    watch_report.drained(actions, None)
    lines = capsys.readouterr().err.splitlines()
    shown = "disk a|b=c\\nslurm: resumed gpu02: passes audit now\\n[bold]x[/bold] \\x1b[31m é\\t "
    assert lines[:3] == [f"slurm: left gpu01: drained by alice for another reason: {shown}",
                         f"slurm: left gpu02: drained for another reason:   {shown}",
                         "error: slurm: unreachable\\nslurm: resumed gpu03"]
    assert len(lines) == 5 and all(shown in line and line.startswith("warning: slurm: left") for line in lines[3:])
