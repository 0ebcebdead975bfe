"""From ranks' events to figures or to a named cause."""

from __future__ import annotations

import json

import pytest

from provisioner.smoke import diagnose
from tests.unit.smoke._helpers import HERE
from tests.unit.smoke.test_plan import job

SIZES = (1 << 20, 2 << 20)


def ev(*kinds: str, sizes: int = 0, error: str | None = None, missing: list[int] | None = None) -> list[dict]:
    events = [{"event": k} for k in kinds]
    events += [{"event": "size", "bytes": s, "seconds": 0.01 * (i + 1), "wrong": 0}
               for i, s in enumerate(SIZES[:sizes])]
    if error:
        events.append({"event": "error", "message": error, "missing": missing or []})
    return events


def four() -> object:
    from tests.unit.smoke._helpers import target
    return job(hosts=tuple(target(f"gpu0{i}") for i in range(1, 5)), ranks_per_host=1, sizes=SIZES)


def test_figures_take_the_slowest_rank() -> None:
    j = four()
    events = {r: ev("started", "connected", "joined", "done", sizes=2) for r in range(4)}
    events[2][4]["seconds"] = 0.05  # rank 2 was slower on the first size
    rows = diagnose.figures(j, events)
    assert [r.size for r in rows] == list(SIZES)
    assert rows[0].time_us == pytest.approx(50_000)
    assert rows[0].busbw == pytest.approx((1 << 20) / 0.05 / 1e9 * 1.5)


def test_figures_skip_sizes_not_every_rank_finished() -> None:
    j = four()
    events = {r: ev("started", "joined", sizes=2 if r else 1) for r in range(4)}
    assert [r.size for r in diagnose.figures(j, events)] == [SIZES[0]]


def test_progress_keeps_the_furthest_stage_and_the_error() -> None:
    j = four()
    progress = diagnose.rank_progress(j, {0: ev("started", "connected", error="boom", missing=[2]), 1: ev("started")})
    assert (progress[0].stage, progress[0].error, progress[0].missing) == ("connected", "boom", (2,))
    assert progress[1].stage == "started" and progress[2].stage == "not_started"


def test_interface_down_is_named() -> None:
    j = four()
    events = {0: ev("started", "connected", error="DistStoreError: wait timeout", missing=[2]),
              1: ev("started", "connected"), 2: ev("started"), 3: ev("started", "connected")}
    down = (HERE / "ip-j-addr-eth1-down.json").read_text()
    eth1_only = json.dumps([e for e in json.loads(down) if e["ifname"] == "eth1"])
    ifaces = {"gpu01": "up", "gpu02": "up", "gpu03": diagnose.iface_state(eth1_only), "gpu04": "up"}
    hosts, cause = diagnose.explain(j, diagnose.rank_progress(j, events), ifaces, timed_out=False, unreachable={},
                                    deadline=20)
    assert hosts == ["gpu03"]
    assert cause.startswith("gpu03 never joined the rendezvous: its data interface eth1 is down")


def test_never_joined_without_interface_fault_points_at_the_path() -> None:
    j = four()
    events = {0: ev("started", "connected", error="timeout", missing=[3]), 1: ev("started", "connected"),
              2: ev("started", "connected"), 3: ev("started", error="cannot reach the rendezvous")}
    hosts, cause = diagnose.explain(j, diagnose.rank_progress(j, events), {}, timed_out=True, unreachable={},
                                    deadline=30)
    assert hosts == ["gpu04"] and "never joined the rendezvous on 198.19.1.1:29500" in cause
    assert "firewall" in cause and "ran out of time (30 s)" in cause


def test_a_host_behind_in_the_sweep_is_named() -> None:
    j = four()
    events = {r: ev("started", "connected", "joined", sizes=2) for r in range(4)}
    events[1] = ev("started", "connected", "joined", sizes=1)
    hosts, cause = diagnose.explain(j, diagnose.rank_progress(j, events), {}, timed_out=True, unreachable={},
                                    deadline=30)
    assert hosts == ["gpu02"] and "fell behind" in cause


def test_everyone_stuck_in_the_same_collective_suggests_mtu_or_firewall() -> None:
    j = four()
    events = {r: ev("started", "connected", "joined", sizes=1) for r in range(4)}
    hosts, cause = diagnose.explain(j, diagnose.rank_progress(j, events), {}, timed_out=True, unreachable={},
                                    deadline=30)
    assert len(hosts) == 4 and "smaller MTU" in cause and str(SIZES[1]) in cause


def test_a_rank_that_timed_out_on_a_peer_does_not_single_out_its_own_host() -> None:
    # Which rank's read from a silent peer times out first is a race: the whole collective is suspect.
    j = four()
    events = {r: ev("started", "connected", "joined") for r in range(4)}
    events[0] += ev(error="RuntimeError: [gloo/transport/tcp/pair.cc:537] Read error [198.19.2.4]:3220: "
                          "Connection timed out")
    hosts, cause = diagnose.explain(j, diagnose.rank_progress(j, events), {}, timed_out=True, unreachable={},
                                    deadline=30)
    assert len(hosts) == 4 and "smaller MTU" in cause
    events[1] += ev(error="RuntimeError: CUDA error: an illegal memory access was encountered")
    hosts, cause = diagnose.explain(j, diagnose.rank_progress(j, events), {}, timed_out=True, unreachable={},
                                    deadline=30)
    assert hosts == ["gpu02"] and "rank 1 on gpu02 failed: RuntimeError: CUDA error" in cause


def test_ranks_that_reached_their_own_deadline_first_do_not_single_out_their_hosts() -> None:
    # Every rank stuck in one collective; two of them reached their own budget before fabnet's kill
    # ended the others: the hang is the whole collective's, to be checked again on the fabric.
    j = four()
    events = {r: ev("started", "connected", "joined") for r in range(4)}
    for rank in (0, 2):
        events[rank] += ev(error="own deadline of 21.25 s reached")
    hosts, cause = diagnose.explain(j, diagnose.rank_progress(j, events), {}, timed_out=True, unreachable={},
                                    deadline=25)
    assert len(hosts) == 4 and "smaller MTU" in cause


def test_iface_state() -> None:
    assert diagnose.iface_state('Device "eth9" does not exist.') == "missing"
    assert diagnose.iface_state("") is None
    healthy = json.loads((HERE / "ip-j-addr-healthy.json").read_text())
    assert diagnose.iface_state(json.dumps([e for e in healthy if e["ifname"] == "eth1"])) == "up"


def test_hosts_that_reached_the_store_but_not_their_peers() -> None:
    """A route or firewall between two hosts: both reach the rendezvous, neither builds its connections."""
    j = four()
    events = {0: ev("started", "connected", "joined"), 1: ev("started", "connected"),
              2: ev("started", "connected", error="RuntimeError: connect: Permission denied"),
              3: ev("started", "connected", "joined", error="Connection reset by peer")}
    hosts, cause = diagnose.explain(j, diagnose.rank_progress(j, events), {}, timed_out=False, unreachable={},
                                    deadline=20)
    assert hosts == ["gpu02", "gpu03"]
    assert "reached the rendezvous but could not connect to their peers" in cause and "Permission denied" in cause


def test_a_rank_killed_by_a_signal_is_named_with_its_output_not_the_network() -> None:
    """kill -9 of one rank: its peers see closed connections; the cause is the killed process."""
    j = four()
    events = {r: ev("started", "connected", "joined", sizes=1,
                    error="RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection closed by peer")
              for r in (0, 1, 3)}
    events[2] = [*ev("started", "connected", "joined", sizes=1), {"event": "exit", "status": 137}]
    outputs = {2: "warming up\nTraceback? no: killed\n", 0: "peer gone\n"}
    progress = diagnose.rank_progress(j, events)
    assert progress[2].status == 137 and progress[2].to_json()["exit"] == "killed by signal 9 (SIGKILL)"
    hosts, cause = diagnose.explain(j, progress, {}, timed_out=False, unreachable={}, deadline=60, outputs=outputs)
    assert hosts == ["gpu03"]
    assert cause.startswith("gpu03: rank 2 killed by signal 9 (SIGKILL) during the all-reduce of 2097152 bytes")
    assert "its last output: warming up | Traceback? no: killed" in cause
    assert "MTU" not in cause and "firewall" not in cause


def test_a_rank_that_exits_without_saying_why_is_named() -> None:
    j = four()
    events = {r: ev("started", "connected", "joined", error="Connection reset by peer") for r in (0, 1, 2)}
    events[3] = [{"event": "exit", "status": 127}]
    hosts, cause = diagnose.explain(j, diagnose.rank_progress(j, events), {}, timed_out=False, unreachable={},
                                    deadline=60, outputs={3: "sh: 1: python3: not found\n"})
    assert hosts == ["gpu04"] and "exited with code 127 after reaching not_started" in cause
    assert "python3: not found" in cause


def test_ranks_that_report_their_own_error_are_not_crashes() -> None:
    j = four()
    events = {r: [*ev("started", "connected", error="own deadline of 10 s reached"), {"event": "exit", "status": 3}]
              for r in range(4)}
    _hosts, cause = diagnose.explain(j, diagnose.rank_progress(j, events), {}, timed_out=True, unreachable={},
                                     deadline=60)
    assert "signal" not in cause and "exited with code" not in cause
    assert [diagnose.exit_words(s) for s in (None, 0, 139, 200)] == [
        None, "exited with code 0", "killed by signal 11 (SIGSEGV)", "killed by signal 72 (unknown signal)"]


def test_pair_figures_use_the_slower_side() -> None:
    j = four()
    events = {0: [{"event": "pair", "partner": 1, "bytes": 1 << 20, "seconds": 0.001}],
              1: [{"event": "pair", "partner": 0, "bytes": 1 << 20, "seconds": 0.002}],
              2: [{"event": "pair", "partner": 3, "bytes": 1 << 20, "seconds": 0.01}],
              3: [{"event": "pair", "partner": 2, "bytes": 1 << 20, "seconds": 0.01}, {"event": "pair", "partner": 9}]}
    pairs = diagnose.pair_figures(j, events)
    assert pairs == {("gpu01", "gpu02"): pytest.approx((1 << 20) / 0.002 / 1e9),
                     ("gpu03", "gpu04"): pytest.approx((1 << 20) / 0.01 / 1e9)}


# What two ranks printed when NCCL 2.28.9 (torch 2.11.0+cu130, one H200) refused them as one GPU twice: fabnet
# smoke over SSH, both ranks given one NCCL_HOSTID (bench/gpu/two-hosts.sh with FAULTS=1). Every rank joined,
# then failed alike at its first all-reduce, where torch builds the communicator.
_DUPLICATE = ("rank {a} error (run): DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
              "NCCLUtils.cpp:93, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.28.9\n"
              "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\nLast error:\n"
              "Duplicate GPU detected : rank {a} and rank {b} both on CUDA device 60\n\n")


def test_every_rank_failing_alike_is_named_by_what_they_printed_not_the_network() -> None:
    from tests.unit.smoke._helpers import target
    j = job(hosts=(target("node1"), target("node2")), ranks_per_host=1, sizes=SIZES, backend="nccl")
    events, outputs = {}, {}
    for rank, other in ((0, 1), (1, 0)):
        text = _DUPLICATE.format(a=rank, b=other)
        events[rank] = ev("started", "connected", "joined", error=text.split("\n", 1)[0].split(": ", 1)[1])
        outputs[rank] = text
    progress = diagnose.rank_progress(j, events)
    hosts, cause = diagnose.explain(j, progress, {}, timed_out=False, unreachable={}, deadline=30, outputs=outputs)
    assert hosts == ["node1", "node2"]
    assert cause.startswith("two ranks on the same GPU: ranks 0, 1 share CUDA device 60") and "Fix: " in cause
    assert "MTU" not in cause
    # Without their output to read, the run is still blamed on the path, as before.
    hosts, cause = diagnose.explain(j, progress, {}, timed_out=False, unreachable={}, deadline=30)
    assert "smaller MTU" in cause


def test_a_rank_stopped_when_the_run_was_cut_off_is_named_not_the_network() -> None:
    """What the lab showed with gloo (torch 2.13) and a rank stopped with SIGSTOP mid-sweep: its peer timed out
    waiting (`Timed out waiting 42000ms for recv operation`), the stopped rank said nothing, and the verdict
    blamed the data path. Its state at the kill (`T`, or `D` for a driver call that never returns) names it."""
    j = four()
    events = {r: ev("started", "connected", "joined", sizes=1) for r in range(4)}
    for r in (0, 1, 3):
        events[r] += ev(error="RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed "
                              "out waiting 42000ms for recv operation to complete")
    states = {0: ("S", "futex_wait_queue"), 1: ("S", "futex_wait_queue"), 2: ("T", "do_signal_stop"),
              3: ("S", "ep_poll")}
    progress = diagnose.rank_progress(j, events, states)
    hosts, cause = diagnose.explain(j, progress, {}, timed_out=True, unreachable={}, deadline=60)
    assert hosts == ["gpu03"]
    assert cause.startswith("gpu03: rank 2 was stopped (SIGSTOP") and f"all-reduce of {SIZES[1]} bytes" in cause
    assert progress[2].to_json()["held_up"].startswith("was stopped")
    states[2] = ("D", "nv_wait_for_completion")  # a thread stuck in a driver call
    hosts, cause = diagnose.explain(j, diagnose.rank_progress(j, events, states), {}, timed_out=True,
                                    unreachable={}, deadline=60)
    assert hosts == ["gpu03"] and "stuck in the kernel (uninterruptible sleep in nv_wait_for_completion)" in cause
    # Without the states (a kill that could not read them), the old reading stands.
    hosts, cause = diagnose.explain(j, diagnose.rank_progress(j, events), {}, timed_out=True, unreachable={},
                                    deadline=60)
    assert len(hosts) == 4 and "smaller MTU" in cause

