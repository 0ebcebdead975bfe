"""The prefixes the frameworks that run collectives log with, one class at a time: each goes, the line after it
stays whole, and the host a prefix names is a machine's or a pod's name, never a logger's, file's or program's.
Shapes that resemble them in ordinary text stay."""

from __future__ import annotations

import pytest

from provisioner.explain.logs import read_log
from provisioner.parsers._text import split_lines

_WARN = "gpu07:2291:2456 [3] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.9<43127> failed"
_ERROR = "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"


def _one(line: str) -> tuple[str, str | None]:
    [read] = read_log("j.log", line + "\n").lines
    return read.text, read.host


# prefix before `_ERROR` (a line with no host of its own) -> the host it names
_PREFIXES: dict[str, tuple[str, str | None]] = {
    "vllm": ("INFO 11-25 10:00:00 [parallel_state.py:1024] ", None),
    "vllm-before-0.6": ("ERROR 07-24 08:26:01 multiproc_worker_utils.py:226] ", None),
    "vllm-worker-process": ("(VllmWorkerProcess pid=760) ERROR 07-24 08:26:01 multiproc_worker_utils.py:226] ", None),
    "vllm-worker-rank": ("(VllmWorker rank=3 pid=406) ERROR 07-23 19:34:51 [multiproc_executor.py:487] ", None),
    "vllm-worker-tp": ("(VllmWorker TP0 pid=3112) ERROR 09-02 11:20:31 [multiproc_executor.py:559] ", None),
    "vllm-engine-core": ("(EngineCore_DP0 pid=2095494) ERROR 04-17 23:05:06 [core.py:390] ", None),
    "vllm-in-ray": ("(RayWorkerWrapper pid=91312, ip=10.0.0.7) ERROR 05-28 03:19:56 [worker_base.py:620] ", "10.0.0.7"),
    "glog": ("E1125 10:00:00.123456  1234 nccl_utils.cc:12] ", None),
    "absl-python": ("I0223 22:58:05.579038 140312230876992 xla_bridge.py:660] ", None),
    "xla": ("2024-07-30 01:35:14.107428: E external/xla/xla/pjrt/pjrt_stream_executor_client.cc:2732] ", None),
    "deepspeed": ("[2024-11-25 10:00:00,123] [INFO] [engine.py:12:__init__] ", None),
    "kubectl-prefix": ("[pod/train-worker-0/pytorch] ", "train-worker-0"),
    "kubectl-prefix-timestamps": ("[pod/train-worker-0/pytorch] 2024-11-25T10:00:00.123456789Z ", "train-worker-0"),
    "journald": ("Nov 25 10:00:00 gpu03 python[123]: ", "gpu03"),
    "syslog-iso": ("2024-11-25T10:00:00.123456+00:00 gpu03.example.com torchrun[77]: ", "gpu03.example.com"),
    "journald-then-vllm": ("Nov 25 10:00:00 gpu03 vllm[9]: (VllmWorker rank=1 pid=11) ERROR 11-25 10:00:00 [x.py:1] ",
                           "gpu03"),
    # A job collector's ISO time with a colon after it, then Open MPI's tag (NVIDIA/nccl#230).
    "collector-iso-colon-then-mpi-tag": ("2019-06-02T16:13:44.884Z: [1,12]<stdout>:", None),
    "ray-then-glog": ("(RayTrainWorker pid=1, ip=10.0.0.8) E1125 10:00:00.123456  1234 nccl_utils.cc:12] ", "10.0.0.8"),
}


@pytest.mark.parametrize("name", sorted(_PREFIXES))
def test_a_framework_prefix_goes_and_names_only_a_real_host(name: str) -> None:
    prefix, host = _PREFIXES[name]
    assert _one(prefix + _ERROR) == (_ERROR, host)


@pytest.mark.parametrize("name", sorted(_PREFIXES))
def test_an_nccl_line_behind_a_framework_prefix_names_its_own_host(name: str) -> None:
    prefix, _ = _PREFIXES[name]
    assert _one(prefix + _WARN) == (_WARN, "gpu07")


def test_a_time_before_a_bracket_is_not_an_nccl_prefix() -> None:
    # `10:00:00 [file.py:12]` has the shape of `host:pid:tid [dev]`: it named the host `10` before.
    assert _one("seen at 10:00:00 [file.py:12] " + _ERROR)[1] is None


# Lines of many containers, as collectors print them: the prefix goes when most lines carry it.
@pytest.mark.parametrize(("prefix", "host"), [
    ("train-worker-0 pytorch ", "train-worker-0"),        # stern
    ("vllm-6f7d9c8b5-x2k4p vllm ", "vllm-6f7d9c8b5-x2k4p"),  # stern, a Deployment's pod
    ("trainer-1  | ", None),                               # docker compose v2
    ("trainer_1  | ", None),                               # docker compose v1
])
def test_a_collectors_prefix_on_most_lines_goes(prefix: str, host: str | None) -> None:
    text = f"{prefix}{_ERROR}\n{prefix}  File \"x.py\", line 3, in f\n{prefix}\n{prefix}{_ERROR}\n"
    lines = read_log("j.log", text).lines
    assert [line.text for line in lines] == [_ERROR, 'File "x.py", line 3, in f', _ERROR]
    assert {line.host for line in lines} == {host}


@pytest.mark.parametrize("text", [
    "10:00:00 job started: ok",
    "INFO: starting the run",
    "INFO 2 ranks ready [x.py:1]",
    "[INFO] [step 12] loss 1.5",
    "(1) the first step pid=3",
    "E1125 is an error code",
    "[pod/x] not kubectl",
    "Rate: 100",
])
def test_text_that_only_resembles_a_prefix_stays(text: str) -> None:
    [line] = split_lines(text + "\n")
    assert (line.prefix, line.text) == ("", text)


def test_a_time_and_a_sentence_are_not_a_syslog_host_and_program() -> None:
    # The stamp goes as any timestamp does; without a program's `[pid]` the words after it stay.
    assert _one("Nov 25 10:00:00 the job ended: ok") == ("the job ended: ok", None)


def test_two_words_on_a_few_lines_are_not_a_stern_prefix() -> None:
    text = "the job failed\nrank-0 node gpu01 lost\nsee above\n"
    assert [line.text for line in split_lines(text)] == text.splitlines()


def test_deepspeed_pdsh_lines_with_the_launchers_own_lines_between() -> None:
    # DeepSpeed's runner logs on the first node without a label; pdsh labels every worker's line.
    log = read_log("ds.log", "[2023-03-24 10:26:48,202] [INFO] [runner.py:550:main] cmd = pdsh -S -f 1024 -w gpu1504\n"
                             f"gpu1504: [2023-03-24 10:26:51,118] [INFO] [launch.py:142:main] WORLD INFO\n"
                             f"gpu1505: {_WARN}\ngpu1505: [2023-03-24 10:27:01,000] [ERROR] [launch.py:9:x] {_ERROR}\n")
    assert [(line.text, line.host) for line in log.lines] == [
        ("cmd = pdsh -S -f 1024 -w gpu1504", None), ("WORLD INFO", "gpu1504"), (_WARN, "gpu07"), (_ERROR, "gpu1505")]
