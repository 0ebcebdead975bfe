"""`srun --label` in a heterogeneous Slurm job: each line carries its component and then the task's id within it
(`P1  3: ...`), read as the line's rank (the task id) and component, and taken off as srun's plain `3: ` is.

The lines are built from Slurm's own format, `_build_label` in src/common/write_labelled_message.c: `"P%u %*d: "`
(the component's offset, a blank, the task id right-aligned to the width of the largest) where the task's offset
in the whole job is not known, and the plain `"%*d: "` where it is.
"""

from __future__ import annotations

from provisioner.explain.logs import read_log
from provisioner.parsers._text import split_lines


def _label(component: int, task: int, width: int = 2) -> str:
    return f"P{component} {task:>{width}}: "


_OUTPUT = [(0, 0, "Epoch 1 step 10 loss 2.31"), (0, 3, "Epoch 1 step 10 loss 2.29"),
           (1, 0, "serving on port 8000"), (1, 12, "serving on port 8000")]


def test_the_label_is_taken_off_and_read_as_rank_and_component() -> None:
    text = "".join(_label(c, t) + said + "\n" for c, t, said in _OUTPUT)
    assert [line.text for line in split_lines(text)] == [said for _, _, said in _OUTPUT]
    lines = read_log("job.log", text).lines
    assert [(line.text, line.rank, line.component) for line in lines] == [
        (said, task, component) for component, task, said in _OUTPUT]


def test_a_one_digit_width_label_reads_the_same() -> None:
    lines = read_log("job.log", _label(2, 5, width=1) + "NCCL WARN net failed\n"
                     + _label(2, 6, width=1) + "ok\n").lines
    assert [(line.text, line.rank, line.component) for line in lines] == [
        ("NCCL WARN net failed", 5, 2), ("ok", 6, 2)]


def test_a_task_s_host_is_not_lent_to_the_same_task_id_of_another_component() -> None:
    nccl = "gpu07:123:456 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.7<0>"
    text = _label(0, 0) + nccl + "\n" + _label(0, 0) + "step done\n" + _label(1, 0) + "step done\n"
    lines = read_log("job.log", text).lines
    assert [(line.host, line.rank, line.component) for line in lines] == [
        ("gpu07", 0, 0), ("gpu07", 0, 0), (None, 0, 1)]


def test_pdsh_around_a_heterogeneous_srun_names_host_rank_and_component() -> None:
    text = "".join(f"node2: {_label(c, t)}{said}\n" for c, t, said in _OUTPUT)
    lines = read_log("job.log", text).lines
    assert [(line.text, line.host, line.rank, line.component) for line in lines] == [
        (said, "node2", task, component) for component, task, said in _OUTPUT]


def test_a_word_and_a_number_are_no_label() -> None:
    lines = read_log("job.log", "P0 failed: 3 retries\nPhase 2: done\n").lines
    assert [(line.text, line.rank) for line in lines] == [("P0 failed: 3 retries", None), ("Phase 2: done", None)]
