"""`explain` per cause class across NCCL releases: each row is one wording of one class, written as NCCL
prints it (`host:pid:tid [dev] file.cc:line NCCL WARN ...`) and framed as launchers and terminals pass it
on (srun --label, timestamps, ANSI colour, a tmux pane). Each row names the release whose source prints
that wording (the format string's file at that tag of NVIDIA/nccl); a healthy log of each release
names no cause.

Format strings read at the tags (file: wording):
- transport/net_ib.cc: `NET/IB : Got completion with error %d, opcode %d, len %d, vendor err %d`
  (v2.3.7 to v2.9.9); `... from peer %s with error ...` (v2.11.4 to v2.16.5); `... vendor err %d
  (%s)%s%s%s%s` with ` localGid `/` remoteGid ` (v2.18.6, v2.19.4); `with status=%d opcode=%d len=%d`
  (v2.21.5); `NET/IB: ... hca %s` (v2.23.4, transport/net_ib.cc); `status=%s(%d) opcode=%s(%d)
  vendor_err=%u` (v2.30.7, transport/net_ib/); `NET/IB/GIN: Got completion` (v2.30.7).
- misc/ibvwrap.cc: `Call to <name> failed` (v2.3.7 on), `failed with error %s` (v2.3.7 on),
  `failed with error %s errno %d` (v2.19.4 on), `failed: %s` (v2.23.4 on), `Call to ibv_modify_qp failed
  with %d %s, on dev %s:%d, curr state ..., next state ...` (v2.26.6 on); transport/net_ib.cc
  `ibv_post_send() failed with error %s, Bad WR %p, First WR %p` (v2.11.4 on).
- async events: `NET/IB : Got async event : %s` (v2.3.7 to v2.19.4), `NET/IB : %s:%d Got async event :
  %s` (v2.21.5), `... Got async error event: %s` / `async fatal event: %s` (v2.23.4), `Got non-fatal
  async event: %s(%d)` (v2.28.9 on).
- bootstrap.cc `Bootstrap : no socket interface found` (v2.4.8 on); transport/net_socket.cc `NET/Socket :
  no interface found` (v2.3.7 on), `NET/Socket : No usable listening interface found` (v2.4.8 on);
  transport/net_ib.cc `NET/IB : No IP interface found.`; misc/socket.cc `Net : No interface found in the
  same subnet as remote address %s`.
- misc/socket.cc `Connect to %s failed : %s` (v2.4.8), `Net : Connect to %s failed : %s` (v2.11.4,
  v2.12.12), `socketPollConnect: exceeded retries (%d)` (v2.16.5), os/linux.cc `%s: connect to %s
  failed : %s` and `%s: connect to %s returned %s, exceeded error retry count after %d attempts` (v2.30.7).
- misc/socket.cc `Net : Connection closed by remote peer` (v2.3.7 to v2.11.4, the peer from v2.12.12),
  `socketProgress: Connection closed by remote peer %s` (v2.16.5 on, a host name when it resolves),
  `socketProgressOpt: Call to recv from %s failed : %s` (v2.16.5), `Call to %s %s failed` with
  `send to` (v2.26.6); proxy.cc `Proxy Call to rank %d failed (%s)` (v2.12.12), `[Proxy Service %d]
  Failed to execute operation %s from rank %d, retcode %d` (v2.12.12 on).
- init.cc `Duplicate GPU detected : rank %d and rank %d both on CUDA device %x` (v2.7.8), `%lx` (v2.11.4
  on); `Mismatched NCCL version detected : rank %d version %d rank %d version %d` (v2.23.4 on);
  ras/ras.cc `NCCL version mismatch with remote peer %s (local: %s, remote %s)` (v2.30.7);
  init.cc VERSION_STRING `NCCL version X.Y.Z+cudaA.B`, printed alone on stdout (v2.3.7 to v2.19.4)
  and as INFO.
- transport/net_ib.cc `NET/IB : Attempted to connect incompatible devices: [%d]%s:%d/%s and [%d]%s:%d/%s. ...`
  and `... merge incompatible devices ...` (v2.26.2 on; net_ib/connect.cc, net_ib/init.cc in v2.30.7).
- dev_runtime.cc `... compiled with NCCL version %d, but is running with NCCL library version %d.` (v2.29.7,
  version codes), `NCCL library is too old. This application was compiled with NCCL version %s, but is
  running with NCCL library version %s.` and `... not backwards compatible ...` (v2.30.7, X.Y.Z).
- The closed-source 2.0 to 2.2 (no public source; wording from logs in public issue threads, cited on each
  row): the level without `NCCL` (`host:pid:tid [dev] INFO ...`, `... include/socket.h:185 WARN ...`),
  `.cu`/`.h` sources, `NET : Using interface`, `NET/IB: [0] mlx4_0:1/IB`, `Using internal Network IB`,
  `3 -> 12 via NET/IB/0/GDRDMA`, `NCCL failure FILE:LINE '...'`.
- misc/argcheck.cc / core.cc ncclGetErrorString: `unhandled system error`, `unhandled cuda error`,
  `internal error` (v2.3.7 to v2.18), with ` (run with NCCL_DEBUG=INFO for details)` and `internal error -
  please report this issue to the NCCL developers` (v2.19.4 on); `remote process exited or there was a
  network error` (ncclRemoteError, v2.14.3 on).
"""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from provisioner.explain.model import Cause


def W(msg: str, host: str = "gpu01", loc: str = "transport/net_ib.cc:1230", dev: int = 0) -> str:
    """One NCCL WARN line as NCCL prints it."""
    return f"{host}:4021:4188 [{dev}] {loc} NCCL WARN {msg}\n"


def I(msg: str, host: str = "gpu01", dev: int = 0) -> str:  # noqa: E743 - NCCL's own level letter
    return f"{host}:4021:4021 [{dev}] NCCL INFO {msg}\n"


def _srun(text: str, rank: int = 1) -> str:
    return "".join(f"{rank}: {line}\n" for line in text.splitlines())


def _stamp(text: str) -> str:
    return "".join(f"[2024-03-02 11:07:{i:02d}] {line}\n" for i, line in enumerate(text.splitlines()))


def _ansi(text: str) -> str:
    return "".join(f"\x1b[33m{line}\x1b[0m\n" for line in text.splitlines())


def _tmux(text: str) -> str:
    return "".join(f"│ {line:<150} │\n" for line in text.splitlines())


_IB_UP = I("NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>")

# (release/source, log, cause id, host the cause must name or None, word its fix must hold or "")
CASES: dict[str, tuple[str, str, str, str | None, str]] = {
    # --- RDMA work-completion errors: the status decides the advice.
    "cqe-2.3": ("v2.3.7 net_ib.cc", _IB_UP + W("NET/IB : Got completion with error 12, opcode 1, len 32768, "
                                               "vendor err 129", loc="transport/net_ib.cc:798"),
                "ib-completion-error", "gpu01", "PFC"),
    "cqe-2.11": ("v2.11.4 net_ib.cc", _srun(W("NET/IB : Got completion from peer 10.0.0.2<56421> with error 12, "
                                              "opcode 0, len 0, vendor err 129", host="gpu03")),
                 "ib-completion-error", "gpu03", "PFC"),
    "cqe-2.19-prot": ("v2.19.4 net_ib.cc", W("NET/IB : Got completion from peer 10.0.0.2<56421> with error 4, "
                                             "opcode 0, len 0, vendor err 81 (Recv) localGid ::ffff:10.0.0.1 "
                                             "remoteGid ::ffff:10.0.0.2"),
                      "ib-completion-error", "gpu01", "nvidia_peermem"),
    "cqe-2.21-status": ("v2.21.5 net_ib.cc", _stamp(W("NET/IB : Got completion from peer 10.0.0.2<56421> with "
                                                      "status=13 opcode=0 len=0 vendor err 136 (Send) localGid "
                                                      "fe80::a288:c2ff:fe1a:2b3c remoteGid fe80::a288:c2ff:fe1a:2b40")),
                        "ib-completion-error", "gpu01", "peer"),
    "cqe-2.23-hca": ("v2.23.4 net_ib.cc", _ansi(W("NET/IB: Got completion from peer 10.0.0.2<56421> with status=1 "
                                                  "opcode=128 len=0 vendor err 105 (Recv) hca mlx5_2")),
                     "ib-completion-error", "gpu01", "dma-buf"),
    "cqe-2.30-symbolic": ("v2.30.7 net_ib/p2p.cc", W("NET/IB: Got completion from peer 10.0.0.2<56421> with "
                                                     "status=IBV_WC_LOC_PROT_ERR(4) opcode=IBV_WC_RDMA_WRITE(1) "
                                                     "vendor_err=81 localGid ::ffff:10.0.0.1 hca mlx5_0",
                                                     loc="transport/net_ib/p2p.cc:512"),
                          "ib-completion-error", "gpu01", "nvidia_peermem"),
    "cqe-2.30-gin": ("v2.30.7 gin", W("NET/IB/GIN: Got completion from peer 10.0.0.2<56421> with status=12 "
                                      "opcode=0 len=0 vendor err 129 (Send) hca mlx5_1"),
                     "ib-completion-error", "gpu01", "PFC"),
    "cqe-2.30-unsupported": ("v2.30.7 p2p_resiliency.cc", W("NET/IB: Unsupported completion status "
                                                            "IBV_WC_REM_ACCESS_ERR (10)"),
                             "ib-completion-error", "gpu01", "peer"),
    "cqe-tmux": ("v2.12.12 net_ib.cc in a tmux pane", _tmux(W("NET/IB : Got completion from peer 10.0.0.7<1234> "
                                                              "with error 12, opcode 1, len 0, vendor err 129")),
                 "ib-completion-error", "gpu01", "PFC"),
    # --- failed verbs calls (misc/ibvwrap.cc), by call family.
    "qp-2.3": ("v2.3.7 ibvwrap.cc", W("Call to ibv_create_qp failed", loc="misc/ibvwrap.cc:212"),
               "verbs-resource-failure", "gpu01", "max_qp"),
    "cq-2.11": ("v2.11.4 ibvwrap.cc", W("Call to ibv_create_cq failed with error Invalid argument",
                                        loc="misc/ibvwrap.cc:284"), "verbs-resource-failure", "gpu01", "max_cq"),
    "pd-2.23": ("v2.23.4 ibvwrap.cc", W("Call to ibv_alloc_pd failed: Device or resource busy",
                                        loc="misc/ibvwrap.cc:150"), "verbs-resource-failure", "gpu01", "ibv_devinfo"),
    "open-2.19": ("v2.19.4 ibvwrap.cc", W("Call to ibv_open_device failed", loc="misc/ibvwrap.cc:123"),
                  "rdma-devices-not-in-container", "gpu01", "ibv_devinfo"),
    "modify-2.19": ("v2.19.4 ibvwrap.cc", W("Call to ibv_modify_qp failed with error Connection timed out errno "
                                            "110", loc="misc/ibvwrap.cc:262"),
                    "verbs-resource-failure", "gpu01", "GID"),
    "modify-2.26": ("v2.26.6 ibvwrap.cc", W("Call to ibv_modify_qp failed with 110 Connection timed out, on dev "
                                            "mlx5_0:1, curr state INIT, next state RTR, local GID index 3, local "
                                            "GID ::ffff:10.0.0.1, remote GID ::ffff:10.0.0.2",
                                            loc="misc/ibvwrap.cc:294"),
                    "verbs-resource-failure", "gpu01", "GID"),
    "reg-dmabuf": ("v2.19.4 ibvwrap.cc", W("Call to ibv_reg_dmabuf_mr failed with error Bad address errno 14",
                                           loc="misc/ibvwrap.cc:193"), "verbs-resource-failure", "gpu01",
                   "nvidia_peermem"),
    "reg-mr-einval": ("v2.12.12 ibvwrap.cc", W("Call to ibv_reg_mr failed with error Invalid argument",
                                               loc="misc/ibvwrap.cc:173"), "verbs-resource-failure", "gpu01",
                      "nvidia_peermem"),
    "post-send": ("v2.11.4 net_ib.cc", W("ibv_post_send() failed with error Cannot allocate memory, Bad WR "
                                         "0x7f2a1c0b2e40, First WR 0x7f2a1c0b2e40"), "memlock-limit", "gpu01",
                  "memlock"),
    "mlx5dv": ("v2.28.9 mlx5dvwrap.cc", W("NET/MLX5: Call to mlx5dv_reg_dmabuf_mr failed with error Operation not "
                                          "supported", loc="misc/mlx5dvwrap.cc:80"),
               "verbs-resource-failure", "gpu01", "nvidia_peermem"),
    # --- locked memory: ENOMEM from registration, libibverbs' own warning; a CUDA OOM is not memlock.
    "reg-enomem-2.11": ("v2.11.4 ibvwrap.cc", W("Call to ibv_reg_mr failed with error Cannot allocate memory",
                                                loc="misc/ibvwrap.cc:173"), "memlock-limit", "gpu01", "ulimit -l"),
    "reg-enomem-2.19": ("v2.19.4 ibvwrap.cc", W("Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory "
                                                "errno 12", loc="misc/ibvwrap.cc:190"), "memlock-limit", "gpu01",
                        "ulimit -l"),
    "cq-enomem": ("v2.23.4 ibvwrap.cc", W("Call to ibv_create_cq failed with error Cannot allocate memory errno 12",
                                          loc="misc/ibvwrap.cc:284"), "memlock-limit", "gpu01", "ulimit -l"),
    "libibverbs": ("rdma-core libibverbs", "gpu01: libibverbs: Warning: RLIMIT_MEMLOCK is 65536 bytes.\n"
                                           "gpu01:     This will severely limit memory registrations.\n",
                   "memlock-limit", "gpu01", "limits.conf"),
    "cuda-oom": ("v2.4.8 enqueue / any", W("Cuda failure 'out of memory'", loc="transport/p2p.cc:191"),
                 "cuda-failure", "gpu01", "nvidia-smi"),
    # --- HCA faults and port events.
    "async-2.3": ("v2.3.7 net_ib.cc", W("NET/IB : Got async event : local catastrophic error"),
                  "hca-firmware-fault", "gpu01", "mlxfwmanager"),
    "async-2.21-port": ("v2.21.5 net_ib.cc", W("NET/IB : mlx5_0:1 Got async event : port error"),
                        "ib-port-event", "gpu01", "cable"),
    "async-2.23-fatal": ("v2.23.4 net_ib.cc", W("NET/IB : mlx5_1:1 async fatal event: local catastrophic error"),
                         "hca-firmware-fault", "gpu01", "mlxfwmanager"),
    "async-2.23-qp": ("v2.23.4 net_ib.cc", W("NET/IB : mlx5_1:1 async fatal event on QP (0x55d0c2a8): local "
                                             "work queue catastrophic error"), "hca-firmware-fault", "gpu01",
                      "mlxfwmanager"),
    "async-2.28-nonfatal": ("v2.28.9 net_ib.cc", W("NET/IB : mlx5_3:1 Got non-fatal async event: port error(10)"),
                            "ib-port-event", "gpu01", "cable"),
    # --- no interface matches the socket setting.
    "noif-2.3": ("v2.3.7 net_socket.cc", W("NET/Socket : no interface found", loc="transport/net_socket.cc:46"),
                 "no-socket-interface", "gpu01", "IFNAME"),
    "noif-bootstrap": ("v2.4.8 bootstrap.cc", I("NCCL_SOCKET_IFNAME set by environment to eth9")
                       + W("Bootstrap : no socket interface found", loc="bootstrap.cc:59"),
                       "no-socket-interface", "gpu01", "IFNAME"),
    "noif-listen": ("v2.4.8 net_socket.cc", W("NET/Socket : No usable listening interface found",
                                              loc="transport/net_socket.cc:60"), "no-socket-interface", "gpu01",
                    "IFNAME"),
    "noif-ib-ip": ("v2.3.7 net_ib.cc", W("NET/IB : No IP interface found."), "no-socket-interface", "gpu01",
                   "IFNAME"),
    "noif-subnet": ("v2.12.12 socket.cc", W("Net : No interface found in the same subnet as remote address "
                                            "10.1.0.5<51234>", loc="misc/socket.cc:398"),
                    "no-socket-interface", "gpu01", "IFNAME"),
    # --- peers unreachable.
    "connect-2.4": ("v2.4.8 socket.h", W("Connect to 10.0.0.2<43187> failed : No route to host",
                                         loc="include/socket.h:403"), "peer-unreachable", "gpu01", "IFNAME"),
    "connect-2.12": ("v2.12.12 socket.cc", W("Net : Connect to 10.0.0.2<43187> failed : Connection refused",
                                             loc="misc/socket.cc:456"), "peer-unreachable", "gpu01", "IFNAME"),
    "connect-2.16-retries": ("v2.16.5 socket.cc", W("socketPollConnect: exceeded retries (20000)",
                                                    loc="misc/socket.cc:518"), "peer-unreachable", "gpu01", "IFNAME"),
    "connect-2.30": ("v2.30.7 os/linux.cc", W("ncclSocketConnect: connect to 10.0.0.2<43187> failed : Network is "
                                              "unreachable", loc="os/linux.cc:276"),
                     "peer-unreachable", "gpu01", "IFNAME"),
    "connect-2.30-retries": ("v2.30.7 os/linux.cc", W("socketStartConnect: connect to 10.0.0.2<43187> returned "
                                                      "Connection timed out, exceeded error retry count after 35 "
                                                      "attempts", loc="os/linux.cc:288"),
                             "peer-unreachable", "gpu01", "IFNAME"),
    # --- a peer's process exited or its connection dropped.
    "closed-2.3": ("v2.3.7 socket.h", W("Net : Connection closed by remote peer", loc="include/socket.h:415"),
                   "connection-lost", "gpu01", "first failing rank"),
    "closed-2.16-name": ("v2.16.5 socket.cc", W("socketProgress: Connection closed by remote peer "
                                                "gpu02.cluster.local<50334>", loc="misc/socket.cc:542"),
                         "connection-lost", "gpu01", "first failing rank"),
    "reset-2.16": ("v2.16.5 socket.cc", W("socketProgressOpt: Call to recv from 10.0.0.2<50334> failed : "
                                          "Connection reset by peer", loc="misc/socket.cc:536"),
                   "connection-lost", "gpu01", "first failing rank"),
    "pipe-2.26": ("v2.26.6 socket.cc", W("socketProgressOpt: Call to send to 10.0.0.2<50334> failed : Broken pipe",
                                         loc="misc/socket.cc:60"), "connection-lost", "gpu01", "first failing rank"),
    "proxy-2.12": ("v2.12.12 proxy.cc", W("Proxy Call to rank 3 failed (Connect)", loc="proxy.cc:1009"),
                   "proxy-connection-lost", "gpu01", "rank 3"),
    "proxy-service": ("v2.19.4 proxy.cc", W("[Proxy Service 2] Failed to execute operation Connect from rank 2, "
                                            "retcode 6", loc="proxy.cc:1481"),
                      "proxy-connection-lost", "gpu01", "rank 2"),
    # --- two ranks on one GPU.
    "dup-2.7": ("v2.7.8 init.cc", _srun(W("Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1a000",
                                          loc="init.cc:573", dev=0)), "duplicate-gpu", "gpu01", "LOCAL_RANK"),
    "dup-2.19": ("v2.19.4 init.cc", W("Duplicate GPU detected : rank 3 and rank 2 both on CUDA device 3d000",
                                      host="node-a17", loc="init.cc:768"), "duplicate-gpu", "node-a17", "LOCAL_RANK"),
    # --- NCCL versions that differ between ranks.
    "version-info": ("init.cc VERSION_STRING as INFO", I("NCCL version 2.18.1+cuda12.1")
                     + I("NCCL version 2.19.3+cuda12.2", host="gpu02"), "nccl-version-mismatch", "gpu02", "version"),
    "version-bare-srun": ("v2.4.8 init.cc printf, srun --label", "0: NCCL version 2.4.8+cuda10.1\n"
                          "1: NCCL version 2.5.6+cuda10.1\n" + _srun(I("Bootstrap : Using [0]ib0:10.0.0.1<0>"), 0)
                          + _srun(I("Bootstrap : Using [0]ib0:10.0.0.2<0>", host="gpu02"), 1),
                          "nccl-version-mismatch", "gpu02", "version"),
    "version-2.23-warn": ("v2.23.4 init.cc", W("Mismatched NCCL version detected : rank 0 version 22304 rank 5 "
                                               "version 21903", loc="init.cc:880"),
                          "nccl-version-mismatch", "gpu01", "version"),
    # --- HCAs of different link layers selected together (v2.26.2 on).
    "incompatible-2.26": ("v2.26.2 net_ib.cc", W("NET/IB : Attempted to connect incompatible devices: [1]mlx5_1:1/RoCE "
                                                 "and [0]mlx5_0:1/IB. Try selecting NICs of only one link type using "
                                                 "NCCL_IB_HCA", host="gpu04", loc="transport/net_ib.cc:1337"),
                          "ib-incompatible-devices", "gpu04", "NCCL_IB_HCA"),
    "incompatible-2.30-merge": ("v2.30.7 net_ib/init.cc", _srun(W(
        "NET/IB : Attempted to merge incompatible devices: [2]mlx5_2:1/IB and [0]mlx5_0:1/RoCE. Try selecting NICs "
        "of only one link type using NCCL_IB_HCA", loc="transport/net_ib/init.cc:250"), 3),
        "ib-incompatible-devices", "gpu01", "link_layer"),
    # --- an application built against another NCCL than it loads (device API).
    "built-2.29": ("v2.29.7 dev_runtime.cc", W("NCCL library version is too old. This application was compiled with "
                                               "NCCL version 22907, but is running with NCCL library version 22803.",
                                               loc="dev_runtime.cc:1153"), "nccl-version-mismatch", "gpu01", "ldd"),
    "built-2.30": ("v2.30.7 dev_runtime.cc", W("NCCL library is too old. This application was compiled with NCCL "
                                               "version 2.30.7, but is running with NCCL library version 2.29.7.",
                                               loc="dev_runtime.cc:1428"), "nccl-version-mismatch", "gpu01", "ldd"),
    "built-2.30-compat": ("v2.30.7 dev_runtime.cc", W("NCCL library is not backwards compatible. This application "
                                                      "was compiled with NCCL version 2.27.3, but is running with "
                                                      "NCCL library version 2.30.7.", loc="dev_runtime.cc:1444"),
                          "nccl-version-mismatch", "gpu01", "rebuild"),
    # --- the closed-source 2.0 to 2.2: the level without `NCCL`, `.cu` / `.h` sources.
    # https://github.com/NVIDIA/nccl/issues/111 (2.0; the reporter masked the host)
    "legacy-2.0-connect": ("2.0 include/socket.h", "*server name* [0] include/socket.h:185 WARN Call to connect "
                           "failed : Connection refused\nNCCL failure *MyProgram*.cu:110 'unhandled system error'\n",
                           "peer-unreachable", None, "IFNAME"),
    # https://github.com/horovod/horovod/issues/234 (2018-04, NCCL 2.1)
    "legacy-2.1-closed": ("2.1 include/socket.h", "ichost103:15819:15981 [1] include/socket.h:196 WARN Connection "
                          "closed by remote peer\nichost103:15819:15981 [1] INFO transport/net_ib.cu:461 -> 2\n"
                          "ichost103:15819:15981 [1] INFO include/net.h:29 -> 2 [Net]\n",
                          "connection-lost", "ichost103", "first failing rank"),
    # https://github.com/horovod/horovod/issues/147 (2018, NCCL 2.1/2.2)
    "legacy-2.2-cqe": ("2.2 transport/net_ib.cu", "gpu5:6252:6325 [0] transport/net_ib.cu:781 WARN NET/IB : Got "
                       "completion with error 12, opcode 1, len 0, vendor err 129\n", "ib-completion-error", "gpu5",
                       "PFC"),
    # https://github.com/horovod/horovod/issues/1651 (2.3/2.4 binaries still built .cu sources)
    "legacy-cu-qp": ("2.3/2.4 misc/ibvwrap.cu", "ta1-1:2712:2824 [0] misc/ibvwrap.cu:280 NCCL WARN Call to "
                     "ibv_create_qp failed\nta1-1:2712:2824 [0] NCCL INFO transport/net_ib.cu:371 -> 2\n",
                     "verbs-resource-failure", "ta1-1", "max_qp"),
    "version-2.30-ras": ("v2.30.7 ras/ras.cc", W("NCCL version mismatch with remote peer 10.0.0.2<28028> (local: "
                                                 "2.30.7, remote 2.28.9)", loc="ras/ras.cc:415"),
                         "nccl-version-mismatch", "gpu01", "version"),
}


def _by_id(text: str, cause_id: str) -> Cause:
    result = explain([("job.log", text)])
    assert result.failed, "a failure log must name a cause (exit 2)"
    found = [c for c in result.causes if c.id == cause_id]
    assert found, f"{cause_id} not among {[c.id for c in result.causes]}"
    return found[0]


@pytest.mark.parametrize(("source", "text", "cause_id", "host", "word"), CASES.values(), ids=list(CASES))
def test_each_release_wording_names_its_class(source: str, text: str, cause_id: str, host: str | None,
                                              word: str) -> None:
    cause = _by_id(text, cause_id)
    assert explain([("job.log", text)]).causes[0].id == cause_id, source
    if host:
        assert host in cause.hosts
    assert word in cause.fix and cause.evidence


def test_completion_advice_follows_the_status_class() -> None:
    prot = _by_id(CASES["cqe-2.30-symbolic"][1], "ib-completion-error")
    assert "(IBV_WC_LOC_PROT_ERR)" in prot.title and "not the fabric" in prot.fix and "PFC" not in prot.fix
    retry = _by_id(CASES["cqe-2.3"][1], "ib-completion-error")
    assert "RETRY_EXC" in retry.title and "nvidia_peermem" not in retry.fix
    hca = _by_id(CASES["cqe-2.23-hca"][1], "ib-completion-error")
    assert hca.title.endswith("on gpu01 (mlx5_2)") and hca.addresses == ["10.0.0.2"]


def test_a_cuda_out_of_memory_is_not_the_memlock_limit() -> None:
    ids = [c.id for c in explain([("job.log", CASES["cuda-oom"][1])]).causes]
    assert "memlock-limit" not in ids


def test_duplicate_gpu_names_both_ranks() -> None:
    assert "ranks 2, 3 share CUDA device 3d000" in _by_id(CASES["dup-2.19"][1], "duplicate-gpu").detail


def test_version_mismatch_names_both_versions() -> None:
    assert "2.23.4" in _by_id(CASES["version-2.23-warn"][1], "nccl-version-mismatch").detail
    assert "2.19.3" in _by_id(CASES["version-2.23-warn"][1], "nccl-version-mismatch").detail
    ras = _by_id(CASES["version-2.30-ras"][1], "nccl-version-mismatch")
    assert "2.30.7" in ras.detail and "2.28.9" in ras.detail and "10.0.0.2" in ras.addresses


def test_a_peer_named_by_host_name_is_kept() -> None:
    assert _by_id(CASES["closed-2.16-name"][1], "connection-lost").addresses == ["gpu02.cluster.local"]


# Healthy multi-node runs in each release's INFO wording: no cause, exit 0.
HEALTHY = {
    "2.3": ("NCCL version 2.3.7+cuda10.0\n"
            + I("NET/Socket : Using [0]ib0:10.0.0.1<0>") + I("NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>")
            + I("Ring 00 : 0 -> 1 [send] via NET/IB/0") + I("Ring 00 : 1 -> 0 [receive] via NET/IB/0", host="gpu02")
            + I("Launch mode Parallel")),
    "2.7": (I("NCCL version 2.7.8+cuda11.0") + I("Bootstrap : Using [0]ib0:10.0.0.1<0>")
            + I("NET/Plugin : No plugin found (libnccl-net.so), using internal implementation")
            + I("NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>") + I("Using network IB")
            + I("Channel 00/02 :    0   1") + I("Channel 00 : 0[1a000] -> 1[1a000] [send] via NET/IB/0/GDRDMA")
            + I("comm 0x55d2e4a0 rank 0 nranks 2 cudaDev 0 busId 1a000 - Init COMPLETE")),
    "2.12": (I("NCCL version 2.12.12+cuda11.7") + I("NCCL_SOCKET_IFNAME set by environment to ib0")
             + I("NET/Plugin : Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such "
                 "file or directory.") + I("NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB ib0:10.0.0.1<0>")
             + I("Using network IB") + I("Call to connect returned Connection refused, retrying")
             + I("Channel 00/0 : 0[1a000] -> 1[1a000] [send] via NET/IB/0/GDRDMA")
             + I("comm 0x55d2e4a0 rank 0 nranks 2 cudaDev 0 busId 1a000 - Init COMPLETE")),
    "2.19": ("NCCL version 2.19.3+cuda12.3\n" + I("cudaDriverVersion 12030")
             + I("Bootstrap : Using ib0:10.0.0.1<0>") + I("Failed to open libibverbs.so[.1]", host="gpu09")
             + I("NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/IB [RO]; OOB ib0:10.0.0.1<0>")
             + I("Using non-device net plugin version 0") + I("Using network IB")
             + I("Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA")
             + I("comm 0x5f8e rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 18000 commId 0x4b1c - Init COMPLETE")),
    "2.26": (I("NCCL version 2.26.6+cuda12.8") + I("NET/IB : GPU Direct RDMA (nvidia-peermem) enabled for HCA 0 "
                                                   "'mlx5_0")
             + I("Call to ibv_modify_qp failed with 110 Connection timed out, on dev mlx5_0:1, curr state INIT, "
                 "next state RTR, local GID index 3, local GID ::ffff:10.0.0.1, remote GID ::ffff:10.0.0.2, "
                 "retrying 1/3 after 1000 msec of sleep")
             + I("NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.0.0.1<0>") + I("Using network IB")
             + I("Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA")
             + I("ncclCommInitRankConfig comm 0x5f8e rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 18000 commId "
                 "0x4b1c - Init COMPLETE")),
}


# https://github.com/horovod/horovod/issues/489 (NCCL 2.2, 16 ranks; the thread cuts the version line short:
# written here as that release prints it)
HEALTHY["2.2"] = ("nmyjs-202-75:24499:24701 [0] INFO NET : Using interface eth0:10.141.202.75<0>\n"
                  "nmyjs-202-75:24499:24701 [0] INFO NET/IB : Using interface eth0 for sideband communication\n"
                  "nmyjs-202-75:24499:24701 [0] INFO NET/IB: [0] mlx4_0:1/IB\n"
                  "nmyjs-202-75:24499:24701 [0] INFO Using internal Network IB\n"
                  "nmyjs-202-75:24499:24701 [0] INFO Using NCCL Low-latency algorithm for sizes below 16384\n"
                  "nmyjs-202-75:24499:24701 [0] INFO NET/Socket : 3 interfaces found\n"
                  "NCCL version 2.2.13+cuda9.0\n"
                  "nmyjs-202-75:24499:24701 [0] INFO comm 0x55d07fb87c10 rank 0 nranks 16\n"
                  "nmyjs-202-75:24499:24701 [0] INFO CUDA Dev 0, IB Ports : mlx4_0/1(PIX)\n"
                  # https://github.com/NVIDIA/nccl/issues/133 (2018-07)
                  "CY4SCH102501002:6213:6213 [4] INFO 3 -> 12 via NET/IB/0/GDRDMA\n")


def test_a_2_2_log_is_read_as_nccl() -> None:
    [use] = explain([("job.log", HEALTHY["2.2"])]).networks
    assert (use.nccl_version, use.network) == ("2.2.13", "IB")
    assert use.devices == ["mlx4_0:1/IB"] and "eth0:10.141.202.75" in use.interfaces
    assert use.hosts == ["nmyjs-202-75", "CY4SCH102501002"]


def test_other_loggers_info_lines_are_not_nccl() -> None:
    text = "INFO:tensorflow:Running local_init_op.\n[0] INFO starting epoch 1\n2018-01-01 12:00:00 INFO WARN x\n"
    assert explain([("job.log", text)]).networks == []


@pytest.mark.parametrize("text", HEALTHY.values(), ids=list(HEALTHY))
def test_a_healthy_log_of_each_release_names_nothing(text: str) -> None:
    result = explain([("job.log", text)])
    assert not result.failed, [c.id for c in result.causes]
    assert result.networks and result.networks[0].nccl_version is not None
