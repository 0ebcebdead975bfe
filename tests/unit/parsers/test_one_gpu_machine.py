"""Outputs recorded on one H200 machine (tests/samples/INDEX.md: the `-30-` samples): a one-rank nccl-tests
run, `nvidia-smi topo -m` with its terminal escapes, and NCCL 2.28's INFO log of fabnet's own smoke rank; and a
two-rank run of nccl-tests built with MPI (`-34-`)."""

from __future__ import annotations

from provisioner.parsers.nccl_debug import parse_nccl_debug
from provisioner.parsers.nccl_tests import parse_nccl_tests
from provisioner.parsers.nvidia_smi_topo import parse_nvidia_smi_topo
from tests.unit.parsers._samples import read


def test_one_rank_all_reduce_perf() -> None:
    run = parse_nccl_tests(read("all_reduce_perf-30-h200-one-gpu.txt"))
    assert run.complete and run.nccl_tests_version == "2.19.6"
    assert run.nccl_library_version == run.nccl_headers_version == "2.28.9"
    [device] = run.devices
    assert (device.host, device.bus_id, device.name) == ("vm", "0000:00:06", "NVIDIA H200")
    assert [row.size for row in run.rows] == [1 << k for k in range(20, 31)]
    assert all(row.oop_busbw == 0.0 and row.ip_busbw == 0.0 for row in run.rows)  # one rank moves nothing
    last = run.rows[-1]
    assert (last.oop_time_us, last.oop_algbw) == (506.1, 2121.6)
    assert last.ip_algbw == 1e6  # printed `1e+06`
    assert run.avg_busbw == 0.0 and run.out_of_bounds == 0


def test_more_gpus_asked_than_the_machine_has() -> None:
    run = parse_nccl_tests(read("all_reduce_perf-31-h200-two-gpus-asked.txt"))
    assert run.verdict == "failed" and not run.complete and run.rows == []
    assert run.failures[0] == "Invalid number of GPUs: 2 requested but only 1 were found."
    assert run.parameters["nGpus"] == "2" and run.unplaced == []


def test_two_copies_started_by_mpirun_from_a_build_without_mpi() -> None:
    run = parse_nccl_tests(read("all_reduce_perf-32-h200-mpirun-without-mpi.txt"))
    assert run.complete and run.single_rank_runs == 2 and run.unplaced == []
    assert sorted(d.pid for d in run.devices) == [1700, 1701]


def test_two_ranks_of_an_mpi_build_with_both_ranks_nccl_info_between_header_and_table() -> None:
    run = parse_nccl_tests(read("all_reduce_perf-34-h200-two-ranks-mpi-socket.txt"))
    assert run.complete and run.verdict == "ok" and run.unplaced == []
    assert run.nccl_library_version == "2.28.9" and run.nccl_tests_version == "2.19.6"
    # One job of two ranks (not two one-rank copies), though both name the same host and device.
    assert [(d.rank, d.host, d.device) for d in run.devices] == [(0, "vm", 0), (1, "vm", 0)]
    assert run.single_rank_runs == 0 and run.separate_runs == 0
    assert [row.size for row in run.rows] == [1 << k for k in range(20, 30)]
    assert (run.rows[0].oop_busbw, run.rows[-1].oop_busbw, run.rows[-1].ip_time_us) == (0.23, 1.86, 288679.0)
    assert run.avg_busbw == 1.4524 and run.out_of_bounds == 0


def test_topology_of_one_gpu_with_escapes() -> None:
    topo = parse_nvidia_smi_topo(read("nvidia-smi-topo-30-h200-one-gpu-escapes.txt"))
    assert topo.complete and topo.gpus == ["GPU0"] and topo.nics == []
    assert topo.info_columns == ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    assert topo.matrix == {"GPU0": {"GPU0": "X"}}
    assert (topo.cpu_affinity["GPU0"], topo.numa_affinity["GPU0"], topo.gpu_numa_id["GPU0"]) == ("0-15", "0", None)


def test_nccl_2_28_single_rank_on_sockets() -> None:
    log = parse_nccl_debug(read("nccl-debug-30-h200-one-rank-socket-2.28.txt"))
    assert (log.nccl_version, log.cuda_version, log.network) == ("2.28.9", "13.0", "Socket")
    assert log.socket_interfaces == ["eth0:192.0.2.2"] and log.ib_devices == []
    assert log.ib_unavailable == ["NET/IB : No device found."]
    # `NET/IB : Using [RO]; OOB eth0:...` after it lists no device: IB is no transport, [RO] describes nothing.
    assert log.net_transports == ["Socket"] and log.ib_relaxed_ordering is None
    assert log.oob_interfaces == ["eth0:192.0.2.2"]
    [comm] = log.communicators
    assert (comm.rank, comm.nranks, comm.network) == (0, 1, "Socket")
