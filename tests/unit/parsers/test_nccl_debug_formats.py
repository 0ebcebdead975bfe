"""NCCL log lines in the wording of the releases that print them, built from NCCL's own format strings
(each test names the release and the source file). They pin the shapes the parser reads by structure."""

from __future__ import annotations

from provisioner.parsers.nccl_debug import parse_nccl_debug

_P = "gpu01:2001:2101 [0] NCCL INFO "


def test_version_is_the_version_line_not_a_warning_that_names_another() -> None:
    # 2.30.7 src/dev_runtime.cc: "NCCL library is too old. This application was compiled with NCCL version %s,
    # but is running with NCCL library version %s." (ncclVersionToString: "%d.%d.%d").
    log = parse_nccl_debug(
        _P + "NCCL version 2.29.7+cuda12.9\n"
        "gpu01:2001:2101 [0] dev_runtime.cc:1428 NCCL WARN NCCL library is too old. This application was compiled "
        "with NCCL version 2.30.7, but is running with NCCL library version 2.29.7.\n"
    )
    assert (log.nccl_version, log.cuda_version) == ("2.29.7", "12.9")
    assert log.nccl_versions_by_host == {"gpu01": "2.29.7"}


def test_ib_device_list_merged_devices() -> None:
    # 2.20.3 to 2.23.4 src/transport/net_ib.cc, NCCL_IB_MERGE_NICS: " [%d]={" then "[%d] %s:%d/%s%s" per
    # member (", " between them) and "}", next to the plain " [%d]%s:%d/%s".
    log = parse_nccl_debug(
        _P + "NET/IB : Using [0]={[0] mlx5_0:1/IB, [1] mlx5_1:1/IB} [1]mlx5_2:1/RoCE [RO]; OOB ib0:10.0.0.1<0>\n"
    )
    assert log.ib_devices == ["mlx5_0:1/IB", "mlx5_1:1/IB", "mlx5_2:1/RoCE"]
    assert log.ib_relaxed_ordering is True
    assert log.oob_interfaces == ["ib0:10.0.0.1"]


def test_ib_device_list_rail_and_plane() -> None:
    # 2.30.7 src/transport/net_ib/init.cc: " [%d]%s:%d", then ":%d" (railId) or ":" when only a plane is set,
    # then ":%d" (planeId), then "/%s" (NCCL_IB_LLSTR: IB, RoCE or UNSPECIFIED).
    log = parse_nccl_debug(
        _P + "NET/IB : Using [0]mlx5_0:1:0:1/IB [1]mlx5_1:1::1/IB [2]mlx5_2:1:3/UNSPECIFIED ; OOB eth0:10.0.0.1<0>\n"
    )
    assert log.ib_devices == ["mlx5_0:1/IB", "mlx5_1:1/IB", "mlx5_2:1/UNSPECIFIED"]
    assert log.net_transports == ["IB"]


def test_ib_without_device_still_names_its_oob_interface() -> None:
    # 2.24 to 2.30.7 src/transport/net_ib.cc (net_ib/init.cc): "NET/IB : Using%s %s; OOB %s:%s" is printed after
    # "NET/IB : No device found." too, with an empty list and no "[RO]".
    log = parse_nccl_debug(_P + "NET/IB : No device found.\n" + _P + "NET/IB : Using  ; OOB lo:127.0.0.1<0>\n")
    assert log.net_transports == []
    assert log.ib_devices == []
    assert log.oob_interfaces == ["lo:127.0.0.1"]
    assert [s.interface for s in log.suspect_interfaces] == ["lo"]


def test_via_net_keeps_the_plugin_whole_name() -> None:
    # "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s" (2.12 to 2.30.7 src/transport/net.cc;
    # "Ring %02d : %d -> %d [send] via NET/%s/%d%s" in 2.4.8) prints ncclNet->name: aws-ofi-nccl's
    # "AWS Libfabric", the rdma-sharp plugins' "UCX-RMA" and "IBext_v8".
    log = parse_nccl_debug(
        _P + "Channel 00/0 : 0[0] -> 8[0] [send] via NET/AWS Libfabric/0/GDRDMA\n"
        + _P + "Channel 01/0 : 8[0] -> 0[0] [receive] via NET/UCX-RMA/1(0)/GDRDMA/Shared\n"
        + _P + "Ring 00 : 0 -> 1 [send] via NET/IBext_v8/0\n"
    )
    assert log.net_paths == ["AWS Libfabric", "UCX-RMA", "IBext_v8"]


def test_bare_gin_failure_line_is_read() -> None:
    # 2.29.2 to 2.30.7 src/transport/net_ib/gin.cc: "NET/IB/GIN: Got completion from peer %s with status=%d ...",
    # quoted alone on its line (a report that dropped NCCL's prefix).
    log = parse_nccl_debug(
        _P + "Using network IB\n"
        "NET/IB/GIN: Got completion from peer 10.0.0.2<5000> with status=12 opcode=0 len=0 vendor err 129 (Send) "
        "hca mlx5_1\n"
    )
    assert [(e.status, e.device) for e in log.completion_errors] == [(12, "mlx5_1")]


def test_tuner_plugin_setting() -> None:
    # 2.21.5 to 2.23.4 src/misc/tuner.cc: "TUNER/Plugin: NCCL_TUNER_PLUGIN set to %s".
    log = parse_nccl_debug(_P + "TUNER/Plugin: NCCL_TUNER_PLUGIN set to libnccl-tuner-ofi.so\n")
    assert log.env == {"NCCL_TUNER_PLUGIN": "libnccl-tuner-ofi.so"}
