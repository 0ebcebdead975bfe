"""`explain` on logs recorded on one H200 machine with NCCL 2.28.9 and torch 2.11 (tests/samples/INDEX.md)."""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from tests.unit.explain._field import causes_of, check_top_cause
from tests.unit.parsers._samples import SAMPLES


def test_two_ranks_on_one_gpu_through_torch() -> None:
    result = explain([("job.log", (SAMPLES / "logs/nccl-duplicate-gpu-torch-2.28.txt").read_text())])
    first = result.causes[0]
    assert first.id == "duplicate-gpu"
    assert "ranks 0, 1 share CUDA device 60" in first.detail
    assert first.hosts == ["vm"]
    assert {3, 9} <= {e.line for e in first.evidence}  # NCCL's own timestamped WARN lines, one per rank



# Faults set on purpose on that machine (bench/gpu/failures.sh): each log's top cause, its first evidence line
# and words the cause must hold.
FAULTS = {
    "nccl-init-rank-missing-h200-2.28.txt": ("init-unfinished", "rank 0 nranks 2", "never printed `Init START`"),
    "torch-no-gpu-visible-h200-2.11.txt": ("gpu-not-visible", "No CUDA GPUs are available", "CUDA_VISIBLE_DEVICES"),
    "torchrun-invalid-device-ordinal-h200-2.11.txt": ("gpu-not-visible", "invalid device ordinal",
                                                       "--nproc-per-node"),
    "torch-store-unresolvable-master-h200-2.11.txt": ("peer-unreachable", "nosuch.invalid",
                                                       "did not resolve to any address"),
    "torch-store-loopback-refused-h200-2.11.txt": ("peer-unreachable", "(127.0.0.1, 29613)",
                                                    "only ranks on the master's own host"),
    "nccl-no-socket-interface-h200-2.28.txt": ("no-socket-interface", "no socket interface found",
                                               "NCCL_SOCKET_IFNAME=nosuch0"),
    "torchrun-no-socket-interface-h200-2.28.txt": ("no-socket-interface", "no socket interface found",
                                                   "NCCL_SOCKET_IFNAME=nosuch0"),
    "nccl-net-ib-forced-h200-2.28.txt": ("net-plugin-none", "Failed to initialize any NET plugin", "NCCL_NET"),
    "nccl-oob-iface-missing-h200-2.28.txt": ("oob-device-not-found", "no device found matching nosuch0",
                                             "NCCL_OOB_NET_IFNAME=nosuch0"),
    "nccl-topo-file-invalid-h200-2.28.txt": ("topo-file-invalid", "XML Parse", "NCCL_TOPO_FILE"),
    # bench/gpu/launch-failures.sh
    "torchrun-rdzv-unresolvable-h200-2.11.txt": ("peer-unreachable", "nosuch.invalid", "getent ahosts"),
    "smoke-rank-missing-store-wait-h200-2.11.txt": ("rendezvous-incomplete", "rank 0 error (rendezvous)",
                                                    "/fabnet/joined/1"),
    "mpirun-executable-missing-openmpi-4.1.6.txt": ("missing-executable", "mpirun was unable to launch",
                                                    "/tmp/ntmpi/build/all_reduce_perf"),
}


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_each_fault_set_on_the_gpu_machine_is_named(name: str) -> None:
    top = check_top_cause(name, FAULTS[name])
    assert top.fix


def test_the_rank_that_never_came_is_no_other_cause() -> None:
    causes = causes_of("nccl-init-rank-missing-h200-2.28.txt")
    assert [c.id for c in causes] == ["init-unfinished"]
    assert "bootstrap waits" in causes[0].detail and causes[0].hosts == ["vm"]


def test_a_name_that_resolves_and_refuses_is_not_called_unresolved() -> None:
    # torch looks the name up for IPv6 first: a name with IPv4 addresses only warns so, then is refused.
    text = ("[W socket.cpp:764] [c10d] The IPv6 network addresses of (master1, 29500) cannot be retrieved (gai "
            "error: -5 - No address associated with hostname).\n"
            "[E socket.cpp:1019] [c10d] The client socket has failed to connect to [master1]:29500 (errno: 111 - "
            "Connection refused).\n")
    [cause] = explain([("job.log", text)]).causes
    assert cause.id == "peer-unreachable" and "resolve" not in cause.title, cause.title


def test_more_gpus_asked_of_nccl_tests_than_the_host_has() -> None:
    result = explain([("arp.txt", (SAMPLES / "all_reduce_perf-31-h200-two-gpus-asked.txt").read_text())])
    top = result.causes[0]
    assert top.id == "gpu-not-visible" and "2 GPUs asked, 1 found" in top.title, top.title


def test_nccl_tests_started_by_mpirun_without_mpi_in_its_build() -> None:
    result = explain([("arp.txt", (SAMPLES / "all_reduce_perf-32-h200-mpirun-without-mpi.txt").read_text())])
    assert result.causes[0].id == "nccl-tests-not-mpi" and "2 separate one-rank runs" in result.causes[0].title


def test_nccl_tests_json_reports() -> None:
    failed = explain([("r.json", (SAMPLES / "nccl-tests-32-h200-failed-before-results.json").read_text())])
    assert [c.id for c in failed.causes] == ["nccl-tests-failed"]
    good = explain([("r.json", (SAMPLES / "nccl-tests-32-h200-all-reduce.json").read_text())])
    assert good.causes == [] and not good.failed


def test_a_healthy_two_node_run_over_sockets_names_only_what_a_fabric_would_not_want() -> None:
    """Two ranks NCCL took for two nodes (own NCCL_HOSTID each), joined over the loopback's sockets: nothing
    failed, so explain names no failure, only that sockets carried it and that the interface was `lo`."""
    result = explain([("rank0.log", (SAMPLES / "logs/nccl-two-nodes-over-lo-h200-2.28.txt").read_text())])
    assert sorted(c.id for c in result.causes) == ["ib-not-used", "suspect-interface"]
    assert all(c.score < 50 for c in result.causes)
    [use] = result.networks
    assert (use.network, use.interfaces, use.nccl_version) == ("Socket", ["lo:127.0.0.1"], "2.28.9")


def test_the_watchdogs_progress_line_after_a_peer_died_is_no_timeout() -> None:
    """torch 2.6 on prints `failure detected by watchdog at work sequence id` for any failed collective: here
    NCCL's own error (the peer's process was killed) is the cause, and no timeout is claimed (it came 8 s into
    a 63 s timeout)."""
    causes = causes_of("torch-nccl-peer-killed-h200-2.11.txt")
    assert [c.id for c in causes] == ["connection-lost"], [(c.id, c.title) for c in causes]
    assert causes[0].addresses == ["localhost"] and "socketProgress" in causes[0].evidence[-1].text


def test_a_real_timeout_still_reads_as_one_beside_the_same_progress_line() -> None:
    """The same machine with the peer stopped (SIGSTOP), not killed: torch's `Watchdog caught collective operation
    timeout` comes first, then the same progress line as above: a timeout, in collective #204."""
    causes = causes_of("torch-nccl-watchdog-timeout-peer-stopped-h200-2.11.txt")
    assert causes[0].id == "collective-timeout", [(c.id, c.title) for c in causes]
    assert "42.047 s in ALLREDUCE (SeqNum 204)" in causes[0].detail



def test_a_rank_that_failed_on_an_nccl_error_is_not_counted_as_timed_out() -> None:
    """Rank 0's real timeout (the peer-stopped sample's first lines), and rank 1 failing the same collective on
    NCCL's `remote process exited` once rank 0 aborted, with torch's generic `Some NCCL operations have failed or
    timed out`: rank 1 did not time out, and did reach the collective."""
    timeout = (SAMPLES / "logs/torch-nccl-watchdog-timeout-peer-stopped-h200-2.11.txt").read_text().splitlines()[1:3]
    rank1 = ["[rank1]:[E1127 05:14:33.533109203 ProcessGroupNCCL.cpp:612] [Rank 1] Collective WorkNCCL(SeqNum=204, "
             "OpType=ALLREDUCE, NumelIn=67108864, NumelOut=67108864, Timeout(ms)=42000) raised the following async "
             "exception: NCCL error: remote process exited or there was a network error, NCCL version 2.28.9",
             "[rank1]:[E1127 05:14:33.533109300 ProcessGroupNCCL.cpp:681] [Rank 1] Some NCCL operations have failed "
             "or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
             "corrupted/incomplete data."]
    top = explain([("job.log", "\n".join(timeout + rank1) + "\n")]).causes[0]
    assert top.id == "collective-timeout"
    assert "Global rank 1 failed on an NCCL error instead" in top.detail and "timed out too" not in top.detail
    assert "never reported it" not in top.detail
