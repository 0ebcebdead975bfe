"""`explain` on a third set of field logs (tests/samples/logs/, sources in tests/samples/INDEX.md): connection
failures in every NCCL wording from 2.1 to 2.2x (a link-local IPv6 peer with its zone, a loopback address a
peer published, `Call to connect timeout`, `Call to recv from X failed`), torch's rendezvous store unreachable
(1.10 to 2.5 wordings) or never given rank 0's NCCL id, completion errors pasted through markdown inline code,
CUDA, shared-memory and OFI failures behind Ray, DeepSpeed, pdsh and rank-tag prefixes, a network plugin's
failure quoted alone on its line, and the completion errors rdma-core's mlx5 provider prints itself."""

from __future__ import annotations

from tests.unit.explain._field import causes_of, table

# file -> (the top cause's id, text its first evidence line starts with, text its title/detail/fix/settings hold)
CASES: dict[str, tuple[str, str, str]] = {
    # A backtick opening markdown's inline code is no part of the host's name.
    "nccl-completion-status5-after-12-backtick-1.txt": ("ib-completion-error", "hostname-test:984:1357 [4]",
                                                        "(IBV_WC_RETRY_EXC_ERR) on hostname-test"),
    "nccl-completion-status12-ipv6-gid-2.txt": ("ib-completion-error", "kp-ddp-worker-0:3468:3905 [4] ib_plugin.c",
                                                "towards 10.216.210.236"),
    "nccl-completion-error-4-link-local-peer-3.txt": ("ib-completion-error", "error log H100-2:19989:20082",
                                                      "IBV_WC_LOC_PROT_ERR) on H100-2"),
    "torch-last-error-no-route-1.txt": ("peer-unreachable", "socketStartConnect: Connect to 192.168.19.14",
                                        "No route to host"),
    # The peer published 127.0.0.1: it chose `lo`, which the thread's NCCL_SOCKET_IFNAME fixed.
    "torch-flattened-srun-loopback-abort-1.txt": ("peer-unreachable", "File ",
                                                  "127.0.0.1 is a loopback address"),
    "torch-ray-recv-refused-1.txt": ("peer-unreachable", "Net : Call to recv",
                                     "the connection to 10.58.226.18 failed (Connection refused)"),
    # Set in markdown bold: the `**` is taken off.
    "torch-store-unique-id-timeout-bold-1.txt": ("rendezvous-incomplete", "torch.distributed.DistBackendError: [5]",
                                                 "rank 5 waited in torch's store for the NCCL id of rank 0"),
    "nccl-2.2-connect-timed-out-1.txt": ("peer-unreachable", "gpu-bql-144-103:18553:18611 [0] include/socket.h:360",
                                         "Connection timed out"),
    "nccl-2.3-connect-refused-lo-1.txt": ("peer-unreachable", "paigcr-b-gpu-1012:4153:4209 [1] include/socket.h:361",
                                          "lo on paigcr-b-gpu-1012 (127.0.0.1, loopback interface)"),
    "torchrun-c10d-client-timeout-host-port-1.txt": ("peer-unreachable", "[c10d] The client socket has",
                                                     "MASTER_ADDR (or --rdzv_endpoint)"),
    "torchrun-c10d-client-timeout-900s-2.txt": ("peer-unreachable", "[c10d] The client socket has",
                                                "the connection to 33.145.124.128 failed"),
    "torchrun-tcpstore-connect-timeout-1.10-3.txt": ("peer-unreachable", "RuntimeError: connect() timed out",
                                                     "cannot reach the rendezvous store"),
    "torchrun-c10d-client-timeout-ms-retry-4.txt": ("peer-unreachable", "[c10d] The client socket has",
                                                    "connections to 248.2.20.163 failed"),
    # Both of the doubled pdsh labels come off.
    "nccl-net-ofi-register-memory-pdsh-1.txt": ("memlock-limit", "ip-10-0-87-143:149:298 [5] register_mr_buffers",
                                                "locked memory"),
    # Rank 3 ran out of GPU memory; rank 0 only saw its connection close.
    "nccl-cuda-oom-peer-closed-1.txt": ("cuda-failure", "ng30903:3063028:3066152 [3] include/alloc.h:178",
                                        "out of memory"),
    "nccl-ray-timestamp-cuda-invalid-argument-1.txt": ("cuda-failure", "n176-080-198:2657296:2658232 [0]",
                                                       "invalid argument"),
    "torch-cuda-illegal-address-watchdog-ray-1.txt": ("cuda-failure", "[Rank 0] NCCL watchdog thread terminated",
                                                      "illegal memory access"),
    "deepspeed-rank-shm-create-1.txt": ("shared-memory", "Error while creating shared memory segment", "/dev/shm"),
    "nccl-socket-abort-link-local-ib-2.txt": ("peer-unreachable", "n122-246-085:12251:12400 [5] misc/socket.cc:483",
                                              "fe80::966d:ae03:a2:8cf0%ib1"),
    "nccl-recv-timed-out-rank-tag-1.txt": ("connection-lost", "[15]worker-23:83:2526 [0] misc/socket.cc:503",
                                           "the connection to 100.96.188.199"),
    "nccl-2.1-recv-reset-1.txt": ("connection-lost", "ml-gpu-ser015:2123:2230 [3] include/socket.h:194",
                                  "closed, reset or timed out mid-job"),
    # A network plugin's failure alone on its line, and rdma-core's mlx5 provider's own completion errors.
    "nccl-bare-net-plugin-completion-12-1.txt": ("ib-completion-error", "NET/IBP:Got completion from peer",
                                                 "towards 7.6.13.83"),
    # Only the provider's line names the failure; NCCL saw the peer go away and Ray saw the worker die.
    "ray-mlx5-provider-completion-error-1.txt": ("ib-completion-error", "mlx5: host_unknown: got completion",
                                                 "memory registration"),
    # The CQE's syndrome 0x12 is a remote invalid request (vendor syndrome 0x8a), not an HCA fault.
    "ucx-mlx5-provider-cqe-dump-1.txt": ("ib-completion-error", "mlx5: hpc-test-node2: got completion",
                                         "error 9 (IBV_WC_REM_INV_REQ_ERR)"),
}


_causes = causes_of


test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, _ = table(CASES, evidence_starts=True)


def test_no_host_keeps_markdown_markup() -> None:
    for name in ("nccl-completion-status5-after-12-backtick-1.txt", "nccl-completion-error-4-link-local-peer-3.txt"):
        for cause in _causes(name):
            assert all("`" not in host for host in cause.hosts), cause.hosts
            assert "`" not in cause.title


def test_a_rank_tag_glued_to_the_nccl_prefix_still_names_the_host() -> None:
    assert _causes("nccl-recv-timed-out-rank-tag-1.txt")[0].hosts == ["worker-23"]


def test_a_store_connection_is_advised_as_the_rendezvous_not_the_nccl_interface() -> None:
    top = _causes("torchrun-c10d-client-timeout-host-port-1.txt")[0]
    assert "NCCL_SOCKET_IFNAME" not in top.fix
    # An NCCL peer connection keeps the interface advice.
    assert "NCCL_SOCKET_IFNAME" in _causes("torch-last-error-no-route-1.txt")[0].fix


def test_the_oom_rank_outranks_the_peer_that_saw_it_leave() -> None:
    ids = [c.id for c in _causes("nccl-cuda-oom-peer-closed-1.txt")]
    assert ids.index("cuda-failure") < ids.index("connection-lost")


def test_a_ray_worker_prefix_is_taken_off_and_names_the_node() -> None:
    top = _causes("torch-ray-recv-refused-1.txt")[0]
    assert top.evidence[0].text.startswith("Net : Call to recv"), top.evidence[0].text
    # torch's lines carry no host of their own: the node is the address Ray's prefix names.
    assert top.hosts == ["10.58.226.15"]
    # A line NCCL printed keeps the host in its own prefix.
    assert _causes("nccl-ipc-peer-access-1.txt")[0].hosts == ["z-pc"]
