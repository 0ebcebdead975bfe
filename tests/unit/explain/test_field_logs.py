"""`explain` on failure logs from the field: verbatim excerpts of public issue threads (tests/samples/logs/,
sources in tests/samples/INDEX.md), each with the cause the thread established (or, where the thread did not
settle it, the class the log itself proves) and the line that shows it. NCCL 2.3 to 2.28, bare NCCL output,
Open MPI and Ray prefixes, and torch's `Last error:` quotes."""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from provisioner.explain.model import Cause
from tests.unit.explain._field import LOGS, causes_of, check_top_cause
from tests.unit.explain.test_field_logs_3 import CASES as THIRD

# file -> (the top cause's id, text of its first evidence line, text its title/detail/fix/settings must hold)
CASES: dict[str, tuple[str, str, str]] = {
    # /dev/shm: every release's wording of a segment that could not be created, opened or pinned.
    "nccl-shm-extend-failed-1.txt": ("shared-memory", "Error while creating shared memory segment /dev/shm/nccl-KWfVyt",
                                     "--shm-size"),
    "nccl-shm-posix-fallocate-2.txt": ("shared-memory", "Call to posix_fallocate failed : No space left on device",
                                       "64 MB"),
    "nccl-shm-no-space-errno-3.txt": ("shared-memory", "failed to extend /dev/shm/nccl-WU88OE to 9637892 bytes",
                                      "No space left on device"),
    "nccl-shm-cuda-register-4.txt": ("shared-memory", "misc/shmutils.cc:103 NCCL WARN Cuda failure 'invalid argument'",
                                     "could not pin"),
    "nccl-shm-attach-missing-5.txt": ("shared-memory", "Call to open failed: No such file or directory",
                                      "RemoveIPC=no"),
    "nccl-shm-register-ipc-localhost-6.txt": ("shared-memory", "failed to register host buffer 0x7f685140d000",
                                              "calls itself `localhost`"),
    # nccl#328: shm_open refused with EACCES, fixed by /dev/shm's mode; not a full /dev/shm.
    "nccl-shm-open-permission-denied-7.txt": ("shared-memory", "Call to shm_open failed : Permission denied",
                                              "chmod 1777 /dev/shm"),
    # GPU side, named as such.
    "nccl-ipc-peer-access-1.txt": ("gpu-p2p-failure", "failed to open CUDA IPC handle : 217 peer access",
                                   "NCCL_P2P_DISABLE"),
    "nccl-driver-insufficient-1.txt": ("cuda-driver", "CUDA driver version is insufficient", "nvidia-smi"),
    # Verbs calls and completions.
    "nccl-create-qp-mixed-links-1.txt": ("verbs-resource-failure", "Call to ibv_create_qp failed", "ibv_create_qp"),
    "nccl-create-cq-enomem-1.txt": ("memlock-limit", "Call to ibv_create_cq failed with error Cannot allocate memory",
                                    "LimitMEMLOCK"),
    "nccl-completion-error-4-1.txt": ("ib-completion-error", "with error 4, opcode 5327", "nvidia_peermem"),
    "nccl-modify-qp-unreachable-1.txt": ("verbs-resource-failure", "ibv_modify_qp failed with error Network is "
                                         "unreachable", "ip route get"),
    "nccl-modify-qp-einval-1.txt": ("verbs-resource-failure", "ibv_modify_qp failed with error Invalid argument",
                                    "GID index that is empty"),
    "nccl-modify-qp-timeout-rail-1.txt": ("verbs-resource-failure", "failed with 110 Connection timed out",
                                          "NCCL_CROSS_NIC=0"),
    "torch-remote-error-completion-12-1.txt": ("ib-completion-error", "Last error: NET/IB : Got completion from peer",
                                               "retransmissions gave up"),
    "torch-ofi-undeliverable-1.txt": ("ofi-failure", "NET/OFI Request 0x7f14cc5b60c0 completed with error",
                                      "libfabric"),
    # Sockets: no interface, an address of no family, an unreachable peer.
    "torch-last-error-no-socket-interface-1.txt": ("no-socket-interface", "Bootstrap : no socket interface found",
                                                   "NCCL_SOCKET_IFNAME"),
    "torch-socket-family-ifname-1.txt": ("socket-address-family", "NCCL_SOCKET_IFNAME set by environment to eth2",
                                         "NCCL_SOCKET_IFNAME=eth2"),
    "nccl-socket-family-unsupported-1.txt": ("socket-address-family", "Socket creation failed : Address family not "
                                             "supported by protocol", "IPv6"),
    "nccl-socket-connect-abort-1.txt": ("peer-unreachable", "Connect to 10.0.0.2<45763> failed : Software caused "
                                        "connection abort", "10.0.0.2"),
    # nccl#1515: the maintainers called the wording a bug in NCCL's error path, the real failure earlier; said so.
    "nccl-socket-abort-retry-3.txt": ("peer-unreachable", "Connect to 10.45.234.83<47527> failed",
                                      "earlier attempt was refused or timed out"),
}


def _top(name: str) -> Cause:
    causes = causes_of(name)
    assert causes, f"{name}: no cause named"
    return causes[0]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_top_cause_of_each_field_log(name: str) -> None:
    check_top_cause(name, CASES[name])


def test_every_field_log_has_a_case() -> None:
    prefixes = ("nccl-shm-", "nccl-ipc-", "nccl-driver-", "nccl-create-", "nccl-completion-", "nccl-modify-qp-",
                "nccl-socket-", "torch-last-error-", "torch-socket-", "torch-remote-", "torch-ofi-")
    later = set(THIRD)  # the third set's logs share some prefixes; its own module checks them
    assert {p.name for p in LOGS.glob("*.txt") if p.name.startswith(prefixes)} - later == set(CASES)


def test_shared_memory_outranks_the_cuda_failure_it_explains() -> None:
    """nccl#1518: the `Cuda failure` comes from the shm code (cudaHostRegister of the segment): one cause, the
    shared memory one, not a GPU fault besides it."""
    causes = explain([("job.log", (LOGS / "nccl-shm-cuda-register-4.txt").read_text())]).causes
    assert [c.id for c in causes] == ["shared-memory"]


def test_a_full_dev_shm_is_told_from_a_missing_segment() -> None:
    full, missing = _top("nccl-shm-no-space-errno-3.txt"), _top("nccl-shm-attach-missing-5.txt")
    assert "no room" in full.title and "--shm-size" in full.settings
    assert "could not open" in missing.title and "--ipc=host" in missing.settings


def test_a_quoted_last_error_is_not_counted_twice_when_the_warn_is_in_the_log() -> None:
    """torch quotes the last WARN after `Last error:`; with the rank's own WARN in the log it is one error."""
    warn = ("gpu01:4021:4188 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
            "10.0.0.2<4567> with error 12, opcode 0, len 0, vendor err 129 (Recv)\n")
    quote = ("ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
             "prematurely.\nLast error:\nNET/IB : Got completion from peer 10.0.0.2<4567> with error 12, opcode 0, "
             "len 0, vendor err 129 (Recv)\n")
    causes = [c for c in explain([("job.log", warn + quote)]).causes if c.id == "ib-completion-error"]
    assert len(causes) == 1 and causes[0].hosts == ["gpu01"], causes


def test_an_empty_address_without_the_setting_names_the_handles() -> None:
    """nccl#1267's master: family 0 with no NCCL_SOCKET_IFNAME in the log: the hosts' NCCL builds or plugins."""
    text = ("ncclInternalError: Internal check failed.\nLast error:\n"
            "ncclSocketInit: connecting to address  with family 0 is neither AF_INET(2) nor AF_INET6(10)\n")
    top = explain([("job.log", text)]).causes[0]
    assert top.id == "socket-address-family" and "family 0" in top.title
    assert "network plugins" in top.detail
