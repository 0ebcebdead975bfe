"""`explain` on gloo transfers that stop after the ranks connected (an MTU blackhole): the ranks' output
the lab recorded under that fault (tests/samples/logs/gloo-*.txt, see INDEX.md), gloo's other wordings
(newest `rank N ([ADDR]:PORT)` peers, writev, the uv transport, sync-mode socket timeouts) under launcher
and logger prefixes, and the logs that must not read as one: a healthy run and a killed rank."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.explain import explain
from provisioner.explain.model import Cause
from tests.unit.parsers._samples import SAMPLES

LOGS = SAMPLES / "logs"
# What gloo adds after a socket error (pair.cc), as the lab's ranks printed it.
TAIL = ("This is typically caused by a remote worker hanging or bugs in the application. Check the logs of the "
        "remote worker before reporting an error. GLHF! \U0001f3d6\ufe0f")


def _causes(text: str, aliases: dict[str, str] | None = None) -> list[Cause]:
    return explain([("job.log", text)], aliases=aliases).causes


def _mtu(text: str, aliases: dict[str, str] | None = None) -> Cause:
    causes = _causes(text, aliases)
    found = [c for c in causes if c.id == "mtu-blackhole"]
    assert found, [c.id for c in causes]
    return found[0]


def test_every_rank_timing_out_without_a_peer_is_the_mtu_signature_but_names_no_node() -> None:
    """The lab, switch port of gpu03 at MTU 1500 after the pre-flight: all four ranks' transfers time out
    (three on recv, one on send) and no error names a peer. The cause is said, the node honestly not."""
    causes = _causes((LOGS / "gloo-mtu-blackhole-op-timeouts-1.txt").read_text())
    cause = causes[0]
    assert cause.id == "mtu-blackhole" and (cause.hosts, cause.addresses) == ([], [])
    assert "cannot tell which node" in cause.detail and "gpu01, gpu02, gpu03, gpu04" in cause.detail
    assert [e.line for e in cause.evidence] == [2, 5, 8, 11]


def test_one_rank_timing_out_while_the_others_hit_their_deadline() -> None:
    cause = _causes((LOGS / "gloo-mtu-blackhole-deadline-2.txt").read_text())[0]
    assert cause.id == "mtu-blackhole" and cause.hosts == [] and "waited 28 s" in cause.detail


def test_a_closure_from_a_rank_that_had_given_up_is_an_echo_once_the_inventory_says_whose_address() -> None:
    """The lab, same fault: gpu03's rank reached its smoke deadline still waiting and exited, and gpu04 saw
    198.19.3.3 (gpu03) close. Knowing that address is the rank that gave up, the closure is its echo; not
    knowing it, a closure may be a crash's, and no MTU cause is made of it."""
    text = (LOGS / "gloo-mtu-blackhole-deadline-closure-6.txt").read_text()
    cause = _causes(text, {"198.19.3.3": "gpu03", "gpu03": "gpu03", "gpu04": "gpu04"})[0]
    assert cause.id == "mtu-blackhole" and (cause.hosts, cause.addresses) == ([], [])
    assert "closed were those of ranks that had given up" in cause.detail
    assert [c.id for c in _causes(text)] == ["connection-lost"]
    # The address is another host's, one that never said it gave up: a peer went away.
    assert "mtu-blackhole" not in [c.id for c in _causes(text, {"198.19.3.3": "gpu01"})]


def test_a_closure_from_a_rank_that_timed_out_is_an_echo() -> None:
    """The lab, same fault: gpu02's transfer timed out, gloo closed its connections, and gpu01 saw
    198.19.5.2 (gpu02) close before its own timeout; gpu03 and gpu04 timed out too."""
    text = (LOGS / "gloo-mtu-blackhole-timeout-closure-7.txt").read_text()
    aliases = {f"198.19.5.{n}": f"gpu0{n}" for n in range(1, 5)} | {f"gpu0{n}": f"gpu0{n}" for n in range(1, 5)}
    cause = _causes(text, aliases)[0]
    assert cause.id == "mtu-blackhole" and (cause.hosts, cause.addresses) == ([], [])
    assert "on gpu02, gpu03, gpu04 waited 28 s" in cause.detail


def test_tcp_giving_up_names_the_pair_and_one_pair_cannot_say_which_end() -> None:
    """The lab, same fault, TCP's retries shortened below gloo's timeout (as a real job's 30-minute
    timeout outlasts TCP's 15): the first rank to fail names the peer it lost, gpu03's data address; the
    smoke launcher stopped the others. One pair: both ends are named, neither is guessed."""
    text = (LOGS / "gloo-mtu-blackhole-tcp-timeout-3.txt").read_text()
    for aliases in (None, {"198.19.1.3": "gpu03", "gpu04": "gpu04"}):
        cause = _causes(text, aliases)[0]
        assert cause.id == "mtu-blackhole" and cause.score > 52
        assert (cause.hosts, cause.addresses) == (["gpu04"], ["198.19.1.3"])
        assert "this one pair" in cause.detail and [e.line for e in cause.evidence] == [8]


def test_a_closure_that_followed_the_timeout_stays_out_of_the_pair() -> None:
    """Another lab run of that fault: gpu04 lost gpu03 (198.19.3.3), and gpu01 then saw gpu02's rank, which
    the launcher stopped, close its connection. The closure is an echo: the pair named is gpu04's."""
    causes = _causes((LOGS / "gloo-mtu-blackhole-tcp-timeout-5.txt").read_text())
    assert causes[0].id == "mtu-blackhole"
    assert (causes[0].hosts, causes[0].addresses) == (["gpu04"], ["198.19.3.3"])


# A ring all-reduce with gpu03's path dropping full-size frames, no launcher stopping the job: gpu03's
# predecessor loses gpu03 and gpu03 loses its successor. Newest gloo names the peer's rank too.
RING = (
    f"gpu02: [rank1]:[E1125 10:00:01.123456 ProcessGroupGloo.cpp:144] RuntimeError: [../third_party/gloo/gloo/"
    f"transport/tcp/pair.cc:589] Read error rank 2 ([10.0.0.3]:41234): Connection timed out. {TAIL}\n"
    f"gpu03: [rank2]:[E1125 10:00:01.234567 ProcessGroupGloo.cpp:144] RuntimeError: [../third_party/gloo/gloo/"
    f"transport/tcp/pair.cc:589] Read error rank 3 ([10.0.0.4]:51515): Connection timed out. {TAIL}\n"
)
INVENTORY = {"gpu02": "gpu02", "gpu03": "gpu03", "10.0.0.3": "gpu03", "10.0.0.4": "gpu04"}


def test_the_node_in_every_timed_out_pair_is_named_once_names_and_addresses_are_one() -> None:
    cause = _mtu(RING, INVENTORY)
    assert (cause.hosts, cause.addresses) == (["gpu03"], ["10.0.0.3"])
    assert "path of gpu03" in cause.title and "gpu02 -> 10.0.0.3, gpu03 -> 10.0.0.4" in cause.detail


def test_without_the_inventory_the_ring_names_every_end_and_says_why() -> None:
    cause = _mtu(RING)
    assert (cause.hosts, cause.addresses) == (["gpu02", "gpu03"], ["10.0.0.3", "10.0.0.4"])
    assert "--inventory" in cause.detail


@pytest.mark.parametrize("line", [
    # gloo before the rank was added to the peer, Python logging's timestamp before the launcher label.
    "2025-11-25 10:00:01,123 gpu0{n}: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] "
    "Read error [10.0.0.3]:4242{n}: Connection timed out. " + TAIL,
    # The write side, as pair.cc words an unexpected writev error.
    "gpu0{n}: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:447] writev [10.0.0.3]:4242{n}: "
    "Connection timed out",
])
def test_every_rank_losing_the_same_peer_names_that_peer(line: str) -> None:
    cause = _mtu("".join(line.format(n=n) + "\n" for n in (2, 4)))
    assert (cause.hosts, cause.addresses) == ([], ["10.0.0.3"])


@pytest.mark.parametrize("timeout", [
    "[rank{n}]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out "
    "waiting 1800000ms for recv operation to complete",
    "[rank{n}]: RuntimeError: [../gloo/transport/uv/unbound_buffer.cc:67] Timed out waiting 5000ms for send "
    "operation to complete",
    "[rank{n}]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:575] Read timeout [10.0.0.{n}]:4242",
])
def test_application_timeouts_in_each_wording_across_nodes(timeout: str) -> None:
    cause = _mtu("".join(f"gpu0{n}: " + timeout.format(n=n) + "\n" for n in (1, 2)))
    assert cause.score == 62 and cause.hosts == []


def test_timeouts_on_one_node_only_are_no_mtu_cause() -> None:
    """No frame leaves a host whose ranks talk over loopback."""
    text = "".join(f"[rank{n}]: RuntimeError: Timed out waiting 5000ms for recv operation to complete\n"
                   for n in (0, 1))
    assert "mtu-blackhole" not in [c.id for c in _causes(text)]


def test_a_killed_rank_is_no_mtu_blackhole() -> None:
    """The lab's killed rank (SIGKILL on gpu02), and a job whose other ranks outlived the dead one: the
    closed connection comes first, the timeout is its echo."""
    recorded = _causes((LOGS / "gloo-killed-rank-4.txt").read_text())
    assert [c.id for c in recorded] == ["process-crashed"] and recorded[0].hosts == ["gpu02"]
    echo = ("gpu01: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
            "[10.0.0.2]:14788\n"
            "gpu03: RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out "
            "waiting 1800000ms for recv operation to complete\n")
    assert "mtu-blackhole" not in [c.id for c in _causes(echo)]
    reset = f"gpu01: RuntimeError: Read error [10.0.0.2]:14788: Connection reset by peer. {TAIL}\n"
    assert "mtu-blackhole" not in [c.id for c in _causes(reset)]


def test_a_healthy_run_names_nothing() -> None:
    """What the lab's ranks print in every run, a healthy one included."""
    warnings = [line for line in (LOGS / "gloo-mtu-blackhole-op-timeouts-1.txt").read_text().splitlines()
                if "socket.cpp" in line]
    assert len(warnings) == 4 and _causes("\n".join(warnings) + "\n") == []


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A loopback port bound and never listened on: a login there is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_cli_names_the_common_node_through_the_inventory(tmp_path: Path, refusing_port: int,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`--inventory` tells that gpu03 is 10.0.0.3: the ring's pairs then share one node, exit 2."""
    log = tmp_path / "job.log"
    log.write_text(RING)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n" + "".join(
        f"    gpu0{n}:\n      ansible_host: 127.0.0.1\n      ansible_port: {refusing_port}\n"
        f"      data_ip: 10.0.0.{n}\n" for n in (2, 3, 4)))
    playbook = tmp_path / "site.yml"
    playbook.write_text("- hosts: all\n  resources:\n    - sysctl: {name: net.ipv4.ip_forward, value: '0'}\n")
    with pytest.raises(SystemExit) as info:
        main(["explain", str(log), "--inventory", str(inventory), "-p", str(playbook), "--json"])
    data = json.loads(capsys.readouterr().out)
    cause = next(c for c in data["causes"] if c["id"] == "mtu-blackhole")
    assert info.value.code == 2 and data["causes"][0] is cause
    assert {data["inventory_hosts"][h] for h in cause["hosts"] + cause["addresses"]} == {"gpu03"}


def test_a_rank_printing_its_timeout_twice_is_counted_once() -> None:
    """torch prints a rank's exception, then its traceback's summary line: two stall lines, one rank."""
    line = "gpu0{n}: [rank{n}]: RuntimeError: Timed out waiting 5000ms for recv operation to complete\n"
    cause = _mtu(line.format(n=1) * 2 + line.format(n=2))
    assert cause.detail.startswith("2 ranks on gpu01, gpu02 waited 5 s")
    smoke = "".join(f"gpu0{n}: rank {n} error (run): RuntimeError: Timed out waiting 5000ms for recv operation to "
                    "complete\n" for n in (1, 1, 2, 3))
    assert _mtu(smoke).detail.startswith("3 ranks on gpu01, gpu02, gpu03")


def test_ranks_without_a_tag_are_told_apart_by_host() -> None:
    text = "".join(f"gpu0{n}: RuntimeError: Timed out waiting 5000ms for recv operation to complete\n"
                   for n in (1, 1, 2))
    assert _mtu(text).detail.startswith("2 ranks on gpu01, gpu02")
