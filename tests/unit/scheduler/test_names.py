"""`fabnet_slurm_node`: a host's Slurm name where the inventory names it otherwise (FQDNs, addresses).
Checked and rendered when the inventory loads; the scheduler is asked in Slurm's names and answers in the
inventory's; srun's `-w` and a drain command's `{node}` get Slurm's. The lab test (tests/e2e/test_slurm.py)
does the same against a real Slurm."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
import yaml

from provisioner.errors import ConfigError
from provisioner.load.inventory import Host, load_inventory
from provisioner.scheduler import NodeState, Ran
from provisioner.scheduler.command import Command, uses
from provisioner.scheduler.drain import resume_fixed
from provisioner.scheduler.names import NodeNames, Renamed
from provisioner.scheduler.select import SchedulerArgs, narrow, selected_names
from provisioner.smoke import nccltests
from provisioner.smoke.nccl_run import _inventory_names
from provisioner.smoke.targets import Target


def _inventory(tmp_path: Path, hosts: dict[str, dict[str, object]], all_vars: dict[str, object] | None = None) -> Path:
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"vars": all_vars or {}, "hosts": hosts}}, sort_keys=False))
    return path


def test_a_template_gives_each_host_its_short_name(tmp_path: Path) -> None:
    path = _inventory(tmp_path, {"gpu01.cluster.test": {"ansible_host": "192.0.2.1"},
                                 "gpu02.cluster.test": {"ansible_host": "192.0.2.2"},
                                 "10.0.0.3": {"fabnet_slurm_node": "gpu03"}},
                      {"fabnet_slurm_node": "{{ inventory_hostname_short }}"})
    hosts = load_inventory(path).hosts
    assert {name: host.node_name for name, host in hosts.items()} == {
        "gpu01.cluster.test": "gpu01", "gpu02.cluster.test": "gpu02", "10.0.0.3": "gpu03"}
    names = NodeNames.of(hosts.values())
    assert names.node("gpu02.cluster.test") == "gpu02" and names.host("gpu03") == "10.0.0.3"
    assert names.host("gpu09") == "gpu09"  # unknown: kept, so the caller can say so


def test_without_the_variable_the_inventory_name_is_slurms(tmp_path: Path) -> None:
    hosts = load_inventory(_inventory(tmp_path, {"gpu01": {}, "gpu02": {}})).hosts
    assert [host.node_name for host in hosts.values()] == ["gpu01", "gpu02"]
    assert NodeNames.of(hosts.values()).to_node == {}


@pytest.mark.parametrize(("value", "words"), [
    ("gpu[01-02]", "must not contain the shell character '['"),
    ("gpu01,gpu02", "invalid Slurm node name"),
    ("gpu01 gpu02", "whitespace"),
    ("-gpu01", "must not start with '-'"),
    ("", "1..255 characters"),
    ("gpu01\x1b[2J", "control character"),
])
def test_a_name_slurm_would_read_as_several_or_as_syntax_is_refused_with_file_line_and_key(
        tmp_path: Path, value: str, words: str) -> None:
    path = _inventory(tmp_path, {"gpu01": {"fabnet_slurm_node": value}})
    with pytest.raises(ConfigError) as info:
        load_inventory(path)
    message = str(info.value)
    assert words in message and "fabnet_slurm_node" in message and str(path) in message, message
    assert f"{path}:5: all.hosts.gpu01.fabnet_slurm_node:" in message, message  # where it was set


@pytest.mark.parametrize(("text", "words"), [
    ("yes", "not a boolean (YAML reads an unquoted yes"),
    ("true", "not a boolean"),
    ("[gpu01, gpu02]", "not a list"),
    ("{name: gpu01}", "not a mapping"),
])
def test_a_value_that_is_not_one_name_is_refused_with_file_line_and_key(tmp_path: Path, text: str,
                                                                          words: str) -> None:
    """`fabnet_slurm_node: yes` is a YAML boolean: read as text it would be the node `True`."""
    path = tmp_path / "hosts.yml"
    path.write_text(f"all:\n  hosts:\n    gpu01:\n      fabnet_slurm_node: {text}\n")
    with pytest.raises(ConfigError) as info:
        load_inventory(path)
    message = str(info.value)
    assert f"{path}:4: all.hosts.gpu01.fabnet_slurm_node: fabnet_slurm_node must be one Slurm node name, {words}" \
        in message, message
    path.write_text("all:\n  hosts:\n    gpu01:\n      fabnet_slurm_node: 'yes'\n")
    assert load_inventory(path).hosts["gpu01"].node_name == "yes"  # quoted: a name


def test_a_rendered_name_is_checked_too(tmp_path: Path) -> None:
    path = _inventory(tmp_path, {"gpu01": {"rack": "r1,r2"}}, {"fabnet_slurm_node": "{{ rack }}"})
    with pytest.raises(ConfigError, match="Slurm node name"):
        load_inventory(path)


def test_two_hosts_with_one_node_name_are_refused(tmp_path: Path) -> None:
    hosts = load_inventory(_inventory(tmp_path, {"a.one.test": {}, "a.two.test": {}},
                                      {"fabnet_slurm_node": "{{ inventory_hostname_short }}"})).hosts
    with pytest.raises(ConfigError, match=re.escape("a.one.test and a.two.test have the same Slurm node name 'a'")):
        NodeNames.of(hosts.values())


class Recorder:
    """A scheduler that knows nodes by Slurm's names and records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, object]] = []

    def drain(self, reasons: Mapping[str, str]) -> Mapping[str, str | Ran | None]:
        self.asked.append(("drain", dict(reasons)))
        return dict.fromkeys(reasons)

    def resume(self, hosts: Sequence[str]) -> dict[str, str | None]:
        self.asked.append(("resume", list(hosts)))
        return {host: "refused" if host == "gpu03" else None for host in hosts}

    def state(self, hosts: Sequence[str]) -> dict[str, NodeState]:
        self.asked.append(("state", list(hosts)))
        return {host: NodeState("drained", reason="fabnet: watch: link down", drain=True)
                for host in hosts if host != "gpu09"}

    def nodes_of_job(self, jobid: str) -> list[str]:
        return ["gpu01", "gpu02", "gpu09"]

    def expand(self, hostlist: str) -> list[str]:
        return ["gpu01", "gpu02"]


NAMES = NodeNames({"gpu01.test": "gpu01", "gpu02.test": "gpu02"}, {"gpu01": "gpu01.test", "gpu02": "gpu02.test"})


def test_the_scheduler_is_asked_in_its_names_and_answers_in_the_inventorys() -> None:
    slurm = Recorder()
    renamed = Renamed(slurm, NAMES)
    assert renamed.drain({"gpu02.test": "fabnet: audit: x", "gpu03": "fabnet: audit: y"}) == {
        "gpu02.test": None, "gpu03": None}
    assert renamed.resume(["gpu01.test", "gpu03"]) == {"gpu01.test": None, "gpu03": "refused"}
    states = renamed.state(["gpu01.test", "gpu03", "gpu09"])
    assert sorted(states) == ["gpu01.test", "gpu03"]
    assert states["gpu01.test"].node == "gpu01" and states["gpu03"].node == ""
    assert renamed.nodes_of_job("7") == ["gpu01.test", "gpu02.test", "gpu09"]
    assert renamed.expand("gpu[01-02]") == ["gpu01.test", "gpu02.test"]
    assert slurm.asked == [("drain", {"gpu02": "fabnet: audit: x", "gpu03": "fabnet: audit: y"}),
                           ("resume", ["gpu01", "gpu03"]), ("state", ["gpu01", "gpu03", "gpu09"])]


def test_the_advice_to_resume_a_watch_drain_names_slurms_node() -> None:
    actions = resume_fixed(Renamed(Recorder(), NAMES), "audit", ["gpu01.test"], {"gpu01.test"})
    assert [(a.host, a.action) for a in actions] == [("gpu01.test", "left")]
    assert "scontrol update nodename=gpu01 state=resume" in actions[0].detail


def test_a_nodelist_names_slurm_nodes_or_inventory_hosts(tmp_path: Path) -> None:
    inventory = load_inventory(_inventory(tmp_path, {"gpu01.cluster.test": {}, "gpu02.cluster.test": {},
                                                     "login": {}},
                                          {"fabnet_slurm_node": "{{ inventory_hostname_short }}"}))
    chosen = selected_names(SchedulerArgs(nodelist="gpu[01-02],login"), inventory, None)  # type: ignore[arg-type]
    assert chosen == {"gpu01.cluster.test", "gpu02.cluster.test", "login"}
    with pytest.raises(ConfigError, match=r"lacks: gpu03 .*fabnet_slurm_node"):
        selected_names(SchedulerArgs(nodelist="gpu0[1,3]"), inventory, None)  # type: ignore[arg-type]


def test_a_drain_command_gets_the_node_name_and_reads_the_inventory_only_for_it(tmp_path: Path) -> None:
    assert uses("scontrol update nodename={node} reason={reason}", "node")
    assert not uses("notify {host} node={reason}", "node")
    command = Command(f"{sys.executable} -c pass {{host}} {{node}}", nodes={"gpu01.test": "gpu01"})
    ran = command.drain({"gpu01.test": "fabnet: smoke: slow", "gpu02": "fabnet: smoke: slow"})
    assert [r.command.split()[-2:] for r in ran.values() if isinstance(r, Ran)] == [
        ["gpu01.test", "gpu01"], ["gpu02", "gpu02"]]


def test_srun_gets_slurms_names_and_its_messages_name_inventory_hosts() -> None:
    targets = [Target(name=f"gpu0{n}.test", host=Host(name=f"gpu0{n}.test", address=f"192.0.2.{n}",
                                                      slurm_name=f"gpu0{n}")) for n in (1, 2)]
    line = nccltests.command("srun -w {hostlist} {binary}", hosts=[t.host.address for t in targets],
                             ranks_per_host=1, binary="all_reduce_perf", sizes=[1], iters=1, env={},
                             names=[t.host.node_name for t in targets])
    assert "-w gpu01,gpu02 all_reduce_perf" in line
    assert _inventory_names(targets, ["gpu02", "192.0.2.1", "other"]) == ["gpu02.test", "gpu01.test", "other"]


@pytest.mark.parametrize("args", [SchedulerArgs(drain_cmd="notify {node} {reason}"), SchedulerArgs(drain_failed=True),
                                  SchedulerArgs(resume_fixed=True)])
def test_two_hosts_with_one_node_name_are_refused_before_any_host_is_checked(
        tmp_path: Path, args: SchedulerArgs) -> None:
    path = _inventory(tmp_path, {"a.one.test": {}, "a.two.test": {}},
                      {"fabnet_slurm_node": "{{ inventory_hostname_short }}", "fabnet_slurm_controller": "a.one.test"})
    with pytest.raises(ConfigError, match="the same Slurm node name 'a'"):
        narrow(["a.one.test"], args, path, None, None)  # type: ignore[arg-type]
    # A drain command without {node} drains by inventory name: the node names do not matter to it.
    assert narrow(["a.one.test"], SchedulerArgs(drain_cmd="notify {host}"), path, None, None) == [  # type: ignore[arg-type]
        "a.one.test"]


def test_watch_refuses_them_before_its_first_cycle(tmp_path: Path) -> None:
    from provisioner.commands.watch import _drainer

    path = _inventory(tmp_path, {"a.one.test": {}, "a.two.test": {}},
                      {"fabnet_slurm_node": "{{ inventory_hostname_short }}", "fabnet_slurm_controller": "a.one.test"})
    with pytest.raises(ConfigError, match="the same Slurm node name 'a'"):
        _drainer(path, tmp_path / "site.yml", None)  # type: ignore[arg-type]


def test_a_hosts_inventory_name_is_not_its_node_when_slurm_knows_it_otherwise(tmp_path: Path) -> None:
    # n1 is Slurm's n2 here, and no host is Slurm's n1: `--nodelist n1` names a node the inventory lacks.
    inventory = load_inventory(_inventory(tmp_path, {"n1": {"fabnet_slurm_node": "n2"}, "n3": {}}))
    with pytest.raises(ConfigError, match="lacks: n1 "):
        selected_names(SchedulerArgs(nodelist="n1"), inventory, None)  # type: ignore[arg-type]
    assert selected_names(SchedulerArgs(nodelist="n[2-3]"), inventory, None) == {"n1", "n3"}  # type: ignore[arg-type]
