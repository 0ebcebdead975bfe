"""Where the recorded tool outputs live, and which parser kind each one is."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from provisioner.errors import ParseError

SAMPLES = Path(__file__).resolve().parents[2] / "samples"

# Every recorded output in tests/samples and the kind that must parse it.
SAMPLE_KINDS: dict[str, str] = {
    "all_reduce_perf-1.txt": "nccl_tests",
    "all_reduce_perf-2.txt": "nccl_tests",
    "all_reduce_perf-3.txt": "nccl_tests",
    "all_reduce_perf-4.txt": "nccl_tests",
    "all_reduce_perf-5.txt": "nccl_tests",
    "all_reduce_perf-8-header.txt": "nccl_tests",
    "all_gather_perf-9-two-runs.txt": "nccl_tests",
    "nccl-debug-10-no-socket-interface.txt": "nccl_debug",
    "nccl-debug-11-connect-no-route.txt": "nccl_debug",
    "nccl-debug-12-duplicate-gpu.txt": "nccl_debug",
    "nccl-debug-13-timestamped-2.27.txt": "nccl_debug",
    "nccl-debug-14-per-device-2.27.txt": "nccl_debug",
    "dcb-4-joined.txt": "dcb",
    "dcb-app-1.txt": "dcb",
    "dcb-ets-1.txt": "dcb",
    "dcb-pfc-1.txt": "dcb",
    "hca_self_test-driver-line-1.txt": "ofed_info",
    "ibdev2netdev-1.txt": "ibdev2netdev",
    "ibdev2netdev-3.txt": "ibdev2netdev",
    "ibdev2netdev-4.txt": "ibdev2netdev",
    "ibstat-1.txt": "ibstat",
    "ibstat-2.txt": "ibstat",
    "ibstat-3.txt": "ibstat",
    "ibstat-6.txt": "ibstat",
    "ibstat-grep-1.txt": "ibstat",
    "ibv_devinfo-1.txt": "ibv_devinfo",
    "ibv_devinfo-2.txt": "ibv_devinfo",
    "ibv_devinfo-v-1.txt": "ibv_devinfo",
    "mlnx_qos-1.txt": "mlnx_qos",
    "mlnx_qos-2.txt": "mlnx_qos",
    "mlnx_qos-3.txt": "mlnx_qos",
    "nccl-debug-2.txt": "nccl_debug",
    "nccl-debug-3.txt": "nccl_debug",
    "nccl-debug-4.txt": "nccl_debug",
    "nccl-debug-6.txt": "nccl_debug",
    "nccl-debug-7.txt": "nccl_debug",
    "nccl-debug-9.txt": "nccl_debug",
    "nccl-debug-net-lines-1.txt": "nccl_debug",
    "nvidia-smi-topo-1.txt": "nvidia_smi_topo",
    "nvidia-smi-topo-2.txt": "nvidia_smi_topo",
    "nvidia-smi-topo-3.txt": "nvidia_smi_topo",
    "nvidia-smi-topo-4.txt": "nvidia_smi_topo",
    "nvidia-smi-topo-6-legend-and-ibstatus.txt": "nvidia_smi_topo",
    "ofed_info-s-1.txt": "ofed_info",
    "ofed_info-s-2.txt": "ofed_info",
    "ofed_info-s-3.txt": "ofed_info",
    "ofed_info-s-6.txt": "ofed_info",
    "perfquery-x-1.txt": "perfquery",
    "perfquery-2.txt": "perfquery",
    "port-counters-sysfs-1.txt": "port_counters",
    "port-counters-sysfs-4-efa-device-hw-counters.txt": "port_counters",
    "rdma-link-1.txt": "rdma_link",
    "rdma-link-3.txt": "rdma_link",
    "rdma-qos-script-q-1.txt": "rdma_qos_script",
    "show_gids-1.txt": "show_gids",
    "show_gids-3.txt": "show_gids",
    "traffic_class-1.txt": "traffic_class",
    "ibstat-7-ibwarn.txt": "ibstat",
    "ibstat-8-ibpanic.txt": "ibstat",
    "ibstat-9-ibpanic-a100.txt": "ibstat",
    "ibv_devinfo-3-azure.txt": "ibv_devinfo",
    "ibv_devinfo-4-rxe-nolinklayer.txt": "ibv_devinfo",
    "ibv_devinfo-v-5-tabs-cut.txt": "ibv_devinfo",
    "mlnx_qos-4-cable-len.txt": "mlnx_qos",
    "ibdev2netdev-5-column-t-notes.txt": "ibdev2netdev",
    "ibdev2netdev-6-pod.txt": "ibdev2netdev",
    "show_gids-4-empty.txt": "show_gids",
    "show_gids-5-tabs.txt": "show_gids",
    "show_gids-6-prompt.txt": "show_gids",
    "show_gids-7-rocep.txt": "show_gids",
    "ofed_info-s-7.txt": "ofed_info",
    "rdma-link-4-trailing-space.txt": "rdma_link",
    "nvidia-smi-topo-7-tabs-2gpu.txt": "nvidia_smi_topo",
    "nvidia-smi-topo-8-mlx4-column-cut.txt": "nvidia_smi_topo",
    "nvidia-smi-topo-9-nv8-cut.txt": "nvidia_smi_topo",
    "nvidia-smi-topo-10-18nics-cut.txt": "nvidia_smi_topo",
    "ofed_info-s-8-internal-24.07.txt": "ofed_info",
    "perfquery-x-3-prompt.txt": "perfquery",
    "all_reduce_perf-10-old-error-column.txt": "nccl_tests",
    "all_reduce_perf-11-two-one-rank-runs-cut.txt": "nccl_tests",
    "all_reduce_perf-12-failure-large-sizes.txt": "nccl_tests",
    "all_reduce_perf-13-mpi-tag-cut.txt": "nccl_tests",
    "broadcast_perf-14-rccl-footer.txt": "nccl_tests",
    "all_reduce_perf-30-h200-one-gpu.txt": "nccl_tests",
    "all_reduce_perf-31-h200-two-gpus-asked.txt": "nccl_tests",
    "all_reduce_perf-32-h200-mpirun-without-mpi.txt": "nccl_tests",
    "all_reduce_perf-34-h200-two-ranks-mpi-socket.txt": "nccl_tests",
    "all_reduce_perf-33-h200-per-iteration.txt": "nccl_tests",
    "all_reduce_perf-33-h200-min-bw-failed.txt": "nccl_tests",
    "all_reduce_perf-33-h200-memory-report.txt": "nccl_tests",
    "all_reduce_perf-33-h200-timestamps.txt": "nccl_tests",
    "all_reduce_perf-33-h200-all-ops-types-invalid-argument.txt": "nccl_tests",
    "nvidia-smi-topo-30-h200-one-gpu-escapes.txt": "nvidia_smi_topo",
    "nccl-debug-30-h200-one-rank-socket-2.28.txt": "nccl_debug",
    "nccl-debug-33-h200-all-subsystems-2.28.txt": "nccl_debug",
    "nccl-debug-tcpxo-fastrak-network-1.txt": "nccl_debug",
    "dcb-pfc-5-man.txt": "dcb",
    "dcb-buffer-6-man.txt": "dcb",
    "dcb-dcbx-7-man.txt": "dcb",
    "dcb-apptrust-8-man.txt": "dcb",
    "dcb-app-9-numeric-man.txt": "dcb",
    "dcb-app-10-pcp-man.txt": "dcb",
    "dcb-rewr-11-man.txt": "dcb",
    "dcb-maxrate-12-man.txt": "dcb",
    "rdma-link-5-ib-polling.txt": "rdma_link",
    "port-counters-sysfs-2-iwarp-no-pma.txt": "port_counters",
    "port-counters-sysfs-3-procfs-mlx5-hfi1-mlx4.txt": "port_counters",
    "ibstatus-1-pod-ib-and-ethernet.txt": "ibstatus",
    "ibstatus-2-1x-edr-prompt.txt": "ibstatus",
    "traffic_class-2-prompt.txt": "traffic_class",
    "traffic_class-3-empty-prompts.txt": "traffic_class",
    "traffic_class-4-cma-roce-tos-bare.txt": "traffic_class",
    "nccl-tests-15-two-8gpu-copies-cut.txt": "nccl_tests",
    "mlnx_qos-5-default-priority-max-buffer.txt": "mlnx_qos",
    "mlnx_qos-6-firmware-dcbx-shared-tc.txt": "mlnx_qos",
    "mlnx_qos-7-skprio.txt": "mlnx_qos",
    "mlnx_qos-8-dscp-split-row.txt": "mlnx_qos",
    "ibv_devinfo-v-6-cx6-nested-caps.txt": "ibv_devinfo",
    "ibv_devinfo-v-7-ofed4-blocks.txt": "ibv_devinfo",
    "show_gids-8-ib-row-no-dev.txt": "show_gids",
    "nvidia-smi-topo-11-10nics-pxb-tabs.txt": "nvidia_smi_topo",
    "nvidia-smi-topo-12-gb200-cut.txt": "nvidia_smi_topo",
    "nvidia-smi-topo-13-nic-rows-no-info.txt": "nvidia_smi_topo",
    "rdma-link-6-index-prefix.txt": "rdma_link",
    "ibdev2netdev-7-long-description.txt": "ibdev2netdev",
    "ofed_info-s-9-doca-25.10.txt": "ofed_info",
    "ofed_info-s-10-doca-24.10-five-part.txt": "ofed_info",
    "perfquery-x-4-data-only.txt": "perfquery",
    "ibv_devinfo-8-efa-unspecified-transport.txt": "ibv_devinfo",
    "ibstat-10-efa-empty-values.txt": "ibstat",
    "ibv_devinfo-9-irdma-e810.txt": "ibv_devinfo",
    "ibv_devinfo-v-10-irdma-e810-verbose.txt": "ibv_devinfo",
    "ibv_devinfo-v-11-bf3-grep-filtered.txt": "ibv_devinfo",
    "rdma-link-7-irdma.txt": "rdma_link",
    "rdma-link-8-bnxt-re.txt": "rdma_link",
    "ibstat-11-bnxt-re-cut.txt": "ibstat",
    "all_reduce_perf-16-gb200-nvl72-integer-time.txt": "nccl_tests",
    "reduce_scatter_perf-17-zero-size-rows-cut.txt": "nccl_tests",
    "all_gather_perf-18-nixos-2.13.6-one-gpu-cut.txt": "nccl_tests",
    "alltoall_perf-19-rtx5090-one-gpu-inplace-na.txt": "nccl_tests",
    "alltoall_perf-20-rccl-mi355x-version-line.txt": "nccl_tests",
    "nvidia-smi-topo-14-wrapped-legend-and-p2p.txt": "nvidia_smi_topo",
    "nvidia-smi-topo-15-16gpu-mlx5-columns-cut.txt": "nvidia_smi_topo",
    "nvidia-smi-topo-16-b200-16nics-glued-cells.txt": "nvidia_smi_topo",
    "show_gids-9-k8s-net1-index4.txt": "show_gids",
    "show_gids-10-mi355-ipv6-only-cut.txt": "show_gids",
    "ibv_devinfo-10-efa-unspecified-link-layer.txt": "ibv_devinfo",
    "ethtool-S-1-mlx5-discards-phy-cut.txt": "ethtool_stats",
    "ethtool-S-2-bnxt_en-rings-tabs.txt": "ethtool_stats",
    "ethtool-S-3-ice-dot-nic.txt": "ethtool_stats",
    "ethtool-S-4-bnx2x-queues-spaces-no-header.txt": "ethtool_stats",
    "ethtool-S-5-mlx5-cx4lx-4.15-no-indent.txt": "ethtool_stats",
    "ethtool-S-6-mlx5-grep-prio-byteps.txt": "ethtool_stats",
    "nvidia-smi-topo-17-3gpu-nv4-pair-and-pcie-gpu.txt": "nvidia_smi_topo",
    "nvidia-smi-topo-18-b200-glued-header-labels-cut.txt": "nvidia_smi_topo",
    "nvidia-smi-topo-19-4h100-nv6-cpu-lists-legend-cut.txt": "nvidia_smi_topo",
    "nvidia-smi-topo-20-5gpu-pcie-only-sys-phb-node.txt": "nvidia_smi_topo",
    "nvidia-smi-topo-21-b200-narrow-info-cells-cut.txt": "nvidia_smi_topo",
    "ethtool-S-7-gve-bracket-queue-suffix.txt": "ethtool_stats",
}


def read(name: str) -> str:
    """The sample exactly as recorded: bytes decoded, line endings untouched (CRLF stays CRLF)."""
    return (SAMPLES / name).read_bytes().decode("utf-8")


def ibstatus_tail() -> str:
    """The ibstatus blocks pasted after the topology legend in one sample, as ibstatus alone prints them."""
    text = read("nvidia-smi-topo-6-legend-and-ibstatus.txt")
    return text[text.index("Infiniband device"):]


def samples_of(kind: str) -> list[str]:
    return sorted(name for name, k in SAMPLE_KINDS.items() if k == kind)


def rejected(parse: Callable[[str], Any], text: str) -> tuple[int | None, str]:
    """Where and why a parser refused a line: its ParseError, else its first unplaced line or missing part.

    Parsers keep going past lines they cannot place; a test of bad input checks that the line is named
    either way, and fails when the parser accepted everything silently.
    """
    try:
        result = parse(text)
    except ParseError as err:
        return err.line, err.message
    if result.unplaced:
        return result.unplaced[0].line, result.unplaced[0].reason or ""
    if result.missing:
        assert result.complete is False
        return None, result.missing[0]
    raise AssertionError(f"{text!r} was accepted whole")
