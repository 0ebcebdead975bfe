"""`explain` on a second set of field logs (tests/samples/logs/, sources in tests/samples/INDEX.md): torch's
NCCL watchdog across releases (1.x lines, `[PG ID n PG GUID ..]` 2.x lines, a stuck watchdog, a report hours
late, a first collective that never completed), GPUDirect RDMA turned off, RoCE GID-index failures, HCA async
events, EFA/OFI and a Slurm time limit; pastes quoted or linkified by markdown read like the plain log."""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from provisioner.parsers._text import split_lines
from provisioner.parsers.nccl_line import label_host
from tests.unit.explain._field import LOGS, causes_of, check_top_cause

# file -> (the top cause's id, text of its first evidence line, text its title/detail/fix/settings must hold)
CASES: dict[str, tuple[str, str, str]] = {
    "torch-watchdog-1x-single-node-2.txt": ("collective-timeout", "[Rank 1] Watchdog caught collective operation",
                                            "ALLREDUCE (SeqNum 469508)"),
    # The watchdog thread itself hung: the heartbeat monitor's cause, not a collective timeout.
    "torch-watchdog-stuck-wrapped-3.txt": ("watchdog-hung", "[PG ID 0 PG GUID 0(default_pg) Rank 6] ProcessGroupNCCL",
                                           "rank 6 stopped making progress for 480 s"),
    # The rank whose watchdog got stuck reached the collective too: not one that "never reported it".
    "torch-watchdog-stuck-and-caught-4.txt": ("collective-timeout", "[Rank 2] Watchdog caught",
                                              "Global rank 7 timed out too (its watchdog"),
    # 25625 s waited against an 1800 s timeout: the watchdog itself was held up.
    "torch-watchdog-late-report-5.txt": ("collective-timeout", "[Rank 0] Watchdog caught",
                                         "the watchdog reported after 25625.6 s"),
    # SeqNum 1: the first collective, where NCCL connects the ranks; rank 3 took itself down after it too.
    "torch-watchdog-first-broadcast-slurm-6.txt": ("collective-timeout", "[Rank 2] Watchdog caught",
                                                   "first collective (SeqNum 1)"),
    "nccl-gdr-disabled-peermem-1.txt": ("gpudirect-rdma-disabled", "GPU Direct RDMA Disabled for HCA 0 'mlx5_0'",
                                        "nvidia_peermem"),
    "nccl-gdr-disabled-roce-2.txt": ("gpudirect-rdma-disabled", "GPU Direct RDMA Disabled for HCA 0 'mlx5_0'",
                                     "mlx5_0, mlx5_1"),
    "nccl-gid-index-completion-12-1.txt": ("ib-completion-error", "Got completion with error 12, opcode 1",
                                           "NCCL_IB_GID_INDEX"),
    # `_..._`: a line set in italics by markdown; `ibvwrap.cc:` is no host.
    "nccl-gid-index-modify-qp-timeout-2.txt": ("verbs-resource-failure", "ibvwrap.cc: NCCL WARN Call to ibv_modify_qp",
                                               "NCCL_IB_GID_INDEX"),
    "nccl-async-gid-change-completion-12-1.txt": ("ib-completion-error", "Got completion with error 12, opcode 0",
                                                  "GID table changed"),
    # GitHub's autolinks (`[net_ib.cc:101](http://net_ib.cc:101/)`) and `> ` quotes taken off.
    "nccl-async-wq-error-markdown-2.txt": ("ib-queue-error", "transport/net_ib.cc:101 NCCL WARN NET/IB : mlx5_0:1",
                                           "local access violation work queue error (mlx5_0:1 on node201)"),
    "nccl-ofi-no-provider-1.txt": ("ofi-failure", "find_ofi_provider:543 NCCL WARN NET/OFI Couldn't find", "efa"),
    "nccl-ofi-open-av-openmpi-2.txt": ("ofi-failure", "Couldn't open AV. RC: -22", "libfabric"),
    "slurm-time-limit-1.txt": ("step-time-limit", "CANCELLED AT 2024-04-20T09:09:37 DUE TO TIME LIMIT", "time limit"),
}


_causes = causes_of


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_top_cause_of_each_field_log(name: str) -> None:
    check_top_cause(name, CASES[name])


def test_every_field_log_of_this_set_has_a_case() -> None:
    prefixes = ("torch-watchdog-", "nccl-gdr-", "nccl-gid-index-", "nccl-async-", "nccl-ofi-", "slurm-")
    older = {"torch-watchdog-timeout-1.txt"}
    assert {p.name for p in LOGS.glob("*.txt") if p.name.startswith(prefixes)} - older == set(CASES)


def test_a_rank_that_only_took_itself_down_is_not_called_absent() -> None:
    top = _causes("torch-watchdog-first-broadcast-slurm-6.txt")[0]
    assert "never reported" not in top.detail
    assert any("taking the entire process down" in e.text for e in top.evidence)


def test_a_timeout_reported_on_time_is_not_called_late() -> None:
    assert "held up" not in _causes("torch-watchdog-1x-single-node-2.txt")[0].detail


def test_markdown_links_are_unwrapped_only_when_they_name_themselves() -> None:
    top = _causes("nccl-async-wq-error-markdown-2.txt")
    completion = next(c for c in top if c.id == "ib-completion-error")
    assert completion.addresses == ["10.1.3.201"]
    lines = split_lines("see [the guide](https://example.com/nccl) and [a.cc:1](http://a.cc:1/)\n")
    assert lines[0].text == "see [the guide](https://example.com/nccl) and a.cc:1"


def test_a_source_file_before_the_level_is_no_host() -> None:
    assert label_host("ibvwrap.cc: ") is None
    assert label_host("gpu07: ") == "gpu07"


def test_gpudirect_over_sockets_is_no_finding() -> None:
    text = ("node1:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
            "node1:1:1 [0] NCCL INFO NET/Socket : GPU Direct RDMA Disabled for HCA 0 'eth0'\n")
    assert not [c for c in explain([("a.log", text)]).causes if c.id.startswith("gpudirect")]


def test_gpudirect_on_one_node_is_no_finding() -> None:
    text = ("n1:1:1 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\n"
            "n1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n")
    assert not [c for c in explain([("a.log", text)]).causes if c.id.startswith("gpudirect")]


def test_old_nccl_that_cannot_see_nvidia_peermem_is_named() -> None:
    text = ("NCCL version 2.21.5+cuda12.4\n"
            "h1:1:1 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\n")
    top = next(c for c in explain([("a.log", text)]).causes if c.id == "gpudirect-rdma-disabled")
    assert "NCCL 2.21.5 only looks for the older nv_peer_mem" in top.detail
    assert top.fix.startswith("Upgrade NCCL to 2.23")


@pytest.mark.parametrize("line", [
    "NCCL INFO NET/IB : GPU Direct RDMA Disabled for GPU 3 / HCA 0 (distance 4 >= 3)",
    "h1:1:1 [0] NCCL INFO GPU Direct RDMA Disabled for GPU 1b000 / HCA 0 (distance 5 > 4)",
])
def test_gpudirect_off_by_distance_names_the_level(line: str) -> None:
    causes = [c for c in explain([("a.log", line + "\n")]).causes if c.id == "gpudirect-rdma-distance"]
    assert causes and causes[0].settings == ["NCCL_NET_GDR_LEVEL"]
