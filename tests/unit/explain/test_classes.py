"""`explain` per cause class, on log lines written in each NCCL release's wording (the release whose
wording a line follows is named beside it, as read from NCCL's source history), plus torch, gloo,
libibverbs, mlx5_core and `fabnet smoke --json` text."""

from __future__ import annotations

import json

import pytest

from provisioner.explain import explain
from provisioner.parsers.nccl_tests import parse_nccl_tests
from tests.unit.parsers._samples import read


def _ids(text: str) -> list[str]:
    return [c.id for c in explain([("job.log", text)]).causes]


def _first(text: str):
    return explain([("job.log", text)]).causes[0]


# (log, expected first cause id, a word its fix must contain)
CASES = {
    # 2.3 to 2.11: no peer in the completion error.
    "retry-2.7": ("gpu01:100:200 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>\n"
                  "gpu01:100:300 [0] transport/net_ib.cc:790 NCCL WARN NET/IB : Got completion with error 12, "
                  "opcode 1, len 32768, vendor err 129\n", "ib-completion-error", "PFC"),
    # 2.19: status= form.
    "prot-2.19": ("gpu01:100:300 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
                  "10.0.0.2<45678> with status=4 opcode=0 len=0 vendor err 81 (Recv) localGid ::ffff:10.0.0.1 "
                  "remoteGids ::ffff:10.0.0.2 hca mlx5_3\n", "ib-completion-error", "nvidia_peermem"),
    # newest: symbolic status.
    "len-new": ("gpu01:100:300 [0] transport/net_ib/common.cc:99 NCCL WARN NET/IB: Got completion from peer "
                "10.0.0.2<45678> with status=IBV_WC_LOC_LEN_ERR(1) opcode=IBV_WC_RECV(128) vendor_err=105 "
                "hca mlx5_0\n", "ib-completion-error", "dma-buf"),
    # 2.3 on: misc/ibvwrap.cc, bare and later with the error.
    "qp-2.4": ("gpu01:100:300 [0] misc/ibvwrap.cc:212 NCCL WARN Call to ibv_create_qp failed\n"
               "gpu01:100:300 [0] NCCL INFO transport/net_ib.cc:360 -> 2\n", "verbs-resource-failure", "ulimit"),
    "cq-2.12": ("gpu01:100:300 [0] misc/ibvwrap.cc:284 NCCL WARN Call to ibv_create_cq failed with error "
                "Invalid argument\n", "verbs-resource-failure", "max_cq"),
    "reg-2.19": ("gpu01:100:300 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_reg_mr_iova2 failed with error "
                 "Cannot allocate memory errno 12\n", "memlock-limit", "LimitMEMLOCK"),
    "memlock": ("libibverbs: Warning: RLIMIT_MEMLOCK is 65536 bytes.\n"
                "    This will severely limit memory registrations.\n", "memlock-limit", "limits.conf"),
    "ofi": ("ip-10-0-0-1:100:300 [0] NCCL WARN NET/OFI Unable to register memory (type = 2) for device 0. "
            "RC: -22, Error: Invalid argument\n", "ofi-failure", "libfabric"),
    # 2.3 to 2.1x async events; mlx5_core kernel health text.
    "fw-event": ("gpu01:100:300 [0] NCCL WARN NET/IB : Got async event : local catastrophic error\n",
                 "hca-firmware-fault", "mlxfwmanager"),
    "fw-dmesg": ("[ 1234.5678] mlx5_core 0000:3b:00.0: print_health_info:423:(pid 0): Fatal error 1 detected\n"
                 "[ 1234.5679] mlx5_core 0000:3b:00.0: mlx5_health_try_recover: health compromised - reached "
                 "miss count\n", "hca-firmware-fault", "firmware"),
    # 2.4: `Connect to X<port> failed`; 2.19 `socketStartConnect: ...`; newest lowercase.
    "refused-2.19": ("gpu01:100:300 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
                     "10.0.0.2<41231> failed : Software caused connection abort\n", "peer-unreachable", "IFNAME"),
    "refused-new": ("gpu01:100:300 [0] misc/socket.cc:700 NCCL WARN ncclSocketConnect: connect to "
                    "10.0.0.2<41231> failed : Connection refused\n", "peer-unreachable", "IFNAME"),
    # 2.3 on.
    "no-if": ("gpu01:100:100 [0] NCCL WARN NET/Socket : no interface found\n", "no-socket-interface", "IFNAME"),
    "no-ip-if": ("gpu01:100:100 [0] NCCL WARN NET/IB : No IP interface found.\n", "no-socket-interface", "ip -br"),
    "hca": ("gpu01:100:100 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_9\n"
            "gpu01:100:200 [0] NCCL INFO NET/IB : No device found.\n"
            "gpu01:100:200 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n", "ib-hca-not-found", "ibv_devinfo"),
    # 2.12: the peer named; torch's ncclRemoteError text (2.13 on).
    "closed-2.12": ("gpu01:100:300 [0] misc/socket.cc:523 NCCL WARN Net : Connection closed by remote peer "
                    "10.0.0.2<37532>\n", "connection-lost", "first failing rank"),
    "gloo": ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
             "[10.0.0.2]:14788\n", "connection-lost", "first failing rank"),
    "torch-remote": ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
                     "NCCLUtils.hpp:275, remote process exited or there was a network error, NCCL version "
                     "2.18.1\n", "connection-lost", "first failing rank"),
    "dup-2.7": ("gpu01:100:100 [1] init.cc:573 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on "
                "CUDA device 1a000\n", "duplicate-gpu", "LOCAL_RANK"),
    "cuda": ("gpu01:100:100 [0] enqueue.cc:300 NCCL WARN Cuda failure 'out of memory'\n", "cuda-failure",
             "nvidia-smi"),
}


@pytest.mark.parametrize(("text", "expected", "word"), CASES.values(), ids=list(CASES))
def test_each_class_is_named_with_matching_advice(text: str, expected: str, word: str) -> None:
    result = explain([("job.log", text)])
    assert result.failed and result.causes[0].id == expected
    assert word in result.causes[0].fix and result.causes[0].evidence


def test_completion_status_sets_the_peer_and_the_device_in_each_release_wording() -> None:
    new = _first(CASES["len-new"][0])
    assert new.title == "RDMA completion error 1 (IBV_WC_LOC_LEN_ERR) on gpu01 (mlx5_0)"
    assert new.addresses == ["10.0.0.2"]
    old = _first(CASES["retry-2.7"][0])
    assert old.title.startswith("RDMA completion error 12 (IBV_WC_RETRY_EXC_ERR)") and old.addresses == []


def test_local_protection_advice_does_not_blame_the_fabric() -> None:
    cause = _first(CASES["prot-2.19"][0])
    assert "registration" in cause.detail and "not the fabric" in cause.fix and "PFC" not in cause.fix


def test_flush_follows_the_first_error() -> None:
    text = (CASES["retry-2.7"][0] + "gpu01:100:300 [0] transport/net_ib.cc:790 NCCL WARN NET/IB : Got completion "
            "with error 5, opcode 0, len 0, vendor err 249\n")
    causes = explain([("job.log", text)]).causes
    assert [c.title.split(" (")[0] for c in causes] == ["RDMA completion error 12", "RDMA completion error 5"]
    assert "earlier error" in causes[1].fix


def test_benign_info_call_failure_is_not_a_cause() -> None:
    # NCCL 2.27 logs this at INFO level on hosts without data-direct support.
    assert _ids(read("nccl-debug-14-per-device-2.27.txt")) == []


def test_watchdog_keeps_global_and_process_group_ranks_apart() -> None:
    text = ("[rank5]:[I0101 00:00:00.1 ProcessGroupNCCL.cpp:900] [PG ID 2 PG GUID 2 Rank 1] ProcessGroupNCCL "
            "initialization options: size: 4, global rank: 5, TIMEOUT(ms): 600000\n"
            "[rank5]:[E0101 00:10:00.1 ProcessGroupNCCL.cpp:632] [PG ID 2 PG GUID 2 Rank 1] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=600000) ran for 600000 milliseconds before timing out.\n")
    cause = next(c for c in explain([("t.log", text)]).causes if c.id == "collective-timeout")
    assert cause.detail.startswith("global rank 5 (global 5 is rank 1 of process group 2) waited 600 s")
    # Without torch's [rankN]: prefix the global rank comes from the init line.
    cause = next(c for c in explain([("t.log", text.replace("[rank5]:", ""))]).causes if c.id == "collective-timeout")
    assert cause.detail.startswith("global rank 5 (global 5 is rank 1 of process group 2)")
    bare = text.splitlines()[1].replace("[rank5]:", "")
    cause = explain([("t.log", bare)]).causes[0]
    assert cause.detail.startswith("process-group rank 1 (process group 2; global ranks not in the log)")


def test_non_mpi_nccl_tests_under_mpirun_is_named() -> None:
    block = ("# nThread 1 nGpus 1 minBytes 8 maxBytes 128M step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
             "#\n# Using devices\n#  Rank  0 Group  0 Pid {pid} on {host} device  0 [0x1a] NVIDIA A100\n")
    text = block.format(pid=11, host="gpu01") + block.format(pid=12, host="gpu02")
    assert parse_nccl_tests(text).single_rank_runs == 2
    cause = _first(text)
    assert cause.id == "nccl-tests-not-mpi" and "MPI=1" in cause.fix
    assert parse_nccl_tests(read("all_reduce_perf-5.txt")).single_rank_runs == 0


def test_fragment_without_header_is_incomplete_and_rows_are_read_by_shape() -> None:
    rows = [line for line in read("all_reduce_perf-4.txt").splitlines() if line.strip()[:1].isdigit()]
    fragment = parse_nccl_tests("\n".join(rows[2:5]) + "\n")
    assert not fragment.complete and len(fragment.rows) == 3
    assert any("column header" in m for m in fragment.missing)
    footer = parse_nccl_tests("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 5.3\n")
    assert not footer.complete and footer.rows == []


def test_run_cut_before_its_largest_size_points_at_mtu() -> None:
    text = read("all_reduce_perf-4.txt")
    lines = text.splitlines()
    last_row = max(i for i, line in enumerate(lines) if line.strip()[:1].isdigit())
    cut = "\n".join(lines[: last_row - 3]) + "\n"
    assert _ids(cut) == ["mtu-blackhole"]


def test_smoke_json_findings_and_rank_output() -> None:
    data = {"schema": "fabnet/smoke/v1", "verdict": "fail", "exit_code": 2, "reason": "rank 1 failed",
            "hosts": [{"name": "gpu01", "mtu": 9000, "failed": False, "reason": None},
                      {"name": "gpu02", "mtu": 1500, "failed": True, "reason": "exit 1"}],
            "preflight": {"passed": False, "findings": [{"check": "mtu", "hosts": ["gpu02"],
                                                         "message": "MTU 1500 on gpu02, 9000 elsewhere",
                                                         "fix": "set the MTU to 9000"}],
                          "unreachable": [], "after_failure": []},
            "rank_output": {"1": CASES["refused-2.19"][0]}}
    result = explain([("smoke.json", json.dumps(data, indent=2))])
    ids = [c.id for c in result.causes]
    assert ids[0] == "smoke-preflight-mtu" and "peer-unreachable" in ids and "smoke-host-failed" in ids
    unreachable = next(c for c in result.causes if c.id == "peer-unreachable")
    assert unreachable.evidence[0].file == "smoke.json[rank 1]"


def test_healthy_multi_node_ib_log_names_nothing() -> None:
    text = ("gpu01:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:10.0.0.1<0>\n"
            "gpu01:1:2 [0] NCCL INFO Using network IB\n"
            "gpu01:1:2 [0] NCCL INFO Channel 00/0 : 0[1a000] -> 1[1a000] [send] via NET/IB/0\n"
            "gpu02:1:2 [0] NCCL INFO comm 0x1 rank 1 nranks 2 cudaDev 0 busId 1a000 - Init COMPLETE\n")
    assert _ids(text) == []


def test_smoke_rank_output_names_the_host_its_rank_ran_on() -> None:
    """A rank's output carries no host label: the run's per-rank progress says where it ran, so the
    cause found in its lines names that host (and --inventory can map it)."""
    gloo = ("RuntimeError: [enforce fail at gloo/transport/tcp/device.cc:84] ifa != nullptr. "
            "Unable to find address for: eth1\n")
    data = {"schema": "fabnet/smoke/v1", "verdict": "failed", "exit_code": 2, "reason": "gpu02 failed",
            "hosts": [], "preflight": {"findings": [], "unreachable": [], "after_failure": []},
            "progress": [{"rank": 0, "host": "gpu01"}, {"rank": 1, "host": "gpu02"}],
            "rank_output": {"0": "", "1": f"rank 1 error (rendezvous): {gloo}"}}
    interface = next(c for c in explain([("smoke.json", json.dumps(data))]).causes if c.id == "no-socket-interface")
    assert interface.hosts == ["gpu02"] and interface.evidence[0].file == "smoke.json[rank 1]"
    # Without the progress no host is guessed.
    data["progress"] = []
    interface = next(c for c in explain([("smoke.json", json.dumps(data))]).causes if c.id == "no-socket-interface")
    assert interface.hosts == []


@pytest.mark.parametrize("line", ["gpu02: Killed", "gpu02: /tmp/run.sh: line 3:  4242 Killed   python3 node.py"])
def test_a_shell_reporting_a_killed_rank_is_a_crash(line: str) -> None:
    log = f"gpu01: waiting for the other ranks\n{line}\n"  # a collected log: every line labelled
    cause = next(c for c in explain([("job.log", log)]).causes if c.id == "process-crashed")
    assert cause.hosts == ["gpu02"]


def test_killed_in_a_sentence_is_no_crash() -> None:
    assert "process-crashed" not in _ids("gpu01: started\ngpu02: Killed 3 stale files before the run\n")


def test_multi_gpu_copies_under_mpirun_are_named_with_their_ranks() -> None:
    """nccl-tests#306: two processes each ran `-g 8` alone; the second's rank list is cut at rank 4."""
    text = read("nccl-tests-15-two-8gpu-copies-cut.txt")
    assert parse_nccl_tests(text).separate_runs == 2
    cause = next(c for c in explain([("t.log", text)]).causes if c.id == "nccl-tests-not-mpi")
    assert cause.title == "nccl-tests ran as 2 separate runs (8, 5 ranks)"
    assert "one node's GPUs" in cause.detail and {"node2", "node3"} <= set(cause.hosts)
