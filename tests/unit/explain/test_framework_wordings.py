"""`explain` on what torch.distributed, gloo, the c10d store and the OFI (aws-ofi-nccl) plugin print, in
the wordings of their releases, and NCCL's error summary as frameworks quote it.

Where each wording comes from (file, release):
- torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp: `[Rank N] Watchdog caught collective operation
  timeout: WorkNCCL(OpType=..., TensorShape=..., Timeout(ms)=...)` (1.8, no SeqNum), `WorkNCCL(SeqNum=N,
  OpType=..., NumelIn=..., NumelOut=..., Timeout(ms)=...)` (1.10 to 2.2), `[PG N Rank M]` (2.3, 2.4) and
  `[PG ID N PG GUID G(name) Rank M]` (2.5 on); the glog prefix `[E ProcessGroupNCCL.cpp:NNN]` (1.x) and
  `[rankN]:[E0612 10:00:00.123 ...]` (2.2 on); `ProcessGroupNCCL's watchdog got stuck for N seconds`
  (2.2 on, the watchdog thread hung: its own cause, not a collective timeout); `NCCL communicator was
  aborted on rank N.` (1.10 on).
- NCCL errors as torch quotes them: `NCCL error in: FILE:LINE, unhandled system error, NCCL version X`
  (1.x, NCCL <= 2.18), `torch.distributed.DistBackendError: NCCL error in: ..., unhandled system error (run
  with NCCL_DEBUG=INFO for details), NCCL version X` then `ncclSystemError: ...` and `Last error:` and the
  WARN text (2.0 on, NCCL >= 2.19); `NCCL Error 2: unhandled system error` (cupy / torch 1.0).
- torch/csrc/distributed/c10d/TCPStore*.cpp and distributed_c10d.py: `Timed out after N seconds waiting for
  clients. A/B clients joined.` (2.0 on), `Timed out initializing process group in store based barrier on
  rank: N, for key: ... (world_size=B, worker_count=A, timeout=...)` (1.x), `The client socket has timed out
  after Ns while trying to connect to (HOST, PORT).` (2.0 on).
- third_party/gloo: `[.../tcp/pair.cc:598] Connection closed by peer [ADDR]:PORT`, `Read error [ADDR]:PORT:
  Connection reset by peer`, `Timed out waiting Nms for recv operation to complete`, `[enforce fail at
  .../tcp/device.cc:83] ifa != nullptr. Unable to find address for: IFACE`.
- aws-ofi-nccl (NET/OFI): `Unable to register memory (type = 2) for device 4. RC: -22, Error: Invalid
  argument`, `OFI fi_getinfo() call failed: No data available`, `Request completed with error. RC: 103.
  Error: 4126 (Unresponsive receiver ...)`, `Could not register memory on rail 0 with flag 0`; benign at
  startup: `Could not find ncclGetVersion symbol`, `pciPath: Could not find real path`, `Error opening file:
  /sys/devices/virtual/dmi/id/product_name`.
- Locked memory outside NCCL: Open MPI's openib help text (`The OpenFabrics (openib) BTL failed to initialize
  while trying to allocate some locked memory. ...` with `Local host:` / `Memlock limit:` lines, 1.4 to 4.x),
  openib's `Failed to create a completion queue (CQ):`, UCX `ibv_create_cq(cqe=4096) failed: Cannot allocate
  memory` and, from 1.14, `... Please set max locked memory (ulimit -l) to 'unlimited'`, libfabric EFA's
  `Libfabric error: (-12) Cannot allocate memory` (threads cited on each row).
- Launcher labels (the host a cause names): srun --label `3: `, torch `[rank3]:`, pdsh/clush `gpu07: ` on
  every line or on a single NCCL line.
"""

from __future__ import annotations

import pytest

from provisioner.explain import explain

_TS = "[rank3]:[E0612 10:41:07.512331 78122 torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:632] "

# (source, log, first cause id, host the cause must name or None, text its detail must hold or "")
CASES: dict[str, tuple[str, str, str, str | None, str]] = {
    "watchdog-1.8": ("torch 1.8", "[E ProcessGroupNCCL.cpp:566] [Rank 1] Watchdog caught collective operation "
                     "timeout: WorkNCCL(OpType=ALLREDUCE, TensorShape=[1024], Timeout(ms)=1800000) ran for 1800104 "
                     "milliseconds before timing out.\n", "collective-timeout", None, "1800.1 s"),
    "watchdog-1.13": ("torch 1.13", "gpu04: [I ProcessGroupNCCL.cpp:588] [Rank 6] ProcessGroupNCCL initialization "
                      "options:NCCL_ASYNC_ERROR_HANDLING: 1, NCCL_DESYNC_DEBUG: 0, NCCL_BLOCKING_WAIT: 0, TIMEOUT(ms): "
                      "600000\ngpu04: [E ProcessGroupNCCL.cpp:821] [Rank 6] Watchdog caught collective "
                      "operation timeout: WorkNCCL(SeqNum=203, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600335 "
                      "milliseconds before timing out.\n", "collective-timeout", "gpu04", "ALLREDUCE (SeqNum 203)"),
    "watchdog-2.3": ("torch 2.3", _TS + "[PG 0 Rank 3] Watchdog caught collective operation timeout: "
                     "WorkNCCL(SeqNum=12, OpType=_ALLGATHER_BASE, NumelIn=2048, NumelOut=16384, Timeout(ms)=600000) "
                     "ran for 600046 milliseconds before timing out.\n", "collective-timeout", None, "global rank 3 "),
    "watchdog-2.5": ("torch 2.5", _TS.replace("rank3", "rank11") + "[PG ID 1 PG GUID 1(tp) Rank 3] Watchdog "
                     "caught collective operation timeout: WorkNCCL(SeqNum=40, OpType=BROADCAST, NumelIn=1, "
                     "NumelOut=1, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.\n",
                     "collective-timeout", None, "global 11 is rank 3 of process group 1"),
    "watchdog-wrapped": ("torch 2.x, wrapped", "[rank12] Watchdog caught collective operation timeout:\n"
                         "         WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600011 ms\n"
                         "         before timing out.\n", "collective-timeout", None, "global rank 12 "),
    "watchdog-stuck": ("torch 2.2", "[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] Heartbeat monitor timed "
                       "out! Process will be terminated after dumping debug info. workMetaList_.size()=1\n"
                       "[rank0]:[E ProcessGroupNCCL.cpp:1153] [PG 0 Rank 0] ProcessGroupNCCL's watchdog got stuck "
                       "for 480 seconds without making progress in monitoring enqueued collectives.\n",
                       "watchdog-hung", None, "480 s"),
    "nccl-error-1.x": ("torch 1.10, NCCL 2.10", "RuntimeError: NCCL error in: /opt/conda/conda-bld/pytorch/work/"
                       "torch/lib/c10d/ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL version 2.10.3\n"
                       "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or "
                       "device error. It can be also caused by unexpected exit of a remote peer.\n",
                       "nccl-error", None, ""),
    "nccl-error-2.x-last": ("torch 2.1, NCCL 2.19", "torch.distributed.DistBackendError: NCCL error in: ../torch/"
                            "csrc/distributed/c10d/NCCLUtils.hpp:219, unhandled system error (run with NCCL_DEBUG="
                            "INFO for details), NCCL version 2.19.3\nncclSystemError: System call (e.g. socket, "
                            "malloc) or external library call failed or device error.\nLast error:\n"
                            "socketStartConnect: Connect to 10.0.0.2<45678> failed : Software caused connection "
                            "abort\n", "peer-unreachable", None, "10.0.0.2"),
    "nccl-cuda-last": ("torch 2.1, NCCL 2.19", "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/"
                       "distributed/c10d/ProcessGroupNCCL.cpp:1275, unhandled cuda error (run with NCCL_DEBUG=INFO "
                       "for details), NCCL version 2.19.3\nncclUnhandledCudaError: Call to CUDA function failed.\n"
                       "Last error:\nCuda failure 'out of memory'\n", "cuda-failure", None, ""),
    "nccl-internal": ("torch 2.2, NCCL 2.19", "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/"
                      "distributed/c10d/NCCLUtils.hpp:219, internal error - please report this issue to the NCCL "
                      "developers, NCCL version 2.19.3\nncclInternalError: Internal check failed.\n",
                      "nccl-error", None, ""),
    "nccl-error-2": ("cupy / torch 1.0", "cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_SYSTEM_ERROR: "
                     "unhandled system error\n", "nccl-error", None, ""),
    "remote-2.14": ("torch 1.13, NCCL 2.14", "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/"
                    "ProcessGroupNCCL.cpp:1269, remote process exited or there was a network error, NCCL version "
                    "2.14.3\n", "connection-lost", None, ""),
    "aborted": ("torch 2.0", "torch.distributed.DistBackendError: NCCL communicator was aborted on rank 3. "
                "Original reason for failure was: NCCL error: remote process exited or there was a network error\n",
                "connection-lost", None, ""),
    "store-clients": ("torch 2.1", "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for "
                      "clients. 1/2 clients joined.\n", "rendezvous-incomplete", None, "1 of 2"),
    "store-barrier": ("torch 1.13", "RuntimeError: Timed out initializing process group in store based barrier on "
                      "rank: 0, for key: store_based_barrier_key:1 (world_size=4, worker_count=3, timeout=0:30:00)\n",
                      "rendezvous-incomplete", None, "3 of 4"),
    "client-socket": ("torch 2.1", "torch.distributed.DistNetworkError: The client socket has timed out after "
                      "1800s while trying to connect to (10.0.0.1, 29500).\n", "peer-unreachable", None, "10.0.0.1"),
    "gloo-closed": ("gloo", "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed "
                    "by peer [10.0.0.2]:14788\n", "connection-lost", None, "10.0.0.2"),
    "gloo-read": ("gloo", "RuntimeError: [/opt/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:575] Read error "
                  "[10.0.0.2]:38409: Connection reset by peer\n", "connection-lost", None, "10.0.0.2"),
    "gloo-timeout": ("gloo", "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed "
                     "out waiting 1800000ms for recv operation to complete\n", "connection-lost", None, ""),
    "gloo-ifname": ("gloo", "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] "
                    "ifa != nullptr. Unable to find address for: ib0\n", "no-socket-interface", None,
                    "GLOO_SOCKET_IFNAME=ib0"),
    "ofi-reg": ("aws-ofi-nccl", "ip-10-1-2-3:88:140 [4] register_rail_mr_buffer:617 NCCL WARN NET/OFI Unable to "
                "register memory (type = 2) for device 4. RC: -22, Error: Invalid argument\n", "ofi-failure",
                "ip-10-1-2-3", ""),
    "ofi-getinfo": ("aws-ofi-nccl", "ip-10-1-2-3:88:140 [0] nccl_net_ofi_create_plugin:212 NCCL WARN NET/OFI OFI "
                    "fi_getinfo() call failed: No data available\n", "ofi-failure", "ip-10-1-2-3", ""),
    "ofi-cq": ("aws-ofi-nccl", "[2026-01-01 12:08:32] node-0:194:710 [0] int cm_req_handle_error_entry(nccl_net_"
               "ofi_context_t*, fid_cq*, fi_cq_err_entry*, uint16_t):46 NCCL WARN NET/OFI Request 0x7f456c222f60 "
               "completed with error. RC: 103. Error: 4126 (Unresponsive receiver (reachable by EFA device but "
               "handshake failed))\n", "ofi-failure", "node-0", ""),
    "ofi-rail": ("aws-ofi-nccl", "node-1:77:90 [1] NCCL WARN NET/OFI Could not register memory on rail 0 with "
                 "flag 0\n", "ofi-failure", "node-1", ""),
    # users@lists.open-mpi.org archive (Open MPI 1.6, "Icreasing OFED registerable memory")
    "openib-memlock": ("Open MPI openib", "-" * 74 + "\nThe OpenFabrics (openib) BTL failed to initialize while "
                       "trying to\nallocate some locked memory.  This typically can indicate that the\nmemlock "
                       "limits are set too low.  For most HPC installations, the\nmemlock limits should be set to "
                       "\"unlimited\".  The failure occured\nhere:\n\n  Local host:    comp003.local\n  OMPI "
                       "source:   btl_openib_component.c:1200\n  Function:      ompi_free_list_init_ex_new()\n"
                       "  Device:        mlx4_0\n  Memlock limit: 65536\n\nYou may need to consult with your system "
                       "administrator to get this\nproblem fixed.\n" + "-" * 74 + "\n", "memlock-limit",
                       "comp003.local", "65536"),
    # users@lists.open-mpi.org archive (Open MPI 1.4.1 on 4096 cores, "Trouble with Memlock ... SGI ICE")
    "openib-unlimited": ("Open MPI openib", "The OpenFabrics (openib) BTL failed to initialize while trying to\n"
                         "allocate some locked memory.  This typically can indicate that the\n\n  Local host:    "
                         "r25i1n0\n  OMPI source:   btl_openib.c:169\n  Function:      ibv_create_cq()\n"
                         "  Device:        mlx4_0\n  Memlock limit: unlimited\n", "registered-memory-limit",
                         "r25i1n0", "mlx4_0"),
    # https://github.com/open-mpi/ompi/issues/4499
    "openib-cq": ("Open MPI openib", "-" * 74 + "\nFailed to create a completion queue (CQ):\n\nHostname: afispb07\n"
                  "Requested CQE: 16384\nError:    Cannot allocate memory\n\nCheck the CQE attribute.\n" + "-" * 74
                  + "\n", "memlock-limit", "afispb07", ""),
    # https://github.com/open-mpi/ompi/issues/6300
    "ucx-cq": ("UCX", "[1548304905.378218] [mpi11:4770 :0]       ib_iface.c:690  UCX  ERROR ibv_create_cq(cqe=4096) "
               "failed: Cannot allocate memory\n[mpi11:04770] pml_ucx.c:212 Error: Failed to create UCP worker\n",
               "memlock-limit", "mpi11", "PropagateResourceLimits"),
    # https://github.com/openucx/ucx/issues/8684 (UCX 1.13/1.14)
    "ucx-ulimit": ("UCX", "ib_log.c:246  UCX  ERROR mlx5_0: ibv_create_cq() failed: Cannot allocate memory. Please "
                   "set max locked memory (ulimit -l) to 'unlimited' (current: 64 kbytes)\n", "memlock-limit", None,
                   "LimitMEMLOCK"),
    # https://github.com/awslabs/awsome-distributed-ai/issues/647
    "efa-enomem": ("libfabric EFA", "Libfabric EFA provider has encountered an internal error:\n\nLibfabric error: "
                   "(-12) Cannot allocate memory\nEFA internal error: (4112) Failure to post internal receive "
                   "buffers\n", "memlock-limit", None, "ulimit -l"),
    # --- the host a launcher's label names.
    "label-pdsh-one": ("pdsh, one line", "gpu07: NCCL WARN NET/IB : Got completion from peer 10.0.0.8<4321> with "
                       "error 12, opcode 0, len 0, vendor err 129\n", "ib-completion-error", "gpu07", "10.0.0.8"),
    "label-pdsh-most": ("pdsh, a line without its label", "gpu07: [E ProcessGroupNCCL.cpp:566] [Rank 1] Watchdog "
                        "caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=600000) ran for "
                        "600104 milliseconds before timing out.\ngpu07: terminate called after throwing an instance "
                        "of 'std::runtime_error'\n  what():  NCCL communicator was aborted.\ngpu08: Fatal Python "
                        "error: Aborted\n", "collective-timeout", "gpu07", "600.104 s"),
    "label-address": ("pdsh by address", "10.0.0.7: NCCL WARN Net : Connect to 10.0.0.8<43187> failed : No route "
                      "to host\n", "peer-unreachable", "10.0.0.7", "10.0.0.8"),
    "label-srun": ("srun --label", "#  Rank  3 Group  0 Pid  4021 on      gpu09 device  1 [0x1a] A100\n"
                   "3: NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.9<0>\n"
                   "3: NCCL WARN Call to ibv_create_qp failed\n", "verbs-resource-failure", "gpu09", ""),
    "label-torch-rank": ("torch [rank3]:", "[rank3]:gpu11:4021:4188 [3] misc/socket.cc:49 NCCL WARN socketProgress: "
                         "Connection closed by remote peer gpu12<50334>\n", "connection-lost", "gpu11", "gpu12"),
}


@pytest.mark.parametrize(("source", "text", "cause_id", "host", "detail"), CASES.values(), ids=list(CASES))
def test_each_framework_wording_names_its_class(source: str, text: str, cause_id: str, host: str | None,
                                                detail: str) -> None:
    result = explain([("job.log", text)])
    assert result.failed, source
    cause = result.causes[0]
    assert cause.id == cause_id, [c.id for c in result.causes]
    if host:
        assert host in cause.hosts
    assert detail in cause.detail + " ".join(cause.settings + cause.addresses)


HEALTHY = {
    "torch-2.3": ("[rank0]:[I0612 10:00:00.1 ProcessGroupNCCL.cpp:869] [PG 0 Rank 0] ProcessGroupNCCL "
                  "initialization options: size: 8, global rank: 0, TIMEOUT(ms): 600000\n"
                  "[rank0]:[I0612 10:00:00.1 ProcessGroupNCCL.cpp:878] [PG 0 Rank 0] ProcessGroupNCCL environments: "
                  "NCCL version: 2.20.5, TORCH_NCCL_ASYNC_ERROR_HANDLING: 3\n"),
    "ofi-startup-noise": ("NCCL version 2.17.1+cuda11.8\n"
                          "algo-1:46:58 [0] configure_nvls_option:287 NCCL WARN NET/OFI Could not find "
                          "ncclGetVersion symbol\n"
                          "algo-1:46:58 [0] NCCL WARN NET/OFI pciPath: Could not find real path of /sys/devices/x\n"
                          "algo-1:46:58 [0] NCCL WARN NET/OFI Error opening file: /sys/devices/virtual/dmi/id/"
                          "product_name\n"
                          "algo-1:46:58 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)\n"
                          "algo-1:46:58 [0] NCCL INFO Using network AWS Libfabric\n"
                          "algo-1:46:58 [0] NCCL INFO comm 0x1 rank 0 nranks 8 cudaDev 0 busId 1a000 - Init "
                          "COMPLETE\n"),
}


@pytest.mark.parametrize("text", HEALTHY.values(), ids=list(HEALTHY))
def test_healthy_framework_logs_name_nothing(text: str) -> None:
    result = explain([("job.log", text)])
    assert not result.failed, [c.id for c in result.causes]


@pytest.mark.parametrize("prefix", [
    "[E ProcessGroupNCCL.cpp:563] ",                                                          # 2.0 to 2.3
    "[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] ",                                    # 2.4 on
    "[E0612 10:41:07.512331 78122 torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:632] ",    # with a thread id
])
def test_torchs_bracketed_c10_prefix_leaves_the_evidence(prefix: str) -> None:
    text = (f"[rank3]:{prefix}[PG ID 0 PG GUID 0(default_pg) Rank 3] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 "
            "milliseconds before timing out.\n")
    top = explain([("t.log", text)]).causes[0]
    assert top.id == "collective-timeout" and top.evidence[0].text.startswith("[PG ID 0"), top.evidence
    assert "global rank 3 " in top.detail, top.detail


def test_a_store_client_names_the_server_it_lost() -> None:
    text = ("[rank1]:[W1218 10:00:00.123456 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=3, "
            "addr=[gpu02]:47466, remote=[gpu01]:29500): Connection reset by peer\n")
    top = explain([("t.log", text)]).causes[0]
    assert top.id == "connection-lost" and top.addresses == ["gpu01:29500"], top
    assert "rank 0's process" in top.detail, top.detail


def test_nccls_last_error_reset_names_the_peer() -> None:
    text = ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited or "
            "there was a network error, NCCL version 2.21.5\nLast error:\n"
            "socketProgressOpt: Call to recv from 10.0.0.7<33759> failed : Connection reset by peer\n")
    top = explain([("t.log", text)]).causes[0]
    assert top.id == "connection-lost" and top.addresses == ["10.0.0.7"], top
