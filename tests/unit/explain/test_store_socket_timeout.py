"""A store call that timed out saying only `Socket Timeout` (torch 1.x `RuntimeError`, 2.x `DistStoreError`), and
the bare version line a host's own lines surround: the rules read them by structure, not one sample's words."""

from __future__ import annotations

import pytest

from provisioner.explain import explain
from tests.unit.explain._field import words

_EXIT_FRAMES = ('  File "/usr/lib/python3/site-packages/torch/distributed/elastic/agent/server/api.py", line 906, '
                "in _exit_barrier\n    store_util.barrier(\n"
                '  File "/usr/lib/python3/site-packages/torch/distributed/elastic/utils/store.py", line 34, '
                'in get_all\n    data = store.get(f"{prefix}{idx}")\n')


def _top(text: str) -> tuple[str, str]:
    causes = explain([("agent.log", text)]).causes
    assert causes, text
    return causes[0].id, words(causes[0])


@pytest.mark.parametrize("error", ["RuntimeError: Socket Timeout", "torch.distributed.DistStoreError: Socket Timeout"])
def test_a_bare_socket_timeout_in_the_exit_barrier_is_a_store_wait(error: str) -> None:
    cause, said = _top(_EXIT_FRAMES + error + "\n")
    assert cause == "rendezvous-incomplete"
    assert "exit barrier" in said and "MASTER_PORT" in said


def test_the_agents_own_barrier_report_keeps_its_cause() -> None:
    text = ("ERROR:torch.distributed.elastic.agent.server.api:Error waiting on exit barrier. Elapsed: 300.1 seconds\n"
            "Traceback (most recent call last):\n" + _EXIT_FRAMES + "RuntimeError: Socket Timeout\n")
    assert _top(text)[0] == "exit-barrier"


def test_the_nccl_id_sentence_is_not_a_bare_socket_timeout() -> None:
    text = ("torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId "
            "from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout\n")
    cause, said = _top(text)
    assert cause == "rendezvous-incomplete" and "NCCL id" in said


def _standalone(host: str, version: str) -> str:
    return (f"{host}:10:10 [0] NCCL INFO cudaDriverVersion 12000\nNCCL version {version}+cuda12.3\n"
            f"{host}:10:20 [0] NCCL INFO Using network Socket\n")


def test_bare_version_lines_belong_to_the_host_around_them() -> None:
    cause, said = _top(_standalone("node-a", "2.18.1") + _standalone("node-b", "2.19.3"))
    assert cause == "nccl-version-mismatch"
    assert "node-a 2.18.1" in said and "node-b 2.19.3" in said


def test_a_bare_version_line_between_two_hosts_stays_unowned() -> None:
    # Interleaved output: the line cannot be told apart, so no host is given a version it may not run.
    text = ("node-a:10:10 [0] NCCL INFO cudaDriverVersion 12000\nNCCL version 2.18.1+cuda12.3\n"
            "node-b:11:11 [0] NCCL INFO cudaDriverVersion 12000\n"
            "node-b:11:11 [0] NCCL INFO NCCL version 2.19.3+cuda12.3\n")
    causes = explain([("job.log", text)]).causes
    assert "nccl-version-mismatch" not in [c.id for c in causes]
