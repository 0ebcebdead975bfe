"""A launcher's label in front of a logger's prefix names the line's host, whatever the logger.

Wordings: torch.distributed.elastic's multiprocessing/api.py as torch 2.x logs it through glog (`E0813
06:19:49.809000 161210 .../api.py:869] failed (exitcode: -9) local_rank: 2 (pid: 161617) of binary: ...`, seen in
github.com/xiaomi-research/time-r1/issues/9; `Sending process N closing signal SIGTERM` from the same file),
distributed_c10d.py's `Rank N: Completed store-based barrier for key:... with N nodes.`, ProcessGroupNCCL.cpp's
watchdog line with torch's `[rankN]:` and c10 prefix (2.2 on). Labels: pdsh/clush `host: ` (by name or address),
srun --label `N: `, Open MPI --tag-output `[1,N]<stdout>:`, and a syslog line (`Mon DD HH:MM:SS host prog[pid]: `)
collected from a log server.
"""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from provisioner.explain.logs import read_log

_API = "site-packages/torch/distributed/elastic/multiprocessing/api.py"
_FAILED = ("failed (exitcode: -9) local_rank: 2 (pid: 161617) of binary: /opt/conda/bin/python3.11")
_SIGTERM = "Sending process 161618 closing signal SIGTERM"
_BARRIER = "Rank 1: Completed store-based barrier for key:store_based_barrier_key:1 with 2 nodes."
_WATCHDOG = ("[PG 0 Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, "
             "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600001 milliseconds before timing out.")


def _glog(level: str, source: str, message: str) -> str:
    return f"{level}0813 06:19:49.809000 161210 {source}] {message}"


def test_a_pdsh_collection_of_glog_lines_names_each_host() -> None:
    text = (f"gpu04: {_glog('I', 'distributed_c10d.py:56', _BARRIER)}\n"
            f"gpu05: {_glog('W', _API + ':897', _SIGTERM)}\n"
            f"gpu04: {_glog('E', _API + ':869', _FAILED)}\n")
    lines = read_log("job.log", text).lines
    assert [(line.text, line.host) for line in lines] == [(_BARRIER, "gpu04"), (_SIGTERM, "gpu05"),
                                                          (_FAILED, "gpu04")]
    cause = explain([("job.log", text)]).causes[0]
    assert (cause.id, cause.hosts) == ("rank-killed", ["gpu04"])


def test_a_labelled_glog_line_among_the_launchers_own_lines_names_its_host() -> None:
    # The launcher's own lines carry no label: the labelled lines are too few to read as a pdsh collection.
    text = ("launching on gpu04,gpu05\nwaiting for workers\nstill waiting\n"
            f"gpu05: {_glog('E', _API + ':869', _FAILED)}\n")
    assert [line.host for line in read_log("job.log", text).lines] == [None, None, None, "gpu05"]
    assert "gpu05" in explain([("job.log", text)]).causes[0].hosts


# a line as the launcher prints it -> (text left, host, rank); one line alone and the same on two lines.
# (A label before NCCL's own `host:pid:tid [dev]` prefix: test_framework_wordings.)
_LABELS: dict[str, tuple[str, str, str | None, int | None]] = {
    "pdsh-glog": ("gpu04: " + _glog("I", "distributed_c10d.py:56", _BARRIER), _BARRIER, "gpu04", None),
    "pdsh-address-glog": ("10.0.0.4: " + _glog("I", "distributed_c10d.py:56", _BARRIER), _BARRIER, "10.0.0.4", None),
    "pdsh-torch-rank-c10": ("gpu04: [rank3]:[E0612 10:41:07.512331 78122 ProcessGroupNCCL.cpp:632] " + _WATCHDOG,
                            _WATCHDOG, "gpu04", 3),
    "srun-glog": ("0: " + _glog("I", "distributed_c10d.py:56", _BARRIER), _BARRIER, None, 0),
    "mpirun-glog": ("[1,0]<stdout>:" + _glog("I", "distributed_c10d.py:56", _BARRIER), _BARRIER, None, 0),
    # The syslog line names the machine that logged it; the label, the server the log was read on.
    "pdsh-syslog": ("logsrv1: Aug 13 06:19:49 gpu03 torchrun[161210]: " + _FAILED, _FAILED, "gpu03", None),
}


@pytest.mark.parametrize("count", [1, 2])
@pytest.mark.parametrize("name", sorted(_LABELS))
def test_each_label_before_a_prefix_names_host_and_rank(name: str, count: int) -> None:
    line, text, host, rank = _LABELS[name]
    read = read_log("job.log", "\n".join([line] * count) + "\n").lines
    assert [(each.text, each.host, each.rank) for each in read] == [(text, host, rank)] * count
