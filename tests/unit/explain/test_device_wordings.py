"""`explain` on HCA async events, failed queue-pair transitions, message-size mismatches and GPU/CUDA failures,
in the wordings of the releases and tools that print them. Each row is verbatim log text (NCCL's prefix
`host:pid:tid [dev] file.cc:line NCCL WARN`) and the cause it must name.

Where each wording comes from (NVIDIA/nccl at the tag, file: format string):
- transport/net_ib.cc: `NET/IB : Got async event : %s` (v2.3.7 to v2.19.4: every event but communication
  established, `GID table change` and `port active` included), `NET/IB : %s:%d Got async event : %s`
  (v2.21.5), `%s:%d Got async error event: %s` and `%s:%d async fatal event on QP (%p): %s` (v2.23.4),
  `%s:%d unknown event type (%d)` (v2.23.4 on; 18 is IBV_EVENT_GID_CHANGE), `%s:%d Got non-fatal async event:
  %s(%d)` (v2.28.9), `%s:%d GID table changed` (v2.29.2 on). Event names: libibverbs ibv_event_type_str.
- misc/ibvwrap.cc: `Call to ibv_modify_qp failed with error %s` (v2.12.12), `... errno %d` (v2.19.4), `Call to
  ibv_modify_qp failed with %d %s, on dev %s:%d, curr state %s, next state %s, local GID index %d, ...` (v2.26.6).
- bootstrap.cc `Message truncated : received %d bytes instead of %d` (v2.4.8 on); transport/net_socket.cc
  `NET/Socket : message truncated : receiving %d bytes instead of %d` (v2.7.8), `NET/Socket : peer %s message
  truncated : receiving %d bytes instead of %d. If you believe your socket network is in healthy state, \\`
  + continuation (v2.12.12 on; the line continuation leaves the indentation in the message).
- include/checks.h `Cuda failure '%s'` (every release), `Cuda failure %d '%s'` (v2.19.4 on); transport/p2p.cc
  `failed to open CUDA IPC handle : %d %s`; graph/paths.cc `P2P is disabled between NVLINK connected GPUs %d
  and %d. ...` (v2.12.7 on). nccl-tests common.cu: `%s: Test CUDA failure %s:%d '%s'`, `%s: Test NCCL failure
  %s:%d '%s'`, ` .. %s pid %d: Test failure %s:%d`. Real logs are cited on their rows.
"""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from provisioner.explain.model import Cause


def W(msg: str, host: str = "gpu01", loc: str = "transport/net_ib.cc:1230", dev: int = 0) -> str:
    return f"{host}:4021:4188 [{dev}] {loc} NCCL WARN {msg}\n"


def I(msg: str, host: str = "gpu01") -> str:  # noqa: E743 - NCCL's own level letter
    return f"{host}:4021:4021 [0] NCCL INFO {msg}\n"


_QP = "misc/ibvwrap.cc:294"
_HEALTHY_TAIL = (I("NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.0.0.1<0>") + I("Using network IB")
                 + I("Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA")
                 + I("comm 0x5f8e rank 0 nranks 16 cudaDev 0 busId 18000 - Init COMPLETE"))

# (source, log, cause id, host the cause must name or None, text its detail/fix/settings must hold)
CASES: dict[str, tuple[str, str, str, str | None, str]] = {
    # --- HCA async events: a port that went down is named with its HCA:port and host.
    "port-2.19": ("v2.19.4 net_ib.cc", W("NET/IB : Got async event : port error", host="gpu05"),
                  "ib-port-event", "gpu05", "port error"),
    "port-2.23": ("v2.23.4 net_ib.cc", W("NET/IB : mlx5_3:1 Got async error event: port error", host="gpu06"),
                  "ib-port-event", "gpu06", "mlx5_3:1 on gpu06"),
    "port-flap-2.28": ("v2.28.9 net_ib.cc", W("NET/IB : mlx5_0:1 Got non-fatal async event: port error(10)")
                       + W("NET/IB : mlx5_0:1 Got non-fatal async event: port active(9)"),
                       "ib-port-event", "gpu01", "came back (a flap) on mlx5_0:1"),
    "pathmig-2.23": ("v2.23.4 net_ib.cc", W("NET/IB : mlx5_2:1 Got async error event: path migration request error"),
                     "ib-port-event", "gpu01", "path migration request error"),
    "catastrophic-2.21": ("v2.21.5 net_ib.cc", W("NET/IB : mlx5_4:1 Got async event : local catastrophic error"),
                          "hca-firmware-fault", "gpu01", "mlx5_4"),
    "qp-access-2.23": ("v2.23.4 net_ib.cc", W("NET/IB : mlx5_1:1 async fatal event on QP (0x55d0c2a8): local access "
                                              "violation work queue error"),
                       "ib-queue-error", "gpu01", "nvidia_peermem"),
    "cq-2.23": ("v2.23.4 net_ib.cc", W("NET/IB : mlx5_1:1 async fatal event on CQ (0x55d0c2b0): CQ error"),
                "ib-queue-error", "gpu01", "CQ error (mlx5_1:1 on gpu01)"),
    # --- failed queue-pair transitions: the advice follows the errno.
    "rtr-110-2.26": ("v2.26.6 ibvwrap.cc", W("Call to ibv_modify_qp failed with 110 Connection timed out, on dev "
                                             "mlx5_0:1, curr state INIT, next state RTR, local GID index 3, local GID "
                                             "::ffff:10.0.0.1, remote GID ::ffff:10.1.0.2", loc=_QP),
                     "verbs-resource-failure", "gpu01", "NCCL_IB_GID_INDEX=3"),
    "rtr-110-2.19": ("v2.19.4 ibvwrap.cc", W("Call to ibv_modify_qp failed with error Connection timed out errno 110",
                                             loc="misc/ibvwrap.cc:262"), "verbs-resource-failure", "gpu01", "ARP/ND"),
    "rtr-22-2.12": ("v2.12.12 ibvwrap.cc", W("Call to ibv_modify_qp failed with error Invalid argument",
                                             loc="misc/ibvwrap.cc:262"),
                    "verbs-resource-failure", "gpu01", "active_mtu"),
    "rtr-22-2.26": ("v2.26.6 ibvwrap.cc", W("Call to ibv_modify_qp failed with 22 Invalid argument, on dev mlx5_2:1, "
                                            "curr state INIT, next state RTR, local GID index 7, local GID "
                                            "fe80::a288:c2ff:fe1a:2b3c, remote GID ::ffff:10.0.0.2", loc=_QP),
                    "verbs-resource-failure", "gpu01", "empty or absent"),
    "rtr-101": ("v2.19.4 ibvwrap.cc", W("Call to ibv_modify_qp failed with error Network is unreachable errno 101",
                                        loc="misc/ibvwrap.cc:262"), "verbs-resource-failure", "gpu01", "ip route get"),
    # --- ranks disagreeing on a message's size.
    "truncated-boot": ("v2.12.12 bootstrap.cc", W("Message truncated : received 2048 bytes instead of 4",
                                                  loc="bootstrap.cc:68"),
                       "message-size-mismatch", "gpu01", "NCCL_PROTO"),
    "truncated-socket-2.7": ("v2.7.8 net_socket.cc", W("NET/Socket : message truncated : receiving 1048576 bytes "
                                                       "instead of 524288", loc="transport/net_socket.cc:414"),
                             "message-size-mismatch", "gpu01", "1048576 bytes for 524288"),
    "truncated-socket-2.19": ("v2.19.4 net_socket.cc", W("NET/Socket : peer 10.0.0.2<53411> message truncated : "
                                                         "receiving 262144 bytes instead of 65536. If you believe your "
                                                         "socket network is in healthy state,           there may be a "
                                                         "mismatch in collective sizes or environment settings (e.g. "
                                                         "NCCL_PROTO, NCCL_ALGO) between ranks",
                                                         loc="transport/net_socket.cc:485"),
                              "message-size-mismatch", "gpu01", "10.0.0.2"),
    # --- GPU / CUDA failures: named as such, not as the network.
    # https://github.com/NVIDIA/nccl-tests/issues/324 (NCCL 2.2x, 10 x L40S)
    "p2p-711": ("nccl-tests#324", "[2025-06-20 02:14:03] ubuntu:33207:33207 [0] allocator.cc:79 NCCL WARN Cuda "
                "failure 711 'peer mapping resources exhausted'\nubuntu: Test NCCL failure common.cu:1005 'unhandled "
                "cuda error (run with NCCL_DEBUG=INFO for details) / '\n", "gpu-p2p-failure", "ubuntu",
                "NCCL_P2P_DISABLE"),
    # https://github.com/ray-project/ray_lightning/issues/24 (NCCL 2.7.8)
    "p2p-ipc-2.7": ("ray_lightning#24", "(pid=909608) z-pc:909608:910337 [0] transport/p2p.cc:238 NCCL WARN failed to "
                    "open CUDA IPC handle : 217 peer access is not supported between these two devices\n(pid=909597) "
                    "RuntimeError: NCCL error in: /opt/conda/conda-bld/pytorch_1603729062494/work/torch/lib/c10d/"
                    "ProcessGroupNCCL.cpp:784, unhandled cuda error, NCCL version 2.7.8\n",
                    "gpu-p2p-failure", "z-pc", "ACS"),
    "p2p-nvlink-disabled": ("v2.12.7 paths.cc", W("P2P is disabled between NVLINK connected GPUs 1 and 0. This should "
                                                  "not be the case given their connectivity, and is probably due to a "
                                                  "hardware issue. If you still want to proceed, you can set "
                                                  "NCCL_IGNORE_DISABLED_P2P=1.", loc="graph/paths.cc:630"),
                            "gpu-p2p-failure", "gpu01", "GPUs 1 and 0"),
    # https://github.com/NVIDIA/nccl-tests/issues/338 (one H20 per node)
    "fabric-802": ("nccl-tests#338", "# Using devices\ngpu: Test CUDA failure common.cu:1030 'system not yet "
                   "initialized'\n .. gpu pid 3018: Test failure common.cu:937\n", "gpu-fabric-manager", "gpu",
                   "nvidia-fabricmanager"),
    # https://github.com/NVIDIA/nccl/issues/1705 (H100, NVLS setup)
    "fabric-nvls": ("nccl#1705", "[2025-05-10 23:09:41] bm-h100-02:630335:630409 [2] transport/nvls.cc:254 NCCL WARN "
                    "Cuda failure 1 'invalid argument'\nbm-h100-02:630335:630410 [3] NCCL INFO transport/nvls.cc:409 "
                    "-> 1\n", "gpu-fabric-manager", "bm-h100-02", "NCCL_NVLS_ENABLE=0"),
    # https://github.com/NVIDIA/nccl/issues/1029 (k8s pods, pdsh-style labels)
    "driver-init": ("nccl#1029", "rdma-test-gpu-worker-1: rdma-test-gpu-worker-1:2918:4483 [4] init.cc:263 NCCL WARN "
                    "Cuda failure 'initialization error'\n", "cuda-driver", "rdma-test-gpu-worker-1", "nvidia-smi"),
    # https://github.com/scitix/sichek/issues/51 (the thread wraps the line; written as nccl-tests prints it)
    "driver-busy": ("sichek#51", "node-17: Test CUDA failure common.cu:1007 'CUDA-capable device(s) is/are busy or "
                    "unavailable'\n .. node-17 pid 5120: Test failure common.cu:937\n", "cuda-driver", "node-17",
                    "Compute Mode"),
    "oom-2.19": ("v2.19.4 checks.h", W("Cuda failure 2 'out of memory'", loc="include/alloc.h:125"),
                 "cuda-failure", "gpu01", "NCCL_BUFFSIZE"),
    "oom-torch": ("torch 2.x", "[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 2 "
                  "has a total capacity of 79.11 GiB of which 1.06 GiB is free.\n", "cuda-failure", None, "batch"),
    # https://github.com/NVIDIA/nccl/issues/629 (NCCL 2.8, nccl-tests)
    "illegal-2.8": ("nccl#629", "A03-R28-I49-2-6000166:104934:104934 [1] init.cc:204 NCCL WARN Cuda failure 'an "
                    "illegal memory access was encountered'\nA03-R28-I49-2-6000166: Test NCCL failure common.cu:497 "
                    "'unhandled cuda error'\n .. A03-R28-I49-2-6000166 pid 104934: Test failure common.cu:587\n",
                    "cuda-failure", "A03-R28-I49-2-6000166", "CUDA_LAUNCH_BLOCKING"),
    # https://github.com/vllm-project/vllm/issues/4108 (torch watchdog quoting the CUDA error)
    "illegal-watchdog": ("vllm#4108", "[E ProcessGroupNCCL.cpp:916] [Rank 0] NCCL watchdog thread terminated with "
                         "exception: CUDA error: an illegal memory access was encountered\n", "cuda-failure", None,
                         "compute-sanitizer"),
    "xid-79": ("kernel NVRM", "gpu09: [ 1843.308145] NVRM: Xid (PCI:0000:44:00): 79, pid=2231, GPU has fallen off the "
               "bus.\ngpu09: NCCL WARN Cuda failure 'unspecified launch failure'\n", "gpu-hardware-fault", "gpu09",
               "Xid 79"),
    # https://github.com/NVIDIA/NVSentinel/issues/155 (fallen off the bus without an Xid)
    "fallen-no-xid": ("NVSentinel#155", "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
                      "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
                      "               NVRM: fallen off the bus and is not responding to commands.\n",
                      "gpu-hardware-fault", None, "nvidia-smi -r"),
    "ecc-torch": ("torch", "RuntimeError: CUDA error: uncorrectable ECC error encountered\n", "gpu-hardware-fault",
                  None, "ROW_REMAPPER"),
    "unhandled-only": ("torch 1.7, NCCL 2.7.8", "RuntimeError: NCCL error in: /opt/conda/conda-bld/pytorch/work/torch/"
                       "lib/c10d/ProcessGroupNCCL.cpp:784, unhandled cuda error, NCCL version 2.7.8\n",
                       "cuda-failure", None, "not the network"),
}


def _first(text: str) -> Cause:
    result = explain([("job.log", text)])
    assert result.failed, "a failure log must name a cause (exit 2)"
    return result.causes[0]


@pytest.mark.parametrize(("source", "text", "cause_id", "host", "word"), CASES.values(), ids=list(CASES))
def test_each_wording_names_its_class(source: str, text: str, cause_id: str, host: str | None, word: str) -> None:
    cause = _first(text)
    assert cause.id == cause_id, (source, [c.id for c in explain([("job.log", text)]).causes])
    if host:
        assert host in cause.hosts
    assert word in " ".join([cause.detail, cause.fix, *cause.settings, *cause.addresses, cause.title])
    assert cause.evidence


def test_a_gpu_failure_outranks_the_network_symptoms_after_it() -> None:
    text = (W("Cuda failure 'out of memory'", loc="enqueue.cc:300")
            + W("socketProgress: Connection closed by remote peer gpu02<50334>", host="gpu02", loc="misc/socket.cc:49"))
    causes = [c.id for c in explain([("job.log", text)]).causes]
    assert causes[0] == "cuda-failure" and "connection-lost" in causes


def test_a_gid_change_beside_a_failed_transition_is_named_in_its_detail() -> None:
    text = (W("NET/IB : mlx5_0:1 GID table changed")
            + W("Call to ibv_modify_qp failed with 110 Connection timed out, on dev mlx5_0:1, curr state INIT, next "
                "state RTR, local GID index 3, local GID ::ffff:10.0.0.1, remote GID ::ffff:10.0.0.2", loc=_QP))
    cause = _first(text)
    assert cause.id == "verbs-resource-failure" and "GID table changed" in cause.detail
    assert any("GID table changed" in e.text for e in cause.evidence)


def test_the_errno_advice_differs() -> None:
    timed_out, invalid = _first(CASES["rtr-110-2.19"][1]), _first(CASES["rtr-22-2.12"][1])
    assert "timed out" in timed_out.fix and "active_mtu" not in timed_out.fix
    assert "active_mtu" in invalid.fix and "ARP" not in invalid.fix


def test_a_port_error_alone_is_no_flap() -> None:
    assert "flap" not in _first(CASES["port-2.23"][1]).detail


# Benign events and healthy runs: no cause, exit 0.
HEALTHY = {
    "gid-change-2.19": ("NCCL version 2.19.3+cuda12.3\n" + W("NET/IB : Got async event : GID table change")
                        + _HEALTHY_TAIL),
    "gid-changed-2.29": ("NCCL version 2.29.2+cuda12.9\n" + W("NET/IB : mlx5_0:1 GID table changed") + _HEALTHY_TAIL),
    "gid-unknown-2.23": ("NCCL version 2.23.4+cuda12.6\n" + W("NET/IB : mlx5_0:1 unknown event type (18)")
                         + _HEALTHY_TAIL),
    "port-active-2.12": ("NCCL version 2.12.12+cuda11.7\n" + W("NET/IB : Got async event : port active")
                         + _HEALTHY_TAIL),
    "sm-lid-2.28": ("NCCL version 2.28.9+cuda12.9\n" + W("NET/IB : mlx5_0:1 Got non-fatal async event: LID change(11)")
                    + W("NET/IB : mlx5_0:1 Got non-fatal async event: SM change(13)")
                    + W("NET/IB : mlx5_0:1 Got non-fatal async event: client reregistration(17)") + _HEALTHY_TAIL),
    # include/checks.h CUDACHECKIGNORE (v2.12.12 on): an ignored CUDA error is logged at INFO.
    "cuda-ignored-info": ("NCCL version 2.19.3+cuda12.3\n" + I("misc/cudawrap.cc:188 Cuda failure 801 'operation not "
                                                              "supported'") + _HEALTHY_TAIL),
}


@pytest.mark.parametrize("text", HEALTHY.values(), ids=list(HEALTHY))
def test_benign_events_name_nothing(text: str) -> None:
    result = explain([("job.log", text)])
    assert not result.failed, [c.id for c in result.causes]


_TABLE = ("# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
          "validation: 1 graph: 0\n#\n# Using devices\n"
          "#  Rank  0 Group  0 Pid   4021 on      gpu01 device  0 [0x1a] NVIDIA A100-SXM4-80GB\n"
          "#  Rank  1 Group  0 Pid   4022 on      gpu02 device  0 [0x1a] NVIDIA A100-SXM4-80GB\n#\n"
          "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
          "busbw #wrong\n"
          "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  "
          "(GB/s)\n"
          "           8             2     float     sum      -1    30.12    0.00    0.00      0    29.80    0.00    "
          "0.00      0\n")


def test_an_nccl_tests_failure_names_the_error_it_quotes_after_its_cause() -> None:
    text = (_TABLE + W("Cuda failure 'out of memory'", loc="enqueue.cc:300")
            + "gpu01: Test NCCL failure common.cu:1005 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) "
              "/ '\n"
            " .. gpu01 pid 4021: Test failure common.cu:891\n")
    causes = explain([("job.log", text)]).causes
    assert [c.id for c in causes][:2] == ["cuda-failure", "nccl-tests-failed"]
    assert "'unhandled cuda error'" in causes[1].detail and causes[1].hosts == ["gpu01"]


def test_an_nccl_tests_failure_alone_is_still_named() -> None:
    text = _TABLE + "gpu02: Test NCCL failure common.cu:1005 'unhandled system error (run with NCCL_DEBUG=INFO for " \
                    "details) / '\n"
    cause = _first(text)
    assert cause.id == "nccl-tests-failed" and cause.hosts == ["gpu02"] and "unhandled system error" in cause.detail


def test_out_of_bounds_values_failed_is_named() -> None:
    text = _TABLE + "# Out of bounds values : 3 FAILED\n# Avg bus bandwidth    : 0.00 \n#\n"
    assert _first(text).id == "nccl-tests-out-of-bounds"
