"""pdsh running `srun --label`: each line carries pdsh's label and then srun's (`node2:  3: ...`), and both go,
the first naming the line's host and the second its rank.

The lines are built from the two tools' own formats: pdsh prints `host: ` before each line of a host's output
and reports a failed connection as `pdsh@<local host>: <host>: ssh exited with exit code N`; srun's label is
Slurm's `"%*d: "`, the task id right-aligned to the width of the largest (` 3: ` in a step of 16 tasks).
"""

from __future__ import annotations

from provisioner.explain.logs import read_log
from provisioner.parsers._text import split_lines

_WATCHDOG = ("[rank3]:[E1125 10:00:00.123456 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective "
             "operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 600001 milliseconds before timing out.")
# (srun's task label, what the task printed)
_OUTPUT = [(" 0", "Epoch 1 step 10 loss 2.31"), (" 3", "Epoch 1 step 10 loss 2.29"), ("12", "Epoch 1 step 10 loss 2.3")]


def _pdsh(host: str, task: str, text: str) -> str:
    return f"{host}: {task}: {text}\n"


def test_every_line_labelled_reads_its_host_and_rank() -> None:
    text = "".join(_pdsh("node2", task, said) for task, said in _OUTPUT)
    text += "node2: srun: error: node2: task 3: Killed\n"
    assert [line.text for line in split_lines(text)] == [said for _, said in _OUTPUT] + [
        "srun: error: node2: task 3: Killed"]
    lines = read_log("job.log", text).lines
    assert [(line.text, line.host, line.rank) for line in lines] == [
        (said, "node2", int(task)) for task, said in _OUTPUT] + [("srun: error: node2: task 3: Killed", "node2", None)]


def test_a_line_of_pdsh_itself_among_them_leaves_the_others_read() -> None:
    # pdsh's own report carries no host label, so the shared cleaning leaves the labels to explain's reader.
    text = "".join(_pdsh(host, task, said) for host in ("node2", "node3") for task, said in _OUTPUT)
    text += _pdsh("node3", " 3", _WATCHDOG) + "pdsh@login1: node3: ssh exited with exit code 1\n"
    lines = read_log("job.log", text).lines
    assert [(line.host, line.rank) for line in lines[:-1]] == [
        (host, int(task)) for host in ("node2", "node3") for task, _ in _OUTPUT] + [("node3", 3)]
    assert [line.text for line in lines[:6]] == [said for _, said in _OUTPUT] * 2
    assert lines[-2].text.startswith("[Rank 3] Watchdog caught")
    assert (lines[-1].host, lines[-1].rank) == (None, None)


def test_a_tools_own_numbered_lines_behind_pdsh_keep_their_numbers() -> None:
    # `ip addr` through pdsh: its interface indexes stand where srun's label would, but on few of the lines.
    text = ("gpu01: 1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536\ngpu01:     link/loopback 00:00:00:00:00:00\n"
            "gpu01: 2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500\ngpu01:     link/ether 52:54:00:12:34:56\n")
    assert [line.text.strip() for line in split_lines(text)][::2] == [
        "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536", "2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500"]
    assert {line.rank for line in read_log("job.log", text).lines} == {None}
