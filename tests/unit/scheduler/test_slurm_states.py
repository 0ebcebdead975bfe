"""What fabnet concludes from each state word `sinfo --format %T` prints, and what it drains or resumes
for it. The words are those of Slurm's node_state_string() (src/common/slurm_protocol_defs.c), which sinfo
lower-cases (src/sinfo/print.c, _print_state_long()); each row names a release and the line that returns it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import SimpleNamespace

import pytest

from provisioner.run import transport
from provisioner.scheduler import NodeState, NoStates
from provisioner.scheduler.command import Command
from provisioner.scheduler.drain import drain_failed, kept_reasons, resume_fixed, smoke_causes
from provisioner.scheduler.slurm import Slurm, parse_sinfo, parse_state

# word, state, flag, responding, drained, out of service
STATES = [
    ("idle", "idle", "", True, False, False),  # 24.05.8 :3584
    ("idle*", "idle", "*", False, False, False),  # 24.05.8 :3577
    ("idle~", "idle", "~", True, False, False),  # 24.05.8 :3573
    ("idle#", "idle", "#", True, False, False),  # 24.05.8 :3569
    ("idle%", "idle", "%", True, False, False),  # 24.05.8 :3571
    ("idle!", "idle", "!", True, False, False),  # 21.08.8 :3804
    ("idle$", "idle", "$", True, False, False),  # 24.05.8 :3563
    ("idle@", "idle", "@", True, False, True),  # 20.02.7 :3555
    ("idle^", "idle", "^", True, False, True),  # 21.08.8 :3794
    ("mixed", "mixed", "", True, False, False),  # 24.05.8 :3605
    ("mixed-", "mixed", "-", True, False, False),  # 21.08.8 :3833 (planned)
    ("mixed*", "mixed", "*", False, False, False),  # 24.05.8 :3602
    ("allocated", "allocated", "", True, False, False),  # 24.05.8 :3540
    ("allocated+", "allocated", "+", True, False, False),  # 20.02.7 :3533 (completing)
    ("allocated*", "allocated", "*", False, False, False),  # 24.05.8 :3537
    ("completing", "completing", "", True, False, False),  # 24.05.8 :3559
    ("completing~", "completing", "~", True, False, False),  # 24.05.8 :3554
    ("planned", "planned", "", True, False, False),  # 21.08.8 :3812
    ("reserved", "reserved", "", True, False, False),  # 20.02.7 :3567
    ("perfctrs", "perfctrs", "", True, False, False),  # 20.02.7 :3565 (gone in 24.05)
    ("blocked", "blocked", "", True, False, False),  # 24.05.8 :3581
    ("maint", "maint", "", True, False, False),  # 24.05.8 :3417
    ("maint*", "maint", "*", False, False, False),  # 24.05.8 :3415
    ("future", "future", "", True, False, True),  # 24.05.8 :3624
    ("unknown*", "unknown", "*", False, False, True),  # 24.05.8 :3630
    ("cloud", "cloud", "", True, False, True),  # 20.11.9 (added beside POWER_DOWN)
    ("power_down", "power_down", "", True, False, True),  # 24.05.8 :3490
    ("powering_up", "powering_up", "", True, False, True),  # 24.05.8 :3498
    ("cancel_reboot", "cancel_reboot", "", True, False, True),  # 24.05.8 :3486
    ("undrain", "undrain", "", True, False, True),  # 24.05.8 :3500
    ("external", "external", "", True, False, True),  # 25.11.7 :3623
    ("dynamic_norm", "dynamic_norm", "", True, False, True),  # 25.11.7 :3639
    ("resume", "resume", "", True, False, True),  # 24.05.8 :3627
    ("?", "?", "", True, False, True),  # 24.05.8 :3633
    ("drained", "drained", "", True, True, True),  # 24.05.8 :3468
    ("drained*", "drained", "*", False, True, True),  # 24.05.8 :3467
    ("drained~", "drained", "~", True, True, True),  # 24.05.8 :3463
    ("drained$", "drained", "$", True, True, True),  # 24.05.8 :3453
    ("drained!", "drained", "!", True, True, True),  # 21.08.8 :3696
    ("drained^", "drained", "^", True, True, True),  # 21.08.8 :3686
    ("draining", "draining", "", True, True, True),  # 24.05.8 :3450
    ("draining@", "draining", "@", True, True, True),  # 20.02.7 :3457
    ("draining*", "draining", "*", False, True, True),  # 24.05.8 :3449
    ("draining%", "draining", "%", True, True, True),  # 24.05.8 :3443
    ("down", "down", "", True, False, True),  # 24.05.8 :3518
    ("down*", "down", "*", False, False, True),  # 24.05.8 :3517
    ("down~", "down", "~", True, False, True),  # 24.05.8 :3513
    ("down$", "down", "$", True, False, True),  # 24.05.8 :3503
    ("fail", "fail", "", True, False, True),  # 24.05.8 :3479
    ("fail*", "fail", "*", False, False, True),  # 24.05.8 :3478
    ("failing", "failing", "", True, False, True),  # 24.05.8 :3475
    ("inval", "inval", "", True, False, True),  # 21.08.8 :3637 (before every other test)
    ("reboot", "reboot", "", True, False, True),  # 20.02.7 :3448 (hides a drain of an idle node)
    ("reboot*", "reboot", "*", False, False, True),  # 24.05.8 :3426
    ("reboot^", "reboot", "^", True, False, True),  # 21.08.8 :3655
    ("reboot_issued", "reboot_issued", "", True, False, True),  # 24.05.8 :3484
    # Not %T's: `%t` short forms and StateComplete's `+` joins. Kept whole, so never read as drained, and
    # out of service as every word fabnet does not know is.
    ("drain", "drain", "", True, False, True),
    ("drng", "drng", "", True, False, True),
    ("idle+drain", "idle+drain", "", True, False, True),
    ("drained*+", "drained*+", "", True, False, True),
]


@pytest.mark.parametrize(("word", "state", "flag", "responding", "drained", "out"), STATES)
def test_each_state_word(word: str, state: str, flag: str, responding: bool, drained: bool, out: bool) -> None:
    parsed = parse_sinfo(f"gpu01|{word}|root|fabnet: audit: drifted: mtu\n", ["gpu01"])["gpu01"]
    assert (parsed.state, parsed.flag, parsed.responding) == (state, flag, responding)
    assert parsed.drained is drained and parsed.out_of_service is out
    assert parsed.drained_by_fabnet is drained


def test_sinfo_prints_upper_case_nowhere_but_fabnet_reads_it_alike() -> None:
    assert parse_state("DRAINED*") == ("drained", "*") and parse_state(" mixed- ") == ("mixed", "-")


@pytest.mark.parametrize(("user", "reason", "want_user", "want_reason"), [
    ("Unknown", "none", "", ""),  # no reason, no user: src/sinfo/print.c, _print_reason() and _print_user()
    ("Unk(1234)", "fabnet: smoke: slow", "Unk(1234)", "fabnet: smoke: slow"),  # a uid the controller cannot name
    ("root", "Kill task failed", "root", "Kill task failed"),
    ("slurm", "Not responding", "slurm", "Not responding"),
    ("alice", "disk | cable 2024-01-25T15:12:23 [x]", "alice", "disk | cable 2024-01-25T15:12:23 [x]"),
    ("root", "fabnet: audit: a|b|c", "root", "fabnet: audit: a|b|c"),
])
def test_reason_and_user_as_sinfo_prints_them(user: str, reason: str, want_user: str, want_reason: str) -> None:
    parsed = parse_sinfo(f"gpu01|drained|{user}|{reason}\n", ["gpu01"])["gpu01"]
    assert (parsed.reason_user, parsed.reason) == (want_user, want_reason)


class Cluster:
    """A scheduler whose nodes read as parse_sinfo reads sinfo's lines, recording what it is told."""

    def __init__(self, sinfo: str) -> None:
        self.states = parse_sinfo(sinfo, [line.split("|")[0] for line in sinfo.splitlines()])
        self.drained: dict[str, str] = {}
        self.resumed: list[str] = []

    def drain(self, reasons: Mapping[str, str]) -> dict[str, str | None]:
        self.drained.update(reasons)
        return dict.fromkeys(reasons)

    def resume(self, hosts: Sequence[str]) -> dict[str, str | None]:
        self.resumed += hosts
        return dict.fromkeys(hosts)

    def state(self, hosts: Sequence[str]) -> dict[str, NodeState]:
        return {h: self.states[h] for h in hosts if h in self.states}

    def nodes_of_job(self, jobid: str) -> list[str]:
        return []

    def expand(self, hostlist: str) -> list[str]:
        return []


# sinfo line, the check that wants it drained, what fabnet does: a drain replaces Slurm's one reason.
DRAINS = [
    ("gpu01|idle|Unknown|none", "audit", "drained"),
    ("gpu01|mixed-|Unknown|none", "smoke", "drained"),
    ("gpu01|allocated+|Unknown|none", "smoke", "drained"),
    ("gpu01|idle|alice|stale note", "audit", "drained"),  # in service: the note keeps no one out
    ("gpu01|down*|Unknown|none", "audit", "drained"),  # out, but no reason to lose
    ("gpu01|drained|alice|disk replacement", "audit", "left"),
    ("gpu01|draining@|alice|firmware", "smoke", "left"),
    ("gpu01|drained*|root|Kill task failed", "watch", "left"),
    ("gpu01|down*|slurm|Not responding", "audit", "left"),
    ("gpu01|down~|root|powered off by admin", "apply", "left"),
    ("gpu01|fail|bob|bad DIMM", "audit", "left"),
    ("gpu01|inval|slurm|Low RealMemory (reported:1000 < 100.00% of configured:2000)", "audit", "left"),
    ("gpu01|reboot^|root|Reboot ASAP", "smoke", "left"),
    ("gpu01|drained|root|fabnet: smoke: slow", "audit", "left"),  # smoke's: only smoke may resume it
    ("gpu01|drained|root|fabnet: watch: link flap", "audit", "left"),  # watch's: a person resumes it
    ("gpu01|drained|root|fabnet: audit: slow", "watch", "left"),
    ("gpu01|drained|root|fabnet: audit: drifted: mtu", "audit", "drained"),  # its own: cause brought up to date
    ("gpu01|drained$|root|fabnet: apply: not converged", "audit", "drained"),  # audit resumes apply's drains
    ("gpu01|drained~|root|fabnet: smoke: slow", "smoke", "drained"),
    ("gpu01|drained|alice|  fabnet: audit: drifted", "audit", "left"),  # blanks first: someone else's words
    ("gpu01|drained|root|none", "audit", "left"),  # the word `none`, set by root: a reason, not its absence
]


@pytest.mark.parametrize(("sinfo", "source", "action"), DRAINS)
def test_what_a_drain_leaves_alone(sinfo: str, source: str, action: str) -> None:
    cluster = Cluster(sinfo)
    [done] = drain_failed(cluster, source, {"gpu01": "it failed"})
    assert done.action == action
    assert ("gpu01" in cluster.drained) is (action == "drained")
    if action == "left":
        assert sinfo.rsplit("|", 1)[1] in done.detail and "would replace" in done.detail


@pytest.mark.parametrize(("sinfo", "cause", "action"), [
    ("gpu01|idle~|Unknown|none", "unreachable: timed out", "left"),  # powered off by power saving
    ("gpu01|idle#|Unknown|none", "unreachable: connection refused", "left"),  # booting for a job
    ("gpu01|allocated%|Unknown|none", "unreachable: no route to host", "left"),
    ("gpu01|idle#|Unknown|none", "drifted: mtu eth1", "drained"),  # up enough to be read: its drift counts
    ("gpu01|idle*|Unknown|none", "unreachable: timed out", "drained"),  # not responding: not power saving
    ("gpu01|idle!|Unknown|none", "unreachable: timed out", "drained"),  # still up until it powers down
    ("gpu01|idle~|Unknown|none", "not converged: unreachable: timed out", "left"),  # apply's wording
    ("gpu01|idle~|Unknown|none", "host down gpu01: connection refused", "left"),  # watch's wording
])
def test_power_saving_nodes_that_cannot_be_reached_are_left(sinfo: str, cause: str, action: str) -> None:
    cluster = Cluster(sinfo)
    [done] = drain_failed(cluster, "audit", {"gpu01": cause})
    assert done.action == action, done.detail
    assert ("gpu01" in cluster.drained) is (action == "drained")
    if action == "left":
        assert "power saving" in done.detail


def test_a_powered_off_node_smoke_could_not_reach_is_left() -> None:
    # smoke keeps SSH's own words for a host it could not reach; its drain must still see an unreachable host.
    why = "ssh: connect to host gpu01 port 22: Connection timed out"
    outcome = SimpleNamespace(verdict="unreachable", failed_hosts={"gpu01": why}, unreachable={"gpu01": why})
    cluster = Cluster("gpu01|idle~|Unknown|none")
    [done] = drain_failed(cluster, "smoke", smoke_causes(outcome))
    assert done.action == "left" and "power saving" in done.detail and "gpu01" not in cluster.drained


def test_a_host_slurm_does_not_know_is_drained_and_slurm_answers() -> None:
    cluster = Cluster("gpu02|idle|Unknown|none")
    assert [a.action for a in drain_failed(cluster, "audit", {"gpu01": "x"})] == ["drained"]


def test_a_drain_command_cannot_read_states_and_drains_as_told() -> None:
    with pytest.raises(NoStates):
        Command("true {host}").state(["gpu01"])
    assert kept_reasons(Command("true {host}"), "audit", ["gpu01"]) == {}


# sinfo line, what `audit --resume-fixed` does for a host that passes audit now.
RESUMES = [
    ("gpu01|drained|root|fabnet: audit: drifted: mtu", "resumed"),
    ("gpu01|drained*|root|fabnet: audit: unreachable", "resumed"),
    # A reboot is asked for (@) or under way (^): Slurm's resume would cancel it.
    ("gpu01|draining@|root|fabnet: apply: not converged", "left"),
    ("gpu01|drained^|root|fabnet: audit: drifted", "left"),
    ("gpu01|drained~|root|fabnet: audit: drifted", "resumed"),
    ("gpu01|drained|alice|maintenance", "left"),
    ("gpu01|drained|alice| fabnet: audit: drifted", "left"),
    ("gpu01|drained|root|fabnet: smoke: slow", "left"),
    ("gpu01|down*|slurm|fabnet: audit: unreachable", "left"),  # not shown drained: not fabnet's to undo
    ("gpu01|reboot^|root|fabnet: audit: drifted", "left"),
    ("gpu01|inval|root|fabnet: audit: drifted", "left"),
    ("gpu01|idle|Unknown|none", None),
    ("gpu01|mixed-|Unknown|none", None),
    ("gpu01|down*|slurm|Not responding", None),  # not fabnet's at all: nothing to say
]


@pytest.mark.parametrize(("sinfo", "action"), RESUMES)
def test_what_resume_fixed_resumes(sinfo: str, action: str | None) -> None:
    cluster = Cluster(sinfo)
    actions = resume_fixed(cluster, "audit", ["gpu01"], {"gpu01"})
    assert [a.action for a in actions] == ([action] if action else [])
    assert cluster.resumed == (["gpu01"] if action == "resumed" else [])


class Recording:
    """Answers each exec with `stdout`, `{mark}` in it replaced by the record mark the script asks sinfo for."""

    def __init__(self, stdout: str) -> None:
        self.stdout = stdout
        self.scripts: list[str] = []

    def exec(self, script: str, *, timeout: float | None = None) -> transport.ExecResult:
        self.scripts.append(script)
        mark = re.search(r"fabnet-[0-9a-f]+\|", script)
        return transport.ExecResult(self.stdout.replace("{mark}", mark.group(0) if mark else ""), "", 0, 0.0)


def test_sinfo_and_squeue_see_hidden_partitions() -> None:
    # Without --all both skip what a hidden partition holds (src/sinfo/sinfo.c builds its rows per
    # partition; slurmctld's job_mgr.c skips a job whose partitions are all hidden unless SHOW_ALL).
    session = Recording("{mark}gpu01|drained*|root|fabnet: smoke: slow\n")
    assert Slurm(session).state(["gpu01"])["gpu01"].drained_by_fabnet
    session.stdout = "gpu[01-02]\n"
    assert Slurm(session).nodes_of_job("7") == ["gpu01", "gpu02"]
    sinfo, squeue = (script.splitlines()[-1].split() for script in session.scripts)
    assert sinfo.count("sinfo") == 2 and all(sinfo[i + 1:i + 3] == ["--all", "--local"]
                                             for i, word in enumerate(sinfo) if word == "sinfo")
    assert sinfo[:3] == ["sinfo", "--all", "--local"] and squeue[:2] == ["squeue", "--all"]


@pytest.mark.parametrize("state", [NodeState("reboot", "fabnet: audit: drifted", "root", drain=True),
                                   NodeState("reboot", "fabnet: audit: drifted", "root", False, "*", drain=True),
                                   NodeState("drained", "fabnet: audit: drifted", "root", flag="^")])
def test_a_drained_node_being_rebooted_is_not_resumed(state: NodeState) -> None:
    """Slurm's resume clears REBOOT_REQUESTED and REBOOT_ISSUED with the drain (src/slurmctld/node_mgr.c,
    update_node(), 20.02 to 25.11): resuming would cancel the reboot someone asked for."""
    cluster = Cluster("")
    cluster.states = {"gpu01": state}
    [action] = resume_fixed(cluster, "audit", ["gpu01"], {"gpu01"})
    assert action.action == "left" and "would cancel it" in action.detail and cluster.resumed == []
