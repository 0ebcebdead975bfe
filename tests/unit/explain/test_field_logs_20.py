"""`explain` on field logs of RDMA in containers and pods: devices seen but not handed in, a queue pair with
no interface behind its GID, and memory a container may not lock (tests/samples/logs/, sources in
tests/samples/INDEX.md)."""

from __future__ import annotations

from tests.unit.explain._field import causes_of, line_causes, table

# file -> (the top cause's id, text its first evidence line holds, text its title/detail/fix hold)
CASES: dict[str, tuple[str, str, str]] = {
    # nccl#451: every HCA fails to open in a container, NCCL runs on sockets. Before: a verbs call failed, with
    # advice on ulimit and QP limits; the question in the thread is how to give the container the device.
    "nccl-container-no-dev-infiniband-open-device-1.txt": (
        "rdma-devices-not-in-container", "Call to ibv_open_device failed", "--device=/dev/infiniband"),
    # nccl#551: rdma shared device plugin pods, queue pair refused with ENODEV. Before: generic GID advice.
    "nccl-pod-modify-qp-no-such-device-1.txt": (
        "verbs-resource-failure", "ibv_modify_qp failed with error No such device", "NetworkAttachmentDefinition"),
    # nccl#799: the same errno in a container; the reporter left the HCA out with NCCL_IB_HCA.
    "nccl-container-modify-qp-no-such-device-2.txt": (
        "verbs-resource-failure", "ibv_modify_qp failed with error No such device", "NCCL_IB_HCA"),
    # mscclpp#335: a queue could not be pinned in a container started without IPC_LOCK. Before: the cause was named,
    # but its fix offered a container only `--ulimit memlock=-1`, nothing a pod can set.
    "ucx-container-create-cq-enomem-ipc-lock-1.txt": (
        "memlock-limit", "ibv_create_cq(cqe=4096) failed: Cannot allocate memory", "securityContext.capabilities.add"),
}
HOSTS: dict[str, list[str]] = {
    "nccl-container-no-dev-infiniband-open-device-1.txt": [],
    "nccl-pod-modify-qp-no-such-device-1.txt": ["gpunodev2"],
    "nccl-container-modify-qp-no-such-device-2.txt": ["72bf7b08-26f3-4ebc-8b9d-85df3e4414c0"],
    "ucx-container-create-cq-enomem-ipc-lock-1.txt": [],
}

test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, test_the_hosts_each_names = table(
    CASES, HOSTS)


def test_an_unopened_device_is_not_called_a_refused_resource() -> None:
    ids = [c.id for c in causes_of("nccl-container-no-dev-infiniband-open-device-1.txt")]
    assert "verbs-resource-failure" not in ids, ids


def test_devices_not_handed_to_a_pod_that_opened_its_own_are_no_cause() -> None:
    """An SR-IOV pod is given one VF: the other devices fail to open, and NCCL uses the one it has."""
    ids = [c[0] for c in line_causes(
        "misc/ibvwrap.cc:212 NCCL WARN Call to ibv_open_device failed",
        "transport/net_ib.cc:117 NCCL WARN NET/IB : Unable to open device mlx5_0",
        "NCCL INFO NET/IB : Using [0]mlx5_8:1/RoCE ; OOB eth0:10.233.99.245<0>",
    )]
    assert "rdma-devices-not-in-container" not in ids and "verbs-resource-failure" not in ids, ids


def test_a_modify_qp_that_timed_out_keeps_its_own_advice() -> None:
    causes = line_causes("misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error "
                         "Connection timed out")
    assert causes and "Multus" not in causes[0][1], causes


def test_a_queue_pair_with_no_device_says_so_in_its_title() -> None:
    """ENODEV from ibv_modify_qp is a GID with no interface behind it, not just a verbs call that failed: the
    title says so; the id stays the verbs rule's."""
    for name in ("nccl-pod-modify-qp-no-such-device-1.txt", "nccl-container-modify-qp-no-such-device-2.txt"):
        top = causes_of(name)[0]
        assert top.id == "verbs-resource-failure", name
        assert "no network interface behind its RoCE GID" in top.title and "No such device" in top.title, top.title
        assert "an RDMA verbs call failed" not in top.title
    timed_out = line_causes("misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error "
                            "Connection timed out")
    assert "an RDMA verbs call failed" in timed_out[0][1]
