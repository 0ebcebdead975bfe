"""`explain` does not name a poster's placeholder for a host (`...-48`, `xxx`, `<hostname>`, `***`) as a host to look
at: the cause says the name was redacted, and the evidence keeps the line as written."""

from __future__ import annotations

from provisioner.explain import explain
from provisioner.explain.hosts import redacted

_FLUSH = ("gpu07:984:1357 [4] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<44206> "
          "with status=5 opcode=32656 len=32659 vendor err 249 (Recv) localGid ::ffff:10.0.0.1 "
          "remoteGids::ffff:10.0.0.2\n")


def test_redacted_host_names_are_not_named_as_hosts() -> None:
    for placeholder in ("...-48", "xxx", "<hostname>", "***"):
        text = _FLUSH.replace("status=5", "status=12").replace("gpu07", placeholder)
        top = explain([("job.log", text)]).causes[0]
        assert top.hosts == [] and placeholder not in top.title, (placeholder, top.title, top.hosts)
        assert "redacts" in top.detail and top.evidence[0].text.startswith(placeholder)
    real = explain([("job.log", _FLUSH.replace("status=5", "status=12"))]).causes[0]
    assert real.hosts == ["gpu07"] and "redacts" not in real.detail


def test_network_summary_leaves_out_redacted_hosts() -> None:
    # NCCL's line prefix is "%s:%d:%d [%d] NCCL INFO" (hostname, pid, tid, cudaDev): the host redacted on one node.
    text = "".join(f"{host}:41:41 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.{n}<0>\n"
                   f"{host}:41:41 [0] NCCL INFO Using network IB\n"
                   for n, host in enumerate(("gpu07", "...-48", "xxx", "<hostname>"), start=1))
    (use,) = explain([("job.log", text)]).networks
    assert use.network == "IB" and use.hosts == ["gpu07"]


def test_placeholders_and_real_names() -> None:
    for placeholder in ("...-48", "xxx", "<hostname>", "{host}", "[REDACTED]", "***", "10.x.x.x", "192.168.x.x",
                        "x.x.x.x:29500", "<MASTER_IP>"):
        assert redacted(placeholder), placeholder
    for real in ("gpu07", "10.0.0.2", "[::1]", "[fe80::1%ib0]", "[::ffff:10.0.0.2]", "dgx-a100-xxl", "x1000c0s0b0n0",
                 "master-x", "gpu.x", "x.example.com", "node_x"):
        assert not redacted(real), real
