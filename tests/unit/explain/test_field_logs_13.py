"""`explain` on what NCCL prints while it lays its NVLink paths, from the field (tests/samples/logs/, sources in
tests/samples/INDEX.md): NVLink SHARP (NVLS) multicast setup failing on the NVSwitch fabric."""

from __future__ import annotations

from provisioner.explain import explain
from tests.unit.explain._field import table

# file -> (the top cause's id, text its first evidence line holds, text its title/detail/fix hold)
CASES: dict[str, tuple[str, str, str]] = {
    # cuMulticastAddDevice failing with 401 on an H100 node (NCCL 2.26.2): the fabric, not a generic CUDA call.
    "nccl-nvls-add-device-illegal-state-1.txt": (
        "gpu-fabric-manager", "transport/nvls.cc:254 NCCL WARN Cuda failure 401", "NCCL_NVLS_ENABLE=0 only to confirm"),
    "nccl-nvls-invalid-argument-1.txt": (
        "gpu-fabric-manager", "transport/nvls.cc:598 NCCL WARN Cuda failure 1 'invalid argument'",
        "NVLS multicast: invalid argument"),
}
# file -> the hosts the top cause names
HOSTS: dict[str, list[str]] = {
    "nccl-nvls-add-device-illegal-state-1.txt": ["node004"],
    "nccl-nvls-invalid-argument-1.txt": ["ccw-gpu-128"],
}

test_every_log_of_this_set_has_a_case, test_the_top_cause_of_each_field_log, test_the_hosts_each_names = table(
    CASES, HOSTS)

_HEAD = "gb-01:2201:2290 [0] NCCL WARN "



def test_the_nvls_bind_failure_of_recent_releases_is_the_fabric() -> None:
    text = (_HEAD + "Failed to bind NVLink SHARP (NVLS) Multicast memory of size 1073741824 : CUDA error 801 "
            "'operation not supported'.\nThis is usually caused by a system or configuration error.\n")
    top = explain([("nvls.log", text)]).causes[0]
    assert top.id == "gpu-fabric-manager" and "operation not supported" in top.title, (top.id, top.title)


def test_an_nvls_failure_of_its_own_class_keeps_it() -> None:
    text = _HEAD.replace("NCCL WARN", "transport/nvls.cc:245 NCCL WARN") + "Cuda failure 'out of memory'\n"
    assert explain([("nvls.log", text)]).causes[0].id == "cuda-failure"
