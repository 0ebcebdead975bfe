"""`explain` on real logs: the network each log shows, the failure with its evidence lines, the order."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.explain import explain
from provisioner.explain.hosts import map_hosts
from tests.unit.parsers._samples import SAMPLES, read

# For each real NCCL log: the network it shows (None: the excerpt has no NET/ or Using network line),
# the failure cause expected first (None: nothing failed) and the lines that must be its evidence.
NCCL_LOGS = {
    "nccl-debug-2.txt": ("IB", "ib-completion-error", [2, 3]),
    "nccl-debug-3.txt": ("Socket", None, []),
    "nccl-debug-4.txt": ("Socket", None, []),
    "nccl-debug-6.txt": (None, None, []),
    "nccl-debug-7.txt": (None, None, []),
    "nccl-debug-9.txt": (None, None, []),
    "nccl-debug-net-lines-1.txt": ("Socket", None, []),
    "nccl-debug-10-no-socket-interface.txt": (None, "no-socket-interface", [1]),
    "nccl-debug-11-connect-no-route.txt": ("Socket", "peer-unreachable", [8, 12]),
    "nccl-debug-12-duplicate-gpu.txt": (None, "duplicate-gpu", [4, 6]),
    "nccl-debug-13-timestamped-2.27.txt": ("IB", "process-crashed", [6]),
    "nccl-debug-14-per-device-2.27.txt": (None, None, []),
    "nccl-debug-30-h200-one-rank-socket-2.28.txt": ("Socket", None, []),  # one node: sockets cost nothing
    "nccl-debug-33-h200-all-subsystems-2.28.txt": ("Socket", None, []),
    "nccl-debug-tcpxo-fastrak-network-1.txt": ("FasTrak", None, []),  # a healthy TCPXO run's network lines
}


def test_every_nccl_sample_is_covered() -> None:
    assert {p.name for p in SAMPLES.glob("nccl-debug-*.txt")} == set(NCCL_LOGS)


@pytest.mark.parametrize(("name", "expected"), sorted(NCCL_LOGS.items()))
def test_network_and_failure_of_each_real_log(name: str, expected: tuple) -> None:
    network, failure, lines = expected
    result = explain([(name, read(name))])
    [use] = result.networks
    assert use.network == network
    failures = [c for c in result.causes if c.score >= 50]
    if failure is None:
        assert failures == [] and not result.failed
        return
    first = result.causes[0]
    assert first.id == failure
    assert [e.line for e in first.evidence] == lines
    assert all(e.file == name and e.text for e in first.evidence)
    assert first.fix and first.detail


def test_completion_error_says_what_status_12_means_and_where() -> None:
    [cause] = explain([("a.log", read("nccl-debug-2.txt"))]).causes
    assert cause.title == "RDMA completion error 12 (IBV_WC_RETRY_EXC_ERR) on node-2"
    assert "retry counter exceeded" in cause.detail and "0x81" in cause.detail
    assert (cause.hosts, cause.addresses) == (["node-2"], ["10.2.0.5"])
    assert cause.evidence[1].text == "0, vendor err 129 (Recv)"  # the wrapped half of the WARN


def test_one_rank_on_sockets_is_healthy() -> None:
    # nranks 1: NCCL needs no network at all, so `NET/IB : No device found` and Socket are no problem.
    assert explain([("j.log", read("nccl-debug-4.txt"))]).causes == []


def test_socket_between_nodes_says_why_ib_was_not_used() -> None:
    text = read("nccl-debug-4.txt").replace("nranks 1 ", "nranks 2 ") + (
        "instance-8g-96c-4:101707:101889 [0] NCCL INFO Channel 00/0 : 0[30] -> 1[30] [send] via NET/Socket/0\n")
    [cause] = explain([("j.log", text)]).causes
    assert cause.id == "ib-not-used" and "no IB/RoCE device found" in cause.detail
    assert 6 in [e.line for e in cause.evidence]  # `NET/IB : No device found.`


def test_watchdog_timeout_names_the_ranks_and_the_collective() -> None:
    result = explain([("train.log", (SAMPLES / "logs/torch-watchdog-timeout-1.txt").read_text())])
    [cause] = result.causes
    assert cause.id == "collective-timeout"
    assert "global ranks 0, 1 waited 600.088 s in BROADCAST (SeqNum 1)" in cause.detail
    assert [e.line for e in cause.evidence] == [1, 2]


def test_watchdog_names_ranks_that_never_arrived() -> None:
    log = (SAMPLES / "logs/torch-watchdog-timeout-1.txt").read_text().splitlines()
    text = "\n".join(line for line in log if not line.startswith("[rank1]")) + "\n[rank1]:[I1218 20:20:00] loading\n"
    [cause] = explain([("train.log", text)]).causes
    assert "Global rank 1 never reported it: it did not" in cause.detail


def test_version_mismatch_across_hosts_in_several_files() -> None:
    result = explain([("a.log", read("nccl-debug-4.txt")), ("b.log", read("nccl-debug-7.txt"))])
    mismatch = next(c for c in result.causes if c.id == "nccl-version-mismatch")
    assert "instance-8g-96c-4 2.19.3" in mismatch.detail and "user 2.18.1" in mismatch.detail
    assert {e.file for e in mismatch.evidence} == {"a.log", "b.log"}


def test_nccl_tests_wrong_results_and_truncation() -> None:
    text = read("all_reduce_perf-4.txt")
    rows = text.splitlines()
    row = next(i for i, line in enumerate(rows) if line.strip()[:1].isdigit())
    cells = rows[row].split()
    cells[-1] = "5"
    rows[row] = "  ".join(cells)
    [cause] = [c for c in explain([("t.txt", "\n".join(rows) + "\n")]).causes if c.id.startswith("nccl-tests")]
    assert cause.id == "nccl-tests-wrong-results" and [e.line for e in cause.evidence] == [row + 1]
    cut = explain([("t.txt", text[: text.index("# Out of bounds")])])
    assert [c.id for c in cut.causes] == ["nccl-tests-truncated"]


def test_interleaved_ranks_with_host_labels() -> None:
    text = ("gpu01: NCCL INFO Bootstrap : Using eth1:198.19.3.1<0>\n"
            "gpu02: [enforce fail at gloo/transport/tcp/device.cc:83] ifa != nullptr. Unable to find address "
            "for: eth9\n"
            "gpu01: NCCL INFO Using network Socket\n")
    result = explain([("job.log", text)])
    first = result.causes[0]
    assert (first.id, first.hosts, first.settings) == ("no-socket-interface", ["gpu02"], ["GLOO_SOCKET_IFNAME=eth9"])


def test_map_hosts_by_name_short_name_and_address_variables() -> None:
    inventory = [("gpu01", "198.18.3.1", {"data_ip": "198.19.3.1"}), ("gpu02", "198.18.3.2", {"rack": "r1"})]
    seen = ["gpu01.cluster.local", "198.19.3.1", "198.18.3.2", "gpu09", "10.0.0.1"]
    assert map_hosts(seen, inventory) == {"gpu01.cluster.local": "gpu01", "198.19.3.1": "gpu01",
                                          "198.18.3.2": "gpu02"}


def test_map_hosts_by_slurm_node_name() -> None:
    """srun's `srun: error: n17: task 3: ...` names Slurm's node; the inventory knows it as 10.2.0.17."""
    inventory = [("10.2.0.17", "10.2.0.17", {}), ("10.2.0.18", "10.2.0.18", {})]
    assert map_hosts(["n17", "n18", "10.2.0.18"], inventory, {"10.2.0.17": "n17"}) == {
        "n17": "10.2.0.17", "10.2.0.18": "10.2.0.18"}


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(args)
    return info.value.code, capsys.readouterr().out


def test_cli_exit_codes_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _cli(["explain", "--json", str(SAMPLES / "nccl-debug-2.txt"), str(SAMPLES / "nccl-debug-4.txt")],
                     capsys)
    data = json.loads(out)
    assert code == 2 and data["schema"] == "fabnet/explain/v1" and data["exit_code"] == 2
    assert [c["id"] for c in data["causes"]] == ["ib-completion-error"]
    assert [n["network"] for n in data["networks"]] == ["IB", "Socket"]
    code, out = _cli(["explain", str(SAMPLES / "nccl-debug-7.txt")], capsys)
    assert code == 0 and "No known cause found" in out
    code, out = _cli(["explain", str(SAMPLES / "nccl-debug-12-duplicate-gpu.txt")], capsys)
    assert code == 2 and "two ranks on the same GPU" in out and ":4  " in out


def test_cli_unreadable_file_is_exit_1(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = _cli(["explain", str(tmp_path / "absent.log")], capsys)
    assert code == 1


def test_the_audit_summary_lines_print(capsys: pytest.CaptureFixture[str]) -> None:
    # The per-host audit lines once passed keyword arguments the line printer does not take.
    from provisioner.commands.explain import _print
    from provisioner.explain.model import Explanation

    _print(Explanation(), {}, [{"host": "gpu01", "status": "drifted", "error": None, "findings": [{}]},
                               {"host": "gpu02", "status": "failed", "error": "unreachable", "findings": []}])
    out = capsys.readouterr().out
    assert "audit gpu01: drifted, 1 finding(s)" in out
    assert "audit gpu02: failed: unreachable, 0 finding(s)" in out


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A loopback port bound and never listened on: a login there is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.mark.parametrize("as_json", [False, True])
def test_cli_with_inventory_maps_and_audits_the_named_host(tmp_path: Path, refusing_port: int, as_json: bool,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """`explain LOG --inventory INV` ended in a TypeError from its own printer (exit 1). The inventory and
    playbook load as audit loads them: the address the log names, and the variable the playbook needs,
    are both in group_vars/ beside the playbook only."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(f"all:\n  hosts:\n    gpu07:\n      ansible_host: 127.0.0.1\n"
                         f"      ansible_port: {refusing_port}\n")
    playbook_dir = tmp_path / "playbooks"
    (playbook_dir / "group_vars").mkdir(parents=True)
    (playbook_dir / "group_vars" / "all.yml").write_text("data_ip: 192.168.80.157\nforwarding: 0\n")
    playbook = playbook_dir / "site.yml"
    playbook.write_text("- hosts: all\n  resources:\n"
                        "    - sysctl: {name: net.ipv4.ip_forward, value: '{{ forwarding }}'}\n")
    log = SAMPLES / "nccl-debug-11-connect-no-route.txt"
    code, out = _cli(["explain", str(log), "--inventory", str(inventory), "-p", str(playbook),
                      *(["--json"] if as_json else [])], capsys)
    assert code == 2
    if as_json:
        data = json.loads(out)
        assert data["inventory_hosts"] == {"192.168.80.157": "gpu07"}
        [audited] = data["audit"]
        assert (audited["host"], audited["status"]) == ("gpu07", "unreachable") and audited["error"]
    else:
        assert "where: localhost, gpu07" in out or "where: gpu07" in out
        assert "  192.168.80.157 -> gpu07" in out
        assert re.search(r"^  audit gpu07: unreachable: .+, 0 finding\(s\)$", out, re.MULTILINE), out


def test_cli_log_text_is_shown_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Evidence lines are log text: markup-like brackets stay as written (the printer once took `[bold]`
    out of them), and no terminal escape reaches the terminal."""
    log = tmp_path / "job.log"
    log.write_text("gpu02: [bold]\x1b]0;owned\x07[enforce fail at gloo/transport/tcp/device.cc:83] ifa != nullptr. "
                   "Unable to find address for: eth9\n")
    code, out = _cli(["explain", str(log)], capsys)
    assert code == 2 and "gpu02: [bold][enforce fail at gloo" in out and "\x1b" not in out and "\x07" not in out


def test_cli_maps_a_launcher_label_to_the_inventory_host(tmp_path: Path, refusing_port: int,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A pdsh label on a single NCCL line names the host; --inventory maps its full name to the inventory host,
    and the cause is shown (and audited) there."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(f"all:\n  hosts:\n    gpu07:\n      ansible_host: 127.0.0.1\n"
                         f"      ansible_port: {refusing_port}\n")
    playbook = tmp_path / "site.yml"
    playbook.write_text("- hosts: all\n  resources:\n    - sysctl: {name: net.ipv4.ip_forward, value: '0'}\n")
    log = tmp_path / "job.log"
    log.write_text("gpu07.cluster.local: NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0, "
                   "vendor err 129\n")
    code, out = _cli(["explain", str(log), "--inventory", str(inventory), "-p", str(playbook), "--json"], capsys)
    data = json.loads(out)
    assert code == 2 and data["inventory_hosts"] == {"gpu07.cluster.local": "gpu07"}
    assert data["causes"][0]["hosts"] == ["gpu07.cluster.local"] and data["audit"][0]["host"] == "gpu07"
    code, out = _cli(["explain", str(log), "--inventory", str(inventory), "-p", str(playbook)], capsys)
    assert code == 2 and "     where: gpu07\n" in out


def test_the_store_host_as_asked_is_the_peer_not_the_addresses_torch_printed_for_it() -> None:
    """torch's per-address lines rendered the IPv4 store's address as IPv6 garbage (the lab's torch, a
    data link down): the peer is the host torch was asked for."""
    text = (
        "gpu03: [W1126 10:43:58.667888412 socket.cpp:764] [c10d] The client socket has failed to connect to "
        "[56a0:0:ff3::]:5327 (errno: 101 - Network is unreachable).\n"
        "gpu03: [W1126 10:43:58.667913860 socket.cpp:764] [c10d] The client socket has failed to connect to "
        "0.0.0.0:5327 (errno: 101 - Network is unreachable).\n"
        "gpu03: [E1126 10:43:58.667916844 socket.cpp:818] [c10d] The client socket has failed to connect to any "
        "network address of (198.19.4.1, 29511).\n")
    [cause] = explain([("job.log", text)]).causes
    assert cause.id == "peer-unreachable" and cause.addresses == ["198.19.4.1"] and cause.hosts == ["gpu03"]
    alone = text.splitlines(keepends=True)[0]  # no line names the host as asked: the address tried is all
    assert explain([("job.log", alone)]).causes[0].addresses == ["56a0:0:ff3::"]


@pytest.mark.parametrize(("peer", "local"), [
    ("gpu004.ds-a4.example.com", True),  # the log's own node, named in full
    ("GPU004", True),
    ("gpu005.ds-a4.example.com", False),  # another node: the path may be at fault
])
def test_a_connection_closed_by_a_peer_on_the_same_node_is_no_network_fault(peer: str, local: bool) -> None:
    line = (f"gpu004:2200689:2200706 [3] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote "
            f"peer {peer}<55693>\n")
    lost = next(c for c in explain([("job.log", line)]).causes if c.id == "connection-lost")
    assert ("no network path was involved" in lost.detail) is local
    assert ("port counters" in lost.fix) is not local
    assert lost.hosts == ["gpu004"] and (peer in lost.addresses) is not local


def test_an_ipc_handle_nccl_could_not_export_is_peer_access_failing() -> None:
    # NCCL's P2P transport (transport/p2p.cc) when the driver refuses to export a buffer for another process.
    line = "gpu01:11:22 [3] NCCL WARN cudaIpcGetMemHandle failed : invalid argument\n"
    p2p = next(c for c in explain([("job.log", line)]).causes if c.id == "gpu-p2p-failure")
    assert "CUDA IPC handle: invalid argument" in p2p.detail and p2p.hosts == ["gpu01"]


def test_a_build_without_code_for_this_gpu_is_named_as_such() -> None:
    line = "gpu01:11:22 [0] enqueue.cc:1556 NCCL WARN Cuda failure 'no kernel image is available for execution on " \
           "the device'\n"
    cause = explain([("job.log", line)]).causes[0]
    assert cause.id == "cuda-driver" and "compute capability" in cause.fix and cause.hosts == ["gpu01"]


def test_nccl_built_without_code_for_this_gpu() -> None:
    # NVIDIA/nccl#1372: NCCL built with NVCC_GENCODE for sm_80 only, run on H100s (the reporter's own finding).
    cause = explain([("job.log", (SAMPLES / "logs/nccl-named-symbol-not-found-1.txt").read_text())]).causes[0]
    assert cause.id == "cuda-driver" and "named symbol not found" in cause.title and "NVCC_GENCODE" in cause.fix


def test_dma_buf_registration_the_driver_does_not_support() -> None:
    # NVIDIA/nccl#778: the IB driver older than dma-buf; the maintainer's answer was NCCL_DMABUF_ENABLE=0.
    cause = explain([("job.log", (SAMPLES / "logs/nccl-reg-dmabuf-mr-not-supported-1.txt").read_text())]).causes[0]
    assert cause.id == "verbs-resource-failure" and cause.settings == ["NCCL_DMABUF_ENABLE=0"]
    assert "nvidia_peermem" in cause.fix
    other = "gpu01:1:2 [0] misc/ibvwrap.cc:288 NCCL WARN Call to ibv_reg_mr failed with error Operation not supported\n"
    assert "NCCL_DMABUF_ENABLE=0" not in explain([("job.log", other)]).causes[0].settings


@pytest.mark.parametrize(("host", "named"), [("gpu07", True), ("...", False), ("***", False)])
def test_the_node_of_slurms_verdict_is_where_it_was_logged_and_a_masked_one_is_none(host: str, named: bool) -> None:
    # slurmstepd prints its verdict on the step's first node only (req.c: `job->nodeid == 0`), naming that
    # node: a time limit ends every node's ranks, so no node is at fault; a masked name names no node at all.
    line = f"slurmstepd: error: *** STEP 494583.0 ON {host} CANCELLED AT 2024-04-20T09:09:37 DUE TO TIME LIMIT ***\n"
    limit = next(c for c in explain([("job.log", line)]).causes if c.id == "step-time-limit")
    assert limit.hosts == [] and host not in limit.title
    assert (f"logged by the step daemon on {host}" in limit.detail) is named


def test_network_summary_names_the_ofi_provider(capsys: pytest.CaptureFixture[str]) -> None:
    sample = SAMPLES / "logs" / "nccl-2.9-efa-p4d-two-nodes-mpi-tags.txt"
    (use,) = explain([(sample.name, sample.read_text())]).networks
    assert (use.network, use.provider) == ("AWS Libfabric", "efa")
    _, out = _cli(["explain", str(sample)], capsys)
    assert "network AWS Libfabric (provider efa)" in out
