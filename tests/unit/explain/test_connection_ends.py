"""`explain` on a completion error that both ends of one connection logged: one cause naming the link between the
two hosts, while errors on unrelated connections keep a cause each.

The real case is nccl-tests#24 (tests/samples/logs/, source in tests/samples/INDEX.md). The other logs are built
from NCCL's own wordings as real logs print them: `Got completion with error 12, opcode 1, len 0, vendor err 129`
(2.4, the same sample), `Got completion from peer A<port> with error N, opcode ..., vendor err N (Send)` (2.12 to
2.18, NVIDIA/nccl-tests#252), `with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid X remoteGidsY`
(2.19 on, NVIDIA/nccl#1405) and `NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:A<0>` (every release from 2.4). A flushed
request reads `with status=5 opcode=1 len=0 vendor err 249 (Recv)` (NVIDIA/nccl#1524 and #1814, in
tests/samples/logs/)."""

from __future__ import annotations

from provisioner.explain import explain
from provisioner.explain.model import Cause
from tests.unit.explain._field import causes_of

_OLD = "transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error {code}, opcode 1, len 0, vendor err 129"
_PEER = ("transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer {peer}<49189> with error 12, opcode 0, "
         "len 0, vendor err 129 (Send)")
_GID = ("ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer {peer}<54862> with status=12 opcode=0 len=0 "
        "vendor err 129 (Recv) localGid {local} remoteGids{remote}")
_FLUSH_GID = ("transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer {peer}<57888> with status=5 "
              "opcode=1 len=0 vendor err 249 (Recv) localGid {local} remoteGids{remote}")
_FLUSH_PEER = _PEER.format(peer="{peer}").replace("error 12", "error 5").replace("vendor err 129", "vendor err 249")
_OOB = "NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:{address}<0>"


def _completions(lines: list[tuple[str, str]], aliases: dict[str, str] | None = None) -> list[Cause]:
    """The completion-error causes for one log of `lines`, each (host, text after the NCCL prefix)."""
    text = "\n".join(f"{host}:{1000 + n}:{2000 + n} [0] {line}" for n, (host, line) in enumerate(lines))
    return [c for c in explain([("job.log", text)], aliases).causes if c.id == "ib-completion-error"]


def _addresses(*hosts: str) -> list[tuple[str, str]]:
    return [(host, _OOB.format(address=f"10.0.0.{n}")) for n, host in enumerate(hosts, start=1)]


def test_the_two_ends_in_nccl_tests_24_are_one_cause() -> None:
    """gpu4 and gpu5 each logged retry-exceeded on their connection (NCCL 2.4 names no peer; the log shows no other
    host): one cause names both, with both records as evidence."""
    causes = [c for c in causes_of("nccl-tests-2.4-completion-error-12-gid-index-cu-form-1.txt")
              if c.id == "ib-completion-error"]
    assert len(causes) == 1, [c.title for c in causes]
    cause = causes[0]
    assert cause.hosts == ["gpu5", "gpu4"], cause.hosts
    assert "between gpu5 and gpu4" in cause.title and "both ends" in cause.detail, (cause.title, cause.detail)
    assert [e.line for e in cause.evidence] == [1, 6], cause.evidence


def test_ends_that_name_each_others_address_fold_among_other_hosts() -> None:
    """Four hosts: a and b each name the other's OOB address, so they are one link, with both addresses."""
    causes = _completions([*_addresses("node-a", "node-b", "node-c", "node-d"),
                           ("node-a", _PEER.format(peer="10.0.0.2")), ("node-b", _PEER.format(peer="10.0.0.1"))])
    assert len(causes) == 1, [c.title for c in causes]
    assert causes[0].hosts == ["node-a", "node-b"], causes[0].hosts
    assert "node-a (10.0.0.1) and node-b (10.0.0.2)" in causes[0].title, causes[0].title
    assert sorted(causes[0].addresses) == ["10.0.0.1", "10.0.0.2"], causes[0].addresses


def test_two_unrelated_connections_keep_a_cause_each() -> None:
    """a towards c and b towards d: two links, two causes."""
    causes = _completions([*_addresses("node-a", "node-b", "node-c", "node-d"),
                           ("node-a", _PEER.format(peer="10.0.0.3")), ("node-b", _PEER.format(peer="10.0.0.4"))])
    assert sorted(c.hosts[0] for c in causes) == ["node-a", "node-b"], [c.title for c in causes]
    assert all(len(c.hosts) == 1 and "both ends" not in c.title for c in causes), [c.title for c in causes]


def test_a_peer_on_a_third_host_keeps_them_apart_even_on_two_logged_hosts() -> None:
    """Only a and b log, but a's error names the address the inventory gives c: not the a-b link."""
    lines = [*_addresses("node-a", "node-b"),
             ("node-a", _PEER.format(peer="10.0.0.3")), ("node-b", _PEER.format(peer="10.0.0.1"))]
    assert len(_completions(lines)) == 1
    assert len(_completions(lines, {"10.0.0.3": "node-c"})) == 2


def test_unnamed_peers_fold_only_when_no_other_host_is_in_the_log() -> None:
    """NCCL 2.4 names no peer: with a third host logging, gpu4's and gpu5's errors may be other connections."""
    two = _completions([("gpu4", _OLD.format(code=12)), ("gpu5", _OLD.format(code=12))])
    three = _completions([("gpu4", _OLD.format(code=12)), ("gpu5", _OLD.format(code=12)),
                          ("gpu6", "NCCL INFO Destroyed comm 0x7f24c4001af0 rank 8")])
    assert len(two) == 1 and two[0].hosts == ["gpu4", "gpu5"], [c.title for c in two]
    assert len(three) == 2, [c.title for c in three]


def test_ends_that_name_each_others_gid_fold_and_a_third_gid_does_not() -> None:
    """2.19 on: the GIDs tell the connection even when the addresses say nothing and other hosts log."""
    a, b, c = "fd00:1148:9000:5000:4:200:3:ff22", "fd00:1148:9000:5000:4:200:3:ff1f", "fd00:1148:9000:5000:4:200:3:ff20"
    other = [("worker-2", "NCCL INFO Destroyed comm 0x7f24c4001af0 rank 8")]
    mutual = _completions([*other, ("worker-0", _GID.format(peer="10.216.210.236", local=a, remote=b)),
                           ("worker-1", _GID.format(peer="10.216.210.235", local=b, remote=a))])
    apart = _completions([("worker-0", _GID.format(peer="10.216.210.236", local=a, remote=c)),
                          ("worker-1", _GID.format(peer="10.216.210.235", local=b, remote=a))])
    assert len(mutual) == 1 and "each names the other's GID" in mutual[0].detail, [x.detail for x in mutual]
    assert len(apart) == 2, [x.title for x in apart]


def test_errors_of_one_host_alone_do_not_fold() -> None:
    """A protection error is each host's own registration or PCIe path: two hosts with it are two causes, and
    different statuses on the two ends are not folded either."""
    protection = _completions([("gpu4", _OLD.format(code=4)), ("gpu5", _OLD.format(code=4))])
    mixed = _completions([("gpu4", _OLD.format(code=12)), ("gpu5", _OLD.format(code=13))])
    assert len(protection) == 2 and len(mixed) == 2, [c.title for c in protection + mixed]


def test_a_flush_on_the_end_facing_a_retry_exceeded_error_is_its_echo() -> None:
    """a gave up retrying towards b, b's queue pair towards a was flushed: one cause, the link, named by the
    retry-exceeded error, with b's flush as its echo (2.12 to 2.18 wording, four hosts logging)."""
    causes = _completions([*_addresses("node-a", "node-b", "node-c", "node-d"),
                           ("node-b", _FLUSH_PEER.format(peer="10.0.0.1")), ("node-a", _PEER.format(peer="10.0.0.2"))])
    assert len(causes) == 1, [c.title for c in causes]
    cause = causes[0]
    assert cause.title.startswith("RDMA completion error 12 (IBV_WC_RETRY_EXC_ERR)"), cause.title
    assert "between node-a (10.0.0.1) and node-b (10.0.0.2)" in cause.title, cause.title
    assert cause.hosts == ["node-a", "node-b"], cause.hosts
    assert "node-b's 1 flushed request (IBV_WC_WR_FLUSH_ERR) is the echo of it" in cause.detail, cause.detail
    assert len(cause.evidence) == 2, cause.evidence


def test_the_folded_cause_gives_the_errors_vendor_syndrome_and_the_flush_keeps_its_own() -> None:
    """The retry-exceeded error's vendor code (0x81) is the cause's; the flush's (0xf9, what mlx5 gives every flushed
    request) is named only beside the flush, as its echo, not listed as a second syndrome of the error."""
    causes = _completions([*_addresses("node-a", "node-b", "node-c", "node-d"),
                           ("node-b", _FLUSH_PEER.format(peer="10.0.0.1")), ("node-a", _PEER.format(peer="10.0.0.2"))])
    assert len(causes) == 1, [c.title for c in causes]
    detail = causes[0].detail
    assert "Vendor syndrome 0x81." in detail and "0x81, 0xf9" not in detail, detail
    assert "not a cause in itself (vendor syndrome 0xf9)." in detail, detail
    both = _completions([*_addresses("node-a", "node-b", "node-c", "node-d"),
                         ("node-a", _PEER.format(peer="10.0.0.2")),
                         ("node-b", _PEER.format(peer="10.0.0.1").replace("vendor err 129", "vendor err 136"))])
    assert len(both) == 1 and "Vendor syndrome 0x81, 0x88." in both[0].detail, both[0].detail


def test_a_flush_on_the_gid_named_end_is_folded_and_one_towards_a_third_gid_is_not() -> None:
    """2.19 on: worker-1's flush names worker-0's GID and worker-0's retry-exceeded error names worker-1's."""
    a, b, c = "fd00:1148:9000:5000:4:200:3:ff22", "fd00:1148:9000:5000:4:200:3:ff1f", "fd00:1148:9000:5000:4:200:3:ff20"
    other = [("worker-2", "NCCL INFO Destroyed comm 0x7f24c4001af0 rank 8")]
    mutual = _completions([*other, ("worker-0", _GID.format(peer="10.216.210.236", local=a, remote=b)),
                           ("worker-1", _FLUSH_GID.format(peer="10.216.210.235", local=b, remote=a))])
    apart = _completions([*other, ("worker-0", _GID.format(peer="10.216.210.236", local=a, remote=b)),
                          ("worker-1", _FLUSH_GID.format(peer="10.216.210.237", local=b, remote=c))])
    assert len(mutual) == 1 and mutual[0].hosts == ["worker-0", "worker-1"], [x.title for x in mutual]
    assert "error 12" in mutual[0].title and "each names the other's GID" in mutual[0].detail, mutual[0].detail
    assert len(apart) == 2, [x.title for x in apart]


def test_a_flush_stays_its_own_cause_alone_beside_a_host_error_or_behind_its_own_pair() -> None:
    """A lone flush keeps its cause and its advice; a flush facing a protection error (one host's registration or
    PCIe path, no link) is not folded; a flush on an end whose same-status pair already folded stays apart."""
    lone = _completions([("gpu4", _OLD.format(code=5))])
    protection = _completions([("gpu4", _OLD.format(code=4)), ("gpu5", _OLD.format(code=5))])
    behind = _completions([("gpu4", _OLD.format(code=12)), ("gpu5", _OLD.format(code=12)),
                           ("gpu5", _OLD.format(code=5))])
    assert len(lone) == 1 and "error 5" in lone[0].title and "No earlier error" in lone[0].detail, lone[0].detail
    assert len(protection) == 2, [c.title for c in protection]
    assert len(behind) == 2 and behind[0].hosts == ["gpu4", "gpu5"], [c.title for c in behind]
    assert "Another completion error above comes first" in behind[1].detail, behind[1].detail
