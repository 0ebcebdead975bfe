"""IB work-completion errors and failed verbs calls in the wording of the releases that print them, built from
NCCL's own format strings (each test names the release and the source file)."""

from __future__ import annotations

from provisioner.parsers.nccl_errors import call_failure, completion


def test_completion_status_that_ncclwcstatusstr_does_not_name() -> None:
    # 2.28.7 to 2.30.7 (src/transport/net_ib.cc, net_ib/p2p.cc): "status=%s(%d)" with ibvWcStatusStr, whose
    # default is "UNKNOWN_STATUS"; 2.30.7 net_ib/p2p_resiliency.cc "Unsupported completion status %s (%d)".
    error = completion(
        "NET/IB: Got completion from peer 10.0.0.2<43211> with status=UNKNOWN_STATUS(23) opcode=IBV_WC_SEND(0) "
        "vendor_err=0  hca mlx5_0", 1, None)
    assert error is not None and (error.status, error.opcode, error.device) == (23, 0, "mlx5_0")
    resiliency = completion("NET/IB: Unsupported completion status UNKNOWN_STATUS (24)", 1, None)
    assert resiliency is not None and resiliency.status == 24


def test_completion_request_type() -> None:
    # 2.28.7/2.28.9 src/transport/net_ib.cc: "... reqSize=%d vendor_err=%u req_type=%s%s%s%s%s hca %s";
    # 2.18 to 2.28.3: "... vendor err %d (%s)" with reqTypeStr {Unused, Send, Recv, Flush, IPut}.
    new = completion(
        "NET/IB: Got completion from peer 10.0.0.2<43211> with status=IBV_WC_RETRY_EXC_ERR(12) "
        "opcode=IBV_WC_RDMA_WRITE(1) reqSize=65536 vendor_err=129 req_type=Send localGid ::ffff:10.0.0.1 "
        "remoteGids::ffff:10.0.0.2 hca mlx5_3", 1, None)
    assert new is not None and (new.status, new.direction, new.device) == (12, "Send", "mlx5_3")
    assert (new.local_gid, new.remote_gid) == ("::ffff:10.0.0.1", "::ffff:10.0.0.2")
    flush = completion(
        "NET/IB: Got completion from peer 10.0.0.2<43211> with status=5 opcode=0 len=0 vendor err 249 (Flush) "
        "hca mlx5_0", 1, None)
    assert flush is not None and flush.direction == "Flush" and flush.local_gid is None


def test_failed_call_errno_before_its_text() -> None:
    # 2.26 to 2.30.7 src/misc/ibvwrap.cc: "Call to ibv_modify_qp failed with %d %s, %s" (ret, strerror(ret), ...);
    # the older "Call to " name " failed with error %s errno %d" names it after the text.
    failure = call_failure("Call to ibv_modify_qp failed with 110 Connection timed out, qp 0x1 state 3", 1, None)
    assert failure is not None and (failure.call, failure.errno) == ("ibv_modify_qp", 110)
    assert failure.error.startswith("Connection timed out")
    older = call_failure("Call to ibv_create_qp failed with error Cannot allocate memory errno 12", 1, None)
    assert older is not None and older.errno == 12
