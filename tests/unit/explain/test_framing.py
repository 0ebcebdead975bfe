"""The same log explains identically however it was captured: framed in a tmux/screen pane, labelled
by `srun --label` or Open MPI `--tag-output`, coloured with ANSI escapes, or timestamped."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from provisioner.explain import explain
from provisioner.explain.logs import read_log
from tests.unit.explain.test_classes import CASES
from tests.unit.parsers._samples import SAMPLES, read


def _tmux(text: str) -> str:
    lines = text.splitlines()
    width = max(len(line) for line in lines) + 2
    return "\n".join(["┌" + "─" * width + "┐"] + [f"│ {line.ljust(width - 2)} │" for line in lines]
                     + ["└" + "─" * width + "┘"]) + "\n"


def _srun(text: str) -> str:
    return "".join(f"{i % 2}: {line}\n" for i, line in enumerate(text.splitlines()))


def _mpi(text: str) -> str:
    return "".join(f"[1,{i % 2}]<stdout>:{line}\n" for i, line in enumerate(text.splitlines()))


def _ansi(text: str) -> str:
    return "".join(f"\x1b[1;31m{line}\x1b[0m\n" for line in text.splitlines())


def _stamped(text: str) -> str:
    return "".join(f"2024-05-01T10:00:{i % 60:02d}.123Z {line}\n" for i, line in enumerate(text.splitlines()))


def _each(prefix: str) -> Callable[[str], str]:
    return lambda text: "".join(f"{prefix}{line}\n" for line in text.splitlines())


def _from_host(prefix: str) -> Callable[[str], str]:
    """A prefix that names the host: the one the log's NCCL lines name, as a pod's or a machine's would."""
    def frame(text: str) -> str:
        own = re.search(r"^([A-Za-z][\w.-]*):[0-9]+:[0-9]+ \[", text, re.M)
        return _each(prefix.format(host=own.group(1).lower() if own else "gpu03"))(text)
    return frame


# What the frameworks and log collectors users run put before each line.
_FRAMEWORKS = {
    "vllm": _each("(VllmWorker rank=1 pid=456) ERROR 11-25 10:00:02 [multiproc_executor.py:470] "),
    "glog": _each("E1125 10:00:00.123456  1234 nccl_utils.cc:12] "),
    "xla": _each("2024-11-25 10:00:00.123456: E external/xla/xla/service/gpu/nccl_utils.cc:305] "),
    "deepspeed": _each("[2024-11-25 10:00:00,123] [INFO] [engine.py:12:__init__] "),
    "kubectl": _from_host("[pod/{host}/pytorch] "),
    "stern": _from_host("{host} pytorch "),
    "journald": _from_host("Nov 25 10:00:00 {host} python[123]: "),
    "compose": _each("trainer-1  | "),
}
FRAMES = {"tmux": _tmux, "srun": _srun, "mpi": _mpi, "ansi": _ansi, "timestamps": _stamped, **_FRAMEWORKS}
LOGS = {**{name: case[0] for name, case in CASES.items()},
        **{name: read(name) for name in ("nccl-debug-2.txt", "nccl-debug-10-no-socket-interface.txt",
                                         "nccl-debug-11-connect-no-route.txt", "nccl-debug-12-duplicate-gpu.txt",
                                         "nccl-debug-4.txt", "all_reduce_perf-4.txt")},
        "watchdog": (SAMPLES / "logs/torch-watchdog-timeout-1.txt").read_text()}


def _summary(text: str) -> list[tuple[str, str, list[int], list[str]]]:
    return [(c.id, c.title, [e.line for e in c.evidence], c.addresses) for c in explain([("j.log", text)]).causes]


@pytest.mark.parametrize("frame", sorted(FRAMES))
@pytest.mark.parametrize("name", sorted(LOGS))
def test_framed_log_explains_like_the_plain_one(name: str, frame: str) -> None:
    text = LOGS[name]
    plain = _summary(text)
    framed = _summary(FRAMES[frame](text))
    if frame == "tmux":  # the border adds a first line: evidence moves down by one
        framed = [(i, t, [n - 1 for n in lines], a) for i, t, lines, a in framed]
    assert framed == plain


def test_srun_label_gives_the_rank_and_its_host() -> None:
    text = ("0: #  Rank  0 Group  0 Pid 1 on gpu01 device 0 [0x1a] A100\n"
            "1: #  Rank  1 Group  0 Pid 2 on gpu02 device 0 [0x1a] A100\n"
            "1: misc/ibvwrap.cc:212 NCCL WARN Call to ibv_create_qp failed\n")
    [cause] = explain([("j.log", text)]).causes
    assert cause.id == "verbs-resource-failure" and cause.hosts == ["gpu02"]


_ARROW = "2025-08-12 09:37:02.216313 {label} >> :16{n}:1228 [{n}] NCCL INFO Connected all trees\n"


@pytest.mark.parametrize(("label", "want"), [
    ("worker-9", "worker-9"), ("node1.cluster.local", "node1.cluster.local"),
    ("42", None), ("10.5", None), ("train.py", None), ("torch.distributed", None), ("INFO", None),
])
def test_a_label_before_an_nccl_prefix_without_host_names_the_host(label: str, want: str | None) -> None:
    log = read_log("job.log", "".join(_ARROW.format(label=label, n=n) for n in range(4)))
    assert {line.host for line in log.lines} == {want}


def test_a_label_on_few_lines_names_no_host() -> None:
    text = _ARROW.format(label="worker-9", n=1) + "".join(f":16{n}:1228 [{n}] NCCL INFO Connected all trees\n"
                                                         for n in range(2, 5))
    assert {line.host for line in read_log("job.log", text).lines} == {None}


def test_each_line_of_a_log_from_several_hosts_takes_its_own_arrow_label() -> None:
    from provisioner.explain.logs import read_log

    text = "".join(f"worker-{n} >> :16{n}:12{n} [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] via NET/IB/0\n"
                   for n in (1, 2, 1, 2))
    assert [line.host for line in read_log("job.log", text).lines] == ["worker-1", "worker-2"] * 2
