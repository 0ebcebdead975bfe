"""The Slurm implementation's scripts, run by a local bash against stand-ins for scontrol, sinfo and squeue
that record their arguments: what reaches Slurm is exactly the values given, whatever they contain."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from provisioner.run import transport
from provisioner.scheduler import SchedulerError
from provisioner.scheduler.slurm import Slurm, parse_sinfo

STAND_IN = """#!/usr/bin/env python3
import json, os, sys
name = os.path.basename(sys.argv[0])
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps([name, *sys.argv[1:]]) + "\\n")
if "FAKE_ENV_LOG" in os.environ:
    with open(os.environ["FAKE_ENV_LOG"], "a") as log:
        log.write(json.dumps(sorted(k for k in os.environ if k.startswith(("SINFO", "SQUEUE", "SCONTROL", "SLURM"))))
                  + "\\n")
if name == "scontrol" and any(a == "NodeName=bad01" for a in sys.argv):
    print("slurm_update error: Invalid node name specified", file=sys.stderr)
    sys.exit(1)
if name == "sinfo":
    # Records as sinfo prints them: the --format's text before %N, then node|state|user|reason; records are
    # lines, or split at \\x1e where a reason holds a line break. --states=drain: the FAKE_DRAIN nodes only.
    form = sys.argv[sys.argv.index("--format") + 1]
    mark = form[:form.index("%N")]
    text = os.environ.get("FAKE_SINFO", "")
    records = [r for r in (text.split("\\x1e") if "\\x1e" in text else text.splitlines()) if r]
    if "--states=drain" in sys.argv:
        records = [n for n in os.environ.get("FAKE_DRAIN", "").split(",") if n]
    print("".join(mark + r + "\\n" for r in records), end="")
if name == "squeue":
    if sys.argv[sys.argv.index("--jobs") + 1] == "404":
        print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
        sys.exit(1)
    print("gpu[01-02]\\ngpu02")
"""


class LocalSession:
    """Runs the script in a local bash, as the controller's shell would."""

    def __init__(self, tmp: Path, sinfo: str = "", env: dict[str, str] | None = None, drain: str = "") -> None:
        self.bin = tmp / "bin"
        self.bin.mkdir()
        for name in ("scontrol", "sinfo", "squeue"):
            (self.bin / name).write_text(STAND_IN)
            (self.bin / name).chmod(0o755)
        self.log = tmp / "calls.jsonl"
        self.sinfo = sinfo
        self.drain = drain
        self.cwd = tmp
        self.env = env or {}

    def exec(self, script: str, *, timeout: float | None = None) -> transport.ExecResult:
        env = {"PATH": f"{self.bin}:/usr/bin:/bin", "FAKE_LOG": str(self.log), "FAKE_SINFO": self.sinfo,
               "FAKE_DRAIN": self.drain, **self.env}
        proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, cwd=self.cwd,
                              timeout=timeout)
        return transport.ExecResult(proc.stdout, proc.stderr, proc.returncode, 0.0)

    def calls(self) -> list[list[str]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []


def test_drain_passes_each_reason_as_one_argument(tmp_path: Path) -> None:
    session = LocalSession(tmp_path)
    hostile = "fabnet: audit: $(touch pwned) `id` ; rm -rf / 'quoted' \"x\" | y"
    result = Slurm(session).drain({"gpu01": hostile, "gpu02": "fabnet: smoke: slow"})
    assert result == {"gpu01": None, "gpu02": None}
    assert session.calls() == [
        ["scontrol", "update", "NodeName=gpu01", "State=DRAIN", f"Reason={hostile}"],
        ["scontrol", "update", "NodeName=gpu02", "State=DRAIN", "Reason=fabnet: smoke: slow"],
    ]
    assert not (tmp_path / "pwned").exists()


def test_a_refused_update_is_reported_for_that_host_only(tmp_path: Path) -> None:
    session = LocalSession(tmp_path)
    result = Slurm(session).resume(["gpu01", "bad01"])
    assert result["gpu01"] is None
    assert result["bad01"] == "slurm_update error: Invalid node name specified"


def test_names_slurm_would_read_as_lists_are_never_sent(tmp_path: Path) -> None:
    session = LocalSession(tmp_path)
    result = Slurm(session).drain({"gpu[01-02]": "fabnet: x", "a,b": "fabnet: x", "": "fabnet: x"})
    assert all(error and "cannot be a Slurm node name" in error for error in result.values())
    assert session.calls() == []


def test_state_reads_sinfo(tmp_path: Path) -> None:
    sinfo = ("gpu01|idle|Unknown|none\ngpu02|drained|root|fabnet: audit: drifted: mtu eth1|x\n"
             "gpu03|idle*|Unknown|none\ngpu03|idle*|Unknown|none\n")
    session = LocalSession(tmp_path, sinfo)
    states = Slurm(session).state(["gpu01", "gpu02", "gpu03", "gpu09"])
    [(first, form), (second, drain_form)] = [(call[:-2], call[-1]) for call in session.calls()]
    assert first == ["sinfo", "--all", "--local", "--noheader", "--Node", "--nodes", "gpu01,gpu02,gpu03,gpu09"]
    assert second == [*first, "--states=drain"]
    # Each record starts with a mark of the call's own, the same for both.
    assert form.endswith("|%N|%T|%u|%E") and drain_form == form.removesuffix("|%T|%u|%E")
    assert set(states) == {"gpu01", "gpu02", "gpu03"}
    assert states["gpu02"].drained_by_fabnet and states["gpu02"].reason == "fabnet: audit: drifted: mtu eth1|x"
    assert states["gpu02"].reason_user == "root"
    assert states["gpu01"].state == "idle" and states["gpu01"].reason == "" and not states["gpu01"].drained
    assert states["gpu03"].state == "idle" and not states["gpu03"].responding


def test_nodes_of_job_expands_and_dedups(tmp_path: Path) -> None:
    session = LocalSession(tmp_path)
    assert Slurm(session).nodes_of_job("1234") == ["gpu01", "gpu02"]
    with pytest.raises(SchedulerError, match="Invalid job id"):
        Slurm(session).nodes_of_job("404")
    with pytest.raises(SchedulerError, match="invalid Slurm job id"):
        Slurm(session).nodes_of_job("1; reboot")


def test_parse_sinfo_keeps_draining_and_drained_apart() -> None:
    states = parse_sinfo("a|draining|alice|maintenance\nb|drained*|root|fabnet: smoke: slow\n", ["a", "b"])
    assert states["a"].drained and not states["a"].drained_by_fabnet and states["a"].reason_user == "alice"
    assert states["b"].drained_by_fabnet and not states["b"].responding


def test_the_controllers_own_slurm_settings_do_not_reach_sinfo_squeue_or_scontrol(tmp_path: Path) -> None:
    """A login that exports SQUEUE_STATES or SINFO_PARTITION would filter what Slurm answers; only
    SLURM_CONF, which says where the cluster's configuration is, gets through."""
    env_log = tmp_path / "env.jsonl"
    session = LocalSession(tmp_path, sinfo="gpu01|idle|N/A|none\n", env={
        "FAKE_ENV_LOG": str(env_log), "SQUEUE_STATES": "PD", "SQUEUE_USERS": "nobody", "SINFO_PARTITION": "x",
        "SCONTROL_FEDERATION": "1", "SINFO_SOMETHING_NEW": "1", "SLURM_CLUSTERS": "other",
        "SLURM_TIME_FORMAT": "relative", "SLURM_CONF": "/etc/slurm/slurm.conf"})
    slurm = Slurm(session)
    slurm.state(["gpu01"])
    slurm.nodes_of_job("7")
    slurm.resume(["gpu01"])
    seen = [json.loads(line) for line in env_log.read_text().splitlines()]
    assert seen == [["SLURM_CONF"]] * 4  # sinfo twice (states, then the DRAIN flag), squeue, scontrol


def test_a_reason_with_line_breaks_is_read_whole_and_cannot_pass_for_another_node(tmp_path: Path) -> None:
    """scontrol stores a reason as given, line breaks included, and sinfo prints it as it is: the lines after
    the first continue the reason (before, they were dropped, and a line shaped like a record was read as
    one: gpu02 read idle)."""
    sinfo = ("gpu01|drained|alice|disk errors:\nsee ticket 42\ngpu02|idle|Unknown|none\x1e"
             "gpu02|drained|root|fabnet: audit: drifted: mtu\x1e")
    states = Slurm(LocalSession(tmp_path, sinfo, drain="gpu01,gpu02")).state(["gpu01", "gpu02"])
    assert states["gpu01"].reason == "disk errors:\nsee ticket 42\ngpu02|idle|Unknown|none"
    assert states["gpu01"].drained and not states["gpu01"].drained_by_fabnet
    assert states["gpu02"].drained_by_fabnet


# %T word, in sinfo's DRAIN list, drained, rebooting: a reboot (every release) or a refused registration
# (21.08 on) hides the DRAIN flag from %T; `sinfo --states=drain` still lists the node (src/sinfo/sinfo.c,
# _filter_out(): "anything that has the drain flag set").
HIDDEN_DRAIN = [
    ("reboot", True, True, True),  # `scontrol reboot ASAP` of an idle node: REBOOT+DRAIN
    ("reboot", False, False, True),
    ("reboot*", True, True, True),  # 20.11: State=REBOOT*+DRAIN in scontrol while it boots
    ("reboot^", True, True, True),
    ("inval", True, True, False),
    ("inval", False, False, False),
    ("idle", False, False, False),
    ("drained@", True, True, True),
]


@pytest.mark.parametrize(("word", "listed", "drained", "rebooting"), HIDDEN_DRAIN)
def test_a_drain_flag_the_state_word_hides(tmp_path: Path, word: str, listed: bool, drained: bool,
                                           rebooting: bool) -> None:
    session = LocalSession(tmp_path, f"gpu01|{word}|root|fabnet: audit: drifted\n", drain="gpu01" if listed else "")
    state = Slurm(session).state(["gpu01"])["gpu01"]
    assert (state.drained, state.drained_by_fabnet, state.rebooting) == (drained, drained, rebooting)
    assert state.out_of_service is (word != "idle")
